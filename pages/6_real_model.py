"""Lesson 6: a real pretrained encoder (all-MiniLM-L6-v2), its 72 heads computed by our own code.

Each function draws one section and returns what the next needs; the last lines put them in
order. Every number comes from core/lessons/real_model.py through ui.cache.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core.app.links import model_head_for
from core.app.registry import PageControl
from core.charts import real_model as charts_rm
from core.inputs.examples import MAX_TEXT_CHARS
from core.inputs.weights import WeightSource
from core.lessons import real_model as lesson_rm
from core.lessons import real_model_frames as frames_rm
from core.models.minilm import MAX_WORD_PIECES, ModelFilesError, SentenceError
from ui import cache, draw, widgets
from ui.frame import frame as page_frame
from ui.frame import page_start
from ui.link_notes import link_warning
from ui.presentation import step, step_break

LAYER, HEAD = (
    PageControl.REAL_LAYER,
    PageControl.REAL_HEAD,
)  # the chosen head's widget keys (clicks on charts set them too)


def model_or_stop() -> None:
    """Load the model once per process; if its files are broken, say so and stop the page."""
    try:
        cache.real_model()
    except ModelFilesError as error:
        st.error("The model's files could not be loaded, so this page cannot run:", icon=":material/error:")
        st.text(str(error))  # plain text: a path is not markdown
        st.stop()


def lesson_for(sentence: str) -> lesson_rm.RealModelLesson:
    return cache.computed(lesson_rm.LESSON, cache.real_model(), sentence)


def sentence_picker() -> tuple[lesson_rm.RealModelLesson, lesson_rm.ExampleSentence | None]:
    """An example or the student's own sentence -> its lesson (the first example if it cannot be used)."""
    pick, own = st.columns([1, 2])
    choice = widgets.linked_select(
        "Sentence",
        list(lesson_rm.SENTENCE_LABELS),
        key=PageControl.REAL_EXAMPLE,
        param=PageControl.REAL_EXAMPLE,
        code=str,
        name=lesson_rm.SENTENCE_LABELS.get,
        default=lesson_rm.EXAMPLES[0].key,
        where=pick,
    )
    typed = own.text_input(
        "Your sentence",
        "Attention lets every word look at every other word.",
        max_chars=MAX_TEXT_CHARS,
        key=PageControl.REAL_SENTENCE,
        bind="query-params",
        persist_state="session",
        disabled=choice != lesson_rm.OWN_SENTENCE,
        help=f"Any English sentence of up to {MAX_WORD_PIECES} word pieces ([CLS] and [SEP] included).",
    )
    example = lesson_rm.EXAMPLES_BY_KEY.get(choice)
    sentence = typed if example is None else example.sentence
    try:
        return lesson_for(sentence), example
    except SentenceError as error:
        st.error(f"{error} Showing the first example instead.", icon=":material/error:")
        return lesson_for(lesson_rm.EXAMPLES[0].sentence), None


def open_head(layer: int, head: int) -> None:
    st.session_state[LAYER], st.session_state[HEAD] = layer, head


def word_pieces(lesson: lesson_rm.RealModelLesson, example: lesson_rm.ExampleSentence | None) -> None:
    """The pieces as plain text; for an example, the head that links its two words, with a button."""
    st.text(f"{len(lesson.tokens)} word pieces:  " + "  ".join(lesson.tokens))  # st.text: never markdown
    if LAYER not in st.session_state:  # first visit: the link's head, the example's, or the clearest previous-token one
        opening = lesson_rm.opening_head(lesson, example)
        # The layer and head boxes are drawn below the grid and take the link's values only then:
        # the grid (drawn first) must outline the same head. The link's values have passed the rule.
        # Held to this model's heads: the rule let a `?weights=decoder` link's layer past 5 through.
        linked, notes = model_head_for(page_frame().link.controls, WeightSource.ENCODER)
        for note in notes:  # and out of the link, so the bound box below does not take it
            link_warning(note.parameter, note.value, note.reason)
            del st.query_params[note.parameter]
        open_head(linked.get(LAYER, opening.layer), linked.get(HEAD, opening.head))
    pair = lesson_rm.pair_finding(lesson, example.query, example.attends_to) if example else None
    if example and pair:
        best = pair.head
        ask, answer = st.columns([3, 1], vertical_alignment="center")
        ask.markdown(lesson_rm.pair_sentence(example, pair))  # the lesson's headline: body text, not a footnote
        answer.button(f"Open layer {best.layer}, head {best.head}", on_click=open_head, args=(best.layer, best.head))
        if example.contrast is not None:  # the same head on a sentence where the query means the other noun
            reading = lesson_rm.contrast_reading(lesson, lesson_for(example.contrast.sentence), example)
            if reading is not None:
                st.caption(lesson_rm.contrast_caption(reading, example))


