"""Lesson 1: attention with the inputs as their own queries, keys and values."""

import streamlit as st

from core.app.markup import literal
from core.app.registry import PageControl
from core.app.settings import PresetKey
from core.lessons import common, without_weights
from ui import cache, draw, widgets
from ui.frame import page_start
from ui.presentation import step, step_break


def context_charts(lesson: without_weights.WithoutWeightsLesson, query: int, colours: common.WeightColours) -> None:
    """Every query's weights (click a row to pick the query) beside the context vectors."""
    with draw.shrinks_to_column("l1-context", projector_vh=draw.PROJECTOR_GRID_VH):
        c1, c2 = st.columns(2)
    with c1:
        draw.query_weights_heatmap(
            lesson.weights,
            "Attention weights (click a row to pick the query)",
            "Heatmap of the attention weights, queries as rows and keys as columns.",
            chart_key="weights_chart",
            picker_key="query_without_weights",
            highlight_row=query,
            value_title=colours.legend,
            domain=colours.domain,
        )
    with c2:
        draw.heatmap(
            lesson.context,
            "Context vectors z = weights @ inputs",
            "Heatmap of the context vectors, one row per token.",
            x_title="dimension",
            y_title="token",
            signed=True,
        )
    with st.expander("Exact values of these two charts"):
        e1, e2 = st.columns(2)
        widgets.number_table(lesson.weights_table, where=e1)
        widgets.number_table(lesson.context_table, where=e2)


def shuffled_charts(shuffled: without_weights.ShuffledTokens, colours: common.WeightColours) -> None:
    """The weights computed on the shuffled tokens beside the original ones put in that order."""
    with draw.shrinks_to_column("l1-shuffled", projector_vh=draw.PROJECTOR_GRID_VH):
        s1, s2 = st.columns(2)
    with s1:
        draw.heatmap(
            shuffled.weights,
            "Weights computed on the shuffled sentence",
            "Heatmap of the attention weights computed from the shuffled tokens.",
            value_title=colours.legend,
            domain=colours.domain,
        )
    with s2:
        draw.heatmap(
            shuffled.reordered,
            "The original weights, rows and columns reordered",
            "Heatmap of the original attention weights with rows and columns put in the shuffled order.",
            value_title=colours.legend,
            domain=colours.domain,
        )


frame = page_start()
settings = frame.settings
widgets.prose("without_weights", "intro")
# Three columns side by side on a wide screen, stacked on a phone (one line of three was cut at 390 px).
for column, formula in zip(
    st.columns(3),
    (
        r"\omega_{ij} = x^{(i)} \cdot x^{(j)}",
        r"\alpha_{ij} = \frac{e^{\omega_{ij}}}{\sum_k e^{\omega_{ik}}}",
        r"z^{(i)} = \sum_j \alpha_{ij}\, x^{(j)}",
    ),
    strict=True,
):
    column.latex(formula)

step_break()  # on a projector, the question's options fell below the fold of the opening
query = widgets.query_picker(
    cache.computed(common.TOKEN_LABELS, settings),
    settings.preset_info.query_index,
    key="query_without_weights",
    example=settings.preset,
)
# The question and the dot products do not depend on the multiplier: they come from the scores as they are, and
# the multiplier's slider sits with the bars it changes (on a projector it was two steps before them, the s28 review).
unscaled = cache.computed(without_weights.LESSON, settings, query, 1.0)
# Every score and weight of the query's row names the token it attends to most: they wait for a choice.
answered = widgets.predict(unscaled.prediction, key="predict_without_weights")
token = unscaled.tokens[query]

step(f"Scores of the query “{literal(token)}”")
widgets.prose("without_weights", "dots")
if answered:
    # On a projector the chart shrinks to fit under the step's prose: its legend ended at 830 px of 720 (s25).
    with draw.shrinks_to_column("l1-dots", projector_vh=draw.PROJECTOR_CHARTS_VH):
        draw.draw(
            without_weights.dots_chart(unscaled, query),
            f"Bar chart: the dot product and the cosine similarity of the query {token} with every token.",
        )
else:
    widgets.answer_first("The dot products and cosine similarities of this query appear")

