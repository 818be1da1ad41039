"""Attention Lab's computation package: every number the dashboard shows comes from here.

`core` never imports streamlit. It runs on CPU or CUDA (`resolve_device`).
"""

from core.attention.functional import (
    AttentionTrace,
    causal_mask,
    dropout_with_generator,
    mask_after_softmax,
    mask_before_softmax,
    mask_with_classic_bug,
    renormalise_rows,
    scaled_dot_product_attention,
)
from core.attention.modules import (
    CausalAttention,
    CrossAttention,
    MultiHeadAttention,
    MultiHeadAttentionWrapper,
    SelfAttention_v1,
    SelfAttention_v2,
    SimpleAverageSelfAttention,
    SingleSelfAttentionHead,
    count_parameters,
    draw_qkv_weights,
    make_linear,
    multihead_from_wrapper,
    multihead_parameter_count,
    torch_multihead_from,
    v1_from_v2,
)
from core.attention.simple import (
    context_vector_loop,
    context_vectors,
    cosine_similarity,
    dot_scores,
    dot_scores_for_query,
    dot_scores_loop,
    naive_softmax_overflow_threshold,
    normalize_by_sum,
    softmax_naive,
    softmax_stable,
)
from core.attention.stats import (
    DEFAULT_DIMS,
    MAX_TRIALS,
    dot_product_variance,
    dot_product_variance_loop,
    entropy,
    peakiness,
    peakiness_vs_dk,
    sample_dot_products,
    sample_dot_products_direct,
    saturation_sweep,
    softmax_jacobian,
    softmax_multiplier_sweep,
)
from core.inputs.device import available_devices, resolve_device
from core.inputs.examples import (
    BOOK_CAUSAL_MASKED_SCORES,
    BOOK_CAUSAL_WEIGHTS,
    MAX_D_IN,
    MAX_TEXT_CHARS,
    MAX_TOKENS,
    Example,
    ShiftedChunk,
    cats_example,
    embed_text,
    journey_example,
    life_example,
    life_vocabulary,
    random_second_sequence,
    random_words_example,
    tokenize,
)

__all__ = [name for name in dir() if not name.startswith("_")]
