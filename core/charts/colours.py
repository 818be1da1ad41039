"""Colour for charts: the colour-blind-safe scales as explicit stops, and the arithmetic that picks each
cell's colour and a readable text colour on it (WCAG contrast). No streamlit, no Altair here.

Viridis for weights (0..1); a diverging blue-orange centred at 0 for signed values.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Colour scales as explicit stops, interpolated linearly in sRGB (Vega's "rgb" interpolation),
# so that Python knows the exact colour of every cell and can pick its text colour from it.
# VIRIDIS: every third stop of Vega's "viridis"; BLUE_ORANGE: Vega's "blueorange" (both colour-blind safe).
VIRIDIS = (
    "#440154", "#482575", "#414487", "#35608d", "#2a788e", "#21918d",
    "#22a884", "#43bf71", "#7ad151", "#bcdf27", "#fde725",
)  # fmt: skip
BLUE_ORANGE = (
    "#134b85", "#2f78b3", "#5da2cb", "#9dcae1", "#d2e5ef", "#f2f0eb",
    "#fce0ba", "#fbbf74", "#e8932f", "#c5690d", "#994a07",
)  # fmt: skip
WEIGHT_DOMAIN = (0.0, 1.0)  # attention weights always on 0..1: 0.099 must not look like a masked 0
MASKED_COLOUR = "#c8c8c8"  # a causal mask's future cells: no weight colour, so a 0 never passes for a small weight
INDUCTION_DOT = "#1b1b1b"  # a mark drawn on set2's pastel cells: at least 6:1 on each of them, on either theme
LEGEND_SYMBOL = "#8c8c8c"  # a legend's symbols where no colour is encoded: 3.4:1 on white, 5.6:1 on the dark theme
HIGHLIGHT = "#e4007c"  # outline of the query's row; stands out on viridis, blue-orange, light and dark


def hex_to_rgb(colours: tuple[str, ...]) -> np.ndarray:
    """('#rrggbb', ...) -> (S, 3) floats in 0..1 (sRGB, gamma-encoded)."""
    return np.array([[int(c[i : i + 2], 16) / 255 for i in (1, 3, 5)] for c in colours])


def scale_colours(values: np.ndarray, domain: tuple[float, float], stops: tuple[str, ...]) -> np.ndarray:
    """The colour a heatmap cell gets: values (N,) -> (N, 3) sRGB in 0..1.

    The same mapping as the Vega scale `heatmap` writes: stops spread evenly over the
    domain, linear between them in sRGB, clamped at the ends.
    """
    lo, hi = domain
    position = np.clip((np.asarray(values, dtype=np.float64) - lo) / (hi - lo), 0.0, 1.0) * (len(stops) - 1)
    left = np.minimum(np.floor(position).astype(int), len(stops) - 2)
    fraction = (position - left)[:, None]  # (N, 1)
    rgb = hex_to_rgb(stops)
    return rgb[left] * (1 - fraction) + rgb[left + 1] * fraction


def relative_luminance(rgb: np.ndarray) -> np.ndarray:
    """WCAG 2 relative luminance of sRGB colours (..., 3) in 0..1."""
    linear = np.where(rgb <= 0.04045, rgb / 12.92, ((rgb + 0.055) / 1.055) ** 2.4)
    return linear @ np.array([0.2126, 0.7152, 0.0722])


def contrast_ratio(luminance_a: np.ndarray, luminance_b: np.ndarray) -> np.ndarray:
    """WCAG 2 contrast ratio (1..21) between two relative luminances."""
    lighter, darker = np.maximum(luminance_a, luminance_b), np.minimum(luminance_a, luminance_b)
    return (lighter + 0.05) / (darker + 0.05)


def text_colours(values: np.ndarray, domain: tuple[float, float], stops: tuple[str, ...]) -> np.ndarray:
    """'black' or 'white' per value: whichever contrasts more with that value's own cell colour.

    One of the two always reaches at least 4.58:1 (the worst case is a cell of luminance 0.18).
    """
    cell = relative_luminance(scale_colours(values, domain, stops))
    black_wins = contrast_ratio(cell, np.zeros_like(cell)) >= contrast_ratio(cell, np.ones_like(cell))
    return np.where(black_wins, "black", "white").astype(object)


def text_switches(stops: tuple[str, ...], samples: int = 4001) -> tuple[float, ...]:
    """Where along a scale (fractions 0..1 of it) the more readable cell text turns from white to black or back.

    Read from the scale's own colours, sampled finely: each switch is the first sample of a new winner (so the
    winner named at a switch is the one from it on). Viridis has one switch (dark end white, light end black);
    a diverging scale, light in the middle and dark at both ends, has two.
    """
    fractions = np.linspace(0.0, 1.0, samples)
    cell = relative_luminance(scale_colours(fractions, (0.0, 1.0), stops))  # (samples,)
    black_wins = contrast_ratio(cell, np.zeros_like(cell)) >= contrast_ratio(cell, np.ones_like(cell))
    changes = np.flatnonzero(black_wins[1:] != black_wins[:-1]) + 1  # first index of each new winner
    return tuple(float(fractions[i]) for i in changes)


def colour_domain(
    values: np.ndarray, *, signed: bool, domain: tuple[float, float] | None = None, min_magnitude: float = 0.0
) -> tuple[float, float]:
    """The (low, high) ends of a heatmap's colour scale.

    An explicit `domain` wins (two heatmaps that pass the same one share a scale). Signed maps
    are symmetric around 0, at least ±min_magnitude (so float noise of 1e-8 in a difference stays
    white). Unsigned maps are 0..1 (weights) unless the values leave it.
    """
    if domain is not None:
        return float(domain[0]), float(domain[1])
    values = np.asarray(values, dtype=np.float64)
    if signed:
        magnitude = max(float(np.abs(values).max(initial=0.0)), min_magnitude)
        magnitude = magnitude if magnitude > 0 else 1.0
        return -magnitude, magnitude
    low, high = WEIGHT_DOMAIN
    return min(low, float(values.min(initial=low))), max(high, float(values.max(initial=high)))


def shared_domain(*frames: pd.DataFrame, signed: bool = True, causal: bool = False) -> tuple[float, float]:
    """One colour domain for several heatmaps (e.g. raw and scaled scores on one scale).

    causal: the frames are drawn behind the causal mask, so only the cells it leaves (key at or before its
    query) set the scale.
    """
    kept = [frame[frame["col_index"] <= frame["row_index"]] if causal else frame for frame in frames]
    values = np.concatenate([frame["value"].to_numpy(dtype=np.float64) for frame in kept])
    return colour_domain(values, signed=signed)
