"""Lesson 0: why attention, the lessons ahead, how to use the lab."""

import streamlit as st

from core.lessons import overview
from ui import cache, draw, widgets
from ui.frame import page_start

frame = page_start()
st.caption("How transformer LLMs decide what to look at: step by step, with real numbers.")
left, right = st.columns([3, 2])
with left:
    widgets.prose("overview", "why")
    widgets.prose("overview", "model")
    st.markdown("Where the steps lead: the scaled dot-product attention of every transformer layer.")
    st.latex(r"\text{Attention}(Q, K, V) = \text{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right) V")
    st.caption("M is the mask: 0 where a query may look, −∞ where it may not (the future, in a causal model).")
with right:
    st.subheader("How to use it")
    widgets.prose("overview", "sidebar")
    lesson = cache.computed(overview.LESSON, frame.settings)
    st.markdown(f"**Current input** ({lesson.source}): {len(lesson.tokens)} tokens × d_in = {lesson.d_in}")
    draw.heatmap(
        lesson.embeddings,
        "Input embeddings",
        "Heatmap of the input embeddings: one row per token, one column per embedding dimension.",
        signed=lesson.signed,
        x_title="embedding dimension",
        y_title="token",
    )
    if lesson.vocabulary:
        st.markdown(
            "**The article's vocabulary** (the sentence's words, sorted): "
            + ", ".join(f"{word} → {index}" for word, index in lesson.vocabulary)
            + f". The sentence as ids: **{list(lesson.token_ids)}**; `nn.Embedding(6, 16)` turns each id "
            "into one row of the heatmap."
        )
    widgets.code_box(lesson.code)
