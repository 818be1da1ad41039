"""Lessons 2, 4, 5 and 7 with `weights=pretrained`: the same steps on a real head of all-MiniLM-L6-v2.

The frame runs `run(spec)` instead of the page script when the sidebar's Weights control says
pretrained (the random pages stay the sources' worked examples, unchanged). Widgets, text and
charts only: every number comes from core.lessons.pretrained through the cached calls below,
which share the one model the real-model page loads (ui/cache.real_model).
"""

from __future__ import annotations

from collections.abc import Callable

import streamlit as st

from core.app.markup import literal
from core.app.registry import PageControl, PageSpec
from core.app.settings import Settings
from core.charts import common as charts
from core.inputs.examples import MAX_TEXT_CHARS
from core.lessons import pretrained as pt
from core.lessons import pretrained_cross as ptc
from core.models.minilm import ModelFilesError
from ui import cache, draw, frame, presentation, widgets

NUM_LAYERS, NUM_HEADS = 6, 12  # all-MiniLM-L6-v2 (tests/unit/test_pretrained.py checks the model's config)
TEXT = "pretrained"  # pages/text/pretrained.md


def trainable(sentence: str, layer: int, head: int, query: int) -> pt.PretrainedTrainableLesson:
    return cache.computed(pt.TRAINABLE, cache.real_model(), sentence, layer, head, query)


def causal(sentence: str, layer: int, head: int, training: bool, p: float, seed: int) -> pt.PretrainedCausalLesson:
    return cache.computed(pt.CAUSAL, cache.real_model(), sentence, layer, head, training, p, seed)


def multihead(sentence: str, layer: int) -> pt.PretrainedMultiHeadLesson:
    return cache.computed(pt.MULTIHEAD, cache.real_model(), sentence, layer)


def cross(first: str, second: str, layer: int, head: int) -> pt.PretrainedCrossLesson:
    return cache.computed(pt.CROSS, cache.real_model(), first, second, layer, head)


# ------------------------------------------------------------------ shared parts
def _model_ready() -> bool:
    """Load the model once per process; if its files are broken, say so (the page then stops)."""
    try:
        cache.real_model()
    except ModelFilesError as error:
        st.error(
            "The model's files could not be loaded, so pretrained weights cannot be shown:", icon=":material/error:"
        )
        st.text(str(error))  # plain text: a path is not markdown
        return False
    return True


def head_picker(slug: str, *, with_head: bool = True) -> tuple[int, int]:
    """Layer (and head) boxes in the link as ?layer=L&head=H, defaulting to this lesson's measured head."""
    default_layer, default_head = pt.DEFAULT_HEADS[slug]
    left, right = st.columns(2)
    layer = widgets.linked_select(
        "Layer",
        list(range(NUM_LAYERS)),
        key=f"pretrained_layer_{slug}",
        param="layer",
        code=str,
        name=lambda i: f"layer {i}" + (" (this lesson's default)" if i == default_layer else ""),
        default=default_layer,
        where=left,
        help="Layers count from 0 (the first, reading the embeddings) to 5.",
    )
    if not with_head:
        return layer, 0
    head = widgets.linked_select(
        "Head",
        list(range(NUM_HEADS)),
        key=f"pretrained_head_{slug}",
        param="head",
        code=str,
        name=lambda i: f"head {i}" + (" (this lesson's default)" if i == default_head else ""),
        default=default_head,
        where=right,
        help="Heads count from 0 to 11. The default is a head whose pattern, measured on the lesson's "
        "sentence, makes the lesson's point.",
    )
    return layer, head


def pieces_line(tokens: tuple[str, ...]) -> None:
    st.text(f"{len(tokens)} word pieces:  " + "  ".join(tokens))  # st.text: never markdown


