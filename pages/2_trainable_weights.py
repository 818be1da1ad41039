"""Lesson 2: queries, keys and values from trainable matrices, drawn at random or learned by a model.

One script for every weight source (core/inputs/weights.py): the random draws follow the sources'
worked examples; a model's head (`?weights=pretrained`) runs the same steps on learned weights.
"""

import streamlit as st

from core.app.markup import literal
from core.app.settings import PresetKey, Settings
from core.charts import common as charts
from core.lessons import common, trainable_weights
from ui import cache, draw, widgets
from ui import weights as source
from ui.frame import page_start
from ui.presentation import step

QUERY_KEY = "query_trainable_weights"  # one picker for every source; its default follows the source
PREDICT_KEY = "predict_trainable_weights"
WEIGHTS_CHART_KEY = "tw_weights"
GIVEAWAY = "The scores and weights of every query appear"


def on_random_draws(settings: Settings) -> None:
    widgets.prose("trainable_weights", "intro")
    query = widgets.query_picker(
        cache.computed(common.TOKEN_LABELS, settings),
        settings.preset_info.query_index,
        key=QUERY_KEY,
        example=f"{settings.preset}/{settings.weights}",
    )
    lesson = cache.computed(trainable_weights.LESSON, settings, query)
    answered = widgets.predict(lesson.prediction, key=PREDICT_KEY)
    token = lesson.tokens[query]

    cols = st.columns(3)
    matrices = (("W_query", lesson.w_query), ("W_key", lesson.w_key), ("W_value", lesson.w_value))
    for col, (name, matrix) in zip(cols, matrices, strict=True):
        with col:
            draw.heatmap(
                matrix,
                name,
                f"Heatmap of the weight matrix {name}.",
                signed=True,
                x_title="output",
                y_title="input",
            )
    st.latex(r"Q = X W_q,\quad K = X W_k,\quad V = X W_v")
    cols = st.columns(3)
    projections = (("queries", "Q", lesson.queries), ("keys", "K", lesson.keys), ("values", "V", lesson.values))
    for col, (name, label, matrix) in zip(cols, projections, strict=True):
        with col:
            draw.heatmap(
                matrix,
                label,
                f"Heatmap of the {name}, one row per token.",
                signed=True,
                x_title="dimension",
                y_title="token",
            )

    step(f"One query: “{literal(token)}”")
    widgets.prose("trainable_weights", "steps")
    scale_text = r"\frac{1}{\sqrt{d_k}}" if settings.scale else "1"
    # Short lines: "Attention(Q, K, V) = ...", d_k and the scale on one line were cut on a 390 px phone.
    st.latex(rf"Z = \text{{softmax}}\left(Q K^\top \cdot {scale_text}\right) V")
    st.latex(rf"d_k = {lesson.d_k},\quad \text{{scale}} = {lesson.scale:.4f}")
    q = ", ".join(f"{v:.4f}" for v in lesson.query_vector)
    st.markdown(f"q = **[{q}]**")
    if answered:  # the query's scores and weights: its strongest key, the question's answer
        widgets.number_table(lesson.one_query.set_index("token").T)
    else:
        widgets.answer_first(f"The scores and weights of “{literal(token)}” appear")
    z = ", ".join(f"{v:.4f}" for v in lesson.query_context)
    st.markdown(f"context vector z for “{literal(token)}” = **[{z}]**")

    step("All queries at once")
    all_queries(lesson, query, answered, model=False)

    step("SelfAttention_v1 vs SelfAttention_v2")
    widgets.prose("trainable_weights", "versions")
    widgets.number_table(lesson.v1_vs_v2.set_index("token"))
    a, b = st.columns(2)
    a.metric("max |v1 − v2|, own initialisations", f"{lesson.v1_fresh_max_diff:.4f}")
    b.metric("max |v1 − v2|, v2's weights copied into v1", f"{lesson.v1_copied_max_diff:.1e}")
    if settings.preset == PresetKey.BOOK:
        st.caption("The book builds v2 with seed 789: set the seed to 789 to see its row 1, [-0.0739, 0.0713].")
    widgets.code_box(
        lesson.v1_v2_code,
        "SelfAttention_v1 and _v2 in plain PyTorch: the three rows of the table above.",
        title="SelfAttention_v1 and _v2",
    )

    step("d_v may differ from d_k")
    widgets.prose("trainable_weights", "dv")
    st.markdown(f"Here d_k = **{lesson.d_k}** and d_v = **{lesson.d_v}**.")
    widgets.code_box(lesson.code)


