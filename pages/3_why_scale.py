"""Lesson 3: why the scores are divided by sqrt(d_k)."""

import streamlit as st

from core.app import choices
from core.app.registry import PageControl
from core.app.settings import Settings
from core.charts import why_scale as scale_charts
from core.charts.spec import VegaChart
from core.lessons import why_scale
from ui import cache, draw, widgets
from ui.frame import page_start
from ui.presentation import step, step_break


def peakiness(settings: Settings) -> None:
    """The largest weight (or effective tokens) against d_k, scaled and unscaled: after the answer."""
    metric = (
        st.segmented_control(
            "Measure",
            list(scale_charts.PeakMetric),
            default=scale_charts.PeakMetric.MAX_WEIGHT,
            key=PageControl.PEAK_METRIC,
            bind="query-params",
            format_func=scale_charts.peakiness_label,
        )
        or scale_charts.PeakMetric.MAX_WEIGHT
    )
    peaks = cache.computed(why_scale.PEAKINESS, settings.seed)
    draw.draw(
        scale_charts.peakiness(peaks, metric),
        f"Line chart of the {scale_charts.peakiness_label(metric)} against d_k for random queries and 8 keys, "
        "with and without scaling.",
    )
    with st.expander("Exact values of this chart"):
        widgets.number_table(why_scale.peakiness_table(peaks, metric))
    widgets.code_box(
        why_scale.peakiness_code(settings.seed),
        "Plain PyTorch that draws the queries and keys themselves; the page samples the same scores faster, "
        "so the digits differ within Monte Carlo error.",
        title="peakiness against d_k",
    )
    if not settings.scale:
        st.warning("Scaling is switched off in the sidebar: the red (unscaled) lines are what your model sees.")


def saturation(sweep: why_scale.SweepResult, saturation_chart: VegaChart) -> None:
    """Section (c): the softmax's gradient as the scores grow, after the answer; on a projector the chart opens a
    screen of its own (under the prose and the formula it started at 615 px of 720, the s27b review)."""
    widgets.prose("why_scale", "saturation")
    st.latex(r"\frac{\partial s_j}{\partial x_k} = s_j(\delta_{jk} - s_k)")
    step_break()
    draw.draw(
        saturation_chart, "Line chart: the norm of the softmax Jacobian falls towards zero as the multiplier grows."
    )
    with st.expander("Exact values of this chart"):
        widgets.number_table(sweep.saturation, hide_index=True)


def dk64_example(sweep: why_scale.SweepResult) -> None:
    """Section (c)'s worked example: a typical d_k = 64 score, unscaled and scaled, with its gradients."""
    widgets.prose("why_scale", "dk64")
    dk64 = sweep.dk64
    k1, k2 = st.columns(2)
    k1.metric(
        f"softmax([{dk64.typical_score:g}, 0, 0]), unscaled",
        "[" + ", ".join(f"{v:.4f}" for v in dk64.unscaled_weights) + "]",
        help=f"gradient size (Jacobian norm) {dk64.unscaled_gradient:.4f}",
    )
    k2.metric(
        f"softmax([{dk64.typical_score:g}/√{dk64.d_k}, 0, 0]) = softmax([1, 0, 0])",
        "[" + ", ".join(f"{v:.4f}" for v in dk64.scaled_weights) + "]",
        help=f"gradient size (Jacobian norm) {dk64.scaled_gradient:.4f}",
    )
    st.caption(
        f"Gradient size (norm of the softmax Jacobian): {dk64.unscaled_gradient:.4f} unscaled vs "
        f"{dk64.scaled_gradient:.4f} scaled. The attention notebook prints [0.576, 0.211, 0.211]: its 0.211 is "
        "0.2119 cut off after three digits, not rounded."
    )
    widgets.code_box(
        sweep.code,
        "The softmax examples of this page: the ×m sweep and the d_k = 64 example, with gradients.",
        title="the softmax sweep and the d_k = 64 example",
    )


frame = page_start()
settings = frame.settings
widgets.prose("why_scale", "intro")
c1, c2 = st.columns(2)
multiplier = c1.select_slider(
    "Score multiplier",
    choices.MULTIPLIERS,
    value=choices.DEFAULT_MULTIPLIER,
    key=PageControl.MULTIPLIER,
    bind="query-params",
)
trials = c2.select_slider(
    "Monte Carlo trials per d_k",
    choices.TRIAL_CHOICES,
    value=choices.DEFAULT_TRIALS,
    key=PageControl.TRIALS,
    bind="query-params",
    help=f"Capped at {choices.MAX_TRIALS:,} so the page stays quick when a whole class uses it at once; 20,000 already "
    "lands within a few percent of the theory.",
)
sweep, sweep_chart, saturation_chart = cache.computed(why_scale.SWEEP, float(multiplier))
answered = widgets.predict(sweep.prediction, key="predict_why_scale")