# ------------------------------------------------------------------ lesson 2
def trainable_weights(settings: Settings, sentence: str, pieces: tuple[str, ...]) -> None:
    widgets.prose(TEXT, "trainable_intro")
    layer, head = head_picker("trainable_weights")
    query = widgets.query_picker(
        list(pieces), pt.default_query(settings, len(pieces)), key="query_trainable_weights_pretrained"
    )
    lesson = trainable(sentence, layer, head, query)
    pieces_line(lesson.tokens)
    st.caption(f"Layer {lesson.layer}, head {lesson.head}, measured on this sentence: {lesson.pattern.summary}.")
    widgets.predict(lesson.prediction, key="predict_trainable_weights_pretrained")
    token = lesson.tokens[lesson.query_index]
    cols = st.columns(3)
    for col, (name, matrix) in zip(
        cols, (("W_query", lesson.w_query), ("W_key", lesson.w_key), ("W_value", lesson.w_value)), strict=True
    ):
        with col:
            draw.heatmap(
                matrix,
                f"{name} (first {pt.W_ROWS_SHOWN} of {lesson.d_in} rows)",
                f"Heatmap of the first {pt.W_ROWS_SHOWN} of the {lesson.d_in} rows of the pretrained matrix {name}.",
                signed=True,
                show_values=False,
                x_title="output",
                y_title="input",
            )
    st.latex(r"Q = X W_q + b_q,\quad K = X W_k + b_k,\quad V = X W_v + b_v")
    cols = st.columns(3)
    for col, (name, label, matrix) in zip(
        cols,
        (("queries", "Q", lesson.queries), ("keys", "K", lesson.keys), ("values", "V", lesson.values)),
        strict=True,
    ):
        with col:
            draw.heatmap(
                matrix,
                label,
                f"Heatmap of the {name}, one row per word piece, {lesson.d_k} columns.",
                signed=True,
                show_values=False,
                x_title="dimension",
                y_title="word piece",
            )
    presentation.step(f"One query: “{literal(token)}”")
    widgets.prose(TEXT, "trainable_steps")
    st.latex(
        r"\text{Attention}(Q, K, V) = \text{softmax}\left(Q K^\top \cdot \frac{1}{\sqrt{d_k}}\right) V"
        rf"\qquad d_k = {lesson.d_k},\ \text{{scale}} = {lesson.scale:.4f}"
    )
    st.markdown("q = **[" + ", ".join(f"{v:.4f}" for v in lesson.query_vector) + "]**")
    widgets.number_table(lesson.one_query.set_index("token").T)
    z = ", ".join(f"{v:.4f}" for v in lesson.query_context)
    st.markdown(f"context vector z for “{literal(token)}” = **[{z}]**")
    presentation.step("All queries at once")
    raw_col, scaled_col = st.columns(2)
    domain = charts.shared_domain(lesson.scores, lesson.scaled_scores)
    with raw_col:
        draw.heatmap(lesson.scores, "Scores ω = Q Kᵀ", "Heatmap of the raw scores.", signed=True, domain=domain)
    with scaled_col:
        draw.heatmap(
            lesson.scaled_scores,
            "Scaled scores ω / √32",
            "Heatmap of the scaled scores.",
            signed=True,
            domain=domain,
        )
    # Full width: the weights are the lesson's point, and their numbers must be readable on a projector.
    draw.query_weights_heatmap(
        lesson.weights,
        "Weights = the model's own attention (click a row)",
        "Heatmap of the attention weights after the softmax.",
        chart_key="tw_weights_pretrained",
        picker_key="query_trainable_weights_pretrained",
        highlight_row=lesson.query_index,
    )
    draw.heatmap(
        lesson.context,
        "Context Z = weights @ V",
        "Heatmap of the context vectors.",
        signed=True,
        show_values=False,
        x_title="dimension",
        y_title="word piece",
    )
    widgets.code_box(lesson.code, "Plain PyTorch from the model's own files: the numbers on this page.")


