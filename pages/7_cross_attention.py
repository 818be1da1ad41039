"""Lesson 7: queries from one sequence, keys and values from another, on random or learned weights.

One script and one lesson (core/lessons/cross_attention.CrossLesson) for every weight source
(core/inputs/weights.py): the random draws follow the sources' worked examples, with their own inputs and a
trained cross-attention at the end; a model's head (`?weights=pretrained`) reads one sentence's keys with
another's queries, under its layer/head picker.
"""

import streamlit as st

from core.app import choices
from core.app.registry import PageControl
from core.app.settings import PresetKey, Settings, effective_d_in
from core.inputs.examples import MAX_D_IN, MAX_TEXT_CHARS
from core.inputs.weights import WeightSource
from core.lessons import common, cross_attention
from core.lessons.cross_attention import DEFAULT_FIRST_TEXT, DEFAULT_SECOND_TEXT, CrossLesson, TrainedHead
from ui import cache, cross_trained, draw, widgets
from ui import weights as source
from ui.frame import page_start
from ui.presentation import step, step_break

PREDICT_KEY = "predict_cross_attention"
SLUG = "cross_attention"


def random_inputs(settings: Settings) -> CrossLesson | None:
    """Random draws: the intro, the two sequences and the widths, and the lesson (None: a text cannot be used)."""
    widgets.prose(SLUG, "intro")
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
    d_v = c3.number_input(
        "d_v (value width)", 1, 64, min(settings.d_out + 4, 64), key=PageControl.D_V, bind="query-params"
    )
    st.latex(r"Z = \text{softmax}\!\left(\frac{(X_1 W_q)(X_2 W_k)^\top}{\sqrt{d_k}}\right) X_2 W_v")
    try:
        lesson = cache.computed(
            cross_attention.LESSON, settings, second_text, int(d_v), None if own_sentence else first_text, int(d_in_kv)
        )
    except ValueError as error:
        st.error(str(error), icon=":material/error:")
        return None
    if article:
        st.caption(
            "The self-attention article's sentence reads a random second sequence of 8 tokens, as in the article."
        )
    return lesson


def own_pair(weights: WeightSource) -> tuple[str, str]:
    """Two sentences typed on the page (in the link as ?first_text=…&second_text=…).

    A sentence the model cannot take gets its message and the book's sentence in its place.
    """
    from core.lessons import pretrained_cross as ptc

    example = ptc.PAIRS[0]
    left, right = st.columns(2)
    boxes = (
        (left, "First sentence (queries)", example.first, PageControl.FIRST_TEXT),
        (right, "Second sentence (keys and values)", example.second, PageControl.SECOND_TEXT),
    )
    typed = [
        column.text_input(label, default, max_chars=MAX_TEXT_CHARS, key=key, bind="query-params")
        for column, label, default, key in boxes
    ]
    used = []
    for which, text in zip(("First", "Second"), typed, strict=True):
        sentence, _, problem = source.usable_sentence(weights, text)
        if problem:
            st.error(f"{which} sentence: {problem}", icon=":material/error:")
        used.append(sentence)
    return used[0], used[1]


def model_inputs(settings: Settings) -> CrossLesson | None:
    """A model's head: the intro, the two sentences and the head picker, and the lesson (None: no model)."""
    from core.lessons import pretrained_cross as ptc

    widgets.prose(source.TEXT, "cross_intro")
    if not source.model_ready(settings.weights):
        return None
    choice = widgets.linked_select(
        "Two sentences",
        list(choices.pair_choices()),
        key="pretrained_pair",
        param="pair",
        code=str,
        name=ptc.pair_label,
        default=ptc.PAIRS[0].key,
    )
    if choice == choices.OWN_PAIR:
        first, second = own_pair(settings.weights)
    else:
        pair = next(pair for pair in ptc.PAIRS if pair.key == choice)
        first, second = pair.first, pair.second
    layer, head = source.head_picker(SLUG, settings.weights)
    lesson = cache.computed(ptc.CROSS, source.model(settings.weights), first, second, layer, head)
    st.text(f"First sentence (queries), {len(lesson.tokens)} pieces:  " + "  ".join(lesson.tokens))
    st.text(f"Second sentence (keys, values), {len(lesson.second_tokens)} pieces:  " + "  ".join(lesson.second_tokens))
    return lesson


