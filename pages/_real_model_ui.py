"""The "Inside a real model" page's parts: each draws one section and returns what the next needs.

Widgets, text and charts only; every number comes from core.real_model_lesson through the
cached calls in pages/_ui.py. (A module, not the page script, so it is compiled once per process.)
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from core import charts_real_model as charts_rm
from core import real_model_lesson as lesson_rm
from core import recipes
from core.examples import MAX_TEXT_CHARS
from core.real_model import MAX_WORD_PIECES, ModelFilesError, SentenceError
from pages import _ui

EXAMPLES = {example.key: example for example in lesson_rm.EXAMPLES}
LABELS = {**{key: example.label for key, example in EXAMPLES.items()}, lesson_rm.OWN_SENTENCE: "Your own sentence"}
LAYER, HEAD = "real_layer", "real_head"  # the chosen head's widget keys (clicks on charts set them too)
SCORE_NAMES = {
    lesson_rm.Pattern.PREVIOUS: "previous-token score",
    lesson_rm.Pattern.NEXT: "next-token score",
    lesson_rm.Pattern.SINK: "weight on [CLS] + [SEP]",
    lesson_rm.Pattern.BROAD: "entropy / log(number of pieces)",
}


def model_or_stop() -> None:
    """Load the model once per process; if its files are broken, say so and stop the page."""
    try:
        _ui.real_model()
    except ModelFilesError as error:
        st.error("The model's files could not be loaded, so this page cannot run:", icon=":material/error:")
        st.text(str(error))  # plain text: a path is not markdown
        st.stop()


def sentence_picker() -> tuple[lesson_rm.RealModelLesson, lesson_rm.ExampleSentence | None]:
    """An example or the student's own sentence -> its lesson (the first example if it cannot be used)."""
    pick, own = st.columns([1, 2])
    choice = _ui.linked_select(
        "Sentence",
        list(LABELS),
        key="real_example",
        param="real_example",
        code=str,
        name=LABELS.get,
        default=lesson_rm.EXAMPLES[0].key,
        where=pick,
    )
    typed = own.text_input(
        "Your sentence",
        "Attention lets every word look at every other word.",
        max_chars=MAX_TEXT_CHARS,
        key="real_sentence",
        bind="query-params",
        persist_state="session",
        disabled=choice != lesson_rm.OWN_SENTENCE,
        help=f"Any English sentence of up to {MAX_WORD_PIECES} word pieces ([CLS] and [SEP] included).",
    )
    sentence = typed if choice == lesson_rm.OWN_SENTENCE else EXAMPLES[choice].sentence
    try:
        return _ui.real_model_lesson(sentence), EXAMPLES.get(choice)
    except SentenceError as error:
        st.error(f"{error} Showing the first example instead.", icon=":material/error:")
        return _ui.real_model_lesson(lesson_rm.EXAMPLES[0].sentence), None


def open_head(layer: int, head: int) -> None:
    st.session_state[LAYER], st.session_state[HEAD] = layer, head


def word_pieces(lesson: lesson_rm.RealModelLesson, example: lesson_rm.ExampleSentence | None) -> None:
    """The pieces as plain text; for an example, the head that links its two words, with a button."""
    st.text(f"{len(lesson.tokens)} word pieces:  " + "  ".join(lesson.tokens))  # st.text: never markdown
    pair = lesson_rm.pair_finding(lesson, example.query, example.attends_to) if example else None
    if LAYER not in st.session_state:  # first visit: the link's head, the example's, or the clearest previous-token one
        previous = next(f.strongest for f in lesson.findings if f.pattern is lesson_rm.Pattern.PREVIOUS)
        opening = pair.strongest if pair else previous
        # The layer and head boxes are drawn below the grid and take the link's values only then:
        # the grid (drawn first) must outline the same head. The link's values have passed the rule.
        linked = _ui.frame().link.controls
        open_head(int(linked.get(LAYER, opening.layer)), int(linked.get(HEAD, opening.head)))
    if example and pair:
        best = pair.strongest
        ask, answer = st.columns([3, 1], vertical_alignment="center")
        ask.caption(
            f"{example.look_for} In this sentence, layer {best.layer}, head {best.head} sends {best.value:.0%} of "
            f"'{pair.query}' to '{pair.attends_to}' (the 72 heads average {pair.mean_weight:.0%})."
        )
        answer.button(f"Open layer {best.layer}, head {best.head}", on_click=open_head, args=(best.layer, best.head))


def head_grid(lesson: lesson_rm.RealModelLesson) -> None:
    _ui.step(f"All {lesson.num_layers * lesson.num_heads} heads")
    _ui.prose("real_model", "grid")
    # 12 panels a row are wider than a phone: the grid shrinks to its column instead of scrolling sideways.
    st.html("<style>.st-key-al-fit-grid svg, .st-key-al-fit-grid canvas {max-width: 100%; height: auto;}</style>")
    with st.container(key="al-fit-grid"):
        _ui.template_chart(
            charts_rm.grid_template(len(lesson.tokens), lesson.num_layers, lesson.num_heads),
            {charts_rm.GRID_DATA: lesson_rm.grid_frame(lesson, st.session_state[LAYER], st.session_state[HEAD])},
            "A grid of 6 by 12 small heatmaps, one per attention head; rows are layers, columns heads.",
            key="real_grid",
            on_select=lambda: _ui.select_head_from_chart("real_grid", charts_rm.HEAD_SELECTION, LAYER, HEAD),
        )