# ------------------------------------------------------------------ lesson 4
def causal_dropout(settings: Settings, sentence: str, pieces: tuple[str, ...]) -> None:
    widgets.prose(TEXT, "causal_intro")
    layer, head = head_picker("causal_dropout")
    training = st.toggle(
        "Training mode (dropout on)",
        False,
        key="training",
        bind="query-params",
        help="Dropout only acts in training mode; the sidebar sets its rate and the seed draws it.",
    )
    lesson = causal(sentence, layer, head, training, float(settings.dropout), int(settings.seed))
    pieces_line(lesson.tokens)
    st.caption(f"Layer {lesson.layer}, head {lesson.head}, measured on this sentence: {lesson.pattern.summary}.")
    widgets.predict(lesson.prediction, key="predict_causal_dropout_pretrained")
    presentation.step("The mask on a real head")
    left, right = st.columns(2)
    with left:
        draw.heatmap(
            lesson.unmasked,
            "As the model runs it (no mask)",
            "Heatmap of the head's weights, every piece reading every piece.",
            value_title="weight",
        )
    with right:
        draw.heatmap(
            lesson.masked,
            "Causal: −∞ above the diagonal, then softmax",
            "Heatmap of the same head's weights with the future masked.",
            value_title="weight",
        )
    st.latex(
        r"\text{softmax}\big(\text{mask}(q K^\top/\sqrt{32})\big)"
        r" = \text{renormalise}\big(\text{zero future}(\text{softmax}(q K^\top/\sqrt{32}))\big)"
    )
    st.markdown(
        f"The two ways of masking differ by at most **{lesson.max_method_difference:.1e}** here. Unmasked, an "
        f"average row put **{lesson.future_mass:.2f}** of its weight on later pieces; the mask gave another "
        f"strongest key to **{lesson.rows_changed}** of {len(lesson.tokens)} rows."
    )
    widgets.number_table(lesson.rows, hide_index=True)
    presentation.step("Dropout on the real weights")
    widgets.prose(TEXT, "causal_dropout")
    if lesson.kept_fraction is None:
        why = "training mode is off" if not training else "the dropout rate is 0"
        st.markdown(f"Nothing is dropped: {why}.")
    else:
        st.markdown(
            f"Rate {lesson.dropout:.2f}: **{lesson.kept_fraction:.0%}** of the weights survived, each multiplied "
            f"by {1 / (1 - lesson.dropout):.4f}."
        )
    draw.heatmap(lesson.dropped, "Masked weights after dropout", "Heatmap of the weights after dropout.")
    widgets.code_box(lesson.code, "Plain PyTorch from the model's own files: the numbers on this page.")


# ------------------------------------------------------------------ lesson 5
def multi_head(settings: Settings, sentence: str, pieces: tuple[str, ...]) -> None:
    widgets.prose(TEXT, "multi_intro")
    layer, _ = head_picker("multi_head", with_head=False)
    lesson = multihead(sentence, layer)
    pieces_line(lesson.tokens)
    widgets.predict(lesson.prediction, key="predict_multi_head_pretrained")
    presentation.step(f"The {lesson.num_heads} heads of layer {lesson.layer}")
    for start in range(0, lesson.num_heads, 4):
        cols = st.columns(4)
        for col, pattern in zip(cols, lesson.patterns[start : start + 4], strict=False):
            with col:
                head_weights = lesson.heads[lesson.heads["head"] == pattern.head].drop(columns="head")
                # One title for the twelve: a heatmap's template is built once per title and labels.
                st.markdown(f"**head {pattern.head}**")
                draw.heatmap(
                    head_weights,
                    "",
                    f"Heatmap of head {pattern.head}'s weights: {pattern.summary}.",
                    value_title="weight",
                    show_values=False,
                )
                st.caption(pattern.summary)
    widgets.number_table(lesson.patterns_table, hide_index=True, decimals=2)
    presentation.step("Twelve heads, or one matrix split in twelve")
    widgets.prose(TEXT, "multi_split")
    st.latex(
        rf"{lesson.d_model} = {lesson.num_heads} \times {lesson.head_dim}"
        r"\qquad \text{MultiHead}(X) = \text{concat}(\text{head}_0, \dots, \text{head}_{11})\, W_o + b_o"
    )
    st.dataframe([{"step": name, "shape": str(shape)} for name, shape in lesson.shapes], hide_index=True)
    a, b = st.columns(2)
    a.metric("max |wrapper − split form|", f"{lesson.wrapper_vs_split:.1e}")
    b.metric("max |split form − the model's forward pass|", f"{lesson.split_vs_model:.1e}")
    widgets.code_box(lesson.code, "Plain PyTorch from the model's own files: both forms, and the heads above.")


