"""A model weight source, whichever model: one `HeadSource` protocol, an encoder and a decoder implementation.

Lessons 2, 4, 5 and 7 on a model (core/lessons/pretrained.py) ask `heads_of(model)` for the model's
`HeadSource` and never ask which model it is: the encoder's heads come from
core/inputs/pretrained_heads.py, the decoder's from core/inputs/decoder_heads.py. A new model adds one
class here and one row to `_HEAD_SOURCES` (and its shape to core/inputs/weights.MODELS).

Shape legend: T = tokens (word pieces), D = hidden width, h = heads, d_k = head width.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Protocol

import torch

from core.inputs import decoder_heads, pretrained_heads
from core.inputs.examples import unique_labels
from core.inputs.weights import MODELS, HeadInput, ModelShape, WeightSource
from core.models import minilm, smollm2

AnyModel = minilm.RealModel | smollm2.SmolLM2


@dataclass(frozen=True)
class LayerForms:
    """One layer's attention computed three ways on one sentence (lesson 5)."""

    tokens: tuple[str, ...]
    wrapper: torch.Tensor  # (T, D): each head on its own, contexts concatenated, output projection
    split: torch.Tensor  # (T, D): one projection each for q, k, v, split into heads by a view
    model_output: torch.Tensor  # (T, D): the model's own forward pass of the layer's attention
    weights: torch.Tensor  # (h, T, T): the split form's attention weights
    shapes: tuple[tuple[str, tuple[int, ...]], ...]  # (step, shape) of the split form


class HeadSource(Protocol):
    """What a lesson reads from a model's attention: its pieces, one head, a layer's heads."""

    @property
    def source(self) -> WeightSource:
        """The weight source the model stands for (its shape: MODELS[source])."""
        ...

    def pieces(self, sentence: str) -> tuple[str, ...]:
        """The labelled tokens the model reads `sentence` as; ValueError in words (empty, too long)."""
        ...

    def head(self, sentence: str, layer: int, head: int) -> HeadInput:
        """(layer, head) reading `sentence`: x, W_q, W_k, W_v, biases, scale (and RoPE for a decoder)."""
        ...

    def check(self, layer: int, head: int) -> None:
        """ValueError in plain words for a layer or head the model does not have."""
        ...

    def token_ids(self, sentence: str) -> list[int] | None:
        """The token ids a Code box starts from (the decoder's); None where it starts from the sentence."""
        ...

    def score_forms(self, layer: int) -> list[torch.Tensor]:
        """Each head's W_q W_kᵀ (D, D), flattened: what its scores are before the scale (and RoPE)."""
        ...

    def layer_forms(self, sentence: str, layer: int) -> LayerForms:
        """All heads of `layer` reading `sentence`, both ways, beside the model's own pass."""
        ...


@dataclass(frozen=True)
class EncoderHeads:
    """all-MiniLM-L6-v2's heads (core/inputs/pretrained_heads.py)."""

    model: minilm.RealModel
    source: ClassVar[WeightSource] = WeightSource.ENCODER

    def pieces(self, sentence: str) -> tuple[str, ...]:
        return unique_labels(minilm.tokenize(self.model, [sentence]).tokens[0])

    def head(self, sentence: str, layer: int, head: int) -> HeadInput:
        return pretrained_heads.real_head(self.model, sentence, layer, head)

    def check(self, layer: int, head: int) -> None:
        pretrained_heads.check_head(self.model, layer, head)

    def token_ids(self, sentence: str) -> list[int] | None:
        return None  # the encoder's Code boxes tokenize the sentence themselves

    def score_forms(self, layer: int) -> list[torch.Tensor]:
        model = self.model
        slices = [pretrained_heads.head_slice(model, layer, head) for head in range(model.config.num_heads)]
        pairs = [(w_query, w_key) for w_query, w_key, *_ in slices]  # (D, d_k) each
        return [(w_query @ w_key.T).flatten() for w_query, w_key in pairs]  # each (D, D) -> (D * D,)

    def layer_forms(self, sentence: str, layer: int) -> LayerForms:
        model = self.model
        self.check(layer, 0)
        tokens, x = pretrained_heads.hidden_entering(model, sentence, layer)  # x: (T, D) entering the layer
        with torch.no_grad():
            wrapper = pretrained_heads.wrapper_form(model, x, layer)
            split, weights = pretrained_heads.split_form(model, x, layer)  # weights (h, T, T)
            attn_mask = torch.ones(1, 1, 1, len(tokens), dtype=torch.bool)
            own, _ = minilm.self_attention(model.weights.layers[layer], x[None], attn_mask, weights.shape[0])
        return LayerForms(tokens, wrapper, split, own[0], weights, _encoder_shapes(model.config, len(tokens)))