PHONE_COLUMNS = 3  # one layer's heads on a phone: 3 a row, each about 100 px wide


def head_grid(lesson: lesson_rm.RealModelLesson, answered: bool) -> None:
    step(f"All {lesson.num_layers * lesson.num_heads} heads")
    widgets.prose("real_model", "grid")
    if not answered:  # the previous-token stripes are in plain sight on the grid
        widgets.answer_first("The grid of every head's weights appears")
        return
    draw.head_grid(
        charts_rm.grid(
            frames_rm.grid_frame(lesson, st.session_state[LAYER], st.session_state[HEAD]),
            len(lesson.tokens),
            lesson.num_layers,
            lesson.num_heads,
        ),
        "A grid of 6 by 12 small heatmaps, one per attention head; rows are layers, columns heads.",
        key="real_grid",
        layer_key=LAYER,
        head_key=HEAD,
        projector_vh=draw.PROJECTOR_GRID_VH,
    )
    # On a phone the grid shrinks to its column and each head is a square of about 24 px: the chosen
    # head's layer follows, its heads larger. A wider screen keeps the grid alone, as it was.
    layer = st.session_state[LAYER]
    with draw.narrow_screens_only("real_layer"):
        st.caption(
            f"On a small screen the squares above are small. Here are the {lesson.num_heads} heads of "
            f"layer {layer}, larger. Tap a square above, or choose a layer below, to see another layer."
        )
        draw.head_panels(
            frames_rm.layer_frame(lesson, layer),
            f"The {lesson.num_heads} heads of layer {layer}",
            f"Small heatmaps of the {lesson.num_heads} heads of layer {layer}, on one colour scale.",
            key="real_layer",
            columns=PHONE_COLUMNS,
        )


def head_picker(lesson: lesson_rm.RealModelLesson) -> tuple[int, int]:
    step("One head, large")
    c1, c2 = st.columns(2)
    linked = {**widgets.LINKED, "help": "Counted from 0, as in the code."}
    layer = c1.selectbox("Layer", list(range(lesson.num_layers)), key=LAYER, **linked)
    head = c2.selectbox("Head", list(range(lesson.num_heads)), key=HEAD, **linked)
    return int(layer), int(head)


def chosen_head(lesson: lesson_rm.RealModelLesson, layer: int, head: int, frame: pd.DataFrame, answered: bool) -> None:
    """The chosen head as a heatmap (tokens on both axes) and as lines."""
    st.markdown(f"**Layer {layer}, head {head}**")
    widgets.prose("real_model", "head")
    if not answered:  # the page opens on the clearest previous-token head: the question's answer
        widgets.answer_first("This head's heatmap and lines appear")
        widgets.prose("real_model", "lines")
        return
    num_tokens = len(lesson.tokens)
    draw.heatmap(  # the lab's one heatmap path (core.charts.heatmap): readable cells, contrast, both themes
        frame,
        "Weights: queries down, keys across",
        f"Heatmap of the attention weights of layer {layer}, head {head}, queries down, keys across.",
        value_title="weight",
        show_values=num_tokens <= 12,
    )
    widgets.prose("real_model", "lines")
    # Below the heatmap, in the middle three fifths: beside it, a 2/5 column left the lines about
    # 30 px between the two label columns on a 1280 px projector (a phone stacks the columns).
    _, middle, _ = st.columns([1, 3, 1])
    with middle:
        draw.draw(
            charts_rm.lines(
                frames_rm.lines_frame(lesson, layer, head),
                frames_rm.tokens_frame(lesson),
                "Who attends to whom",
                max(map(len, lesson.tokens)),
            ),
            f"Lines from each word piece to the pieces it attends to (layer {layer}, head {head}).",
        )


