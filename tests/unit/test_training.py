"""The training lab: a tiny transformer learns what it should, deterministically, as the recipe says."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from core import recipes
from core.attention.head_measures import previous_token_share
from core.attention.modules import MultiHeadAttention
from core.charts import training as charts_training
from core.lessons import training_lab as tt
from core.models import tiny_transformer as model_tt
from tests.support import open_page, validated_spec

pytestmark = pytest.mark.slow  # live training runs

INDUCTION = tt.default_config(model_tt.Task.INDUCTION)  # the page's induction defaults: 2 layers, 1,500 steps
# One layer at the strongest settings the page allows: in a sweep over heads, d_k, learning rate, init,
# scaling and steps up to the cap, 4 heads of 64 reached the most (NO_INDUCTION_ACCURACY); the cap keeps it
# at about 350 steps, and any longer one-layer run in the sweep (4 x 16 to 3,000 steps) stayed lower.
ONE_LAYER_STRONGEST = tt.within_caps(replace(INDUCTION, layers=1, heads=4, d_k=64, steps=tt.MAX_STEPS)).config


@pytest.fixture(scope="module", autouse=True)
def one_torch_thread() -> Iterator[None]:
    """As the app runs (streamlit_app.py): two intra-op threads on a busy 2-core machine spin against each other."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def default_run() -> model_tt.TrainingRun:
    return model_tt.train(model_tt.TrainingConfig())


@pytest.fixture(scope="module")
def induction_run() -> model_tt.TrainingRun:
    return model_tt.train(INDUCTION)


def test_default_run_learns_the_previous_token(default_run: model_tt.TrainingRun) -> None:
    assert default_run.final_accuracy >= 0.95
    assert default_run.accuracies[0] < 0.2  # it learned it: at step 0 it is near chance (1/16)
    shares_after = previous_token_share(default_run.attention_after, default_run.example_lookback)[0]  # (h,)
    shares_before = previous_token_share(default_run.attention_before, default_run.example_lookback)[0]
    assert shares_after.max() >= 0.8, shares_after
    assert shares_before.max() < 0.5, shares_before


def test_induction_two_layers_at_the_page_defaults_learn_it(induction_run: model_tt.TrainingRun) -> None:
    assert (INDUCTION.layers, INDUCTION.heads, INDUCTION.d_k, INDUCTION.learning_rate) == (2, 2, 16, 3e-3)
    assert induction_run.final_accuracy >= 0.85, induction_run.accuracies


def test_induction_one_layer_at_the_strongest_settings_stays_low() -> None:
    # The old task (distinct tokens always at positions 0-9) let one layer reach 98% without induction.
    assert (ONE_LAYER_STRONGEST.heads * ONE_LAYER_STRONGEST.d_k, ONE_LAYER_STRONGEST.steps) == (tt.MAX_WIDTH, 354)
    one = model_tt.train(ONE_LAYER_STRONGEST)
    assert max(one.accuracies) < 0.40, one.accuracies
    # The level the page draws as "without induction" is what one layer reaches, not a guess.
    assert max(one.accuracies) <= model_tt.NO_INDUCTION_ACCURACY + 0.02, one.accuracies
    assert one.final_accuracy > 2 / model_tt.INDUCTION_SYMBOLS  # it learns the format's weak cues, not the task


@pytest.mark.parametrize("seed", [1, 5])
def test_one_layers_line_is_not_crossed_at_other_seeds(seed: int) -> None:
    # The line at 20% (seed 123's sweep) was crossed at seeds 1 and 5 (0.212 and 0.215): the level is now the
    # best over seeds 1-8 and 123.
    one = model_tt.train(replace(ONE_LAYER_STRONGEST, seed=seed))
    assert max(one.accuracies) <= model_tt.NO_INDUCTION_ACCURACY, one.accuracies


