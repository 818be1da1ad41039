"""Lesson 11 (from attention to the answer) in AppTest: opens clean, its controls, bad links, its questions.

The first page run in a process loads SmolLM2 and waits behind the model queue's warm-up: 300 s each.
"""

from __future__ import annotations

import pytest

from core.lessons import to_the_answer as lesson11
from core.models.patching import PatchingMethod
from tests.support import answered, assert_clean, needs_decoder, open_page, prediction_radio, text_of

pytestmark = [pytest.mark.slow, needs_decoder]
TIMEOUT = 300


def test_the_page_opens_clean_and_reveals_each_answer_after_a_choice(decoder) -> None:
    at = open_page("to_the_answer", timeout_s=TIMEOUT)
    assert_clean(at)
    assert not at.error, [e.value for e in at.error]
    steps = [h.value for h in at.subheader]
    for title in ("The residual stream is a sum", "The logit lens", "Direct logit attribution", "Activation patching"):
        assert title in steps
    text = text_of(at)
    assert "add up to" in text and "The model answers ' Mary'" in text
    assert "The lens first puts" not in text  # the lens question's answer is hidden
    assert "Pushing ' Mary' - ' John' up the most" not in text  # so is the attribution map's
    assert "The heads that restore the most" not in text  # patching would hint at the attribution's answer
    lens_radio = prediction_radio(at, "predict_answer_lens")
    assert lens_radio.value is None
    # The s29b review: the residual's largest parts (the last MLPs) stood above the attribution question and hinted
    # at its answer. The question now comes first, in the residual's step, and the parts' chart waits for it.
    charts = lambda: [element.proto.alt for element in at.get("vega_lite_chart")]  # noqa: E731
    assert not any(alt.startswith("Bars of the") for alt in charts()), charts()
    keys = [radio.key or "" for radio in at.radio]
    place = lambda question: next(i for i, key in enumerate(keys) if key.startswith(question))  # noqa: E731
    assert place("predict_answer_part") < place("predict_answer_lens"), keys
    answered(at)
    assert any(alt.startswith("Bars of the") for alt in charts()), charts()
    text = text_of(at)
    assert "The lens first puts ' Mary' on top" in text
    # The rank sentence with the lesson's own numbers (computed here as the page's lesson computes them).
    lesson = lesson11.answer_lesson(decoder, lesson11.DEFAULT_TEXT, lesson11.Explain.CONTRAST, "")
    ranks = [int(r) for r in lesson.answer_ranks]
    top_10 = next(i for i, rank in enumerate(ranks) if rank <= 10)
    assert lesson.rank_sentence() in text
    assert f"{ranks[0]:,} at {lesson.lens_labels[0]}" in text
    if top_10 == lesson.first_on_top:  # one point, named once (the s29b review)
        assert f"comes out on top at once, at {lesson.lens_labels[top_10]}" in text
    else:
        assert f"{lesson.lens_labels[top_10]} (rank {ranks[top_10]}" in text
    assert "Pushing ' Mary' - ' John' up the most" in text
    # The opened head's sentence splits its effect into the two logits (the lesson's own numbers).
    layer, head = int(at.session_state["answer_layer"]), int(at.session_state["answer_head"])
    assert lesson.head_sentence(layer, head) in text and "' John' by " in lesson.head_sentence(layer, head)
    assert "The heads that restore the most" in text  # attribution patching, live once answered
    assert "logit(' Mary') - logit(' John'): +" in text  # the clean run's difference, positive
    assert not at.exception and not at.error


def test_a_typed_token_and_bad_input_say_why_without_a_traceback() -> None:
    at = open_page(
        "to_the_answer",
        timeout_s=TIMEOUT,
        answer_text="The capital of France is",
        answer_explain="token",
        answer_token=" Johnxyzzyq",
        answer_layer="99",
        answer_corrupted="Mary and John",
    )
    assert not at.exception
    errors = " ".join(e.value for e in answered(at).error)
    # A mistyped token keeps the student's prompt: the page explains the model's own answer on it (it showed the
    # opening prompt under the student's text, an independent review).
    assert "not one" in errors and "Explaining the model's own answer on your prompt instead" in errors
    assert "Showing the opening prompt" not in errors and "The model answers ' Paris'" in text_of(at)
    assert "same number of tokens" in errors  # the corrupted prompt's length, once patching shows
    at.text_input(key="answer_corrupted").set_value("").run()
    at.text_area(key="answer_text").set_value(lesson11.DEFAULT_TEXT).run()
    at.text_input(key="answer_token").set_value(" John").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "' John'" in text_of(answered(at))
    assert not at.error, [e.value for e in at.error]


def test_an_empty_prompt_and_a_prompt_without_a_repeated_name(decoder) -> None:
    at = open_page("to_the_answer", timeout_s=TIMEOUT)
    at.text_area(key="answer_text").set_value("").run()
    assert not at.exception and "Showing the opening prompt instead" in " ".join(e.value for e in at.error)
    at.text_area(key="answer_text").set_value("The capital of France is").run()
    answered(at)
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert "no corruption to suggest" in " ".join(i.value for i in at.info)
    at.text_area(key="answer_text").set_value(lesson11.DEFAULT_TEXT).run()
    answered(at)
    next(b for b in at.button if b.label.startswith("Run exact patching")).click().run()  # through the queue
    assert not at.exception and not at.error
    assert text_of(at).count("The heads that restore the most") == 2
    # The s29b review: the estimate and exact patching were never compared. Now a scatter and the agreement, in
    # the lesson's own numbers.
    suggested = lesson11.answer_lesson(decoder, lesson11.DEFAULT_TEXT, lesson11.Explain.CONTRAST, "").corrupted
    assert suggested is not None
    estimate, exact = (
        lesson11.patching_lesson(decoder, lesson11.DEFAULT_TEXT, suggested, method)
        for method in (PatchingMethod.ATTRIBUTION, PatchingMethod.EXACT)
    )
    assert lesson11.patching_agreement(estimate, exact).sentence() in text_of(at)
    assert any(e.proto.alt.startswith("A scatter of the 270 heads") for e in at.get("vega_lite_chart"))


@pytest.mark.slow
def test_in_presentation_mode_the_head_map_runs_the_layers_across() -> None:
    """A projector never showed a whole 30 x 9 map with the layers down (an independent review)."""
    import json

    def head_map_x(at) -> list[str]:
        maps = [e.proto for e in at.get("vega_lite_chart") if e.proto.alt.startswith("A 30 by 9 map of each head")]
        return [json.loads(proto.spec)["layer"][0]["encoding"]["x"]["field"] for proto in maps]

    assert head_map_x(answered(open_page("to_the_answer", timeout_s=TIMEOUT, present="1"))) == ["layer"]
    assert head_map_x(answered(open_page("to_the_answer", timeout_s=TIMEOUT))) == ["head"]
