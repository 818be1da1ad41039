"""Predict-then-reveal: the options' order gives nothing away, and a new setting hides the old answer."""

from __future__ import annotations

import json

import pytest
import torch
from streamlit.testing.v1 import AppTest

from core.app import registry
from core.app.settings import PRESETS, settings_for_preset
from core.lessons import causal_dropout, multi_head, real_model, why_scale
from core.lessons import training_lab as tl
from core.lessons.common import Prediction, strongest_key_question
from tests.support import answered, app, open_page


def lesson_predictions() -> list[Prediction]:
    """Every lesson question with fixed options that the page can show, over the presets and settings."""
    found = [why_scale.sweep(m).prediction for m in (1.0, 8.0)]
    found += [tl.gradient_question(tl.start_of(tl.TrainingConfig(d_k=d_k, heads=1))) for d_k in (4, 16, 64)]
    for key in PRESETS:
        settings = settings_for_preset(key)
        found.append(multi_head.multihead_lesson(settings).prediction)
        found.append(causal_dropout.causal_lesson(settings, 0, False).prediction)
    return found


def test_the_answers_place_on_screen_varies_and_the_order_is_fixed() -> None:
    # The lessons listed the answer at a fixed place (the real model's always first); shown in display_order,
    # it lands in different places, and the same question always shows the same order.
    predictions = lesson_predictions()
    places = [p.display_order().index(p.answer) for p in predictions]
    assert len(set(places)) >= 2, places
    for p in predictions:
        assert sorted(p.display_order()) == list(range(len(p.options)))
        assert p.display_order() == p.display_order()


def test_token_questions_keep_the_sentence_order_and_do_not_contradict_themselves() -> None:
    tokens = ("a", "b", "c")
    own = strongest_key_question(tokens, 1, torch.tensor([0.2, 0.5, 0.3]))
    other = strongest_key_question(tokens, 1, torch.tensor([0.5, 0.2, 0.3]))
    assert own.display_order() == (0, 1, 2)
    assert "its own embedding" in own.explanation and "outscore the token itself" not in own.explanation
    assert "outscore the token itself, as it does here" in other.explanation


def test_a_repeated_word_tied_with_the_top_key_is_right_too() -> None:
    # The s25 review: in "The cat sat on the mat because it was tired", "The" and "the" share an embedding, so the
    # same weight; choosing "the" was "Not quite", and "a larger multiplier only makes its share larger" was false.
    tokens = ("The", "cat", "the")
    tie = strongest_key_question(tokens, 0, torch.tensor([0.4, 0.2, 0.4]))
    assert tie.answer == 0 and tie.tied == (2,) and tie.is_right(2) and not tie.is_right(1)
    assert "and as much to “the” (x⁽³⁾): the same word, the same embedding, the same score" in tie.explanation
    assert "only makes its share larger" not in tie.explanation
    assert strongest_key_question(tokens, 0, torch.tensor([0.5, 0.2, 0.3])).tied == ()
    at = open_page(
        "without_weights",
        preset="custom",
        text="The cat sat on the mat because it was tired",
        d_in="8",
        seed="7",
        logit_scale="200",
    )
    radio = next(r for r in at.radio if r.key and r.key.startswith("predict_"))
    radio.set_value(radio.options.index("the")).run()
    assert not at.warning and any(s.value.startswith("Right.") for s in at.success), [w.value for w in at.warning]


def test_a_revealed_answer_is_hidden_again_when_the_settings_change() -> None:
    at = app(registry.page("trainable_weights"))
    radio = next(r for r in at.radio if r.key and r.key.startswith("predict_"))
    radio.set_value(0).run()
    assert len(at.success) + len(at.warning) >= 1 and not any("Choose an answer" in c.value for c in at.caption)
    at.number_input(key="seed").set_value(7).run()  # new weights: a new answer and new numbers
    assert not at.exception, [e.value for e in at.exception]
    assert any("Choose an answer" in c.value for c in at.caption)  # it used to show the new answer at once


def test_a_preset_brings_its_own_focus_token_and_a_later_pick_stays() -> None:
    from core.app.settings import PRESETS as presets

    for slug, key in (("without_weights", "query_without_weights"), ("trainable_weights", "query_trainable_weights")):
        at = app(registry.page(slug))
        assert at.selectbox(key=key).value == presets["book"].query_index  # "journey"
        at.selectbox(key="preset").set_value("notebook").run()
        assert not at.exception, [e.value for e in at.exception]
        # The attention notebook's worked example is about x³: it used to keep the book's "journey" (x²).
        assert at.selectbox(key=key).value == presets["notebook"].query_index == 2, slug
        at.selectbox(key=key).set_value(0).run()
        at.run()
        assert at.selectbox(key=key).value == 0  # the student's own pick stays theirs
        at.selectbox(key="preset").set_value("book").run()
        assert at.selectbox(key=key).value == presets["book"].query_index  # and the next example brings its own


