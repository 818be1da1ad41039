"""Presentation mode on a projector (issue 30, defect 6): the title and the step bar leave room for the step."""

from __future__ import annotations

import re

import pytest

from core.app import registry
from tests.support import answered, answered_page, markdown_text, open_page
from ui import presentation


def test_the_repeated_title_and_the_bars_label_row_shrink_on_every_step() -> None:
    # At 1280×720 CSS pixels zoomed 1.5× the full-size title and the bar's label row took about 40% of the
    # height, and the step's chart started below the fold. Every step's style now shrinks them.
    for current in (1, 3):
        css = presentation.presentation_style(current)
        size = re.search(r"\.st-key-al-title h1 \{font-size: ([\d.]+)rem", css)
        assert size is not None and float(size.group(1)) <= 1.5, css
        assert '.st-key-al-bar [data-testid="stWidgetLabel"] {display: none;}' in css
        assert 'stMainBlockContainer"] {padding-top' in css


def test_the_step_bar_stays_below_the_fixed_header() -> None:
    # A top padding of 0.75rem put Back and Next under Streamlit's fixed header, where no click reached them
    # (tests/browser/test_defects_browser.py clicks Next in Chromium); 3.25rem still cut the step box's top edge.
    # The header is 3.75rem on a lesson page: 75 px at 20 px a rem (tests/browser/test_presentation.py measures it).
    css = presentation.presentation_style(1)
    padding = re.search(r'stMainBlockContainer"\] \{padding-top: ([\d.]+)rem', css)
    assert padding is not None and float(padding.group(1)) * 20 >= 75, css


def test_the_step_count_stands_beside_the_step_box_not_under_it() -> None:
    # "of n steps" under the box made its column taller than Back's and Next's: centred in the row, the box sat
    # about 28 px above them on a projector (tests/browser/test_projector_fold.py measures the row).
    at = open_page("causal_dropout", present="1")
    (box_column,) = [column for column in at.columns if any(box.key == "step" for box in column.number_input)]
    assert not box_column.caption
    assert [c.value for column in at.columns for c in column.caption if "steps" in c.value] == ["of 9 steps"]
    # The overview is seven screens on a projector, not one of 6,884 px (the s25 review): its live head, the
    # lessons, how to use the lab, the block's text, the block, its lessons' links, the lecture path.
    overview = open_page("overview", present="1")
    assert [c.value for column in overview.columns for c in column.caption if c.value.startswith("of ")] == [
        "of 7 steps"
    ]


# ---------------------------------------------------------------- lock lines name where their question is
LOCK = "once you have answered"


def locks(at) -> list[str]:
    return [c.value.replace("\\", "") for c in at.caption if LOCK in c.value]


def test_in_presentation_mode_a_lock_line_names_the_step_of_its_question() -> None:
    # Only one step shows on a projector: "the question above" pointed at a question on an earlier step.
    at = open_page("without_weights", present="1")
    lines = locks(at)
    assert len(lines) >= 5
    assert all(line.endswith(f"{LOCK} the question on step 2.") for line in lines), lines
    at = open_page("training_lab", present="1")  # its lock is on the last step, the question on step 3
    assert locks(at) and all(line.endswith(f"{LOCK} the question on step 3.") for line in locks(at)), locks(at)


def test_on_the_whole_page_a_lock_line_points_above() -> None:
    at = open_page("without_weights")
    lines = locks(at)
    assert lines and all(line.endswith(f"{LOCK} the question above.") for line in lines), lines


def test_a_lock_on_its_questions_own_step_says_above_in_presentation_mode() -> None:
    # Lesson 9 asks five questions. Three locks stand under their question on the same step; the doubling's (two
    # screens: its charts, then their numbers), the fused kernel's (after the tiles' grid) and the real caches' open
    # the steps after theirs (what they unlock started below a projector's fold, or made the step two screens tall).
    at = open_page("attention_at_scale", present="1")
    lines = locks(at)
    above = [line for line in lines if line.endswith(f"{LOCK} the question above.")]
    assert len(lines) == 7 and len(above) == 3, lines
    assert lines[0].endswith(f"{LOCK} the question on step 2.") and lines[1].endswith(f"{LOCK} the question on step 2.")
    assert lines[-1].endswith(f"{LOCK} the question on step 13.")


def step_of_each(node, step: int = 1) -> list[tuple[int, object]]:
    """(step, element) for every element under `node` in page order: a container keyed al-step-N starts step N."""
    found = []
    for child in getattr(node, "children", {}).values():
        key = str(getattr(child, "key", None) or "")
        if key.startswith("al-step-"):
            step = int(key.removeprefix("al-step-"))
        found.append((step, child))
        inner = step_of_each(child, step)
        found.extend(inner)
        step = inner[-1][0] if inner else step
    return found


