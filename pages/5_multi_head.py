"""Lesson 5: several heads in parallel, two ways to build them, on random or learned weights.

One script and one lesson (core/lessons/multi_head.MultiHeadLesson) for every weight source
(core/inputs/weights.py): the random draws follow the sources' worked examples, with the book's layer, the
article's full-width heads and the parameter count; a model's layer (`?weights=pretrained`, `?weights=decoder`)
shows its trained heads, what each was measured to do, and the split form beside the model's own pass.
"""

import streamlit as st

from core.app.markup import counted, literal
from core.app.settings import PresetKey, Settings
from core.inputs.weights import MODELS
from core.lessons import multi_head
from core.lessons.common import token_name
from core.lessons.multi_head import (
    ArticleHeads,
    BookLayer,
    MultiHeadLesson,
    TrainedLayer,
    gpt2_parameter_counts,
    parameter_counts,
)
from ui import cache, draw, widgets
from ui import weights as source
from ui.frame import page_start
from ui.presentation import step, step_break

PREDICT_KEY = "predict_multi_head"
SLUG = "multi_head"


def formulas() -> None:
    """Random draws: the intro and the book's two formulas."""
    widgets.prose(SLUG, "intro")
    # Side by side on a wide screen, stacked on a phone (one line was cut at 390 px).
    whole, one_head = st.columns(2)
    whole.latex(r"\text{MultiHead}(X) = [\,\text{head}_1 \cdots \text{head}_h\,]\,W_o")
    one_head.latex(r"\text{head}_i = \text{softmax}\!\left(\frac{Q_i K_i^\top}{\sqrt{d_{head}}} + M\right) V_i")
    st.caption(
        "[head₁ ⋯ headₕ] puts the heads' outputs side by side (concatenation). M is the causal mask: 0 where a "
        "query may look, −∞ on the future tokens it may not see."
    )
    # The question on a screen of its own: under the formulas, its options fell below a projector's fold, and
    # then its 8-line verdict ran to 777 px (the s22 re-review).
    step_break()


def computed(settings: Settings) -> MultiHeadLesson | None:
    """The intro, the layer picker and the lesson for this source (None: the model's files are broken)."""
    if not settings.weights.is_model:
        formulas()
        lesson = cache.computed(multi_head.LESSON, settings)
        if lesson.heads_note:
            st.info(lesson.heads_note, icon=":material/call_split:")
        return lesson
    from core.lessons import pretrained as pt

    chosen = source.pick(SLUG, settings, "multi_intro", with_head=False)
    if chosen is None:
        return None
    lesson = cache.computed(pt.MULTIHEAD, settings.weights, chosen.model, chosen.sentence, chosen.layer)
    source.pieces_line(lesson.tokens, settings.weights)
    step_break()  # the question on a screen of its own: under the pickers its verdict ran to 862-894 px
    return lesson


def the_heads(lesson: MultiHeadLesson, answered: bool) -> None:
    """Every head's weights once answered (the question is about them); a model's with its patterns."""
    trained = lesson.trained
    if trained is None:
        step(f"{counted(lesson.num_heads, 'head')} of width {lesson.head_dim}")
    else:
        step(f"The {lesson.num_heads} heads of layer {trained.layer}")
    if not answered:
        what = " and what each was measured to do" if trained else ", and whether they differ,"
        widgets.answer_first(f"The {lesson.num_heads} heads' weights{what} appear")
    elif trained is None:
        draw.head_panels(
            lesson.head_weights,
            f"{counted(lesson.num_heads, 'causal head')} of width {lesson.head_dim}",
            f"Small heatmaps of the causal attention weights of {counted(lesson.num_heads, 'head')}, on one colour "
            "scale.",
            key="random_heads",
            causal=True,
        )
        if lesson.num_heads > 1:  # whether random heads differ: one head has no other to differ from
            widgets.prose(SLUG, "random")
    else:
        head_grid(lesson, trained)
        widgets.number_table(trained.patterns_table, hide_index=True, decimals=2)
        # A row read 0.93 on the first token and 0.22 on the previous piece (the s20 review): say why that can be.
        st.caption(
            "Each column is a mean over the queries"
            + (" after the first (whose only key is itself)" if lesson.causal else "")
            + ". The columns overlap where one key is two things at once (for the second piece, the previous piece "
            "is the first), so a head's numbers can add up to more than 1."
        )