def test_layer_one_reads_the_previous_token_on_the_first_copy(induction_run: model_tt.TrainingRun) -> None:
    run = induction_run
    first_copy = previous_token_share(run.attention_after, run.example_lookback)[0]  # layer 1, (h,)
    every_row = previous_token_share(run.attention_after, [True] * len(run.example_tokens))[0]
    assert first_copy.max() >= 0.5, first_copy  # where the lookup needs it, one head looks one step back
    assert first_copy.max() > every_row.max() + 0.1, (first_copy, every_row)  # averaging every row hides it
    rows = [t for t, inside in enumerate(run.example_lookback) if inside]
    assert len(rows) == model_tt.INDUCTION_PART - 1
    tokens, targets = run.example_tokens, run.example_targets
    scored = [t for t, y in enumerate(targets) if y != model_tt.IGNORE_INDEX]
    assert [tokens[t] for t in rows] == [targets[t] for t in scored]  # the first copy is what the repeat answers


def test_same_seed_same_curves_other_seed_other_curves() -> None:
    config = model_tt.TrainingConfig(steps=40)
    first, again, other = model_tt.train(config), model_tt.train(config), model_tt.train(replace(config, seed=124))
    assert first.losses == again.losses and first.accuracies == again.accuracies
    assert np.array_equal(first.attention_after, again.attention_after)
    assert first.losses != other.losses


def test_training_never_touches_the_global_rng() -> None:
    torch.manual_seed(0)
    state = torch.get_rng_state()
    model_tt.train(model_tt.TrainingConfig(task=model_tt.Task.INDUCTION, layers=2, steps=5, init=model_tt.Init.BOOK))
    assert torch.equal(torch.get_rng_state(), state)


@pytest.mark.parametrize("d_k", [16, 256])
@pytest.mark.parametrize("init", list(model_tt.Init))
def test_unscaled_logits_are_sqrt_dk_wider_at_init(d_k: int, init: model_tt.Init) -> None:
    config = model_tt.TrainingConfig(heads=1, d_k=d_k, init=init)
    generator = torch.Generator().manual_seed(7)
    model = model_tt.TinyTransformer(config, generator)
    held_out = model_tt.draw_batch(config.task, 64, generator)
    start = model_tt.start_statistics(model, held_out, d_k)
    assert start.logit_std_unscaled == pytest.approx(math.sqrt(d_k) * start.logit_std_scaled, rel=0.10)
    assert start.entropy_unscaled < start.entropy_scaled <= start.uniform_entropy + 1e-6


def test_start_statistics_do_not_depend_on_the_runs_own_scaling() -> None:
    scaled = model_tt.train(model_tt.TrainingConfig(steps=2))
    unscaled = model_tt.train(model_tt.TrainingConfig(steps=2, scale=False))
    assert scaled.start == unscaled.start  # same weights, both sides measured explicitly


def test_the_start_of_a_setting_is_what_its_run_measures_first() -> None:
    config = model_tt.TrainingConfig(steps=2, d_k=8)
    assert model_tt.start_of(config) == model_tt.train(config).start


@pytest.mark.parametrize(
    ("config", "answer"),
    [
        (model_tt.TrainingConfig(), 1),  # nn.Linear, d_k 16: 3.39 times, less than √16 (the softmax saturates)
        (model_tt.TrainingConfig(init=model_tt.Init.BOOK, d_k=4, heads=1), 3),  # the book's start: 2.58 > √4
        (replace(INDUCTION, d_k=16, heads=1), 2),  # 4.34 times: within 10% of √16
    ],
)
def test_the_gradient_question_is_answered_by_the_measured_ratio(config: model_tt.TrainingConfig, answer: int) -> None:
    # Issue 30: the question asked how much wider the logits' spread is without 1/√d_k, which is √d_k by
    # definition. The gradient's ratio is a real prediction: its answer changes with the setting.
    start = model_tt.start_of(config)
    prediction = tt.gradient_question(start)
    ratio = start.grad_norm_unscaled / start.grad_norm_scaled
    assert prediction.answer == answer, ratio
    # The numbers at the table's decimals, and the ratio of those printed numbers (a reader's division).
    digits = tt.START_DECIMALS
    scaled, unscaled = f"{start.grad_norm_scaled:.{digits}f}", f"{start.grad_norm_unscaled:.{digits}f}"
    assert f"{scaled} with the factor, {unscaled} without, {float(unscaled) / float(scaled):.2f} times" in (
        prediction.explanation
    )
    assert abs(float(unscaled) / float(scaled) - ratio) < 0.01