def test_lesson_one_s_multiplier_slider_stands_on_the_step_of_the_bars_it_changes() -> None:
    # The s28 review: on a projector the slider stood with the question on step 2, the bars it changes on step 4,
    # and the prose pointed back "to the start of the lesson". Now the slider opens the bars' screen.
    at = answered_page("without_weights", present="1")
    steps = step_of_each(at.main)
    (slider_step,) = [n for n, e in steps if getattr(e, "key", None) == "logit_scale"]
    bars = [n for n, e in steps if getattr(e, "key", None) == "al-l1-norms"]  # the bars' shrinking box
    assert bars and set(bars) == {slider_step}, (slider_step, bars)
    label = at.slider(key="logit_scale").label
    assert f'"{label}" slider with the bars' in markdown_text(at)


# ---------------------------------------------------------------- the verdict above the fold
def box_of(node, key_prefix: str):
    """The innermost block whose direct children include the predict radio keyed `key_prefix…`."""
    for child in getattr(node, "children", {}).values():
        if getattr(child, "type", None) == "radio" and str(getattr(child, "key", "")).startswith(key_prefix):
            return node
        found = box_of(child, key_prefix)
        if found is not None:
            return found
    return None


def test_in_presentation_mode_the_verdict_stands_beside_the_options() -> None:
    # The fourth review: on a projector the verdict under the options fell below the 720-px fold on lessons 1,
    # 5, 6, 7 and 8; then, above the options, it pushed lesson 9's options to 762 px (the s21 note). In
    # presentation mode it stands beside the options once answered; on the page it stays below them.
    for present in ("1", None):
        at = open_page("without_weights", **({"present": present} if present else {}))
        box = box_of(at.main, "predict_without_weights")
        assert not box.columns, "before an answer the options keep the box's width"
        radio = next(c for c in box.children.values() if getattr(c, "type", None) == "radio")
        radio.set_value(0).run()
        options = box_of(at.main, "predict_without_weights")
        parent = next(block for block in blocks(at.main) if any(c is options for c in block.children.values()))
        siblings = list(parent.children.values())
        after = siblings[[i for i, c in enumerate(siblings) if c is options][0] + 1 :]
        assert not has_alert(options) and any(has_alert(c) for c in after), "the verdict comes after the options"
        beside = getattr(options, "type", None) == "column" and len(siblings) == 2
        assert beside == bool(present), [getattr(c, "type", None) for c in siblings]


def blocks(node) -> list:
    """`node` and every block under it (elements have no children)."""
    if not hasattr(node, "children"):
        return []
    return [node, *(found for child in node.children.values() for found in blocks(child))]


def has_alert(node) -> bool:
    if getattr(node, "type", None) in ("success", "warning", "info", "alert"):
        return True
    return any(has_alert(child) for child in getattr(node, "children", {}).values())


def _grid_styles(at) -> list[str]:
    return [h.proto.body for h in at.get("html") if "al-grid-real_grid" in h.proto.body]


def test_on_a_projector_the_72_head_grid_fits_the_screen_s_height() -> None:
    # Review s23 (D5): lesson 6's grid of 72 heads ran from 382 to 957 px on a 720 px projector. In presentation
    # mode it shrinks, keeping its shape, to PROJECTOR_GRID_VH of the screen (382-785 px measured in Chromium).
    from ui.draw import PROJECTOR_GRID_VH

    (laptop,) = _grid_styles(answered_page("real_model"))
    assert "max-height" not in laptop
    (projector,) = _grid_styles(answered_page("real_model", present="1"))
    assert f"max-height: {PROJECTOR_GRID_VH}vh" in projector and PROJECTOR_GRID_VH <= 60


def test_on_a_projector_lesson_one_s_three_normalisations_get_a_screen_of_their_own() -> None:
    # The s28 review: under the prose the bars shrank to fit and their legend fell below the fold (issue 41: about
    # 60 px tall). Now one more step, the bars alone on it, up to PROJECTOR_GRID_VH of the screen.
    from ui.draw import PROJECTOR_CHARTS_VH, PROJECTOR_GRID_VH

    steps = step_total(open_page("without_weights", present="1"))
    styles = [h.proto.body for h in answered_page("without_weights", present="1").get("html")]
    (style,) = [body for body in styles if "l1-norms" in body]
    assert f"max-height: {PROJECTOR_GRID_VH}vh" in style and PROJECTOR_GRID_VH > PROJECTOR_CHARTS_VH
    assert steps == 10  # nine before: the prose and its bars were one step


def step_total(at) -> int:
    (count,) = [c.value for column in at.columns for c in column.caption if c.value.startswith("of ")]
    return int(count.split()[1])


