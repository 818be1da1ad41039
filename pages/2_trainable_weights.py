"""Lesson 2: queries, keys and values from trainable matrices, drawn at random or learned by a model.

One script and one lesson (core/lessons/trainable_weights.TrainableLesson) for every weight source
(core/inputs/weights.py): the random draws follow the sources' worked examples; a model's head
(`?weights=pretrained`) runs the same steps on learned weights, under its layer/head picker.
"""

import streamlit as st

from core.app.markup import literal
from core.app.settings import Settings
from core.charts import colours
from core.inputs.weights import MODELS
from core.lessons import common, trainable_weights
from core.lessons.trainable_weights import TrainableLesson
from ui import cache, draw, widgets
from ui import weights as source
from ui.frame import page_start
from ui.presentation import presenting, step, step_break

QUERY_KEY = "query_trainable_weights"  # one picker for every source; a new source brings its own default
SLUG = "trainable_weights"


def computed(settings: Settings) -> TrainableLesson | None:
    """The intro, the pickers and the lesson for this source (None: the model's files are broken)."""
    example = f"{settings.preset}/{settings.weights}"  # a new example or source brings its own focus token
    if not settings.weights.is_model:
        widgets.prose(SLUG, "intro")
        step_break()  # on a projector, the question's options fell below the fold of the opening
        tokens = cache.computed(common.TOKEN_LABELS, settings)
        query = widgets.query_picker(tokens, settings.preset_info.query_index, key=QUERY_KEY, example=example)
        return cache.computed(trainable_weights.LESSON, settings, query)
    from core.lessons import pretrained as pt

    chosen = source.pick(SLUG, settings, "trainable_intro")
    if chosen is None:
        return None
    step_break()  # the query and the question (one option a word piece) on a screen of their own
    pieces = chosen.pieces
    query = widgets.query_picker(
        pieces, pt.default_query(settings, len(pieces), settings.weights), key=QUERY_KEY, example=example
    )
    lesson = cache.computed(
        pt.TRAINABLE, settings.weights, chosen.model, chosen.sentence, chosen.layer, chosen.head, query
    )
    source.pieces_line(lesson.tokens, settings.weights)
    return lesson


def ingredients(lesson: TrainableLesson, model: bool, biases: bool, row: str, answered: bool) -> None:
    """W_q, W_k, W_v and the queries, keys and values they make (a model's: its first rows, no numbers).

    The random draws' Q, K and V wait for the question: their numbers answer it (the s27 and s27b reviews read
    the favourite off K, the darkest row in every column, before choosing). A model's maps print no numbers."""
    cols = st.columns(3)
    matrices = (("W_query", lesson.w_query), ("W_key", lesson.w_key), ("W_value", lesson.w_value))
    for col, (name, matrix) in zip(cols, matrices, strict=True):
        with col:
            if model:  # a (384, 32) matrix is noise as a chart, and seconds to draw: its top-left corner
                rows, cols = lesson.rows_shown, lesson.cols_shown
                title = f"{name} ({lesson.d_in} × {lesson.d_k}): its top-left {rows} × {cols}"
                alt = (
                    f"Heatmap of the top-left {rows} rows and {cols} columns of the pretrained matrix {name}, "
                    f"{lesson.d_in} × {lesson.d_k} in all."
                )
            else:
                title, alt = name, f"Heatmap of the weight matrix {name}."
            draw.heatmap(matrix, title, alt, signed=True, x_title="output", y_title="input")
    # The matrices, then what they make, each a projector screen (together 1,661 px with a model's; s26 review).
    step_break()
    st.latex(
        r"Q = X W_q + b_q,\quad K = X W_k + b_k,\quad V = X W_v + b_v"
        if biases
        else r"Q = X W_q,\quad K = X W_k,\quad V = X W_v"
    )
    if not (answered or model):
        widgets.answer_first("The queries, keys and values, with their numbers, appear")
        return
    cols = st.columns(3)
    projections = (("queries", "Q", lesson.queries), ("keys", "K", lesson.keys), ("values", "V", lesson.values))
    for col, (name, label, matrix) in zip(cols, projections, strict=True):
        with col:
            alt = f"Heatmap of the {name}, one row per {row}" + (f", {lesson.d_k} columns." if model else ".")
            draw.heatmap(matrix, label, alt, signed=True, show_values=not model, x_title="dimension", y_title=row)


