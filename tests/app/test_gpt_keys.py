"""Lesson 12 (a GPT's keys: rotated, shared, cached) in AppTest: its sections, its question before what answers
it, the RoPE pair a student picks, and the KV cache timed on a student's own prompt only when asked."""

from __future__ import annotations

import dataclasses

from core.lessons import gpt_keys
from core.lessons import inside_gpt_cache as gpt_cache
from core.lessons import inside_gpt_runs as gpt_runs
from tests.support import needs_decoder, open_page

ROPE = "RoPE on layer 0's query and key from the model's file"
KV_CACHE = "a KV cache written out, from the model's file"
SECTIONS = ["Position by rotation (RoPE)", "Grouped-query attention", "The KV cache, measured"]


def code_boxes(at) -> list[str]:
    return [e.label.removeprefix("Code: ") for e in at.expander if e.label.startswith("Code")]


def box(at, label: str):
    """A RoPE pair box, by its label: its key carries the prompt's fingerprint (`rope_pickers`)."""
    (found,) = [s for s in at.selectbox if s.label.startswith(label)]
    return found


def captions(at) -> str:
    return "\n".join(c.value for c in at.caption)


@needs_decoder
def test_the_page_draws_its_sections_and_the_scores_wait_for_the_answer() -> None:
    at = open_page("gpt_keys", timeout_s=300)
    assert [h.value for h in at.subheader if h.value in SECTIONS] == SECTIONS
    radio = next(r for r in at.radio if r.label == "Your prediction")
    # Before the choice: no table of the moved pair's scores, no curves, no RoPE Code box (it prints the scores).
    assert not [d for d in at.dataframe if "score q·k" in d.value.columns]
    assert not [c for c in at.get("vega_lite_chart") if c.proto.alt.startswith("Lines of the score")]
    assert code_boxes(at) == [KV_CACHE]
    assert "moved together by up to" not in captions(at)
    right = gpt_keys.OPTIONS[gpt_keys.Moved.SAME]
    radio.set_value(next(o for o in radio.options if o.replace("\\", "") == right)).run(timeout=300)
    assert not at.exception
    assert [s.value for s in at.success if s.value.startswith("Right")]
    (table,) = [d.value for d in at.dataframe if "score q·k" in d.value.columns]
    scores = table["score q·k"].to_numpy()
    assert scores.max() - scores.min() < gpt_keys.ROUNDING  # the answer, on the page's own numbers
    assert [c for c in at.get("vega_lite_chart") if c.proto.alt.startswith("Lines of the score")]
    assert code_boxes(at) == [ROPE, KV_CACHE]


@needs_decoder
def test_a_student_picks_the_rope_pair_and_the_section_and_its_code_box_follow() -> None:
    # Issue 42, item 6 (BertViz's neuron view for a chosen pair): the pair up close was fixed to the prompt's last
    # token's query and its second token's key.
    at = open_page("gpt_keys", timeout_s=300)
    radio = next(r for r in at.radio if r.label == "Your prediction")
    radio.set_value(radio.options[0]).run(timeout=300)
    query, key = box(at, "Query token"), box(at, "Key token")
    assert (query.value, key.value) == (len(query.options) - 1, 1)  # the default pair, as before
    query.set_value(5).run(timeout=300)
    key = box(at, "Key token")
    assert len(key.options) == 6  # keys at or before the query: positions 0 to 5
    key.set_value(3).run(timeout=300)
    assert not at.exception
    assert "at positions 5 and 3, the table's first row" in captions(at)
    # The same question for every pair (the s30 review: a new pick wiped the answer and locked the table again):
    # still answered, the table and the Code box follow the new pair.
    radio = next(r for r in at.radio if r.label == "Your prediction")
    assert radio.value is not None  # the choice made before the pick
    (code,) = [c.value for c in at.code if "\ni = 5\n" in c.value]
    assert "\nj = 3\n" in code
    assert [row for row in at.dataframe if "query position" in row.value.columns][0].value["query position"][0] == 5