@pytest.mark.parametrize("spec", [pytest.param(s, id=s.slug) for s in registry.lessons()])
def test_answering_every_question_leaves_the_step_count_as_it_was(spec) -> None:
    # The s27b review: lesson 9 said "of 13 steps" and, after the first answer, "of 14 steps" (its numbers opened a
    # screen of their own only once answered). A teacher's "step 9" must mean the same screen before and after.
    at = open_page(spec.slug, present="1", timeout_s=300)
    before = step_total(at)
    answered(at)
    assert not at.exception
    assert step_total(at) == before, spec.slug


def test_a_step_past_the_last_after_a_switch_of_weights_goes_back_without_an_error() -> None:
    # The step box's bound is the page's count from the session's last run (ui.presentation.step_box): lesson 4 on
    # random weights has more steps than on the decoder's, so a teacher at its last step who switches the weights
    # holds a step the new page lacks. The page shows its last step, and Back goes to the one before it; never an
    # error, and a step the page has is never sent back to step 1.
    at = open_page("causal_dropout", present="1", timeout_s=300)
    last = step_total(at)
    at.number_input(key="step").set_value(last).run()
    at.sidebar.radio(key="weights").set_value("decoder").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    fewer = step_total(at)
    assert fewer < last
    at.button[[b.label for b in at.button].index("← Back")].click().run()  # from the last step shown
    assert not at.exception and not at.error
    assert at.number_input(key="step").value == fewer - 1
    at.number_input(key="step").set_value(fewer).run()
    at.sidebar.radio(key="weights").set_value("random").run()  # back to more steps: nothing to send back
    at.run()
    assert not at.exception and at.number_input(key="step").value == fewer


def test_on_a_projector_lesson_three_s_bars_and_variance_tables_get_screens_of_their_own() -> None:
    # The s28b review: the bars ran from 490 to 922 px of 720 under the formula and the paragraph (step 2), and the
    # variance chart's step ran to 1,671 px with its three tables.
    at = answered_page("why_scale", present="1")
    steps = step_of_each(at.main)

    def step_where(found) -> int:
        (number,) = {n for n, e in steps if found(e)}
        return number

    prose = step_where(lambda e: getattr(e, "type", None) == "markdown" and "softmax gets peaky" in e.value)
    bars = step_where(lambda e: getattr(e, "key", None) == "al-l3-sweep")
    variance = step_where(lambda e: getattr(e, "type", None) == "vega_lite_chart" and "Log-log" in e.proto.alt)
    notebook = step_where(lambda e: getattr(e, "type", None) == "markdown" and "notebook's experiment" in e.value)
    assert bars == prose + 1 and notebook == variance + 1, (prose, bars, variance, notebook)
    # ... shrunk to PROJECTOR_CHARTS_VH, so that the largest weight under them is in view (at 56%, below; s29b).
    from ui.draw import PROJECTOR_CHARTS_VH

    styles = [h.proto.body for h in at.get("html") if "l3-sweep" in h.proto.body]
    assert styles and f"max-height: {PROJECTOR_CHARTS_VH}vh" in styles[0]


def test_on_a_projector_lesson_eight_s_start_table_stands_under_its_own_paragraph() -> None:
    # The s29 review: under three paragraphs the start table began at 710 px of 720. Now the paragraph that
    # introduces it and the table share a screen; what it shows, and its chart, the next.
    steps = step_of_each(answered_page("training_lab", present="1").main)
    intro = {n for n, e in steps if getattr(e, "type", None) == "markdown" and "What the factor changes" in e.value}
    effects = {n for n, e in steps if getattr(e, "type", None) == "markdown" and "Two effects, opposite" in e.value}
    (intro_step,), (effects_step,) = intro, effects
    assert effects_step == intro_step + 1
    assert [e for n, e in steps if n == intro_step and getattr(e, "type", None) == "dataframe"]  # the table


def test_on_a_projector_lesson_twelve_s_question_map_and_timing_get_screens_of_their_own() -> None:
    # The s29c review: with a poll's tally beside it the question showed one option under the prose and pickers;
    # the sizes sharing saves stood under the 30-row map at 1,185 px; the cache's chart started at 570 px.
    steps = step_of_each(answered_page("gpt_keys", present="1").main)

    def where(found) -> int:
        (number,) = {n for n, e in steps if found(e)}
        return number

    kind = lambda e: getattr(e, "type", None)  # noqa: E731 - one attribute, read often
    pickers = where(lambda e: kind(e) == "selectbox" and e.label == "Query token")
    question = where(lambda e: kind(e) == "radio" and e.label == "Your prediction")
    sizes = where(lambda e: kind(e) == "metric" and e.label.startswith("KV cache per token"))
    groups = where(lambda e: kind(e) == "vega_lite_chart" and "key/value head they read" in e.proto.alt)
    prose = where(lambda e: kind(e) == "markdown" and "**KV cache**" in e.value)
    timed = where(lambda e: kind(e) == "caption" and e.value.startswith("Both runs chose"))
    assert (question, groups, timed) == (pickers + 1, sizes + 1, prose + 1), (pickers, question, sizes, groups)
