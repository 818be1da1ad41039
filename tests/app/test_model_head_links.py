"""A link's `real_layer`/`real_head` (lesson 6's names for a model's head) on every page that shows one.

A teacher's review: lesson 2 opened `?weights=decoder&real_layer=16&real_head=0` on its default head, without a
word: the rule held real_layer to the encoder's 6 layers, and lesson 2's boxes read only `layer`/`head`, so the
note on it never reached the page. Now the pages on a model's head (lessons 2, 4, 5 and 7) open on the link's
head of the link's model, and a value past that model gets the usual note. The rule alone: tests/unit/test_links.py.
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.app import registry
from core.inputs.weights import WeightSource
from core.lessons import pretrained as pt
from tests.support import answered, assert_clean, assert_no_error, open_page, text_of

MODEL_HEAD_PAGES = ["trainable_weights", "causal_dropout", "multi_head"]  # both models' heads; 7: the encoder's


def box(at: AppTest, label: str):
    return next(b for b in at.main.selectbox if b.label == label)


def shown_text(at: AppTest) -> str:
    """What the page says, step headings included (lesson 5 names its layer there)."""
    return text_of(at) + "\n" + "\n".join(h.value for h in at.subheader)


def link(at: AppTest) -> dict[str, str]:
    """The page's link as it stands after the run, one value per name."""
    return {name: value if isinstance(value, str) else value[-1] for name, value in at.query_params.items()}


def page_notes(at: AppTest) -> list[str]:
    return [w.value for w in at.main.warning]


def opened(slug: str, **params: str) -> AppTest:
    at = open_page(slug, **params)
    assert_clean(at)
    assert_no_error(at)
    return at


def assert_names_the_head(at: AppTest, slug: str, layer: int, head: int) -> None:
    """The page says which head it shows, once its question is answered (what the head does gives it away)."""
    answered(at)
    text = shown_text(at)
    if registry.PageControl.HEAD in registry.page(slug).controls:
        assert f"Layer {layer}, head {head}" in text, text[:2000]
    else:  # lesson 5 shows every head of the layer
        assert f"heads of layer {layer}" in text, text[:2000]


@pytest.mark.parametrize("slug", MODEL_HEAD_PAGES)
@pytest.mark.parametrize(
    ("weights", "layer", "head"),
    # 16/0 is the teacher's link (and lesson 4's decoder default); 20/3 is no page's default
    [("decoder", 16, 0), ("decoder", 20, 3), ("pretrained", 5, 11)],
)
def test_a_links_real_head_opens_on_every_model_head_page(slug: str, weights: str, layer: int, head: int) -> None:
    at = opened(slug, weights=weights, real_layer=str(layer), real_head=str(head))
    assert not page_notes(at), page_notes(at)
    assert box(at, "Layer").value == layer
    if registry.PageControl.HEAD in registry.page(slug).controls:
        assert box(at, "Head").value == head
    assert_names_the_head(at, slug, layer, head)


def test_lesson_7_takes_the_encoders_real_head() -> None:
    at = opened("cross_attention", weights="pretrained", real_layer="5", real_head="11")
    assert not page_notes(at), page_notes(at)
    assert (box(at, "Layer").value, box(at, "Head").value) == (5, 11)


@pytest.mark.parametrize(
    ("slug", "weights", "layer", "head", "named"),
    [
        (
            "trainable_weights",
            "decoder",
            "30",
            "9",
            ["a layer of SmolLM2-135M-Instruct: 0 to 29", "a head of SmolLM2-135M-Instruct: 0 to 8"],
        ),
        ("trainable_weights", "pretrained", "16", "0", ["a layer of all-MiniLM-L6-v2: 0 to 5"]),
        ("causal_dropout", "decoder", "31", "2", ["a layer of SmolLM2-135M-Instruct: 0 to 29"]),
        ("causal_dropout", "pretrained", "2", "12", ["a head of all-MiniLM-L6-v2: 0 to 11"]),
        ("multi_head", "decoder", "30", "0", ["a layer of SmolLM2-135M-Instruct: 0 to 29"]),
        # lesson 6 shows the encoder whatever the link's Weights say: the decoder's layer 16 is not one of its
        ("real_model", "decoder", "16", "0", ["a layer of all-MiniLM-L6-v2: 0 to 5"]),
    ],
)
def test_a_real_head_past_the_links_model_is_a_note_and_the_default(
    slug: str, weights: str, layer: str, head: str, named: list[str]
) -> None:
    at = opened(slug, weights=weights, real_layer=layer, real_head=head)
    notes = page_notes(at)
    assert len(notes) == len(named), notes
    for note, allowed in zip(notes, named, strict=True):
        assert allowed in note and note.endswith("ignored."), note
    if slug == "real_model":
        return
    default_layer, default_head = pt.DEFAULT_HEADS[WeightSource(weights)][slug]
    expected_layer = int(layer) if "a layer" not in " ".join(named) else default_layer
    assert box(at, "Layer").value == expected_layer
    if registry.PageControl.HEAD in registry.page(slug).controls:
        assert box(at, "Head").value == (int(head) if "a head" not in " ".join(named) else default_head)


def test_moving_the_boxes_writes_a_link_that_reopens_the_same_head() -> None:
    slug = "trainable_weights"
    at = opened(slug, weights="decoder", real_layer="16", real_head="0")
    box(at, "Layer").set_value(20).run()
    assert_no_error(at)
    # The box writes its own name; lesson 6's, left behind, would reopen layer 16 once the box went back to its default.
    assert link(at) == {"weights": "decoder", "layer": "20", "head": "0"}
    again = opened(slug, **link(at))
    assert (box(again, "Layer").value, box(again, "Head").value) == (20, 0)
    default_layer, _ = pt.DEFAULT_HEADS[WeightSource.DECODER][slug]
    box(at, "Layer").set_value(default_layer).run()
    assert link(at) == {"weights": "decoder", "head": "0"}
    again = opened(slug, **link(at))
    assert (box(again, "Layer").value, box(again, "Head").value) == (default_layer, 0)


def test_the_boxes_own_name_wins_over_lesson_6s_with_a_note() -> None:
    at = opened("trainable_weights", weights="decoder", layer="20", real_layer="16")
    assert box(at, "Layer").value == 20
    (note,) = page_notes(at)
    assert "`real_layer=16`" in note and "`layer`" in note, note