@needs_decoder
def test_the_kv_cache_is_timed_on_a_student_s_own_prompt_only_when_they_ask(monkeypatch) -> None:
    """Timing the cache was about 85% of the model's work for a new prompt (loadtest/inside_gpt_queue.py); on a
    student's own prompt it waits for the button, and then the section shows the prompt's own numbers."""
    real, runs = gpt_runs.run_lesson, []

    def counted(lesson, model, args, keep_going):
        runs.append((lesson.name, args[0] if args else None))
        return real(lesson, model, args, keep_going)

    monkeypatch.setattr(gpt_runs, "run_lesson", counted)
    text = "My cat sat on the mat and then it"
    at = open_page("gpt_keys", gpt_prompt="own", gpt_text=text, timeout_s=300)
    timed = [run for run in runs if run == (gpt_cache.CACHE_TIMING.name, text)]
    assert timed == []  # the prompt was read, the cache not timed
    assert "The KV cache, measured" in {h.value for h in at.subheader}
    assert not any("Both runs chose" in c.value for c in at.caption)
    button = next(b for b in at.button if b.key == "al_time_kv_cache")
    button.click().run(timeout=300)
    assert [run for run in runs if run == (gpt_cache.CACHE_TIMING.name, text)] == [(gpt_cache.CACHE_TIMING.name, text)]
    assert any("Both runs chose" in c.value for c in at.caption)
    at.run(timeout=300)  # asked once: the timing stays on this prompt's later runs, without another press
    assert any("Both runs chose" in c.value for c in at.caption)
    assert not any(b.key == "al_time_kv_cache" for b in at.button)


@needs_decoder
def test_each_prompt_has_rope_boxes_of_its_own() -> None:
    """The s29b review: after a new prompt the browser sent the pair box's old label ("1: ','"), which named no
    option any more, and the page said "A control sent a value the app cannot read (gpt_rope_key)". The boxes'
    keys carry the prompt's fingerprint: a new prompt's boxes are new, at its default pair."""
    at = open_page("gpt_keys", gpt_prompt="own", gpt_text="one, two, three, four", timeout_s=300)
    before = {box(at, "Query token").key, box(at, "Key token").key}
    at.text_area(key="gpt_text").set_value("The cat sat on the mat.").run(timeout=300)
    after = {box(at, "Query token").key, box(at, "Key token").key}
    assert not before & after and all(k.startswith(("gpt_rope_query_", "gpt_rope_key_")) for k in after)
    query = box(at, "Query token")
    assert query.value == len(query.options) - 1  # the new prompt's default pair
    assert not [w.value for w in at.warning if "cannot read" in w.value]


@needs_decoder
def test_a_link_opens_the_rope_section_on_its_head_and_a_bad_one_on_the_default() -> None:
    """The s29c review: lesson 12's head was not in the link, so a teacher's shared link opened another head."""
    at = open_page("gpt_keys", timeout_s=300, gpt_keys_head="6")
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.selectbox(key="gpt_keys_head").value == 6
    assert at.query_params.get("gpt_keys_head") == "6"
    default = open_page("gpt_keys", timeout_s=300).selectbox(key="gpt_keys_head").value
    for bad in ("99", "-1", "four", "<b>4</b>"):
        bad_link = open_page("gpt_keys", timeout_s=300, gpt_keys_head=bad)
        assert not bad_link.exception and not bad_link.error, (bad, [e.value for e in bad_link.error])
        assert bad_link.selectbox(key="gpt_keys_head").value == default, bad


@needs_decoder
def test_a_timing_that_cannot_show_the_speed_up_can_be_timed_again(monkeypatch) -> None:
    """The s30 review: "reload the page to time it again" read the same shared run back. A noisy run (here made
    so: its first step's two equal passes 20x apart) offers "Time it again", a run of its own, a few times."""
    real, runs = gpt_runs.run_lesson, []

    def noisy(lesson, model, args, keep_going):
        result = real(lesson, model, args, keep_going)
        if lesson is gpt_cache.CACHE_TIMING:
            runs.append(tuple(args[2:]))
            _, *later = result.without_cache_ms  # the first step's pass without the cache, 20x the cached one
            result = dataclasses.replace(result, without_cache_ms=(result.with_cache_ms[0] * 20, *later))
        return result

    monkeypatch.setattr(gpt_runs, "run_lesson", noisy)
    at = open_page("gpt_keys", gpt_prompt="own", gpt_text="My dog ran to the park and then he", timeout_s=300)
    next(b for b in at.button if b.key == "al_time_kv_cache").click().run(timeout=300)
    assert "this run cannot show the cache's speed-up; time it again" in captions(at)
    for attempt in range(1, gpt_cache.MAX_ATTEMPTS):
        next(b for b in at.button if b.key == "al_time_kv_cache_again").click().run(timeout=300)
        assert not at.exception and runs[-1] == (gpt_cache.TIMED_TOKENS, attempt)
    assert not any(b.key == "al_time_kv_cache_again" for b in at.button)  # bounded: MAX_ATTEMPTS in all
    retimed = [(gpt_cache.TIMED_TOKENS, n) for n in range(1, gpt_cache.MAX_ATTEMPTS)]
    assert runs[-gpt_cache.MAX_ATTEMPTS :] == [(gpt_cache.TIMED_TOKENS,), *retimed]  # (the warm-up's come first)