def head_picker(lesson: lesson_rm.RealModelLesson) -> tuple[int, int]:
    _ui.step("One head, large")
    c1, c2 = st.columns(2)
    linked = {**_ui.LINKED, "help": "Counted from 0, as in the code."}
    layer = c1.selectbox("Layer", list(range(lesson.num_layers)), key=LAYER, **linked)
    head = c2.selectbox("Head", list(range(lesson.num_heads)), key=HEAD, **linked)
    return int(layer), int(head)


def chosen_head(lesson: lesson_rm.RealModelLesson, layer: int, head: int, frame: pd.DataFrame) -> None:
    """The chosen head as a heatmap (tokens on both axes) and as lines."""
    st.markdown(f"**Layer {layer}, head {head}**")
    _ui.prose("real_model", "head")
    num_tokens = len(lesson.tokens)
    _ui.heatmap(  # the lab's one heatmap path (core.charts): readable cells, contrast, both themes
        frame,
        "Weights: queries down, keys across",
        f"Heatmap of the attention weights of layer {layer}, head {head}, queries down, keys across.",
        value_title="weight",
        show_values=num_tokens <= 12,
    )
    _ui.prose("real_model", "lines")
    # Below the heatmap, in the middle three fifths: beside it, a 2/5 column left the lines about
    # 30 px between the two label columns on a 1280 px projector (a phone stacks the columns).
    _, middle, _ = st.columns([1, 3, 1])
    with middle:
        _ui.template_chart(
            charts_rm.lines_template(num_tokens, "Who attends to whom", max(map(len, lesson.tokens))),
            {
                charts_rm.LINES_DATA: lesson_rm.lines_frame(lesson, layer, head),
                charts_rm.TOKENS_DATA: lesson_rm.tokens_frame(lesson),
            },
            f"Lines from each word piece to the pieces it attends to (layer {layer}, head {head}).",
        )


def described(finding: lesson_rm.Finding) -> str:
    """One line about a pattern's heads in this sentence (numbers only: no user text)."""
    best = finding.strongest
    strongest = f"the strongest is layer {best.layer}, head {best.head} ({best.value:.2f})"
    if not finding.heads:
        return f"In this sentence no head reaches {finding.threshold:.2f}; {strongest}."
    named = ", ".join(f"{s.layer}-{s.head} ({s.value:.2f})" for s in finding.heads[:6])
    more = f" and {len(finding.heads) - 6} more" if len(finding.heads) > 6 else ""
    return f"In this sentence {len(finding.heads)} head(s) reach {finding.threshold:.2f} (layer-head): {named}{more}."


def measures(lesson: lesson_rm.RealModelLesson, layer: int, head: int) -> None:
    """A map of one measure over all heads, then each pattern with the heads that show it here."""
    _ui.step("What the heads do: measured")
    _ui.prose("real_model", "measures")
    measure = _ui.linked_select(
        "Measure",
        list(lesson_rm.Measure),
        key="real_measure",
        param="real_measure",
        code=lambda m: m.value,
        name=lambda m: m.title,
        default=lesson_rm.Measure.PREVIOUS,
    )
    _ui.template_chart(
        charts_rm.measure_template(f"{measure.title}, every head", measure.title),
        {charts_rm.MEASURE_DATA: lesson_rm.measure_frame(lesson, measure, layer, head)},
        f"A 6 by 12 map of each head's {measure.title} on this sentence.",
        key="real_measures",
        on_select=lambda: _ui.select_head_from_chart("real_measures", charts_rm.HEAD_SELECTION, LAYER, HEAD),
    )
    for finding in lesson.findings:
        _ui.prose("real_model", finding.pattern.value)
        st.caption(f"Measured by the {SCORE_NAMES[finding.pattern]}. {described(finding)}")


def bridge(lesson: lesson_rm.RealModelLesson) -> None:
    _ui.step("The same attention as in the earlier lessons")
    _ui.prose("real_model", "bridge")
    st.latex(
        r"\text{head}_i = \text{softmax}\!\left(\frac{Q_i K_i^\top}{\sqrt{"
        + str(lesson.head_dim)
        + r"}}\right) V_i,\qquad Q_i = X W_q^{(i)},\; K_i = X W_k^{(i)},\; V_i = X W_v^{(i)}"
    )
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("width of a token's vector", lesson.hidden_size)
    m2.metric("heads per layer", lesson.num_heads)
    m3.metric("head width d_k", lesson.head_dim)
    m4.metric("score scale 1/√d_k", f"{lesson.scale:.4f}")


def causal(lesson: lesson_rm.RealModelLesson, layer: int, head: int, frame: pd.DataFrame) -> None:
    """The chosen head without a mask and with a causal mask put back, side by side."""
    _ui.prose("real_model", "causal")
    view = lesson_rm.causal_view(lesson, layer, head)
    st.metric(
        f"weight layer {layer}, head {head} puts on later pieces (mean over queries)",
        f"{view.mean_future_share:.0%}",
        help="What a causal mask would take away and share out over the earlier pieces.",
    )
    left, right = st.columns(2)
    with left:
        _ui.heatmap(
            frame,
            "As the encoder computes it (no mask)",
            "Heatmap of the chosen head's weights without a mask.",
            value_title="weight",
            show_values=False,
        )
    with right:
        _ui.heatmap(
            lesson_rm.causal_frame(lesson, view),
            "With a causal mask put back",
            "Heatmap of the chosen head's weights with a causal mask: zero above the diagonal.",
            value_title="weight",
            show_values=False,
        )


def code(lesson: lesson_rm.RealModelLesson, layer: int, head: int) -> None:
    _ui.prose("real_model", "code")
    _ui.code_box(recipes.fill("real_model", {"sentence": lesson.sentence, "layer": layer, "head": head}))
