"""Lesson 2: attention with the inputs as their own queries, keys and values."""

import streamlit as st

from core import charts
from core.markup import literal
from core.snippets import simple_code
from pages import _ui

_ui.require_frame()

st.title("1 · Attention without trainable weights")
_ui.show_input_problem()
settings = _ui.settings()
_ui.prose("without_weights", "intro")
st.latex(
    r"\omega_{ij} = x^{(i)} \cdot x^{(j)} \qquad \alpha_{ij} = \frac{e^{\omega_{ij}}}{\sum_k e^{\omega_{ik}}}"
    r"\qquad z^{(i)} = \sum_j \alpha_{ij}\, x^{(j)}"
)

query = _ui.query_picker(_ui.token_labels(settings), settings.preset_info.query_index, key="query_without_weights")
scale = st.slider(
    "Multiply the scores by",
    1.0,
    200.0,
    1.0,
    step=1.0,
    key="logit_scale",
    help="Large multipliers push exp() past the float32 limit (about 88.7).",
)
lesson = _ui.simple_lesson(settings, query, scale)
token = lesson.tokens[query]

st.subheader(f"Scores of the query “{literal(token)}”")
_ui.prose("without_weights", "dots")
dots = lesson.frames["dots"].melt(id_vars="token", var_name="measure", value_name="score")
_ui.chart(
    charts.grouped_bars(dots, "token", "score", "measure", f"Dot product and cosine similarity with “{token}”"),
    f"Bar chart: the dot product and the cosine similarity of the query {token} with every token.",
)

st.subheader("Three ways to normalise")
_ui.prose("without_weights", "norms")
_ui.chart(
    charts.grouped_bars(
        lesson.frames["norms"], "token", "weight", "method", f"Weights for “{token}” with scores × {scale:g}"
    ),
    "Bar chart comparing divide-by-sum, naive softmax and stable softmax weights for the chosen query.",
)
if lesson.values["naive_overflows"]:
    st.error(
        f"The naive softmax overflowed: the largest score is {lesson.values['max_scaled_score']:.1f}, "
        f"above {lesson.values['overflow_at']:.2f}, so exp() gave inf and inf/inf = nan. "
        "The stable softmax is unaffected.",
        icon=":material/warning:",
    )
else:
    st.info(
        f"Largest score {lesson.values['max_scaled_score']:.2f}: exp() overflows float32 above "
        f"{lesson.values['overflow_at']:.2f}. Raise the multiplier to see it happen."
    )

st.subheader("Context vectors for every token")
_ui.prose("without_weights", "context")
c1, c2 = st.columns(2)
with c1:
    _ui.heatmap(
        lesson.frames["weights"],
        "Attention weights (click a row to pick the query)",
        "Heatmap of the attention weights, queries as rows and keys as columns.",
        value_title="weight",
        select_rows=True,
        key="weights_chart",
        on_select=lambda: _ui.select_query_from_chart("weights_chart", "query_without_weights"),
    )
with c2:
    _ui.heatmap(
        lesson.frames["context"],
        "Context vectors z = weights @ inputs",
        "Heatmap of the context vectors, one row per token.",
        x_title="dimension",
        y_title="token",
        signed=True,
    )
z = ", ".join(f"{v:.4f}" for v in lesson.values["query_context"])
st.markdown(f"z for “{literal(token)}” = **[{z}]**")
ok = lesson.values["loop_equals_matrix"] and lesson.values["loop_scores_equal"]
st.success("Loop form and matrix form agree to float precision." if ok else "Loop and matrix forms differ!")
_ui.code_expander(simple_code(settings))