def test_lesson_3_shows_the_bars_that_answer_its_question_only_after_a_choice() -> None:
    # The ×1…×16 bars, the table and "×8 takes 80%" stood right under the question "what happens at ×16?".
    at = app(registry.page("why_scale"))
    shown = lambda: "\n".join(m.value for m in at.markdown)  # noqa: E731
    assert "80%" not in shown() and not [m for m in at.metric if "largest weight" in m.label]
    assert any("once you have answered" in c.value for c in at.caption)
    # A reviewer found the answer in the headings ("peakier", "saturated"), in the peakiness lines
    # against d_k and in softmax([8, 0, 0]) = [0.9993, ...] under the question, before any choice.
    headings = lambda: " ".join(h.value for h in at.subheader)  # noqa: E731
    assert "peakier" not in headings() and "Saturated" not in headings()
    assert not [m for m in at.metric if "softmax([" in m.label] and len(at.get("vega_lite_chart")) == 1  # variance
    radio = next(r for r in at.radio if r.key and r.key.startswith("predict_"))
    radio.set_value(0).run()
    assert not at.exception, [e.value for e in at.exception]
    assert "80%" in shown() and [m for m in at.metric if "largest weight" in m.label]
    assert not any("once you have answered" in c.value for c in at.caption)
    assert "peakier" in headings() and "Saturated" in headings()
    assert len([m for m in at.metric if "softmax([" in m.label]) == 2 and len(at.get("vega_lite_chart")) == 4


def open_lesson(slug: str, **params: str) -> AppTest:
    return open_page(slug, timeout_s=300, **params)  # the training lab's and lesson 9's first runs are long


