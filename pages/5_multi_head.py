"""Lesson 5: several heads in parallel, two ways to build them, on random or learned weights.

One script for every weight source (core/inputs/weights.py): the random draws follow the sources'
worked examples; a model's layer (`?weights=pretrained`) shows its twelve trained heads.
"""

from typing import TYPE_CHECKING

import streamlit as st

from core.app.markup import literal
from core.app.settings import PresetKey, Settings
from core.lessons import multi_head
from core.lessons.common import token_name
from core.lessons.multi_head import gpt2_parameter_counts, parameter_counts
from ui import cache, draw, widgets
from ui import weights as source
from ui.frame import page_start
from ui.presentation import step

if TYPE_CHECKING:  # the model's modules load only when a model source is chosen (memory)
    from core.lessons import pretrained as pt

PREDICT_KEY = "predict_multi_head"


def on_random_draws(settings: Settings) -> None:
    widgets.prose("multi_head", "intro")
    # Side by side on a wide screen, stacked on a phone (one line was cut at 390 px).
    whole, one_head = st.columns(2)
    whole.latex(r"\text{MultiHead}(X) = [\,\text{head}_1 \cdots \text{head}_h\,]\,W_o")
    one_head.latex(r"\text{head}_i = \text{softmax}\!\left(\frac{Q_i K_i^\top}{\sqrt{d_{head}}} + M\right) V_i")
    st.caption(
        "[head₁ ⋯ headₕ] puts the heads' outputs side by side (concatenation). M is the causal mask: 0 where a "
        "query may look, −∞ on the future tokens it may not see."
    )
    lesson = cache.computed(multi_head.LESSON, settings)
    if lesson.heads_note:
        st.info(lesson.heads_note, icon=":material/call_split:")

    answered = widgets.predict(lesson.prediction, key=PREDICT_KEY)
    step(f"{lesson.num_heads} heads of width {lesson.head_dim}")
    if answered:  # whether the heads look alike is the question
        draw.head_panels(
            lesson.head_weights,
            f"{lesson.num_heads} causal heads of width {lesson.head_dim}",
            f"Small heatmaps of the causal attention weights of the {lesson.num_heads} heads, on one colour scale.",
            key="random_heads",
            causal=True,
        )
        widgets.prose("multi_head", "random")
    else:
        widgets.answer_first(f"The {lesson.num_heads} heads' weights, and whether they differ, appear")

    step("Wrapper vs one split matrix")
    widgets.prose("multi_head", "two")
    a, b, c = st.columns(3)
    a.metric("wrapper output width", lesson.wrapper_width, help="d_out per head × heads")
    b.metric("max |wrapper − MultiHeadAttention|", f"{lesson.wrapper_max_diff:.1e}")
    c.metric("parameters (this layer)", f"{lesson.params:,}")
    st.markdown("**Shapes step by step** (batch of one sentence)")
    st.dataframe(
        [{"code": step.code, "what happens": step.what, "shape": str(step.shape)} for step in lesson.shape_steps],
        hide_index=True,
        width="stretch",
    )
    draw.heatmap(
        lesson.output,
        "Output after out_proj",
        "Heatmap of the multi-head attention output.",
        signed=True,
        x_title="dimension",
        y_title="token",
        show_values=settings.d_out <= 8,
    )

    article = lesson.article
    step(f"The self-attention article's design: {article.num_heads} full-width heads")
    widgets.prose("multi_head", "article")
    st.markdown(
        f"Here h = **{article.num_heads}**, d_q = d_k = **{article.d_k}** and d_v = **{article.d_v}** for every head "
        f"(d_v = d_k + 4, as the article's 24 and 28), following the query token "
        f"{token_name(article.query_index + 1)} “{literal(lesson.tokens[article.query_index])}”. "
        f"Weights: **{article.params:,}** numbers, against **{lesson.params:,}** for the split layer above."
    )
    st.dataframe(
        [{"code": s.code, "what happens": s.what, "shape": str(list(s.shape))} for s in article.shape_steps],
        hide_index=True,
        width="stretch",
    )
    if settings.preset == PresetKey.ARTICLE:
        st.caption(
            "The article prints these shapes: [3, 24], [3, 16, 6], [3, 24, 6], [3, 28, 6], [3, 6, 24], [3, 6, 28]. "
            "It prints no numbers for its heads (its draws continue from earlier cells), so the weights below "
            "are drawn from the sidebar's seed."
        )
    a1, a2 = st.columns(2)
    with a1:
        draw.heatmap(
            article.weights,
            "Each head's weights for the query token",
            "Heatmap: one row per full-width head, one column per token.",
            value_title="weight",
            x_title="key token",
            y_title="head",
        )
    with a2:
        draw.heatmap(
            article.context,
            f"Context vectors: h × d_v = {article.num_heads} × {article.d_v}",
            "Heatmap of each head's context vector for the query token.",
            signed=True,
            x_title="dimension",
            y_title="head",
        )
    widgets.code_box(
        article.code,
        "The article's way in plain PyTorch: torch.rand(h, d_q, d), repeat, bmm, permute.",
        title="the self-attention article's full-width heads",
    )

    step("Parameter count")
    widgets.prose("multi_head", "params")
    counts = gpt2_parameter_counts()
    p1, p2 = st.columns(2)
    p1.metric("GPT-2-sized layer (768 → 768, 12 heads), no q/k/v bias (the book's)", f"{counts.without_qkv_bias:,}")
    p2.metric("the same with q/k/v biases (GPT-2 itself)", f"{counts.with_qkv_bias:,}")
    layer_counts = parameter_counts(settings)
    st.markdown(
        f"This page's layer (sidebar d_in and d_out, no q/k/v bias): **{layer_counts.this_layer:,}** parameters"
    )
    widgets.code_box(
        layer_counts.code, "Counting real nn.Linear layers instead of using the formula.", title="count the parameters"
    )
    widgets.code_box(lesson.code, title="the book's multi-head attention with these numbers")