# Until a choice, the headings name the steps without their findings ("peakier", "saturated"),
# and the peakiness lines and the saturated softmax stay hidden: each answers the question.
step("(a) Bigger scores, peakier softmax" if answered else "(a) Multiplying the scores")
st.latex(r"\text{softmax}(m\,\omega)_j = \frac{e^{m \omega_j}}{\sum_k e^{m \omega_k}}")
if answered:  # the text's 80%, the bars and the largest weight answer the question above
    widgets.prose("why_scale", "peaky")
else:
    widgets.answer_first("What multiplying the scores does to the softmax appears")
# The bars on a projector screen of their own: under the formula and the paragraph they ran from 490 to 922 px
# of 720 (the s28b review); the two numbers under them (at 56% of the screen they fell below the fold, s29b), the
# table below the fold (it repeats the bars).
step_break()
if answered:
    with draw.shrinks_to_column("l3-sweep", projector_vh=draw.PROJECTOR_CHARTS_VH):
        draw.draw(
            sweep_chart, "Bars of softmax weights for the scores [0.1, -0.2, 0.3, -0.2, 0.5] times 1, 2, 4, 8, 16."
        )
    m1, m2 = st.columns(2)
    m1.metric(f"largest weight at ×{multiplier:g}", f"{sweep.max_weight:.4f}")
    m2.metric("effective number of tokens", f"{sweep.effective_tokens:.2f}")
    widgets.number_table(sweep.sweep_table)
else:
    widgets.answer_first("The bars for ×1 to ×16, their weights, and the largest weight appear")
# The same measured against d_k on a projector screen of its own: under the bars it made the step 2,359 px (s27).
step_break()
if answered:
    peakiness(settings)
else:
    widgets.answer_first("The largest weight measured against d_k, scaled and unscaled, appears")

step("(b) The variance of q·k grows like d_k")
widgets.prose("why_scale", "variance")
step_break()  # the formula and the chart: on a projector the chart started at the fold, under two paragraphs
st.latex(r"\operatorname{Var}(q\cdot k) = d_k, \qquad \operatorname{Var}\!\left(\frac{q\cdot k}{\sqrt{d_k}}\right) = 1")
variance = cache.computed(why_scale.VARIANCE, settings.seed, int(trials))
draw.draw(
    scale_charts.variance(variance.table),
    "Log-log chart: measured variance of q·k grows along the line d_k; the scaled variance stays at 1.",
)
# The tables on a projector screen of their own: under the chart they made the step 1,671 px (the s28b review).
step_break()
widgets.number_table(scale_charts.variance_table(variance.table), hide_index=True)
st.markdown("**The trainable-weights notebook's experiment** (1,000 draws at d = 5 and d = 100, this seed):")
widgets.number_table(variance.notebook.labelled, hide_index=True)
widgets.code_box(
    variance.notebook.code,
    "The notebook's experiment at d = 5 and 100, drawn from the sidebar's seed.",
    title="the attention notebook's variance experiment",
)

step("(c) Saturated softmax, vanishing gradients" if answered else "(c) What the softmax passes back")
if answered:
    saturation(sweep, saturation_chart)
else:
    widgets.answer_first("Why the softmax's gradient shrinks as the scores grow appears")
    step_break()  # the chart's place once answered: the step count stays
    widgets.answer_first("The chart of the softmax's gradient against the multiplier appears")
step_break()  # the d_k = 64 example on a screen of its own: with the gradient chart the step was 1,903 px (s27)
if answered:
    dk64_example(sweep)
else:
    widgets.answer_first("The d_k = 64 example, unscaled and scaled, with its gradients, appears")
widgets.code_box(
    variance.code,
    # The box draws as the page does (its recipe's docstring): it said "the digits differ", and a reviewer's paste
    # printed the table's digits exactly (the s28b review).
    "Plain PyTorch drawing as the page draws, from the same seed: it prints the table's digits. Instead of d_k "
    "products per pair it draws |q| (a chi-squared draw) and one normal number, the same random q·k.",
    title="the variance of q·k, drawn as the page draws it",
)
