"""Lesson 2: queries, keys and values from trainable matrices."""

import streamlit as st

from core.app.markup import literal
from core.app.settings import PresetKey
from core.charts import common as charts
from core.lessons import common, trainable_weights
from ui import cache, draw, widgets
from ui.frame import page_start
from ui.presentation import step

frame = page_start()
settings = frame.settings
widgets.prose("trainable_weights", "intro")
query = widgets.query_picker(
    cache.computed(common.TOKEN_LABELS, settings),
    settings.preset_info.query_index,
    key="query_trainable_weights",
    example=settings.preset,
)
lesson = cache.computed(trainable_weights.LESSON, settings, query)
widgets.predict(lesson.prediction, key="predict_trainable_weights")
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
widgets.number_table(lesson.one_query.set_index("token").T)
z = ", ".join(f"{v:.4f}" for v in lesson.query_context)
st.markdown(f"context vector z for “{literal(token)}” = **[{z}]**")

step("All queries at once")
# Two per row: four heatmaps side by side leave no room for their numbers.
raw_col, scaled_col = st.columns(2)
weights_col, context_col = st.columns(2)
scores_domain = charts.shared_domain(lesson.scores, lesson.scaled_scores)
with raw_col:
    draw.heatmap(
        lesson.scores,
        "Scores ω = Q Kᵀ",
        "Heatmap of the raw attention scores, on the same colour scale as the scaled scores.",
        signed=True,
        domain=scores_domain,
    )
with scaled_col:
    draw.heatmap(
        lesson.scaled_scores,
        "Scaled scores ω · scale",
        "Heatmap of the scores after scaling, before the softmax, on the same colour scale as the raw scores.",
        signed=True,
        domain=scores_domain,
    )
with weights_col:
    draw.query_weights_heatmap(
        lesson.weights,
        "Weights (click a row)",
        "Heatmap of the attention weights after the softmax.",
        chart_key="tw_weights",
        picker_key="query_trainable_weights",
        highlight_row=query,
    )
with context_col:
    draw.heatmap(
        lesson.context,
        "Context Z = weights @ V",
        "Heatmap of the context vectors.",
        signed=True,
        x_title="dimension",
        y_title="token",
    )

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
