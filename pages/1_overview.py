"""Lesson 1: why attention, the chapter's mental model, how to use the lab."""

import streamlit as st

from core.lessons import dims, matrix_frame, unique_labels
from core.settings import load_example
from core.snippets import inputs_code
from pages import _ui

_ui.require_frame()

st.title("Attention Lab")
st.caption("How transformer LLMs decide what to look at: step by step, with real numbers.")
_ui.show_input_problem()
left, right = st.columns([3, 2])
with left:
    _ui.prose("overview", "why")
    _ui.prose("overview", "model")
    st.markdown("Where the four steps lead: the scaled dot-product attention of every transformer layer.")
    st.latex(r"\text{Attention}(Q, K, V) = \text{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V")
with right:
    st.subheader("How to use it")
    _ui.prose("overview", "sidebar")
    settings = _ui.settings()
    example = load_example(settings)
    tokens = unique_labels(example.tokens)
    st.markdown(f"**Current input** ({settings.preset_info.source}): {len(tokens)} tokens × d_in = {example.d_in}")
    _ui.heatmap(
        matrix_frame(example.embeddings, tokens, dims("x", example.d_in)),
        "Input embeddings",
        "Heatmap of the input embeddings: one row per token, one column per embedding dimension.",
        signed=bool((example.embeddings < 0).any()),
        x_title="embedding dimension",
        y_title="token",
    )
    _ui.code_expander(inputs_code(settings))
