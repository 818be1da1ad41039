"""Where W_q, W_k and W_v come from: a weight source is an input, like the sentence.

Lessons 2, 4, 5 and 7 read the sidebar's Weights control (the link's `weights`). Each source yields
the same ingredients, a `HeadInput`: the tokens, x, W_q, W_k, W_v, their biases and the scale, with
where they came from (model, layer, head) for the page's labels.

- RANDOM: the sources' own random draws (their worked examples, digit for digit; core/lessons/).
- ENCODER: one head of all-MiniLM-L6-v2 (taken apart in core/inputs/pretrained_heads.py). Its URL
  value stays "pretrained", the spelling every shared link already carries.
- DECODER: one head of SmolLM2-135M (taken apart in core/inputs/decoder_heads.py): a causal head
  with rotary positions, trained behind the mask. Lessons 2, 4 and 5 take it (core/app/registry.py).

Another model source is a member here (its URL value), a `MODELS` entry, a function that takes its
head apart into a `HeadInput` (core/inputs/model_heads.py dispatches to it) and a loader in
ui/weights.py. The links' rule, the sidebar and the layer/head picker read `MODELS`, so they follow.

Shape legend: T = tokens (word pieces, [CLS] and [SEP] included for the encoder), D = embedding width,
d_k = head width. Matrices are stored as (D, d_k), the x @ W layout of lesson 2.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import torch

from core.attention import functional as fn


class WeightSource(StrEnum):
    """The Weights control's choices; each value is what the link carries (?weights=...)."""

    RANDOM = "random"  # the sources' own draws
    ENCODER = "pretrained"  # a head of all-MiniLM-L6-v2 (the value old links carry)
    DECODER = "decoder"  # a head of SmolLM2-135M, a decoder-only GPT

    @property
    def is_model(self) -> bool:
        """Whether a trained model supplies the weights (the page then draws a layer/head picker)."""
        return self in MODELS


@dataclass(frozen=True)
class ModelShape:
    """What a model source fixes: its name on labels, the picker's ranges, and how its heads read."""

    name: str
    num_layers: int
    num_heads: int
    head_dim: int
    hidden_size: int
    causal: bool = False  # trained behind the causal mask (a decoder): its own weights are the masked ones
    sink: str = "[CLS] and [SEP]"  # where its heads park spare weight (head_measures: the first and last key)
    biases: bool = True  # its projections add a bias (BERT's do; a Llama layer's have none)
    piece: str = "word piece"  # what its tokenizer cuts a sentence into, as labels name one (WordPiece's)

    @property
    def sink_positions(self) -> tuple[int, ...]:
        """The keys counted as the sink: a decoder's first token; an encoder's [CLS] (0) and [SEP] (last, -1)."""
        return (0,) if self.causal else (0, -1)


# The model behind each model source (tests/unit/test_pretrained.py checks these against the model's config).
MODELS: dict[WeightSource, ModelShape] = {
    WeightSource.ENCODER: ModelShape("all-MiniLM-L6-v2", num_layers=6, num_heads=12, head_dim=32, hidden_size=384),
    WeightSource.DECODER: ModelShape(
        "SmolLM2-135M-Instruct",
        num_layers=30,
        num_heads=9,
        head_dim=64,
        hidden_size=576,
        causal=True,
        sink="the first token",
        biases=False,
        piece="token",
    ),
}

# How far a weight of the decoder's float32 redo of one head (lessons 2, 4, 5) can be from the model's own bfloat16
# pass (the overview, lessons 10-11): over all 270 heads on three sentences the largest gap measured 0.014, the
# median 0.004 (tests/unit/test_decoder_heads.py holds every head on a sentence under it). The pages say so.
BFLOAT16_WEIGHT_GAP = 0.015

# The largest layer and head index any model source has: the link's rule (core/app/links.py) allows these,
# and the picker then checks a value against the chosen model's own range.
MAX_LAYERS = max(shape.num_layers for shape in MODELS.values())
MAX_HEADS = max(shape.num_heads for shape in MODELS.values())


@dataclass(frozen=True)
class Provenance:
    """Where a head's weights came from, for labels: 'all-MiniLM-L6-v2, layer 0, head 2'."""

    model: str
    layer: int
    head: int

    def label(self) -> str:
        return f"{self.model}, layer {self.layer}, head {self.head}"


@dataclass(frozen=True)
class HeadInput:
    """What a weight source yields for one head (all float32 on the CPU).

    x (T, D); w_query, w_key, w_value (D, d_k); b_query, b_key, b_value (d_k,).
    """

    tokens: tuple[str, ...]  # unique labels for charts
    x: torch.Tensor
    w_query: torch.Tensor
    w_key: torch.Tensor
    w_value: torch.Tensor
    b_query: torch.Tensor
    b_key: torch.Tensor
    b_value: torch.Tensor
    scale: float  # what the scores are multiplied by: the model's own 1/sqrt(d_k)
    provenance: Provenance
    # A decoder with rotary positions (RoPE, core/inputs/decoder_heads.py): q and k are turned pair by pair
    # by their positions 0..T-1 before the dot product. None for the encoder, whose x carries positions.
    rope_base: float | None = None
    # Trained behind the causal mask (a decoder head): the model's own weights are head_trace(..., causal=True).
    causal: bool = False

    @property
    def layer(self) -> int:
        return self.provenance.layer

    @property
    def head(self) -> int:
        return self.provenance.head


def head_trace(head: HeadInput, x_query: torch.Tensor | None = None, *, causal: bool = False) -> fn.AttentionTrace:
    """q = x W_q + b_q (and k, v likewise), then softmax(q kᵀ · scale) v; queries from `x_query` if given
    (cross-attention: queries from one sentence, keys and values from another). A RoPE head turns q and k
    by their positions first; `causal` hides each query's future keys before the softmax (lesson 4)."""
    x_q = head.x if x_query is None else x_query
    with torch.no_grad():
        queries = x_q @ head.w_query + head.b_query  # (T_q, d_k)
        keys = head.x @ head.w_key + head.b_key  # (T, d_k)
        values = head.x @ head.w_value + head.b_value  # (T, d_k)
        if head.rope_base is not None:
            from core.models.smollm2 import rope_angles, rotate_pairs  # the decoder's own rotation

            d_k = queries.shape[-1]
            queries = rotate_pairs(queries, rope_angles(torch.arange(queries.shape[0]), d_k, head.rope_base))
            keys = rotate_pairs(keys, rope_angles(torch.arange(keys.shape[0]), d_k, head.rope_base))
        return fn.scaled_dot_product_attention(queries, keys, values, scale=head.scale, is_causal=causal)