def on_screen(at: AppTest) -> str:
    """Every markdown, caption and metric label and value the page shows, as one text."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption]
    parts += [f"{m.label} {m.value}" for m in at.metric]
    return "\n".join(parts)


def charts_drawn(at: AppTest) -> int:
    return len(at.get("vega_lite_chart"))


def locks(at: AppTest) -> int:
    return sum("once you have answered" in c.value for c in at.caption)


def test_lesson_1_keeps_the_querys_scores_and_weights_until_a_choice() -> None:
    # "Which token will 'journey' attend to most?" stood above its own dot products, weights and shares.
    at = open_lesson("without_weights")
    assert "Divide by sum:" not in on_screen(at) and locks(at) >= 4
    before = charts_drawn(at)
    answered(at)
    assert "Divide by sum:" in on_screen(at) and locks(at) == 0
    assert charts_drawn(at) >= before + 5  # the two bar charts and the three weight heatmaps


@pytest.mark.parametrize("logit_scale", ["1", "200"])
def test_lesson_1_keeps_the_rows_largest_score_until_a_choice(logit_scale: str) -> None:
    # "Largest score 1.50" stood above the lock: a student who worked out journey · journey = 1.495 read the winner
    # off it (the s26 review). At ×200 the overflow box named the score too.
    at = open_lesson("without_weights", logit_scale=logit_scale)
    boxes = lambda: " ".join(box.value for box in [*at.info, *at.error])  # noqa: E731
    assert "overflow" in boxes() and "largest score" not in boxes().lower()
    answered(at)
    assert "largest score" in boxes().lower()


def test_lesson_8_says_exactly_sqrt_dk_only_after_a_choice() -> None:
    # "Without the factor their spread is exactly √d_k times larger" sat in the text under the question.
    at = open_lesson("training_lab")
    # Two locks: the start table, and on the next projector screen what it shows (s29 review: the table at 710 px).
    assert "exactly √d_k times" not in on_screen(at) and locks(at) == 2
    answered(at)
    assert "exactly √d_k times" in on_screen(at) and locks(at) == 0


def test_lesson_9_shows_each_measurement_only_after_its_question() -> None:
    # "memory ×, 1,024 → 2,048: 4.00", the tile grid's "skipped", the cache's growth table and the real caches
    # all stood right under (or above) the questions they answer.
    at = open_lesson("attention_at_scale", scale_longest="1024")
    labels = " ".join(m.label for m in at.metric)
    assert "memory ×" not in labels and "online result" not in labels and "Exact, not approximate" not in on_screen(at)
    assert "skipped" not in " ".join(c.value for c in at.caption if "once you have answered" not in c.value)
    # Seven: the doubling's charts and, a screen later, their numbers; the tiles' grid and, a screen later, the fused
    # kernel timed (s27: one 1,973 px step); the online result, the cache's growth, the real caches.
    assert locks(at) == 7
    # The doubling question's answer in words: the tiling section said "plain attention's scores grow like
    # T²" one scroll below the question (the third review).
    assert "T²" not in on_screen(at).replace("T² line", "")
    tables = len(at.dataframe)
    answered(at)
    labels = " ".join(m.label for m in at.metric)
    assert "memory ×" in labels and "online result" in labels and "Exact, not approximate" in on_screen(at)
    assert locks(at) == 0 and len(at.dataframe) >= tables + 2  # the growth table and the real models' caches


def test_lesson_6_hides_the_heads_that_answer_its_question_until_a_choice() -> None:
    # The page opened on the clearest previous-token head, under "which head looks at the previous piece?".
    at = open_lesson("real_model")
    assert "Measured by the" not in on_screen(at) and locks(at) == 4
    answered(at)
    assert "Measured by the" in on_screen(at) and locks(at) == 0


def test_lesson_6_asks_for_a_count_and_draws_its_three_heads_only_with_the_verdict() -> None:
    # Review s24: the three heatmaps drawn beside "which of these heads…" answered it (a perfect stripe). The
    # question now asks how many heads, and the heatmaps wait for a choice like every other head's weights.
    at = open_lesson("real_model")

    def panels() -> list:
        return [c for c in at.get("vega_lite_chart") if "highest previous-piece scores" in c.proto.alt]

    def verdicts() -> str:
        return on_screen(at) + "\n".join(v.value for v in [*at.success, *at.warning])

    radio = next(r for r in at.radio if r.key and r.key.startswith("predict_real_model"))
    assert tuple(radio.options) == real_model.COUNT_OPTIONS  # in order: counts
    assert not panels() and "The highest under that line" not in verdicts()
    assert "layer 0, head 2" not in on_screen(at)  # the answer's head is named nowhere before a choice
    answered(at)
    assert len(panels()) == 1 and "The highest under that line" in verdicts()


def test_lesson_1_stretches_its_weight_colours_from_the_link_and_says_so_on_the_legend() -> None:
    at = answered(open_lesson("without_weights", stretch="true"))
    assert at.toggle(key="stretch").value is True
    alts = [c.proto.spec for c in at.get("vega_lite_chart") if "attention weights" in c.proto.alt]
    assert alts and all("colours stretched to" in spec for spec in alts)


def test_lesson_7_stretches_its_random_weights_colours_from_the_link() -> None:
    """The s29 review: random cross-attention weights sit near 1/8, one flat colour on the fixed 0-1 scale."""
    for stretch, expected in (("true", True), (None, False)):
        at = answered(open_lesson("cross_attention", **({"stretch": stretch} if stretch else {})))
        (spec,) = [c.proto.spec for c in at.get("vega_lite_chart") if c.proto.alt.startswith("Rectangular heatmap")]
        assert ("colours stretched to" in spec) is expected


def cross_attention_giveaways(at: AppTest) -> list[str]:
    """What on lesson 7's random page tells the weights' shape: the table of each query's strongest key (one row
    per query), the context vectors (one per query) with their "7 tokens × d_v" title, and the prose that says so."""
    found = [f"table {list(df.value.columns)}" for df in at.dataframe if "reads most from" in df.value.columns]
    found += [c.proto.alt for c in at.get("vega_lite_chart") if "context vectors" in c.proto.alt]
    specs = [json.dumps(json.loads(c.proto.spec), ensure_ascii=False) for c in at.get("vega_lite_chart")]
    found += ["a chart titled … tokens × d_v" for spec in specs if "tokens × d_v" in spec]
    text = " ".join(on_screen(at).split())
    found += [s for s in ("as many context vectors as tokens", "one per token of the first") if s in text]
    return found


def test_lesson_7_hides_the_weights_shape_until_a_choice_in_normal_and_presentation_mode() -> None:
    # The question asks the weights' shape (7 × 8); right under "The weights, and the shape they have, appear once
    # you have answered" stood each query's strongest key, 7 rows, and "Context vectors: 7 tokens × d_v = 6".
    for link in ({}, {"present": "1"}):
        at = open_lesson("cross_attention", **link)
        question = next(r for r in at.radio if r.key and r.key.startswith("predict_cross_attention"))
        assert "7 × 8" in question.options  # the question: what shape the weights will have
        assert cross_attention_giveaways(at) == [], link
        assert locks(at) >= 3, link  # the weights, the context vectors, the shapes
        at.radio(key=question.key).set_value(0).run()
        assert not at.exception, [e.value for e in at.exception]
        shown = cross_attention_giveaways(at)  # all of it, once answered
        assert len(shown) == 4 and "as many context vectors as tokens" in shown, (link, shown)


def masked_heatmaps(at: AppTest) -> list[str]:
    """The alt text of every heatmap drawn with the causal mask's grey future (core.charts.heatmap, causal=True)."""
    return [c.proto.alt for c in at.get("vega_lite_chart") if "datum.masked" in c.proto.spec]


