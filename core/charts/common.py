"""What every chart shares: the plot's height and sizing, a token axis, and the grouped bar chart that
several lessons draw. Pure chart builders: DataFrame in, `VegaChart` out. No streamlit here.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import altair as alt
import pandas as pd

from core.charts.spec import (
    SpecPath,
    VegaChart,
    phone_title,
    template,
)

# A line or bar chart's own height (for its marks), the view growing for its title, axes and legend, and the
# column's width. Streamlit's default "fit" squeezes all of them into 300 px: in presentation mode's larger
# type a vertical axis title then outgrew the plot and pushed the chart's title above the top edge, cut off.
PLOT_HEIGHT = 220
GROWS_FOR_TEXT = alt.AutoSizeParams(type="fit-x", contains="padding")


def token_axis(count: int, title: str | None = None) -> alt.Axis:
    """An x axis that labels every one of `count` tokens (Vega would skip overlapping ones).

    Labels are tilted, and vertical beyond 10 tokens, so that a 20-token sentence still gets
    one readable label per bar on a phone.
    """
    return alt.Axis(title=title, labelAngle=-45 if count <= 10 else -90, labelOverlap=False, labelLimit=120)


BARS_DATA = "bar_values"  # the named dataset of the bar charts below


def _grouped_bars(
    num_categories: int, x: str, value: str, group: str, title: str, value_title: str | None
) -> alt.Chart:
    """Bars of `value` per `x`, one colour per `group`, side by side (categories in BARS_DATA's order)."""
    return (
        alt.Chart(alt.NamedData(name=BARS_DATA), title=phone_title(title))
        .mark_bar()
        .encode(
            # The sort is a slot: `grouped_bars` writes this sentence's tokens in.
            x=alt.X(f"{x}:N", sort=[str(i) for i in range(num_categories)], axis=token_axis(num_categories)),
            xOffset=alt.XOffset(f"{group}:N"),
            y=alt.Y(f"{value}:Q", title=value_title or value),
            color=alt.Color(
                f"{group}:N",
                scale=alt.Scale(scheme="tableau10"),
                title=None,
                legend=alt.Legend(orient="bottom", columns=2),  # one row of three ran off a phone's right edge
            ),
            tooltip=[alt.Tooltip(f"{x}:N"), alt.Tooltip(f"{group}:N"), alt.Tooltip(f"{value}:Q", format=".4f")],
        )
        # Without a height of its own, Streamlit's 300 px held the title, the tilted tokens and the legend too,
        # and left the bars about 60-80 px (the s21 and s22 reviews, lesson 1).
        .properties(height=PLOT_HEIGHT, autosize=GROWS_FOR_TEXT)
    )


@functools.lru_cache(maxsize=256)
def _grouped_bars_template(
    num_categories: int, x: str, value: str, group: str, title: str, value_title: str | None
) -> str:
    return template(_grouped_bars(num_categories, x, value, group, title, value_title))


X_SORT: SpecPath = ("encoding", "x", "sort")  # the bar charts' category order


COLOR_DOMAIN: SpecPath = ("encoding", "color", "scale", "domain")  # the groups, in a fixed order
X_OFFSET_SCALE: SpecPath = ("encoding", "xOffset", "scale")


def grouped_bars(
    frame: pd.DataFrame,
    x: str,
    value: str,
    group: str,
    title: str,
    *,
    value_title: str | None = None,
    groups: Sequence[str] | None = None,
) -> VegaChart:
    """Bars of `value` per `x` (in the frame's order), one colour per `group`, side by side.

    `groups` fixes the colours and the bars' places: Vega-Lite leaves out a group whose values are
    all NaN (lesson 1's naive softmax past float32's limit), and without a fixed domain the next
    group took its colour and its place in the legend. With it, a series keeps its colour and its
    legend entry whatever its values.

    The template is built once per number of categories, not per sentence (bench/NOTES.md).
    """
    categories = list(dict.fromkeys(frame[x]))
    cached = _grouped_bars_template(len(categories), x, value, group, title, value_title)
    slots: dict[SpecPath, object] = {X_SORT: categories}
    if groups is not None:
        slots[COLOR_DOMAIN] = list(groups)
        slots[X_OFFSET_SCALE] = {"domain": list(groups)}
    return VegaChart(cached, {BARS_DATA: frame}, slots)