def the_weights(lesson: CrossLesson, answered: bool) -> None:
    """The rectangle of weights once answered (random draws: its shape is the question; a model's head: which
    piece a word reads)."""
    trained = lesson.trained
    colours = common.WeightColours(None, "weight")
    if trained is None:
        # Random draws spread each row near evenly (about 1/8 each): on the fixed 0-1 scale the map is one flat
        # colour (the s29 review), so the toggle lesson 1 has stretches its colours to their own range.
        colours = widgets.weight_colours(lesson.weights)
    if not answered:
        widgets.answer_first(
            "The weights, and the shape they have, appear"
            if trained is None
            else "The head's weights and the piece each query reads most appear"
        )
        return
    sequence = "sequence" if trained is None else "sentence"
    draw.heatmap(
        lesson.weights,
        "Cross-attention weights: queries × keys"
        if trained is None
        else f"Layer {trained.layer}, head {trained.head}: queries × keys",
        f"Rectangular heatmap: one row per {'token' if trained is None else 'piece'} of the first {sequence}, one "
        f"column per {'token' if trained is None else 'piece'} of the second.",
        value_title=colours.legend,
        domain=colours.domain,
        x_title=f"key (second {sequence})",
        y_title=f"query (first {sequence})",
    )
    if trained is None:
        widgets.prose(SLUG, "weights")
        if lesson.translating:
            widgets.prose(SLUG, "weights_translation")
        # One row per query: above the answer, this table gave the weights' shape away.
        widgets.number_table(lesson.strongest, hide_index=True)


def context_and_shapes(lesson: CrossLesson, answered: bool, settings: Settings) -> None:
    """Random draws: the context vectors and every tensor's shape, once answered (both give the shape away)."""
    step("Context vectors")
    if answered:
        widgets.prose(SLUG, "context")
        draw.heatmap(
            lesson.output,
            f"Context vectors: {len(lesson.tokens)} tokens × d_v = {lesson.d_v}",
            "Heatmap of the context vectors: one row per token of the first sequence, d_v columns.",
            signed=True,
            x_title="dimension",
            y_title="query (first sequence)",
        )
    else:  # one context vector per query: their number is the weights' first dimension
        widgets.answer_first("The context vectors appear")
    step("Shapes")
    widgets.prose(SLUG, "shapes")
    st.markdown(
        f"Embedding widths: first sequence **{lesson.d_in}**, second sequence **{lesson.d_in_kv}**; "
        f"both are projected to d_k = **{settings.d_out}**."
    )
    if answered:
        st.dataframe(
            [{"tensor": name, "shape": str(shape)} for name, shape in lesson.shapes], hide_index=True, height="content"
        )
    else:
        widgets.answer_first("The shape of every tensor, the weights' included, appears")


def where_the_weight_goes(lesson: CrossLesson, trained: TrainedHead, answered: bool) -> None:
    """A model's head: the share its sinks take, the copies it finds, and each query's strongest keys."""
    widgets.prose(source.TEXT, "cross_sinks")
    if not answered:
        return
    found = (
        f"Of the **{trained.shared_words}** content words the two sentences share, **{trained.copies_found}** "
        f"read their copy more than any other word; a shared word gives its copy **{trained.copy_share:.2f}** "
        "of the weight it puts on words."
        if trained.shared_words
        else "The two sentences share no content word here."
    )
    st.markdown(f"[CLS] and [SEP] take **{trained.special_share:.2f}** of an average row in this head. {found}")
    widgets.number_table(lesson.strongest, hide_index=True)


def lesson_7(settings: Settings) -> None:
    lesson = model_inputs(settings) if settings.weights.is_model else random_inputs(settings)
    if lesson is None:
        return
    trained = lesson.trained
    if trained is None and lesson.translating:
        widgets.prose(SLUG, "pair")
    # The question opens the step, on every source: a model's question (one option a word piece) stood at the
    # end of the opening, below a projector's fold.
    step(f"Queries from one {'sequence' if trained is None else 'sentence'}, keys from another")
    answered = widgets.predict(lesson.prediction, key=PREDICT_KEY)
    step_break()  # what the answer unlocks, on a screen of its own: on a projector it started below the fold
    the_weights(lesson, answered)
    if trained is not None:
        step_break()  # where the weight goes, on a screen of its own: under the map the step was 1,927 px (s27)
        where_the_weight_goes(lesson, trained, answered)
        step("Shapes")
        st.dataframe(
            [{"tensor": name, "shape": str(shape)} for name, shape in lesson.shapes], hide_index=True, height="content"
        )
        widgets.code_box(lesson.code, source.CODE_CAPTION)
        return
    context_and_shapes(lesson, answered, settings)
    widgets.code_box(lesson.code)
    cross_trained.section(settings, lesson.d_v, answered)


lesson_7(page_start().settings)
