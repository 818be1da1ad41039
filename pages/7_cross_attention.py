"""Lesson 7: queries from one sequence, keys and values from another."""

import streamlit as st

from core.examples import MAX_TEXT_CHARS, embed_text
from core.lessons import DEFAULT_SECOND_TEXT
from core.settings import load_example
from core.snippets import cross_code
from pages import _ui

_ui.require_frame()

st.title("6 · Cross-attention")
_ui.show_input_problem()
settings = _ui.settings()
_ui.prose("cross_attention", "intro")
article = settings.preset == "article"
c1, c2 = st.columns([3, 1])
second_text = c1.text_input(
    "Second sequence (keys and values)",
    DEFAULT_SECOND_TEXT,
    max_chars=MAX_TEXT_CHARS,
    key="second_text",
    disabled=article,
    help="With the seed 003 preset the second sequence is torch.rand(8, 16)." if article else None,
)
d_v = c2.number_input("d_v (value width)", 1, 64, min(settings.d_out + 4, 64), key="d_v")
st.latex(r"Z = \text{softmax}\!\left(\frac{(X_1 W_q)(X_2 W_k)^\top}{\sqrt{d_k}}\right) X_2 W_v")
try:
    lesson = _ui.cross_lesson(settings, second_text, int(d_v))
except ValueError as error:
    st.error(f"Second sequence: {error}", icon=":material/error:")
    st.stop()
values = lesson.values
_ui.heatmap(
    lesson.frames["weights"],
    "Cross-attention weights: queries × keys",
    "Rectangular heatmap: one row per token of the first sequence, one column per token of the second.",
    value_title="weight",
    x_title="key (second sequence)",
    y_title="query (first sequence)",
)
_ui.prose("cross_attention", "shapes")
st.dataframe([{"tensor": k, "shape": str(tuple(v))} for k, v in values["shapes"].items()], hide_index=True)
second = None if article else embed_text(second_text, load_example(settings).d_in, settings.seed).embeddings
_ui.code_expander(cross_code(settings, second, int(d_v)))
