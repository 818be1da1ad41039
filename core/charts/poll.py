"""The class poll's answers on the teacher's screen: the counts and their chart (no store, no streamlit)."""

from __future__ import annotations

from dataclasses import dataclass

import altair as alt
import pandas as pd

from core.charts.spec import VegaChart, from_altair


@dataclass(frozen=True)
class Tally:
    """One question's answers as the teacher's screen shows them."""

    counts: tuple[int, ...]  # students per option, in the options' order
    options: tuple[str, ...]

    @property
    def total(self) -> int:
        return sum(max(0, count) for count in self.counts)  # never "-7 answers", whatever the store held

    def headline(self) -> str:
        """ "3 answers" (the words the teacher reads out), computed from the counts."""
        return f"{self.total} answer" + ("" if self.total == 1 else "s")


def tally_chart(tally: Tally, answer: int | None = None) -> VegaChart:
    """Horizontal bars, one per option, its count at its end; the right option outlined once revealed.

    `answer`: the right option's index after the reveal (None before: no hint on the projector).
    """
    frame = pd.DataFrame(
        {
            "option": [f"{index + 1}. {text}" for index, text in enumerate(tally.options)],
            "students": list(tally.counts),
            "right": [index == answer for index in range(len(tally.options))],
        }
    )
    order = list(frame["option"])
    base = alt.Chart(frame).encode(
        y=alt.Y("option:N", sort=order, title=None, axis=alt.Axis(labelLimit=420)),
        x=alt.X("students:Q", title="students", axis=alt.Axis(tickMinStep=1, format="d")),
    )
    bars = base.mark_bar(color="#4c78a8", strokeWidth=3).encode(
        stroke=alt.condition(alt.datum.right, alt.value("#e4007c"), alt.value(None)),
        tooltip=[alt.Tooltip("option:N"), alt.Tooltip("students:Q")],
    )
    labels = base.mark_text(align="left", dx=4, fontSize=16).encode(text="students:Q")
    return from_altair((bars + labels).properties(height=alt.Step(tally_bar_px(len(tally.options)))))


TALLY_BARS_PX = 192  # the bars' height in all, up to 48 px a bar: four options as before, readable from the back


def tally_bar_px(options: int) -> int:
    """A bar's height: 48 px up to four options, less for more (at 48 px lesson 1's six options put the last two
    bars below a projector's fold, the s29b review), never under 28 px."""
    return min(48, max(28, TALLY_BARS_PX // max(options, 1)))