# ------------------------------------------------------------------ lesson 7
PAIRS = {pair.key: pair for pair in pt.PAIRS}


def own_pair() -> tuple[str, str]:
    """Two sentences typed on the page (in the link as ?first_text=…&second_text=…).

    A sentence the model cannot take gets its message and the book's sentence in its place.
    """
    example = pt.PAIRS[0]
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
        sentence, _, problem = usable_sentence(text)
        if problem:
            st.error(f"{which} sentence: {problem}", icon=":material/error:")
        used.append(sentence)
    return used[0], used[1]


def cross_attention(settings: Settings, sentence: str, pieces: tuple[str, ...]) -> None:
    widgets.prose(TEXT, "cross_intro")
    choice = widgets.linked_select(
        "Two sentences",
        list(ptc.pair_choices()),
        key="pretrained_pair",
        param="pair",
        code=str,
        name=ptc.pair_label,
        default=pt.PAIRS[0].key,
    )
    first, second = own_pair() if choice == ptc.OWN_PAIR else (PAIRS[choice].first, PAIRS[choice].second)
    layer, head = head_picker("cross_attention")
    lesson = cross(first, second, layer, head)
    st.text(f"First sentence (queries), {len(lesson.tokens)} pieces:  " + "  ".join(lesson.tokens))
    st.text(f"Second sentence (keys, values), {len(lesson.second_tokens)} pieces:  " + "  ".join(lesson.second_tokens))
    widgets.predict(lesson.prediction, key="predict_cross_attention_pretrained")
    presentation.step("Queries from one sentence, keys from another")
    draw.heatmap(
        lesson.weights,
        f"Layer {lesson.layer}, head {lesson.head}: queries × keys",
        "Rectangular heatmap: one row per piece of the first sentence, one column per piece of the second.",
        value_title="weight",
        x_title="key (second sentence)",
        y_title="query (first sentence)",
    )
    widgets.prose(TEXT, "cross_sinks")
    found = (
        f"Of the **{lesson.shared_words}** content words the two sentences share, **{lesson.copies_found}** read "
        f"their copy more than any other word; a shared word gives its copy **{lesson.copy_share:.2f}** of the "
        "weight it puts on words."
        if lesson.shared_words
        else "The two sentences share no content word here."
    )
    st.markdown(f"[CLS] and [SEP] take **{lesson.special_share:.2f}** of an average row in this head. {found}")
    widgets.number_table(lesson.strongest, hide_index=True)
    presentation.step("Shapes")
    st.dataframe([{"tensor": name, "shape": str(shape)} for name, shape in lesson.shapes], hide_index=True)
    widgets.code_box(lesson.code, "Plain PyTorch from the model's own files: the numbers on this page.")


VIEWS: dict[str, Callable[[Settings, str, tuple[str, ...]], None]] = {
    "trainable_weights": trainable_weights,
    "causal_dropout": causal_dropout,
    "multi_head": multi_head,
    "cross_attention": cross_attention,
}


def run(spec: PageSpec) -> None:
    """The lesson `spec` on pretrained weights (the frame calls this instead of the page script)."""
    state = frame.page_start()
    if not _model_ready():
        return
    settings = state.settings
    sentence, pieces, problem = usable_sentence(pt.lesson_sentence(settings))
    if problem and spec.slug != "cross_attention":  # lesson 7 reads its own two sentences
        st.error(problem, icon=":material/error:")
    VIEWS[spec.slug](settings, sentence, pieces)


def usable_sentence(sentence: str) -> tuple[str, tuple[str, ...], str | None]:
    return cache.computed(pt.SENTENCE, cache.real_model(), sentence)