LEAK_CODE = "Code: the leakage check and the masked_fill bug"


def test_lesson_4_keeps_the_masked_triangle_until_a_choice_in_normal_and_presentation_mode() -> None:
    # Random weights: right under "Push token x⁽³⁾ … Which output rows can change?" stood the masking formula
    # (−∞ for j > i) and both masked heatmaps with their grey future, whose triangle reads "rows 3 to 6"; only
    # the leakage bars were locked. The book's and the decoder blog's triangles and the weights after dropout
    # read the same way.
    for link in ({}, {"present": "1"}):
        at = open_lesson("causal_dropout", **link)
        question = next(r for r in at.radio if r.key and r.key.startswith("predict_causal_dropout"))
        assert "Rows 3 to 6" in question.options
        assert masked_heatmaps(at) == [], link
        assert not [f for f in at.latex if r"-\infty" in f.value], link  # the masking formula
        lines = [c.value for c in at.caption if "once you have answered" in c.value]
        where = "the question on step 1." if link else "the question above."  # the question opens step 1
        # Eight: the two methods' difference and the book's replay's second screen have their own (the s27 review).
        assert len(lines) == 8 and all(line.endswith(where) for line in lines), (link, lines)
        # The s22 re-review: the leakage check's Code box says in a comment which rows a push leaves alone.
        assert LEAK_CODE not in [e.label for e in at.expander], link
        at.radio(key=question.key).set_value(0).run()
        assert not at.exception, [e.value for e in at.exception]
        shown = masked_heatmaps(at)
        assert "Heatmap of causal weights made by masking with minus infinity before the softmax." in shown
        assert "Heatmap of causal weights made by masking after the softmax and renormalising." in shown
        assert any(alt.startswith("Heatmap of the attention weights after dropout") for alt in shown)
        assert len(shown) == 8, shown  # and the book's three and the decoder blog's two
        assert [f for f in at.latex if r"-\infty" in f.value] and locks(at) == 0
        assert LEAK_CODE in [e.label for e in at.expander]


def test_lesson_2_keeps_both_versions_context_vectors_until_a_choice() -> None:
    # The fourth review: the SelfAttention_v1 vs _v2 table printed six alike context vectors (0.29-0.31 /
    # 0.79-0.82) under the question "how many different favourite keys", whose Z the page locks for that reason.
    at = open_lesson("trainable_weights")
    labels = " ".join(m.label for m in at.metric)
    assert "max |v1 − v2|" not in labels and "Both versions" in on_screen(at)
    answered(at)
    assert "max |v1 − v2|" in " ".join(m.label for m in at.metric) and locks(at) == 0


def test_no_paragraph_above_a_question_states_its_answer() -> None:
    # The fourth review: lesson 4's "Rows before it must not change at all" above "which output rows can
    # change?", lesson 7's "A trained translator would put each English word's weight on its German
    # counterpart" above "which German word will 'translate' read", and lesson 5's "training gave each a
    # different job" above "will they look alike?". Each paragraph is drawn before its question.
    from core.app import prose

    for page, section, giveaway in (
        ("causal_dropout", "leak", "must not change at all"),
        ("cross_attention", "weights_translation", "German counterpart"),
        ("pretrained", "multi_intro", "different job"),
        ("pretrained", "cross_intro", "still do so across two sentences"),
    ):
        assert giveaway not in " ".join(prose.section(page, section).split()), (page, section)
    assert "Leakage check" in on_screen(open_lesson("causal_dropout"))  # the paragraph is on screen unlocked
