"""Lesson 7: queries from one sequence, keys and values from another, on random or learned weights.

One script for every weight source (core/inputs/weights.py): the random draws follow the sources'
worked examples; a model's head (`?weights=pretrained`) reads one sentence's keys with another's queries.
"""

import streamlit as st

from core.app.registry import PageControl
from core.app.settings import PresetKey, Settings, effective_d_in
from core.inputs.examples import MAX_D_IN, MAX_TEXT_CHARS
from core.inputs.weights import WeightSource
from core.lessons import cross_attention
from core.lessons.cross_attention import DEFAULT_FIRST_TEXT, DEFAULT_SECOND_TEXT
from ui import cache, cross_trained, draw, widgets
from ui import weights as source
from ui.frame import page_start
from ui.presentation import step

PREDICT_KEY = "predict_cross_attention"


def on_random_draws(settings: Settings) -> None:
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
        return
    if article:
        st.caption(
            "The self-attention article's sentence reads a random second sequence of 8 tokens, as in the article."
        )
    # Only the overview's pair is a translation: your own sentences are not called one.
    the_overviews_pair = (first_text, second_text) == (DEFAULT_FIRST_TEXT, DEFAULT_SECOND_TEXT)
    translating = not (article or own_sentence) and the_overviews_pair
    if translating:
        widgets.prose("cross_attention", "pair")
    step("Queries from one sequence, keys from another")
    answered = widgets.predict(lesson.prediction, key=PREDICT_KEY)
    if answered:  # the rectangle's shape is the question
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
    else:
        widgets.answer_first("The weights, and the shape they have, appear")
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
    if answered:
        st.dataframe([{"tensor": name, "shape": str(shape)} for name, shape in lesson.shapes], hide_index=True)
    else:
        widgets.answer_first("The shape of every tensor, the weights' included, appear")
    widgets.code_box(lesson.code)
    cross_trained.section(settings, int(d_v))


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


def on_a_model(settings: Settings) -> None:
    """Cross-attention through one head of a trained model: each sentence runs through the model alone."""
    from core.lessons import pretrained_cross as ptc

    widgets.prose(source.TEXT, "cross_intro")
    if not source.model_ready(settings.weights):
        return
    choice = widgets.linked_select(
        "Two sentences",
        list(ptc.pair_choices()),
        key="pretrained_pair",
        param="pair",
        code=str,
        name=ptc.pair_label,
        default=ptc.PAIRS[0].key,
    )
    if choice == ptc.OWN_PAIR:
        first, second = own_pair(settings.weights)
    else:
        pair = next(pair for pair in ptc.PAIRS if pair.key == choice)
        first, second = pair.first, pair.second
    layer, head = source.head_picker("cross_attention", settings.weights)
    lesson = cache.computed(ptc.CROSS, source.model(settings.weights), first, second, layer, head)
    st.text(f"First sentence (queries), {len(lesson.tokens)} pieces:  " + "  ".join(lesson.tokens))
    st.text(f"Second sentence (keys, values), {len(lesson.second_tokens)} pieces:  " + "  ".join(lesson.second_tokens))
    answered = widgets.predict(lesson.prediction, key=PREDICT_KEY)
    step("Queries from one sentence, keys from another")
    if answered:  # the heatmap, the copies found and the strongest keys answer the question
        draw.heatmap(
            lesson.weights,
            f"Layer {lesson.layer}, head {lesson.head}: queries × keys",
            "Rectangular heatmap: one row per piece of the first sentence, one column per piece of the second.",
            value_title="weight",
            x_title="key (second sentence)",
            y_title="query (first sentence)",
        )
    else:
        widgets.answer_first("The head's weights and the piece each query reads most appear")
    widgets.prose(source.TEXT, "cross_sinks")
    if answered:
        found = (
            f"Of the **{lesson.shared_words}** content words the two sentences share, **{lesson.copies_found}** "
            f"read their copy more than any other word; a shared word gives its copy **{lesson.copy_share:.2f}** "
            "of the weight it puts on words."
            if lesson.shared_words
            else "The two sentences share no content word here."
        )
        st.markdown(f"[CLS] and [SEP] take **{lesson.special_share:.2f}** of an average row in this head. {found}")
        widgets.number_table(lesson.strongest, hide_index=True)
    step("Shapes")
    st.dataframe([{"tensor": name, "shape": str(shape)} for name, shape in lesson.shapes], hide_index=True)
    widgets.code_box(lesson.code, source.CODE_CAPTION)


settings = page_start().settings
if settings.weights.is_model:
    on_a_model(settings)
else:
    on_random_draws(settings)
