"""Pure chart builders: data in, a `spec.VegaChart` (a Vega-Lite template, its datasets, a few slots) out."""