def book_layer(lesson: MultiHeadLesson, book: BookLayer, settings: Settings) -> None:
    """Random draws: the book's wrapper against one split matrix, the shapes and the output."""
    step("Wrapper vs one split matrix")
    widgets.prose(SLUG, "two")
    a, b, c = st.columns(3)
    a.metric("wrapper output width", book.wrapper_width, help="d_out per head × heads")
    b.metric("max |wrapper − MultiHeadAttention|", f"{lesson.wrapper_vs_split:.1e}")
    c.metric("parameters (this layer)", f"{book.params:,}")
    # Three screens on a projector, not one of 1,808 px (the s26 review): the two forms, the shapes, the output.
    step_break()
    st.markdown("**Shapes step by step** (batch of one sentence)")
    st.dataframe(
        # The shape before the words: on a phone the table scrolls sideways and hid the column it is about.
        [{"code": step.code, "shape": str(step.shape), "what happens": step.what} for step in book.shape_steps],
        hide_index=True,
        width="stretch",
        height="content",  # every row: a shape table is short
    )
    step_break()
    draw.heatmap(
        book.output,
        "Output after out_proj",
        "Heatmap of the multi-head attention output.",
        signed=True,
        x_title="dimension",
        y_title="token",
        show_values=settings.d_out <= 8,
    )


def article_design(
    lesson: MultiHeadLesson, article: ArticleHeads, book_params: int, settings: Settings, answered: bool
) -> None:
    """Random draws: the self-attention article's full-width heads on the same input."""
    step(f"The self-attention article's design: {counted(article.num_heads, 'full-width head')}")
    widgets.prose("multi_head", "article")
    st.markdown(
        f"Here h = **{article.num_heads}**, d_q = d_k = **{article.d_k}** and d_v = **{article.d_v}** for every head "
        f"(d_v = d_k + 4, as the article's 24 and 28), following the query token "
        f"{token_name(article.query_index + 1)} “{literal(lesson.tokens[article.query_index])}”. "
        f"Weights: **{article.params:,}** numbers, against **{book_params:,}** for the split layer above."
    )
    st.dataframe(
        [{"code": s.code, "shape": str(list(s.shape)), "what happens": s.what} for s in article.shape_steps],
        hide_index=True,
        width="stretch",
        height="content",  # every row: a shape table is short
    )
    if settings.preset == PresetKey.ARTICLE:
        st.caption(
            "The article prints these shapes: [3, 24], [3, 16, 6], [3, 24, 6], [3, 28, 6], [3, 6, 24], [3, 6, 28]. "
            "It prints no numbers for its heads (its draws continue from earlier cells), so the weights below "
            "are drawn from the sidebar's seed."
        )
    # On a projector the heads' heatmaps open a screen of their own: under the prose and the shapes table they
    # started at 868 px of 720 (the s24 review).
    step_break()
    if not answered:  # full-width random heads that differ would point at an answer for the book's heads
        widgets.answer_first("These heads' weights and context vectors appear")
    else:
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
        st.markdown(multi_head.article_comparison(article, lesson.head_dim))
    widgets.code_box(
        article.code,
        "The article's way in plain PyTorch: torch.rand(h, d_q, d), repeat, bmm, permute.",
        title="the self-attention article's full-width heads",
    )


def parameter_count(settings: Settings) -> None:
    """Random draws: a GPT-2-sized layer's parameters and this page's, by formula and by counting."""
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