@dataclass(frozen=True)
class DecoderHeads:
    """SmolLM2-135M's heads (core/inputs/decoder_heads.py): causal, grouped-query, with RoPE."""

    model: smollm2.SmolLM2
    source: ClassVar[WeightSource] = WeightSource.DECODER

    def pieces(self, sentence: str) -> tuple[str, ...]:
        return decoder_heads.token_labels(self.model, decoder_heads.lesson_ids(self.model, sentence))

    def head(self, sentence: str, layer: int, head: int) -> HeadInput:
        return decoder_heads.decoder_head(self.model, sentence, layer, head)

    def check(self, layer: int, head: int) -> None:
        decoder_heads.check_head(self.model, layer, head)

    def token_ids(self, sentence: str) -> list[int] | None:
        return [int(i) for i in decoder_heads.lesson_ids(self.model, sentence)]

    def score_forms(self, layer: int) -> list[torch.Tensor]:
        no_tokens = torch.zeros(0, self.model.config.hidden_size)  # the layer's matrices read back once, per head
        pairs = [(one.w_query, one.w_key) for one in decoder_heads.head_inputs(self.model, (), no_tokens, layer)]
        return [(w_query @ w_key.T).flatten() for w_query, w_key in pairs]  # each (D, D) -> (D * D,)

    def layer_forms(self, sentence: str, layer: int) -> LayerForms:
        model = self.model
        tokens, wrapper, split, own, weights = decoder_heads.decoder_layer_forms(model, sentence, layer)
        return LayerForms(tokens, wrapper, split, own, weights, _decoder_shapes(model.config, len(tokens)))


# The table of models: a loaded model's class -> its HeadSource.
_HEAD_SOURCES: dict[type, type[EncoderHeads] | type[DecoderHeads]] = {
    minilm.RealModel: EncoderHeads,
    smollm2.SmolLM2: DecoderHeads,
}


def heads_of(model: AnyModel) -> HeadSource:
    """The `HeadSource` of a loaded model."""
    return _HEAD_SOURCES[type(model)](model)  # type: ignore[arg-type]  # the row of the model's own class


def shape_of(model: AnyModel) -> ModelShape:
    return MODELS[heads_of(model).source]


def _encoder_shapes(config: minilm.EncoderConfig, tokens: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
    heads, d_k, d_model = config.num_heads, config.head_dim, config.hidden_size
    return (
        ("x entering the layer", (tokens, d_model)),
        (f"queries = x W_q + b_q (one {d_model} → {d_model} projection)", (tokens, d_model)),
        (f"split: .view(T, {heads}, {d_k})", (tokens, heads, d_k)),
        ("heads first: .transpose(0, 1)", (heads, tokens, d_k)),
        (f"weights = softmax(q kᵀ / √{d_k})", (heads, tokens, tokens)),
        ("context = weights @ v", (heads, tokens, d_k)),
        (f"heads back together: .transpose(0, 1).reshape(T, {d_model})", (tokens, d_model)),
        (f"attention.output.dense ({d_model} → {d_model})", (tokens, d_model)),
    )


def _decoder_shapes(config: smollm2.DecoderConfig, tokens: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
    heads, kv_heads, d, d_model = config.num_heads, config.num_kv_heads, config.head_dim, config.hidden_size
    return (
        ("x entering the layer, after its RMSNorm", (tokens, d_model)),
        (f"queries = x W_q (one {d_model} → {heads * d} projection, no bias)", (tokens, heads * d)),
        (f"keys = x W_k (only {d_model} → {kv_heads * d}: {kv_heads} key/value heads)", (tokens, kv_heads * d)),
        (f"queries split: .view(T, {heads}, {d}).transpose(0, 1)", (heads, tokens, d)),
        (f"keys and values split: .view(T, {kv_heads}, {d}).transpose(0, 1)", (kv_heads, tokens, d)),
        ("q and k turned by their positions (RoPE): shapes unchanged", (heads, tokens, d)),
        (
            f"each key/value head serves {config.group_size} query heads: .repeat_interleave({config.group_size}, 0)",
            (heads, tokens, d),
        ),
        (f"weights = softmax(mask(q kᵀ / √{d}))", (heads, tokens, tokens)),
        ("context = weights @ v", (heads, tokens, d)),
        (f"heads back together: .transpose(0, 1).reshape(T, {heads * d})", (tokens, heads * d)),
        (f"attn_output ({heads * d} → {d_model})", (tokens, d_model)),
    )