def test_the_start_table_waits_for_the_answer_and_needs_no_run(navigation_not_pages_directory: None) -> None:
    at = open_page("training_lab")
    assert not at.get("vega_lite_chart") and not at.dataframe  # before a choice: no table, no chart
    radio = next(r for r in at.radio if r.key and r.key.startswith("predict_training_lab"))
    radio.set_value(1).run()
    assert not at.exception, [e.value for e in at.exception]
    start = model_tt.start_of(model_tt.TrainingConfig())
    table = at.dataframe[0].value
    assert table["scaled"].iloc[2] == pytest.approx(round(start.grad_norm_scaled, tt.START_DECIMALS))
    assert len(at.get("vega_lite_chart")) == 1  # the start chart, with no run trained
    assert at.session_state["training_runs"] == []


@pytest.mark.parametrize("scale", [None, 1.0])
def test_fused_forward_equals_traced_forward(scale: float | None) -> None:
    config = model_tt.TrainingConfig(task=model_tt.Task.INDUCTION, layers=2, heads=2, d_k=8, scale=scale is None)
    generator = torch.Generator().manual_seed(3)
    model = model_tt.TinyTransformer(config, generator)
    tokens = model_tt.draw_batch(config.task, 4, generator).tokens
    torch.testing.assert_close(model(tokens), model.trace(tokens).logits, rtol=1e-5, atol=1e-5)


def test_multihead_scale_option_keeps_the_default_and_switches_scaling_off() -> None:
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
    plain = MultiHeadAttention(8, 8, 5, 0.0, 2, generator=torch.Generator().manual_seed(2))
    default = MultiHeadAttention(8, 8, 5, 0.0, 2, generator=torch.Generator().manual_seed(2), scale=None)
    torch.testing.assert_close(plain(x), default(x))
    unscaled = MultiHeadAttention(8, 8, 5, 0.0, 2, generator=torch.Generator().manual_seed(2), scale=1.0)
    assert unscaled.trace(x).scale == 1.0 and plain.trace(x).scale == pytest.approx(1 / 2)
    assert not torch.allclose(unscaled(x), plain(x))
    unscaled.fused = True
    torch.testing.assert_close(unscaled(x), unscaled.trace(x).output, rtol=1e-5, atol=1e-6)


def test_previous_token_batch_answers_one_step_back() -> None:
    batch = model_tt.draw_batch(model_tt.Task.PREVIOUS_TOKEN, 8, torch.Generator().manual_seed(0))
    assert (batch.targets[:, 0] == model_tt.IGNORE_INDEX).all()
    assert torch.equal(batch.targets[:, 1:], batch.tokens[:, :-1])


def test_induction_batch_hides_a_copy_among_random_tokens() -> None:
    batch = model_tt.draw_batch(model_tt.Task.INDUCTION, 256, torch.Generator().manual_seed(0))
    part = model_tt.INDUCTION_PART
    firsts, gaps, repeats_inside = [], [], 0
    for tokens, targets, lookback in zip(batch.tokens, batch.targets, batch.lookback, strict=True):
        scored = (targets != model_tt.IGNORE_INDEX).nonzero().flatten()
        assert len(scored) == part - 1  # the repeat after its first token
        assert torch.equal(targets[scored], tokens[scored + 1])
        second = int(scored[0])  # at the repeat's first token, predict its second
        rows = lookback.nonzero().flatten()
        first = int(rows[0]) - 1
        assert torch.equal(rows, torch.arange(first + 1, first + part))  # the first copy after its first token
        assert torch.equal(tokens[first : first + part], tokens[second : second + part])
        firsts.append(first)
        gaps.append(second - first - part)
        repeats_inside += len(set(tokens[first : first + part].tolist())) < part
    assert set(firsts) == set(range(model_tt.INDUCTION_MAX_PREFIX + 1))  # the copy starts anywhere in the prefix
    assert set(gaps) == set(range(1, model_tt.INDUCTION_MAX_GAP + 1))
    assert repeats_inside > 10  # a token may repeat inside the copy
    assert int(batch.tokens.max()) == model_tt.INDUCTION_SYMBOLS - 1 and int(batch.tokens.min()) == 0