def one_query(lesson: TrainableLesson, settings: Settings, answered: bool, model: bool) -> None:
    token = lesson.tokens[lesson.query_index]
    step(f"One query: “{literal(token)}”")
    if model:
        widgets.prose(source.text(settings.weights), "trainable_steps")
        # Two lines, as below: on one, the formula and d_k ran past a 390 px phone (the s19 review).
        st.latex(r"\text{Attention}(Q, K, V) = \text{softmax}\left(Q K^\top \cdot \frac{1}{\sqrt{d_k}}\right) V")
        st.latex(rf"d_k = {lesson.d_k},\quad \text{{scale}} = {lesson.scale:.4f}")
    else:
        widgets.prose(SLUG, "steps")
        scale_text = r"\frac{1}{\sqrt{d_k}}" if settings.scale else "1"
        # Short lines: "Attention(Q, K, V) = ...", d_k and the scale on one line were cut on a 390 px phone.
        st.latex(rf"Z = \text{{softmax}}\left(Q K^\top \cdot {scale_text}\right) V")
        st.latex(rf"d_k = {lesson.d_k},\quad \text{{scale}} = {lesson.scale:.4f}")
    if model:  # a model's 64 numbers as a strip, each in its tooltip: as a line of text they were a wall of digits
        step_break()  # the formulas, then the query's numbers: together 1,866 px on a projector (s26 review)
        vector_strip(lesson.query_row(), f"q for “{literal(token)}”", f"the query vector q, {lesson.d_k} numbers")
    else:
        st.markdown("q = **[" + ", ".join(f"{v:.4f}" for v in lesson.query_vector) + "]**")
    if answered:  # the query's scores and weights: its favourite key, part of the question's answer
        widgets.number_table(lesson.one_query.set_index("token").T)
    else:
        widgets.answer_first(f"The scores and weights of “{literal(token)}” appear")
    z = ", ".join(f"{v:.4f}" for v in lesson.query_context)
    if model:
        vector_strip(
            lesson.context_row(),
            f"context vector z for “{literal(token)}”",
            f"the context vector z, {lesson.d_v} numbers",
        )
        with st.expander(f"The numbers of q and z for “{literal(token)}”"):
            st.markdown("q = [" + ", ".join(f"{v:.4f}" for v in lesson.query_vector) + "]")
            st.markdown(f"z = [{z}]")
    else:
        st.markdown(f"context vector z for “{literal(token)}” = **[{z}]**")


def vector_strip(row, title: str, what: str) -> None:
    """One vector as a one-row heatmap on its own signed scale: colours at a glance, each number in its tooltip."""
    draw.heatmap(
        row,
        title,
        f"A strip of coloured cells: {what}.",
        signed=True,
        show_values=False,
        x_title="dimension",
        y_title="",
    )


