"""Lesson 7: queries from one sequence, keys and values from another."""

import streamlit as st

from core.examples import MAX_TEXT_CHARS
from core.lessons.cross_attention import DEFAULT_SECOND_TEXT
from pages import _ui

frame = _ui.page_start()
settings = frame.settings
_ui.prose("cross_attention", "intro")
article = settings.preset == "article"
c1, c2 = st.columns([3, 1])
second_text = c1.text_input(
    "Second sequence (keys and values)",
    DEFAULT_SECOND_TEXT,
    max_chars=MAX_TEXT_CHARS,
    key="second_text",
    bind="query-params",
    disabled=article,
    help="With the the self-attention article preset the second sequence is torch.rand(8, 16)." if article else None,
)
d_v = c2.number_input("d_v (value width)", 1, 64, min(settings.d_out + 4, 64), key="d_v", bind="query-params")
st.latex(r"Z = \text{softmax}\!\left(\frac{(X_1 W_q)(X_2 W_k)^\top}{\sqrt{d_k}}\right) X_2 W_v")
try:
    lesson = _ui.cross_lesson(settings, second_text, int(d_v))
except ValueError as error:
    st.error(f"Second sequence: {error}", icon=":material/error:")
    st.stop()
_ui.step("Queries from one sequence, keys from another")
_ui.predict(lesson.prediction, key="predict_cross_attention")
_ui.heatmap(
    lesson.weights,
    "Cross-attention weights: queries × keys",
    "Rectangular heatmap: one row per token of the first sequence, one column per token of the second.",
    value_title="weight",
    x_title="key (second sequence)",
    y_title="query (first sequence)",
)
_ui.step("Shapes")
_ui.prose("cross_attention", "shapes")
st.dataframe([{"tensor": name, "shape": str(shape)} for name, shape in lesson.shapes], hide_index=True)
_ui.code_box(lesson.code)