def test_caps_bound_every_run_and_say_why() -> None:
    limited = tt.within_caps(model_tt.TrainingConfig())
    assert limited.config == model_tt.TrainingConfig() and not limited.reasons
    worst = tt.within_caps(
        model_tt.TrainingConfig(task=model_tt.Task.INDUCTION, layers=2, heads=4, d_k=256, steps=tt.MAX_STEPS)
    )
    assert worst.config.d_model <= tt.MAX_WIDTH
    assert worst.config.steps < tt.MAX_STEPS
    assert len(worst.reasons) == 2 and "heads × d_k" in worst.reasons[0]
    assert tt.estimated_seconds(worst.config) <= tt.RUN_BUDGET_S
    for bad in ({"layers": 3}, {"d_k": 5}, {"heads": 0}, {"steps": 0}, {"learning_rate": -1.0}):
        with pytest.raises(ValueError):
            tt.within_caps(replace(model_tt.TrainingConfig(), **bad))


RECIPE_CASES = [
    model_tt.TrainingConfig(steps=30),
    model_tt.TrainingConfig(
        task=model_tt.Task.INDUCTION, layers=2, heads=1, d_k=32, scale=False, init=model_tt.Init.BOOK, steps=20
    ),
    model_tt.TrainingConfig(heads=4, d_k=8, learning_rate=0.01, steps=25, seed=9),
]


@pytest.mark.parametrize("config", RECIPE_CASES, ids=["default", "induction-unscaled-book", "four-heads"])
def test_recipe_reproduces_the_core_curve_exactly(config: model_tt.TrainingConfig) -> None:
    run = model_tt.train(config)
    script = recipes.run(recipes.fill("training_lab", tt.recipe_values(config)))
    assert tuple(script["logged_steps"]) == run.steps
    assert tuple(script["losses"]) == run.losses
    assert tuple(script["accuracies"]) == run.accuracies


def test_recipe_settings_are_the_config_fields() -> None:
    assert recipes.settings_of("training_lab") == list(tt.recipe_values(model_tt.TrainingConfig()))


def test_verdict_compares_a_scaled_and_an_unscaled_run() -> None:
    scaled = model_tt.train(model_tt.TrainingConfig(steps=20))
    unscaled = model_tt.train(model_tt.TrainingConfig(steps=20, scale=False))
    other = model_tt.train(model_tt.TrainingConfig(steps=20, seed=5))
    sentences = tt.verdict([other, unscaled, scaled])
    assert len(sentences) == 2  # one comparison, one run on its own
    assert f"unscaled reached {100 * unscaled.final_accuracy:.0f}%" in sentences[0]
    assert f"scaled {100 * scaled.final_accuracy:.0f}%" in sentences[0]
    assert "seed 5" in sentences[1]


def test_curves_and_start_charts_validate_and_carry_the_runs() -> None:
    runs = [
        model_tt.train(model_tt.TrainingConfig(steps=10)),
        model_tt.train(model_tt.TrainingConfig(steps=10, scale=False)),
    ]
    frame = tt.curves_frame(runs)
    assert set(frame["scaling"]) == {"scaled", "unscaled"}
    assert len(frame) == 2 * sum(len(r.steps) for r in runs)
    loss, accuracy = (validated_spec(chart) for chart in charts_training.curve_charts(frame))
    assert (loss["title"], accuracy["title"]) == ("Training loss", "Held-out accuracy")
    start = validated_spec(charts_training.start_chart(tt.start_frame(runs[0].start)))
    assert start["resolve"]["scale"]["x"] == "independent"
    table = tt.start_table(runs[0].start)
    assert table["unscaled / scaled"][0] == pytest.approx(math.sqrt(16), rel=1e-4)  # of the rounded values


def test_page_trains_a_default_run(navigation_not_pages_directory: None) -> None:
    at = open_page("training_lab")
    assert at.title[0].value == "8 · Train it yourself"
    assert not at.get("vega_lite_chart")  # nothing trained yet
    at.button(key="train_button").click().run()
    assert not at.exception, [e.value for e in at.exception]
    run = model_tt.train(model_tt.TrainingConfig())  # what the page must show: the seed is the sidebar's 123
    verdicts = [m.value for m in at.markdown if m.value.startswith("- ")]
    assert verdicts == [f"- {tt.verdict([run])[0]}"]
    assert len(at.get("vega_lite_chart")) >= 3  # curves, heatmaps before/after, start statistics
    assert len(at.session_state["training_runs"]) == 1
    at.button(key="train_clear").click().run()
    assert at.session_state["training_runs"] == []


