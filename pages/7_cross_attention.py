"""Lesson 7: queries from one sequence, keys and values from another."""

import streamlit as st

from core.app.registry import PageControl
from core.app.settings import PresetKey, effective_d_in
from core.inputs.examples import MAX_D_IN, MAX_TEXT_CHARS
from core.lessons import cross_attention
from core.lessons.cross_attention import DEFAULT_FIRST_TEXT, DEFAULT_SECOND_TEXT
from ui import cache, cross_trained, draw, widgets
from ui.frame import page_start
from ui.presentation import step

frame = page_start()
settings = frame.settings
widgets.prose("cross_attention", "intro")
article = settings.preset == PresetKey.ARTICLE
own_sentence = settings.preset == PresetKey.CUSTOM  # your own sentence (the sidebar's) asks the questions
if article:
    first_help = "With the self-attention article's preset the page keeps the article's own setup."
elif own_sentence:
    first_help = "With 'Your own sentence' in the sidebar, your sentence is the first sequence."
else:
    first_help = "Each of its tokens asks which tokens of the second sequence to read."
first_text = st.text_input(
    "First sequence (queries): the one being written",
    DEFAULT_FIRST_TEXT,
    max_chars=MAX_TEXT_CHARS,
    key=PageControl.FIRST_TEXT,
    bind="query-params",
    disabled=article or own_sentence,
    help=first_help,
)
c1, c2, c3 = st.columns([4, 1, 1])
second_text = c1.text_input(
    "Second sequence (keys and values): the one it reads",
    DEFAULT_SECOND_TEXT,
    max_chars=MAX_TEXT_CHARS,
    key=PageControl.SECOND_TEXT,
    bind="query-params",
    disabled=article,
    help="With the self-attention article preset the second sequence is torch.rand(8, 16)." if article else None,
)
d_in = effective_d_in(settings)
d_in_kv = c2.number_input(
    "its width d_in",
    1,
    MAX_D_IN,
    d_in,
    key=PageControl.D_IN_KV,
    bind="query-params",
    disabled=article,
    help="The second sequence's embedding width. It may differ from the first's: only d_k must agree.",
)
d_v = c3.number_input("d_v (value width)", 1, 64, min(settings.d_out + 4, 64), key=PageControl.D_V, bind="query-params")
st.latex(r"Z = \text{softmax}\!\left(\frac{(X_1 W_q)(X_2 W_k)^\top}{\sqrt{d_k}}\right) X_2 W_v")
try:
    lesson = cache.computed(
        cross_attention.LESSON, settings, second_text, int(d_v), None if own_sentence else first_text, int(d_in_kv)
    )
except ValueError as error:
    st.error(str(error), icon=":material/error:")
    st.stop()
if article:
    st.caption("The self-attention article's sentence reads a random second sequence of 8 tokens, as in the article.")
# Only the overview's pair is a translation: your own sentences are not called one.
translating = not (article or own_sentence) and (first_text, second_text) == (DEFAULT_FIRST_TEXT, DEFAULT_SECOND_TEXT)
if translating:
    widgets.prose("cross_attention", "pair")
step("Queries from one sequence, keys from another")
widgets.predict(lesson.prediction, key="predict_cross_attention")
draw.heatmap(
    lesson.weights,
    "Cross-attention weights: queries × keys",
    "Rectangular heatmap: one row per token of the first sequence, one column per token of the second.",
    value_title="weight",
    x_title="key (second sequence)",
    y_title="query (first sequence)",
)
widgets.prose("cross_attention", "weights")
if translating:
    widgets.prose("cross_attention", "weights_translation")
widgets.number_table(lesson.strongest, hide_index=True)
step("Context vectors")
widgets.prose("cross_attention", "context")
draw.heatmap(
    lesson.output,
    f"Context vectors: {len(lesson.tokens)} tokens × d_v = {int(d_v)}",
    "Heatmap of the context vectors: one row per token of the first sequence, d_v columns.",
    signed=True,
    x_title="dimension",
    y_title="query (first sequence)",
)
step("Shapes")
widgets.prose("cross_attention", "shapes")
st.markdown(
    f"Embedding widths: first sequence **{lesson.d_in}**, second sequence **{lesson.d_in_kv}**; "
    f"both are projected to d_k = **{settings.d_out}**."
)
st.dataframe([{"tensor": name, "shape": str(shape)} for name, shape in lesson.shapes], hide_index=True)
widgets.code_box(lesson.code)
cross_trained.section(settings, int(d_v))
