"""Lesson 8: train a tiny transformer live and watch what 1/√d_k does to learning."""

from dataclasses import replace

import streamlit as st

from core.app import choices
from core.app.registry import PageControl
from core.charts import training as charts_training
from core.lessons import training_lab as tt
from ui import cache, draw, training_queue, widgets
from ui.frame import page_start
from ui.presentation import step, step_break

frame = page_start()

LEARNING_RATES = list(choices.LEARNING_RATES)


def task_changed() -> None:
    """A new task brings the depth and length that solve it (the student can still change them).

    A callback runs before the page's error handler: a value no option has (a forged message)
    changes nothing here, and the task box puts back its default.
    """
    task = st.session_state.get("train_task")
    if task in tt.DEFAULT_LAYERS:
        st.session_state["train_layers"] = tt.DEFAULT_LAYERS[task]
        st.session_state["train_steps"] = tt.DEFAULT_STEPS[task]


def task_defaults(task: tt.Task) -> dict[str, int]:
    """Initial values of the two boxes a task brings (task_changed), whichever way the task was chosen.

    Set once per session unless the link gives them; these widgets take no default argument,
    since a callback may set them.
    """
    return {"train_layers": tt.DEFAULT_LAYERS[task], "train_steps": tt.DEFAULT_STEPS[task]}


def controls(seed: int) -> tt.TrainingConfig:
    """The page's own controls; returns the run they ask for (before the caps)."""
    c1, c2, c3, c4 = st.columns(4)
    task = widgets.linked_select(
        "Task",
        list(tt.Task),
        key=PageControl.TRAIN_TASK,
        param=PageControl.TRAIN_TASK,
        code=str,
        name=tt.TASK_LABELS.get,
        default=tt.Task.PREVIOUS_TOKEN,
        where=c1,
        on_change=task_changed,
    )
    # After the task box, so that a link naming only the task (?train_task=induction) starts from that task's
    # defaults, as choosing it in the box does.
    for key, value in task_defaults(tt.Task(task)).items():
        if key not in st.query_params:
            st.session_state.setdefault(key, value)
    layers = c2.radio(
        "Layers", [1, 2], horizontal=True, key=PageControl.TRAIN_LAYERS, help="Induction needs 2.", **widgets.LINKED
    )
    # Number boxes and select boxes, not sliders: a slider's floating value fails the 4.5:1 contrast on
    # the main background (axe-core, tests/browser/test_display.py), and these values are read, not dragged.
    heads = c3.number_input("Heads per layer", 1, tt.MAX_HEADS, 2, key=PageControl.TRAIN_HEADS, **widgets.LINKED)
    d_k = c4.selectbox(
        "d_k (head width)",
        list(tt.D_K_CHOICES),
        list(tt.D_K_CHOICES).index(16),
        key=PageControl.TRAIN_D_K,
        help=f"heads × d_k is at most {tt.MAX_WIDTH}.",
        **widgets.LINKED,
    )
    c5, c6, c7, c8 = st.columns(4)
    scale = c5.toggle("Scale q·k by 1/√d_k", True, key=PageControl.TRAIN_SCALE, **widgets.LINKED)
    init = widgets.linked_select(
        "W_q, W_k, W_v start as",
        list(tt.Init),
        key=PageControl.TRAIN_INIT,
        param=PageControl.TRAIN_INIT,
        code=str,
        name=tt.INIT_LABELS.get,
        default=tt.Init.LINEAR,  # nn.Linear's
        where=c6,
    )
    learning_rate = c7.selectbox(
        "Learning rate (Adam)", LEARNING_RATES, LEARNING_RATES.index(3e-3), key=PageControl.TRAIN_LR, **widgets.LINKED
    )
    steps = c8.number_input("Steps", 10, tt.MAX_STEPS, step=50, key=PageControl.TRAIN_STEPS, **widgets.LINKED)
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


def show_heads(run: tt.TrainingRun) -> None:
    layer = 0
    if run.config.layers > 1:
        layer = (
            st.radio("Layer", [1, 2], index=1, horizontal=True, key=PageControl.TRAIN_SHOW_LAYER, **widgets.LINKED) - 1
        )
    wide = len(run.example_tokens) > 20
    where = "on the first copy" if run.config.task is tt.Task.INDUCTION else "per row"
    if run.config.task is tt.Task.INDUCTION:
        st.caption(
            f"Labels are position:token; {tt.FIRST_COPY_MARK} marks the first copy, {tt.REPEAT_MARK} its repeat. "
            "An induction head looks from each repeated token to the token after its first copy."
        )
    for view in tt.head_views(run, layer):
        st.markdown(
            f"**Layer {view.layer}, head {view.head}**: mean weight on the previous token {where} "
            f"{view.previous_share:.2f}"
        )
        # Side by side while a heatmap fits half the page (16 tokens); the 48-token induction maps stack.
        before, after = (st.container(), st.container()) if wide else st.columns(2)
        for column, when, weights in ((before, "before", view.before), (after, "after", view.after)):
            with column:
                draw.heatmap(
                    weights,
                    f"{when} training",
                    f"Heatmap of layer {view.layer}, head {view.head}'s attention weights {when} training.",
                    show_values=False,
                    value_title="weight",
                )