def all_queries(lesson: TrainableLesson, answered: bool, model: bool, row: str) -> None:
    """Scores, scaled scores, weights and context of every query: each row's favourite key, the question's answer."""
    step("All queries at once")
    # Two per row: four heatmaps side by side leave no room for their numbers. A model's weights and context
    # at full width: its weights are the lesson's point, and their numbers must be readable.
    # On a projector the weights (the question's answer) come first: under the two score maps they ended at
    # 1,324 px of 720 (the s25 review).
    if presenting():
        with draw.shrinks_to_column("tw-weights", projector_vh=draw.PROJECTOR_GRID_VH):  # and whole on the screen
            weights_col, context_col = (st.container(), st.container()) if model else st.columns(2)
        step_break()  # the scores on a screen of their own: under a model's weights and context, 2,076 px (s26)
        raw_col, scaled_col = st.columns(2)
    else:
        raw_col, scaled_col = st.columns(2)
        weights_col, context_col = (st.container(), st.container()) if model else st.columns(2)
    if answered:
        # A decoder head's future keys are masked (grey "–"): the model never uses their scores, so they set
        # neither colour scale.
        domain = colours.shared_domain(lesson.scores, lesson.scaled_scores, causal=lesson.causal)
        with raw_col:
            draw.heatmap(
                lesson.scores,
                "Scores ω = Q Kᵀ",
                "Heatmap of the raw scores."
                if model
                else "Heatmap of the raw attention scores, on the same colour scale as the scaled scores.",
                signed=True,
                domain=domain,
                causal=lesson.causal,
            )
        with scaled_col:
            draw.heatmap(
                lesson.scaled_scores,
                f"Scaled scores ω / √{lesson.d_k}" if model else "Scaled scores ω · scale",
                "Heatmap of the scaled scores."
                if model
                else "Heatmap of the scores after scaling, before the softmax, on the same colour scale as the raw "
                "scores.",
                signed=True,
                domain=domain,
                causal=lesson.causal,
            )
        with weights_col:
            draw.query_weights_heatmap(
                lesson.weights,
                "Weights = the model's own attention (click a row)" if model else "Weights (click a row)",
                "Heatmap of the attention weights after the softmax.",
                chart_key="tw_weights",
                picker_key=QUERY_KEY,
                highlight_row=lesson.query_index,
                causal=lesson.causal,
            )
        with context_col:  # alike rows of Z would hint that the rows of weights are alike
            draw.heatmap(
                lesson.context,
                "Context Z = weights @ V",
                "Heatmap of the context vectors.",
                signed=True,
                show_values=not model,
                x_title="dimension",
                y_title=row,
            )
    else:  # the weights' place: on a projector the first screen of this step (the scores open the next)
        with weights_col:
            widgets.answer_first("The scores, weights and context vectors of every query appear")


def versions(lesson: TrainableLesson, answered: bool) -> None:
    """The sources' SelfAttention_v1 and _v2 (random draws only), and d_v.

    The table waits for the question: its rows are context vectors too, as alike as the Z the question locks."""
    if lesson.versions is None:
        return
    step("SelfAttention_v1 vs SelfAttention_v2")
    widgets.prose(SLUG, "versions")
    if answered:
        widgets.number_table(lesson.versions.table.set_index("token"))
        a, b = st.columns(2)
        a.metric("max |v1 − v2|, own initialisations", f"{lesson.versions.fresh_max_diff:.4f}")
        b.metric("max |v1 − v2|, v2's weights copied into v1", f"{lesson.versions.copied_max_diff:.1e}")
        if lesson.versions.book_hint is not None:
            st.caption(lesson.versions.book_hint)
    else:
        widgets.answer_first(
            "Both versions' context vectors, side by side, appear", question="predict_trainable_weights"
        )
    widgets.code_box(
        lesson.versions.code,
        "SelfAttention_v1 and _v2 in plain PyTorch: the three rows of the table above.",
        title="SelfAttention_v1 and _v2",
    )
    step("d_v: the width of the values")
    widgets.prose(SLUG, "dv")
    st.markdown(f"Here d_k = **{lesson.d_k}** and d_v = **{lesson.d_v}**: the sidebar's d_out sets both.")


def lesson_2(settings: Settings) -> None:
    model = settings.weights.is_model
    lesson = computed(settings)
    if lesson is None:
        return
    answered = widgets.predict(lesson.prediction, key="predict_trainable_weights")
    if lesson.pattern is not None:
        source.head_caption(lesson.pattern, answered)
    step_break()  # the matrices, on a screen of their own: on a projector a long verdict pushed them below the fold
    row = MODELS[settings.weights].piece if model else "token"  # what a row of Q, K, V and Z stands for
    ingredients(lesson, model, model and MODELS[settings.weights].biases, row, answered)  # random draws: no biases
    one_query(lesson, settings, answered, model)
    all_queries(lesson, answered, model, row)
    versions(lesson, answered)
    if model:
        widgets.code_box(lesson.code, source.code_caption(settings.weights), title=source.code_title(settings.weights))
    else:
        widgets.code_box(lesson.code)


lesson_2(page_start().settings)