def measures(lesson: lesson_rm.RealModelLesson, layer: int, head: int, answered: bool) -> None:
    """A map of one measure over all heads, then each pattern with the heads that show it here."""
    step("What the heads do: measured")
    widgets.prose("real_model", "measures")
    measure = widgets.linked_select(
        "Measure",
        list(lesson_rm.Measure),
        key=PageControl.REAL_MEASURE,
        param=PageControl.REAL_MEASURE,
        code=lambda m: m.value,
        name=lambda m: m.label,
        default=lesson_rm.Measure.PREVIOUS,
    )
    if not answered:  # the map of every head's previous-token share, and the heads named below, answer it
        widgets.answer_first("The map of this measure over every head, and the heads that show each pattern, appear")
        for finding in lesson.findings:
            widgets.prose("real_model", finding.pattern.value)
        return
    draw.draw(
        charts_rm.measure(
            frames_rm.measure_frame(lesson, measure, layer, head), f"{measure.label}, every head", measure.label
        ),
        f"A 6 by 12 map of each head's {measure.label} on this sentence.",
        key="real_measures",
        on_select=lambda: draw.select_head_from_chart("real_measures", charts_rm.HEAD_SELECTION, LAYER, HEAD),
    )
    if measure in (lesson_rm.Measure.DISTANCE, lesson_rm.Measure.WORD_DISTANCE):
        st.caption(lesson_rm.distance_caption(lesson))
    for finding in lesson.findings:
        widgets.prose("real_model", finding.pattern.value)
        st.caption(lesson_rm.finding_caption(finding))


def bridge(lesson: lesson_rm.RealModelLesson) -> None:
    step("The same attention as in the earlier lessons")
    widgets.prose("real_model", "bridge")
    # Side by side on a wide screen, stacked on a phone (one line was cut at 390 px).
    attention, projections = st.columns(2, vertical_alignment="center")
    attention.latex(
        r"\text{head}_i = \text{softmax}\!\left(\frac{Q_i K_i^\top}{\sqrt{" + str(lesson.head_dim) + r"}}\right) V_i"
    )
    projections.latex(r"Q_i = X W_q^{(i)},\; K_i = X W_k^{(i)},\; V_i = X W_v^{(i)}")
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("width of a token's vector", lesson.hidden_size)
    m2.metric("heads per layer", lesson.num_heads)
    m3.metric("head width d_k", lesson.head_dim)
    m4.metric("score scale 1/√d_k", f"{lesson.scale:.4f}")


def causal(lesson: lesson_rm.RealModelLesson, layer: int, head: int, frame: pd.DataFrame, answered: bool) -> None:
    """The chosen head without a mask and with a causal mask put back, side by side."""
    step_break()  # on a projector, these heatmaps started below the fold of the step's formula and numbers
    widgets.prose("real_model", "causal")
    if not answered:
        widgets.answer_first("The chosen head with and without a causal mask appears")
        return
    view = frames_rm.causal_view(lesson, layer, head)
    st.metric(
        f"weight layer {layer}, head {head} puts on later pieces (mean over queries)",
        f"{view.mean_future_share:.0%}",
        help="What a causal mask would take away and share out over the earlier pieces.",
    )
    left, right = st.columns(2)
    with left:
        draw.heatmap(
            frame,
            "As the encoder computes it (no mask)",
            "Heatmap of the chosen head's weights without a mask.",
            value_title="weight",
            show_values=False,
        )
    with right:
        draw.heatmap(
            frames_rm.causal_frame(lesson, view),
            "With a causal mask put back",
            "Heatmap of the chosen head's weights with a causal mask: zero above the diagonal.",
            value_title="weight",
            show_values=False,
        )


page_start()
widgets.prose("real_model", "intro")
model_or_stop()
lesson, example = sentence_picker()
step_break()  # the question on a screen of its own: under the intro and the sentence box its verdict reached 724 px
# The question asks for a count, then its evidence: the three highest heads (drawn beside the question, a perfect
# stripe gave the answer away, review s24). Every head's weights and the measures wait for a choice.
widgets.prose("real_model", "question")
answered = widgets.predict(lesson_rm.previous_token_question(lesson), key="predict_real_model")
if answered:
    draw.head_panels(
        frames_rm.question_heads_frame(lesson),
        "The three heads that look most at the piece just before",
        "Three small heatmaps: the heads with the highest previous-piece scores, on one colour scale.",
        key="real_question",
    )
widgets.prose("real_model", "input")
word_pieces(lesson, example)
head_grid(lesson, answered)
layer, head = head_picker(lesson)
chosen = frames_rm.head_frame(lesson, layer, head)
chosen_head(lesson, layer, head, chosen, answered)
measures(lesson, layer, head, answered)
bridge(lesson)
causal(lesson, layer, head, chosen, answered)
widgets.prose("real_model", "code")
widgets.code_box(lesson_rm.code(lesson, layer, head))