def on_a_model(settings: Settings) -> None:
    """The twelve heads of one trained layer, and the layer computed both ways."""
    from core.lessons import pretrained as pt

    widgets.prose(source.text(settings.weights), "multi_intro")
    if not source.model_ready(settings.weights):
        return
    sentence, _ = source.lesson_sentence(settings)
    layer, _ = source.head_picker("multi_head", settings.weights, with_head=False)
    lesson = cache.computed(pt.MULTIHEAD, settings.weights, source.model(settings.weights), sentence, layer)
    source.pieces_line(lesson.tokens, settings.weights)
    answered = widgets.predict(lesson.prediction, key=PREDICT_KEY)
    step(f"The {lesson.num_heads} heads of layer {lesson.layer}")
    if answered:  # the heatmaps and their measured patterns say whether the heads look alike
        head_grid(lesson)
        widgets.number_table(lesson.patterns_table, hide_index=True, decimals=2)
    else:
        widgets.answer_first(f"The {lesson.num_heads} heads' weights and what each was measured to do appear")
    step(f"{lesson.num_heads} heads, or one matrix split in {lesson.num_heads}")
    widgets.prose(source.text(settings.weights), "multi_split")
    width, whole = st.columns([1, 2])
    width.latex(rf"{lesson.d_model} = {lesson.num_heads} \times {lesson.head_dim}")
    whole.latex(r"\text{MultiHead}(X) = [\,h_0 \cdots h_{" + str(lesson.num_heads - 1) + r"}\,]\, W_o + b_o")
    st.caption(f"h_i is head i's output, {lesson.head_dim} numbers per piece; the table follows the shapes.")
    st.dataframe([{"step": name, "shape": str(shape)} for name, shape in lesson.shapes], hide_index=True)
    a, b = st.columns(2)
    a.metric("max |wrapper − split form|", f"{lesson.wrapper_vs_split:.1e}")
    b.metric("max |split form − the model's forward pass|", f"{lesson.split_vs_model:.1e}")
    if lesson.trained_causal:
        st.caption(
            f"The model's own pass multiplies by its 4-bit weights in bfloat16 (about three significant digits); "
            f"both forms here run in float32 on the same 4-bit numbers. So they differ from it by bfloat16's rounding, "
            f"summed over the products: at most {lesson.split_vs_model:.2g} on outputs as large as "
            f"{lesson.largest_output:.3g} ({lesson.split_vs_model / lesson.largest_output:.1%} of the largest)."
        )
        widgets.code_box(lesson.code, source.code_caption(settings.weights))
        return
    widgets.code_box(
        lesson.code,
        "Plain PyTorch from the model's own files: both forms, and the heads above. Its max |wrapper − split| is "
        "float32 rounding, like the page's (both under 1e-6), but it reaches the layer by another order of "
        "operations, so the last digits of that one figure differ.",
    )


def head_grid(lesson: "pt.PretrainedMultiHeadLesson") -> None:
    """A trained layer's heads as small multiples on one colour scale; the table below names each one's pattern.
    A decoder's heads stand one row per key/value head, the three query heads that share it side by side."""
    group = lesson.num_heads // lesson.kv_heads
    shared = group > 1
    draw.head_panels(
        lesson.heads,
        f"The {lesson.num_heads} heads of layer {lesson.layer}"
        + (f": one row per key/value head, its {group} query heads side by side" if shared else ""),
        f"Small heatmaps of the {lesson.num_heads} heads' weights on one colour scale: "
        + "; ".join(f"head {p.head} {p.summary}" for p in lesson.patterns)
        + ".",
        key="model_heads",
        causal=lesson.trained_causal,
        columns=group if shared else None,
    )


settings = page_start().settings
if settings.weights.is_model:
    on_a_model(settings)
else:
    on_random_draws(settings)