widgets.prose("training_lab", "intro")
widgets.prose("training_lab", "tasks")
step_break()  # the controls: on a projector they started below the two paragraphs' fold
requested = controls(frame.settings.seed)
limited = tt.within_caps(requested)
config = limited.config
for reason in limited.reasons:
    st.info(reason, icon=":material/speed:")
st.caption(tt.estimate_sentence(config, training_queue.pace()))
step_break()  # the question on a screen of its own: under the controls its verdict ran to 757 px
# Predict before pressing Train (on a projector the question stood below the buttons and the fold). The start
# statistics' table and chart measure the answer (the gradient's ratio): they wait for a choice.
start = cache.computed(tt.START, config)
answered = widgets.predict(tt.gradient_question(start), key="predict_training_lab")

step("Loss and held-out accuracy")  # with its buttons: on a projector Train sat below the question's fold
runs: list[tt.TrainingRun] = st.session_state.setdefault("training_runs", [])
b1, b2, b4, b3 = st.columns(4)
# A press queues the run(s) (one training per setting for the whole class, a few at once per process);
# a run someone already trained is ready at once and drawn in this very rerun.
if b1.button("Train", type="primary", icon=":material/play_arrow:", key="train_button"):
    training_queue.ask([config])
# Short labels: on a projector "Compare scaled vs unsc…" and "Compare with the book'…" were cut off.
if b2.button("Scaled vs unscaled", icon=":material/compare:", key="train_compare"):
    training_queue.ask([replace(config, scale=scaled) for scaled in (True, False)])
if b4.button(
    "Book's init, both ways",
    icon=":material/science:",
    key="train_compare_book",
    help="The same setting with the book's torch.rand weights, scaled and unscaled: a start where the scale matters.",
):
    training_queue.ask([replace(config, init=tt.Init.BOOK, scale=scaled) for scaled in (True, False)])
st.caption(tt.COMPARE_NOTE)
if b3.button("Clear the runs", icon=":material/delete:", key="train_clear"):
    runs = []
    training_queue.forget()
for finished in training_queue.collect():  # asked for now or earlier, and ready
    runs = tt.keep(runs, finished)
st.session_state["training_runs"] = runs
waiting = st.empty()  # the place in the queue, or the run's progress, while this session waits

if runs:
    loss_chart, accuracy_chart = charts_training.curve_charts(tt.curves_frame(runs), tt.chance_frame(runs))
    left, right = st.columns(2)  # side by side on a laptop, one under the other on a phone
    with left:
        draw.draw(loss_chart, "Line chart against the step: training loss, one line per run; unscaled runs dashed.")
    with right:
        draw.draw(
            accuracy_chart,
            "Line chart against the step: held-out accuracy, one line per run; a grey rule marks what a model "
            "without the task's lookup scores.",
        )
    st.dataframe(
        [{"run": f"run {number}", "setup": tt.run_label(run.config)} for number, run in enumerate(runs, start=1)],
        hide_index=True,
        width="stretch",
        height="content",  # every row: the table is short
    )
else:
    st.info("No run yet: press Train.", icon=":material/school:")
widgets.prose("training_lab", "curves")  # under the charts it explains: they stay on the projector's screen

widgets.prose("training_lab", "verdict")
for sentence in tt.verdict(runs, start_shown=answered):  # the start's gradient both ways is the answer
    st.markdown(f"- {sentence}")

latest = runs[-1] if runs else None
step("Each head, before and after")
widgets.prose("training_lab", "heads")
if latest is not None:
    st.caption(f"Run {len(runs)}: {tt.run_label(latest.config)}")
    show_heads(latest)

step("At the start: what scaling changes")
widgets.prose("training_lab", "start")
if not answered:
    widgets.answer_first("The spread, the entropy and the gradient both ways appear")
else:
    # The table under the paragraph that introduces it; what it shows on the next projector screen (under three
    # paragraphs it started at 710 px of 720, the s29 review).
    widgets.number_table(tt.start_table(start), decimals=tt.START_DECIMALS, hide_index=True)
step_break()
if answered:
    widgets.prose("training_lab", "start_effects")  # the two effects all but name the answer: after it
    widgets.prose("training_lab", "start_spread")
    draw.draw(
        charts_training.start_chart(tt.start_frame(start)),
        "Bars: logit spread, softmax entropy and gradient norm at initialisation, scaled and unscaled.",
    )
else:
    widgets.answer_first("What the table shows, with a chart of it, appears")
widgets.prose("training_lab", "cost")
widgets.code_box(tt.code(config))
training_queue.wait(waiting)  # last: the page is complete while the student waits
