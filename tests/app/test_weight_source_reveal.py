"""Lessons 2, 4, 5 and 7, on every weight source: one page script, and its question before what answers it.

Each page drew charts, captions and sentences that answer its question right under (or above) it, e.g.
lesson 2 on a model's head printed "looks at the previous piece (1.00 of each row)" above "which piece
will 'journey' attend to most?". Now they appear only once the question is answered (ui/widgets.predict).
"""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from core.app import registry
from core.inputs.weights import WeightSource
from tests.support import open_page

LOCK = "once you have answered the question above"

# (lesson, source, something on the page that answers its question)
GIVEAWAYS = [
    ("trainable_weights", WeightSource.RANDOM, "Heatmap of the attention weights after the softmax."),
    ("trainable_weights", WeightSource.ENCODER, "measured on this sentence: looks at the next piece"),
    ("trainable_weights", WeightSource.RANDOM, "Heatmap of the context vectors."),  # alike rows: alike weights
    # The keys' numbers: one key at least as large as the others in every column wins every row (s27 reviews).
    ("trainable_weights", WeightSource.RANDOM, "Heatmap of the keys, one row per token."),
    ("trainable_weights", WeightSource.ENCODER, "Heatmap of the attention weights after the softmax."),
    ("causal_dropout", WeightSource.RANDOM, "Bars of how much each output row changed"),
    ("causal_dropout", WeightSource.RANDOM, "no leakage"),
    ("causal_dropout", WeightSource.ENCODER, "the mask gave another strongest key"),
    ("causal_dropout", WeightSource.ENCODER, "with the future masked"),
    # The other model's head on the same sentence, masked: it answers the question by contrast.
    ("causal_dropout", WeightSource.ENCODER, "weights with the future masked."),
    ("causal_dropout", WeightSource.DECODER, "Heatmap of all-MiniLM-L6-v2's weights with the future masked."),
    ("multi_head", WeightSource.RANDOM, "heatmaps of the causal attention weights of"),
    ("multi_head", WeightSource.RANDOM, "the heatmaps look alike"),
    ("multi_head", WeightSource.RANDOM, "Heatmap: one row per full-width head, one column per token."),
    ("multi_head", WeightSource.RANDOM, "the book's split heads above, on the same row, by"),
    ("multi_head", WeightSource.ENCODER, "heatmaps of the 12 heads' weights"),
    ("cross_attention", WeightSource.RANDOM, "Rectangular heatmap"),
    # The trained step's random weights on the default pair: 7 rows and 8 columns (issue 30's second review).
    ("cross_attention", WeightSource.RANDOM, "Heatmap of the sources' random cross-attention weights on the picked"),
    ("cross_attention", WeightSource.ENCODER, "Rectangular heatmap"),
    ("cross_attention", WeightSource.ENCODER, "[CLS] and [SEP] take"),
]


def opened(slug: str, source: WeightSource) -> AppTest:
    return open_page(slug, timeout_s=180, weights=source.value)  # a model source's first run loads it


def on_screen(at: AppTest) -> str:
    """Every sentence, caption and chart description the page shows (a chart's alt text names it)."""
    texts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.success]
    charts = [chart.proto.alt for chart in at.get("vega_lite_chart")]
    return "\n".join(texts + [t.value for t in at.text] + charts)


@pytest.mark.parametrize(("slug", "source"), sorted({(slug, source) for slug, source, _ in GIVEAWAYS}))
def test_what_answers_the_question_appears_only_after_a_choice(slug: str, source: WeightSource) -> None:
    at = opened(slug, source)
    giveaways = [text for page, where, text in GIVEAWAYS if (page, where) == (slug, source)]
    before = on_screen(at)
    assert LOCK in before, slug
    for text in giveaways:
        assert text not in before, (slug, source, text)
    radio = next(r for r in at.radio if r.key and r.key.startswith(f"predict_{slug}"))
    radio.set_value(0).run()
    assert not at.exception, [e.value for e in at.exception]
    after = on_screen(at)
    for text in giveaways:
        assert text in after, (slug, source, text)
    assert after.count(LOCK) < before.count(LOCK)  # its own lock is gone (lesson 7 has a second question)


@pytest.mark.parametrize("spec", [spec for spec in registry.PAGES if spec.pretrained is not None], ids=lambda s: s.slug)
def test_every_source_runs_the_lessons_own_script_with_one_question_key(spec: registry.PageSpec) -> None:
    # ?weights=pretrained used to run ui/pretrained.py instead of the page, with its own keys ("..._pretrained").
    keys = set()
    for source in WeightSource:
        at = opened(spec.slug, source)
        assert at.title[0].value == spec.heading
        keys |= {r.key.rsplit("_", 1)[0] for r in at.radio if r.key and r.key.startswith("predict_")}
        assert not [k for k in (w.key for w in at.main if getattr(w, "key", None)) if str(k).endswith("_pretrained")]
    assert keys - {"predict_cross_trained"} == {f"predict_{spec.slug}"}  # lesson 7's trained step asks its own


def test_only_a_model_source_has_a_model_to_load() -> None:
    from ui import weights as source

    assert source.model(WeightSource.ENCODER) is source.model(WeightSource.ENCODER)  # loaded once, shared
    with pytest.raises(ValueError, match="No model behind the weight source 'random'"):
        source.model(WeightSource.RANDOM)