def test_page_compares_scaled_and_unscaled_and_shows_a_cap(navigation_not_pages_directory: None) -> None:
    at = open_page("training_lab")
    at.number_input(key="train_steps").set_value(20).run()
    at.button(key="train_compare").click().run()
    assert not at.exception, [e.value for e in at.exception]
    verdicts = [m.value for m in at.markdown if m.value.startswith("- ")]
    assert len(verdicts) == 1 and "unscaled reached" in verdicts[0]
    at.selectbox(key="train_d_k").set_value(256).run()
    assert any("heads × d_k is at most" in i.value for i in at.info)
    at.selectbox(key="train_task").set_value(model_tt.Task.INDUCTION).run()
    assert at.radio(key="train_layers").value == 2
    assert at.number_input(key="train_steps").value == tt.DEFAULT_STEPS[model_tt.Task.INDUCTION]


def pair(config: model_tt.TrainingConfig) -> list[str]:
    """The verdict on `config` trained scaled and unscaled."""
    return tt.verdict([model_tt.train(replace(config, scale=True)), model_tt.train(replace(config, scale=False))])


ADVICE = ("learns as well", "wider d_k", "Raise d_k", "raise d_k")


def test_verdict_when_neither_run_learned_says_so_and_asks_for_more_steps() -> None:
    (sentence,) = pair(replace(INDUCTION, steps=20))
    assert "Neither run has learned the task yet" in sentence and "more steps" in sentence
    assert not any(a in sentence for a in ADVICE), sentence  # it used to advise raising d_k here (8% vs 9%)


def test_verdict_says_when_the_unscaled_run_was_faster() -> None:
    scaled, unscaled = (
        model_tt.train(model_tt.TrainingConfig(steps=60)),
        model_tt.train(model_tt.TrainingConfig(steps=60, scale=False)),
    )
    fast_s, fast_u = tt.steps_to_reach(scaled, tt.REACHED), tt.steps_to_reach(unscaled, tt.REACHED)
    assert fast_u is not None and fast_s is not None and fast_u < fast_s  # the runs: unscaled got there first
    (sentence,) = tt.verdict([scaled, unscaled])
    assert f"unscaled was faster: 90% at step {fast_u}, where scaled needed {fast_s}" in sentence
    assert not any(a in sentence for a in ADVICE), sentence


def test_verdict_at_the_widest_d_k_never_advises_raising_it() -> None:
    (sentence,) = pair(model_tt.TrainingConfig(heads=1, d_k=256, steps=100))
    assert "d_k=256" in sentence and not any(a in sentence for a in ADVICE[1:]), sentence
    widest = model_tt.TrainingConfig(heads=1, d_k=256, init=model_tt.Init.BOOK)
    assert "already the widest" in tt._still_to_try(widest)
    assert "wider d_k" not in tt._still_to_try(model_tt.TrainingConfig(heads=2, d_k=128))  # 2 x 128 is the cap
    assert "up to 128 with 2 heads" in tt._still_to_try(model_tt.TrainingConfig(heads=2, d_k=16))


def test_training_lab_text_offers_advice_only_as_the_verdicts_do() -> None:
    text = (Path(__file__).resolve().parents[2] / "pages" / "text" / "training_lab.md").read_text()
    assert "widen d_k" not in text and "guessing gives 1 in 16" not in text and "ten different tokens" not in text
    assert "more steps" in text


def test_a_link_naming_only_the_induction_task_brings_its_defaults() -> None:
    at = open_page("training_lab", train_task="induction")
    assert at.selectbox(key="train_task").value == "induction"
    assert at.radio(key="train_layers").value == tt.DEFAULT_LAYERS[model_tt.Task.INDUCTION]  # it opened with 1 and 300
    assert at.number_input(key="train_steps").value == tt.DEFAULT_STEPS[model_tt.Task.INDUCTION]