step("Three ways to normalise")
widgets.prose("without_weights", "norms")
# On a projector the bars on a screen of their own: under the prose, shrunk to fit, they were 60 px tall (issue 41)
# and their legend fell below the fold (the s28 review).
step_break()
scale = st.slider(
    "Multiply the scores by",
    1.0,
    200.0,
    1.0,
    step=1.0,
    key=PageControl.LOGIT_SCALE,
    bind="query-params",
    help="Large multipliers push exp() past the float32 limit (about 88.7).",
)
lesson = cache.computed(without_weights.LESSON, settings, query, scale)
if answered:
    with draw.shrinks_to_column("l1-norms", projector_vh=draw.PROJECTOR_GRID_VH):
        draw.draw(
            without_weights.norms_chart(lesson, query, scale),
            "Bar chart comparing divide-by-sum, naive softmax and stable softmax weights for the chosen query.",
        )
else:
    widgets.answer_first("The three normalisations' weights for this query appear")
# The row's largest score only with the answer: 1.50 before it, a student who worked out journey · journey = 1.495
# could read the winner off it (the s26 review).
largest = f"the largest score is {lesson.max_scaled_score:.1f}, " if answered else "a score is "
if lesson.naive_overflows:
    st.error(
        f"The naive softmax overflowed: {largest}above {lesson.overflow_at:.2f}, so exp() gave inf and "
        "inf/inf = nan. The stable softmax is unaffected.",
        icon=":material/warning:",
    )
elif answered:
    st.info(
        f"Largest score {lesson.max_scaled_score:.2f}: exp() overflows float32 above "
        f"{lesson.overflow_at:.2f}. Raise the multiplier to see it happen."
    )
else:
    st.info(f"exp() overflows float32 above {lesson.overflow_at:.2f}. Raise the multiplier to see it happen.")

step_break()  # reading the weights on a screen of its own: with the chart above, 2,235 px on a projector (s26)
widgets.prose("without_weights", "sums")
if answered:
    widgets.number_table(lesson.norms_table)
    (most, most_share), (least, least_share) = lesson.largest_share, lesson.smallest_share
    st.markdown(
        f"Divide by sum: “{literal(token)}” puts **{most_share:.2%}** of its attention on “{literal(most)}” "
        f"and only **{least_share:.2%}** on “{literal(least)}”."
    )
else:
    widgets.answer_first("The table of these weights and the query's largest and smallest share appear")
st.markdown(
    f"float32 sums of the weights at ×1 (whatever the score multiplier): divide by sum **{lesson.sums.by_sum!r}**, "
    f"naive softmax "
    f"**{lesson.sums.naive_softmax!r}**, `torch.softmax` **{lesson.sums.torch_softmax!r}**"
)
if settings.preset == PresetKey.NOTEBOOK and query == 2:
    st.caption(
        "The attention notebook prints the same for x⁽³⁾: 28.75% and 6.05%, and the sums 0.9999998807907104, "
        "1.0 and 1.0000001192092896."
    )
st.markdown("**All scores ω = inputs @ inputsᵀ** (one row per query, one column per key):")
if answered:
    widgets.number_table(lesson.scores_table)
else:
    widgets.answer_first("The scores appear")

step("Context vectors for every token")
widgets.prose("without_weights", "context")
step_break()  # the two maps under the toggle, whole on a projector: under the paragraph they ran to 916 px (s26b)
colours = widgets.weight_colours(lesson.weights)
if answered:
    context_charts(lesson, query, colours)
else:
    widgets.answer_first("The heatmaps of every weight and context vector appear")
z = ", ".join(f"{v:.4f}" for v in lesson.query_context)
st.markdown(f"z for “{literal(token)}” = **[{z}]**")
if lesson.loop_matches_matrix:
    st.success("Loop form and matrix form agree to float precision.")
else:
    st.error("Loop and matrix forms differ!")
widgets.code_box(lesson.code)

step("Word order: shuffle the tokens")
widgets.prose("without_weights", "position")
shuffled = lesson.shuffled
st.markdown("Shuffled sentence: " + " · ".join(f"“{literal(t)}”" for t in shuffled.tokens))
step_break()  # the two maps on a screen of their own: under the paragraph they ran to 1,014 px (s26b)
if answered:
    shuffled_charts(shuffled, colours)
else:
    widgets.answer_first("The two heatmaps of the shuffled sentence's weights appear")
differences = (
    f"the largest difference is {shuffled.max_difference:.1e} for the weights "
    f"and {shuffled.max_context_difference:.1e} for the context vectors."
)
if shuffled.agrees:
    st.success(f"The two agree to float rounding: {differences}")
else:
    st.error(f"The two differ: {differences}")