def all_queries(lesson, query: int, answered: bool, *, model: bool) -> None:
    """Scores, scaled scores, weights and context of every query; all but the context answer the question."""
    # Two per row: four heatmaps side by side leave no room for their numbers.
    raw_col, scaled_col = st.columns(2)
    weights_col, context_col = st.columns(2)
    row = "word piece" if model else "token"
    if answered:
        domain = charts.shared_domain(lesson.scores, lesson.scaled_scores)
        with raw_col:
            draw.heatmap(
                lesson.scores,
                "Scores ω = Q Kᵀ",
                "Heatmap of the raw scores."
                if model
                else "Heatmap of the raw attention scores, on the same colour scale as the scaled scores.",
                signed=True,
                domain=domain,
            )
        with scaled_col:
            draw.heatmap(
                lesson.scaled_scores,
                "Scaled scores ω / √32" if model else "Scaled scores ω · scale",
                "Heatmap of the scaled scores."
                if model
                else "Heatmap of the scores after scaling, before the softmax, on the same colour scale as the raw "
                "scores.",
                signed=True,
                domain=domain,
            )
        # With a model, full width: the weights are the lesson's point, and their numbers must be readable.
        with st.container() if model else weights_col:
            draw.query_weights_heatmap(
                lesson.weights,
                "Weights = the model's own attention (click a row)" if model else "Weights (click a row)",
                "Heatmap of the attention weights after the softmax.",
                chart_key=WEIGHTS_CHART_KEY,
                picker_key=QUERY_KEY,
                highlight_row=query,
            )
    else:
        with raw_col:
            widgets.answer_first(GIVEAWAY)
    with st.container() if model else context_col:
        draw.heatmap(
            lesson.context,
            "Context Z = weights @ V",
            "Heatmap of the context vectors.",
            signed=True,
            show_values=not model,
            x_title="dimension",
            y_title=row,
        )


def on_a_model(settings: Settings) -> None:
    """The same steps on one head of a trained model: its own x, W_q, W_k, W_v, biases and scale."""
    from core.lessons import pretrained as pt

    widgets.prose(source.TEXT, "trainable_intro")
    if not source.model_ready():
        return
    sentence, pieces = source.lesson_sentence(settings)
    layer, head = source.head_picker("trainable_weights", settings.weights)
    query = widgets.query_picker(
        list(pieces),
        pt.default_query(settings, len(pieces)),
        key=QUERY_KEY,
        example=f"{settings.preset}/{settings.weights}",
    )
    lesson = cache.computed(pt.TRAINABLE, cache.real_model(), sentence, layer, head, query)
    source.pieces_line(lesson.tokens)
    answered = widgets.predict(lesson.prediction, key=PREDICT_KEY)
    source.head_caption(lesson, answered)
    token = lesson.tokens[lesson.query_index]
    cols = st.columns(3)
    matrices = (("W_query", lesson.w_query), ("W_key", lesson.w_key), ("W_value", lesson.w_value))
    for col, (name, matrix) in zip(cols, matrices, strict=True):
        with col:
            draw.heatmap(
                matrix,
                f"{name} (first {pt.W_ROWS_SHOWN} of {lesson.d_in} rows)",
                f"Heatmap of the first {pt.W_ROWS_SHOWN} of the {lesson.d_in} rows of the pretrained matrix {name}.",
                signed=True,
                show_values=False,
                x_title="output",
                y_title="input",
            )
    st.latex(r"Q = X W_q + b_q,\quad K = X W_k + b_k,\quad V = X W_v + b_v")
    cols = st.columns(3)
    projections = (("queries", "Q", lesson.queries), ("keys", "K", lesson.keys), ("values", "V", lesson.values))
    for col, (name, label, matrix) in zip(cols, projections, strict=True):
        with col:
            draw.heatmap(
                matrix,
                label,
                f"Heatmap of the {name}, one row per word piece, {lesson.d_k} columns.",
                signed=True,
                show_values=False,
                x_title="dimension",
                y_title="word piece",
            )
    step(f"One query: “{literal(token)}”")
    widgets.prose(source.TEXT, "trainable_steps")
    st.latex(
        r"\text{Attention}(Q, K, V) = \text{softmax}\left(Q K^\top \cdot \frac{1}{\sqrt{d_k}}\right) V"
        rf"\qquad d_k = {lesson.d_k},\ \text{{scale}} = {lesson.scale:.4f}"
    )
    st.markdown("q = **[" + ", ".join(f"{v:.4f}" for v in lesson.query_vector) + "]**")
    if answered:
        widgets.number_table(lesson.one_query.set_index("token").T)
    else:
        widgets.answer_first(f"The scores and weights of “{literal(token)}” appear")
    z = ", ".join(f"{v:.4f}" for v in lesson.query_context)
    st.markdown(f"context vector z for “{literal(token)}” = **[{z}]**")
    step("All queries at once")
    all_queries(lesson, lesson.query_index, answered, model=True)
    widgets.code_box(lesson.code, source.CODE_CAPTION)


settings = page_start().settings
if settings.weights.is_model:
    on_a_model(settings)
else:
    on_random_draws(settings)
