"""Lesson 8: train a tiny transformer live and watch what 1/√d_k does to learning."""

from dataclasses import replace

import streamlit as st
import torch

from core import charts_training, recipes
from core import tiny_transformer as tt
from core.lessons import matrix_frame
from pages import _ui

frame = _ui.page_start()

RUNS_KEPT = 6  # runs overlaid per session: enough for a comparison, few enough to read the legend
LEARNING_RATES = list(tt.LEARNING_RATES)


def task_changed() -> None:
    """A new task brings the depth and length that solve it (the student can still change them).

    A callback runs before the page's error handler: a value no option has (a forged message)
    changes nothing here, and the task box puts back its default.
    """
    task = st.session_state.get("train_task")
    if task in tt.DEFAULT_LAYERS:
        st.session_state["train_layers"] = tt.DEFAULT_LAYERS[task]
        st.session_state["train_steps"] = tt.DEFAULT_STEPS[task]


# Initial values of the two boxes a new task resets (task_changed), set once per session unless the
# link gives them; these widgets take no default argument, since a callback may set them.
DEFAULTS = {"train_layers": 1, "train_steps": tt.DEFAULT_STEPS[tt.Task.PREVIOUS_TOKEN]}


def controls(seed: int) -> tt.TrainingConfig:
    """The page's own controls; returns the run they ask for (before the caps)."""
    for key, value in DEFAULTS.items():
        if key not in st.query_params:
            st.session_state.setdefault(key, value)
    c1, c2, c3, c4 = st.columns(4)
    task = _ui.linked_select(
        "Task",
        list(tt.Task),
        key="train_task",
        param="train_task",
        code=str,
        name=tt.TASK_LABELS.get,
        default=tt.Task.PREVIOUS_TOKEN,
        where=c1,
        on_change=task_changed,
    )
    layers = c2.radio("Layers", [1, 2], horizontal=True, key="train_layers", help="Induction needs 2.", **_ui.LINKED)
    # Number boxes and select boxes, not sliders: a slider's floating value fails the 4.5:1 contrast on
    # the main background (axe-core, tests/test_display.py), and these values are read, not dragged.
    heads = c3.number_input("Heads per layer", 1, tt.MAX_HEADS, 2, key="train_heads", **_ui.LINKED)
    d_k = c4.selectbox(
        "d_k (head width)",
        list(tt.D_K_CHOICES),
        list(tt.D_K_CHOICES).index(16),
        key="train_d_k",
        help=f"heads × d_k is at most {tt.MAX_WIDTH}.",
        **_ui.LINKED,
    )
    c5, c6, c7, c8 = st.columns(4)
    scale = c5.toggle("Scale q·k by 1/√d_k", True, key="train_scale", **_ui.LINKED)
    init = _ui.linked_select(
        "W_q, W_k, W_v start as",
        list(tt.Init),
        key="train_init",
        param="train_init",
        code=str,
        name=tt.INIT_LABELS.get,
        default=tt.Init.LINEAR,  # nn.Linear's
        where=c6,
    )
    learning_rate = c7.selectbox(
        "Learning rate (Adam)", LEARNING_RATES, LEARNING_RATES.index(3e-3), key="train_lr", **_ui.LINKED
    )
    steps = c8.number_input("Steps", 10, tt.MAX_STEPS, step=50, key="train_steps", **_ui.LINKED)
    return tt.TrainingConfig(
        task=tt.Task(task),
        layers=int(layers),
        heads=int(heads),
        d_k=int(d_k),
        scale=bool(scale),
        init=tt.Init(init),
        learning_rate=float(learning_rate),
        steps=int(steps),
        seed=seed,
    )


def keep(runs: list[tt.TrainingRun], run: tt.TrainingRun) -> list[tt.TrainingRun]:
    """The session's runs with `run` last; an identical earlier run is not kept twice."""
    return [r for r in runs if r.config != run.config][-(RUNS_KEPT - 1) :] + [run]