def test_verdict_sums_up_several_comparisons_by_width() -> None:
    runs = [
        model_tt.train(model_tt.TrainingConfig(steps=10, d_k=d_k, scale=s)) for d_k in (32, 8) for s in (True, False)
    ]
    sentences = tt.verdict(runs)
    assert len(sentences) == 3  # two comparisons and the summary
    summary = sentences[2]
    assert summary.index("d_k=8 ") < summary.index("d_k=32 ")  # ordered by width
    gap = 100 * (runs[2].final_accuracy - runs[3].final_accuracy)
    assert f"d_k=8 (linear init, previous token): {gap:+.0f} points" in summary


def keep_apptest_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two AppTests running at once: each run installs its mock Runtime globally and removes it when it
    ends, so the first session to finish took it from under the other's rerun ("Runtime hasn't been
    created!" in its script thread, and that session's runs never arrived). Here the last mock stays."""
    from streamlit.runtime.runtime import Runtime

    last: list[Runtime] = []
    real_instance = Runtime.instance.__func__

    def instance(cls: type[Runtime]) -> Runtime:
        if cls._instance is not None:
            last[:] = [cls._instance]
            return cls._instance
        return last[0] if last else real_instance(cls)

    monkeypatch.setattr(Runtime, "instance", classmethod(instance))


def one_parse_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each AppTest has its own script cache, so two of them in threads can parse a script at once.

    CPython 3.11's ast.parse is not safe in two threads at once ("AST constructor recursion depth
    mismatch", which failed CI's run of the test below even with the threads 0.5 s apart). The server
    has one script cache and parses under its lock; this gives the test's AppTests one lock as well.
    """
    from streamlit.runtime.scriptrunner import magic

    lock = threading.Lock()
    real_add_magic = magic.add_magic

    def add_magic_alone(code: str, script_path: str) -> object:
        with lock:
            return real_add_magic(code, script_path)

    monkeypatch.setattr(magic, "add_magic", add_magic_alone)


def test_two_sessions_pressing_train_at_once_cost_one_training(
    navigation_not_pages_directory: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ui import training_queue

    config = model_tt.TrainingConfig(steps=30, seed=4321)  # a run no other test caches
    calls: list[model_tt.TrainingConfig] = []
    real_train = model_tt.train

    def counting_train(config: model_tt.TrainingConfig, on_progress=None) -> model_tt.TrainingRun:
        calls.append(config)
        time.sleep(2.0)  # long enough for the second session to arrive while the first trains
        return real_train(config, on_progress)

    monkeypatch.setattr(tt, "RUN", replace(tt.RUN, compute=counting_train))
    keep_apptest_runtime(monkeypatch)
    training_queue.training_queue.clear()  # a fresh queue: no finished runs
    sessions = []
    for _ in range(2):
        at = open_page("training_lab")
        at.sidebar.number_input(key="seed").set_value(config.seed).run()
        at.number_input(key="train_steps").set_value(config.steps).run()
        sessions.append(at)
    one_parse_at_a_time(monkeypatch)
    threads = [threading.Thread(target=at.button(key="train_button").click().run) for at in sessions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert calls == [config]
    for at in sessions:
        assert not at.exception, [e.value for e in at.exception]
        assert [r.config for r in at.session_state["training_runs"]] == [config]


def test_the_wait_says_the_place_and_the_estimate() -> None:
    from services.training_queue import State, Status
    from ui import training_queue

    fraction, text = training_queue.describe([Status(State.QUEUED, place=3, wait_s=42.4)])
    assert fraction == 0 and text == "Waiting for a free trainer: place 3 in the queue, ready in about 42 s."
    _, text = training_queue.describe([Status(State.QUEUED, place=1, wait_s=9.0)])
    assert "you are next" in text
    # Compare asks for two runs: one running, one behind it; the later one says when both are ready.
    fraction, text = training_queue.describe(
        [Status(State.RUNNING, progress=0.5, wait_s=10.0), Status(State.QUEUED, place=1, wait_s=30.0)]
    )
    assert fraction == 0.25 and text == "Waiting for a free trainer: you are next, ready in about 30 s."
    fraction, text = training_queue.describe([Status(State.RUNNING, progress=0.5, wait_s=10.0)])
    assert text == "Training: 50% done, about 10 s left."