def model_layer(lesson: MultiHeadLesson, trained: TrainedLayer, settings: Settings) -> None:
    """A model's layer: its heads as one split matrix, beside the wrapper and the model's own pass."""
    step(f"{counted(lesson.num_heads, 'head')}, or one matrix split in {lesson.num_heads}")
    widgets.prose(source.text(settings.weights), "multi_split")
    width, whole = st.columns([1, 2])
    width.latex(rf"{trained.d_model} = {lesson.num_heads} \times {lesson.head_dim}")
    bias = r" + b_o" if MODELS[settings.weights].biases else ""  # SmolLM2's output projection has none
    whole.latex(r"\text{MultiHead}(X) = [\,h_0 \cdots h_{" + str(lesson.num_heads - 1) + r"}\,]\, W_o" + bias)
    st.caption(f"h_i is head i's output, {lesson.head_dim} numbers per piece; the table follows the shapes.")
    step_break()  # the shapes and the checks on a projector screen of their own (1,329-1,537 px with the formulas)
    st.dataframe(
        [{"step": name, "shape": str(shape)} for name, shape in trained.shapes], hide_index=True, height="content"
    )
    a, b = st.columns(2)
    a.metric("max |wrapper − split form|", f"{lesson.wrapper_vs_split:.1e}")
    b.metric("max |split form − the model's forward pass|", f"{trained.split_vs_model:.1e}")
    if lesson.causal:
        st.caption(
            f"The model's own pass multiplies by its 4-bit weights in bfloat16 (about three significant digits); "
            f"both forms here run in float32 on the same 4-bit numbers. So they differ from it by bfloat16's rounding, "
            f"summed over the products: at most {trained.split_vs_model:.2g} on outputs as large as "
            f"{trained.largest_output:.3g} ({trained.split_vs_model / trained.largest_output:.1%} of the largest)."
        )
        widgets.code_box(lesson.code, source.code_caption(settings.weights), title=source.code_title(settings.weights))
        return
    widgets.code_box(
        lesson.code,
        "Plain PyTorch from the model's own files: both forms, and the heads above. Its max |wrapper − split| is "
        "float32 rounding, like the page's (both under 1e-6), but it reaches the layer by another order of "
        "operations, so the last digits of that one figure may differ (0 where both orders round alike).",
    )


def head_grid(lesson: MultiHeadLesson, trained: TrainedLayer) -> None:
    """A trained layer's heads as small multiples on one colour scale; the table below names each one's pattern.
    A decoder's heads stand one row per key/value head, the three query heads that share it side by side."""
    draw.layer_head_panels(
        lesson.head_weights,
        lesson.num_heads,
        lesson.num_heads // trained.kv_heads,
        f"The {lesson.num_heads} heads of layer {trained.layer}",
        f"Small heatmaps of the {lesson.num_heads} heads' weights on one colour scale: "
        + "; ".join(f"head {p.head} {p.summary}" for p in trained.patterns)
        + ".",
        key="model_heads",
        causal=lesson.causal,
    )


def lesson_5(settings: Settings) -> None:
    lesson = computed(settings)
    if lesson is None:
        return
    if lesson.prediction is None:  # one head: "will the heads look different?" has no pair to compare
        st.info(
            "This layer has one head, so there is no pair of heads to compare and no question to answer. Choose 2 "
            "or more heads in the sidebar (a number that divides d_out) to ask whether random heads already differ."
        )
        answered = True
    else:
        answered = widgets.predict(lesson.prediction, key=PREDICT_KEY)
    the_heads(lesson, answered)
    if lesson.trained is not None:
        model_layer(lesson, lesson.trained, settings)
    if lesson.book is not None:
        book_layer(lesson, lesson.book, settings)
        if lesson.article is not None:
            article_design(lesson, lesson.article, lesson.book.params, settings, answered)
        parameter_count(settings)
        widgets.code_box(lesson.code, title="the book's multi-head attention with these numbers")


lesson_5(page_start().settings)