def show_heads(run: tt.TrainingRun) -> None:
    labels = tt.token_labels(run.example_tokens)
    layer = 0
    if run.config.layers > 1:
        layer = st.radio("Layer", [1, 2], index=1, horizontal=True, key="train_show_layer", **_ui.LINKED) - 1
    shares = tt.previous_token_share(run.attention_after)[layer]
    for head in range(run.config.heads):
        st.markdown(f"**Layer {layer + 1}, head {head + 1}**: weight on the previous token {shares[head]:.2f}")
        # Side by side while a heatmap fits half the page (16 tokens); the 36-token induction maps stack.
        before, after = st.columns(2) if len(labels) <= 20 else (st.container(), st.container())
        for column, when, weights in (
            (before, "before", run.attention_before),
            (after, "after", run.attention_after),
        ):
            with column:
                _ui.heatmap(
                    matrix_frame(torch.from_numpy(weights[layer, head]), labels, labels),
                    f"{when} training",
                    f"Heatmap of layer {layer + 1}, head {head + 1}'s attention weights {when} training.",
                    show_values=False,
                    value_title="weight",
                )


_ui.prose("training_lab", "intro")
_ui.prose("training_lab", "tasks")
requested = controls(frame.settings.seed)
limited = tt.within_caps(requested)
config = limited.config
for reason in limited.reasons:
    st.info(reason, icon=":material/speed:")
st.caption(f"Estimated time on one core: about {tt.estimated_seconds(config):.0f} s (less if someone ran it already).")

runs: list[tt.TrainingRun] = st.session_state.setdefault("training_runs", [])
b1, b2, b3 = st.columns(3)
if b1.button("Train", type="primary", icon=":material/play_arrow:", key="train_button"):
    runs = keep(runs, _ui.training_run(config))
if b2.button("Compare scaled vs unscaled", icon=":material/compare:", key="train_compare"):
    for scaled in (True, False):
        runs = keep(runs, _ui.training_run(replace(config, scale=scaled)))
if b3.button("Clear the runs", icon=":material/delete:", key="train_clear"):
    runs = []
st.session_state["training_runs"] = runs

_ui.predict(tt.spread_question(config.d_k), key="predict_training_lab")
_ui.step("Loss and held-out accuracy")
_ui.prose("training_lab", "curves")
if runs:
    loss_chart, accuracy_chart = charts_training.curve_charts(tt.curves_frame(runs))
    left, right = st.columns(2)  # side by side on a laptop, one under the other on a phone
    with left:
        _ui.chart(loss_chart, "Line chart against the step: training loss, one line per run; unscaled runs dashed.")
    with right:
        _ui.chart(accuracy_chart, "Line chart against the step: held-out accuracy, one line per run.")
    st.dataframe(
        [{"run": f"run {number}", "setup": tt.run_label(run.config)} for number, run in enumerate(runs, start=1)],
        hide_index=True,
        width="stretch",
    )
else:
    st.info("No run yet: press Train.", icon=":material/school:")

_ui.prose("training_lab", "verdict")
for sentence in tt.verdict(runs):
    st.markdown(f"- {sentence}")

latest = runs[-1] if runs else None
_ui.step("Each head, before and after")
_ui.prose("training_lab", "heads")
if latest is not None:
    st.caption(f"Run {len(runs)}: {tt.run_label(latest.config)}")
    show_heads(latest)

_ui.step("At the start: what scaling changes")
_ui.prose("training_lab", "start")
if latest is not None:
    st.dataframe(tt.start_table(latest.start).round(4), hide_index=True, width="stretch")
    _ui.chart(
        charts_training.start_chart(tt.start_frame(latest.start)),
        "Bars: logit spread, softmax entropy and gradient norm at initialisation, scaled and unscaled.",
    )
_ui.prose("training_lab", "cost")
_ui.code_box(recipes.fill("training_lab", tt.recipe_values(config)))
