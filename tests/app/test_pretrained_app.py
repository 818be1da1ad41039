"""AppTest: lessons 2, 4, 5 and 7 with ?weights=pretrained, the Weights control, and its greyed-out states."""

from __future__ import annotations

import functools

import pytest
from streamlit.testing.v1 import AppTest

from core.app import prose, registry
from core.app.settings import settings_for_preset
from core.lessons import pretrained as pt
from core.lessons import pretrained_cross as ptc
from core.models import minilm as real_model
from tests import support
from tests.support import assert_no_error, prediction_radio, text_of

PRETRAINED = [spec for spec in registry.PAGES if spec.pretrained is not None]
OTHERS = [spec for spec in registry.PAGES if spec.pretrained is None]

app = functools.partial(support.app, timeout_s=180)  # a page's first run may load the encoder


def test_the_four_lessons_offer_pretrained_weights() -> None:
    assert [spec.number for spec in PRETRAINED] == [2, 4, 5, 7]


@pytest.mark.parametrize("spec", PRETRAINED, ids=lambda spec: spec.slug)
def test_pretrained_lesson_renders_and_greys_out_what_the_model_fixes(spec: registry.PageSpec) -> None:
    at = app(spec, weights="pretrained")
    assert_no_error(at)
    assert at.title[0].value == spec.heading
    assert at.sidebar.radio(key="weights").value == "pretrained"
    assert not at.sidebar.radio(key="weights").disabled
    for control in spec.ignores_with("pretrained"):
        widget = next(w for w in at.sidebar if getattr(w, "key", None) == control.value)
        assert widget.disabled, (spec.slug, control)
    captions = " ".join(c.value for c in at.sidebar.caption)
    assert "fixed by all-MiniLM-L6-v2" in captions
    assert "Pretrained weights." in text_of(at)  # the pretrained view ran, not the random page
    assert at.expander, "no Code box"


@pytest.mark.parametrize("spec", OTHERS, ids=lambda spec: spec.slug)
def test_other_pages_grey_out_the_weights_control_with_its_reason(spec: registry.PageSpec) -> None:
    at = app(spec, weights="pretrained")
    assert not at.exception, [e.value for e in at.exception]
    assert at.sidebar.radio(key="weights").disabled
    assert "pretrained weights are offered on lessons 2, 4, 5 and 7" in " ".join(c.value for c in at.sidebar.caption)


def test_random_is_the_default_and_keeps_the_books_numbers() -> None:
    at = app(registry.page("trainable_weights"))
    assert_no_error(at)
    assert at.sidebar.radio(key="weights").value == "random"
    assert "q = **[0.4306, 1.4551]**" in text_of(at)


def test_a_bad_weights_value_in_the_link_is_a_note_not_an_error() -> None:
    at = app(registry.page("trainable_weights"), weights="<b>trained</b>")
    assert not at.exception
    assert any("weights=" in w.value and "ignored" in w.value for w in at.warning)
    assert at.sidebar.radio(key="weights").value == "random"


def answer(at: AppTest, key: str) -> AppTest:
    """Choose the first option of the page's question: what answers it is drawn only after a choice."""
    prediction_radio(at, key).set_value(0).run()
    assert_no_error(at)
    return at


def test_lesson_2_numbers_on_screen_equal_core(encoder: real_model.RealModel) -> None:
    at = answer(app(registry.page("trainable_weights"), weights="pretrained"), "predict_trainable_weights")
    sentence = pt.lesson_sentence(settings_for_preset("book"))
    layer, head = pt.DEFAULT_HEADS[pt.WeightSource.ENCODER]["trainable_weights"]
    lesson = pt.pretrained_trainable_lesson(encoder, sentence, layer, head, 2)  # "journey", after [CLS]
    z = ", ".join(f"{v:.4f}" for v in lesson.query_context)
    # A model's vectors are strips (a chart each) with their numbers in an expander: as text they were a wall.
    assert f"z = [{z}]" in text_of(at) and "context vector z for “journey” =" not in text_of(at)
    assert any("The numbers of q and z for “journey”" in e.label for e in at.expander)
    assert lesson.pattern.summary in text_of(at)


def test_lesson_2_layer_and_head_come_from_the_link(encoder: real_model.RealModel) -> None:
    at = app(registry.page("trainable_weights"), weights="pretrained", layer="4", head="9")
    assert_no_error(at)
    answer(at, "predict_trainable_weights")  # the head's measured pattern answers the question
    lesson = pt.pretrained_trainable_lesson(encoder, pt.BOOK_SENTENCE, 4, 9, 2)
    assert f"Layer 4, head 9, measured on this sentence: {lesson.pattern.summary}" in text_of(at)


def test_lesson_2_prediction_reveals_the_real_heads_answer() -> None:
    at = app(registry.page("trainable_weights"), weights="pretrained")
    radio = prediction_radio(at, "predict_trainable_weights")
    radio.set_value(0).run()  # "One", where the default next-piece head has 5 favourites on 8 pieces
    revealed = " ".join(s.value for s in at.success) + " ".join(w.value for w in at.warning)
    assert "5 different favourites" in revealed and "looks at the next piece" in revealed


def test_lesson_4_dropout_and_switching_back_to_random() -> None:
    at = app(registry.page("causal_dropout"), weights="pretrained", dropout="0.5")
    assert_no_error(at)
    at.toggle(key="training").set_value(True).run()
    assert_no_error(at)
    assert "weights the mask lets through survived" in text_of(at)
    assert "each survives with probability 50%" in text_of(at)  # the expected share beside the drawn one (s28)
    at.sidebar.radio(key="weights").set_value("random").run()
    assert_no_error(at)
    assert "Pretrained weights." not in text_of(at)


def test_lesson_5_shows_twelve_heads_and_equal_forms() -> None:
    at = app(registry.page("multi_head"), weights="pretrained")
    assert_no_error(at)
    metrics = {m.label: m.value for m in at.metric}
    assert float(metrics["max |wrapper − split form|"]) <= 1e-5
    assert float(metrics["max |split form − the model's forward pass|"]) <= 1e-5
    assert at.sidebar.slider(key="num_heads").disabled


def test_lesson_7_pairs_and_honesty(encoder: real_model.RealModel) -> None:
    at = app(registry.page("cross_attention"), weights="pretrained", pair="question")
    assert_no_error(at)
    answer(at, "predict_cross_attention")
    text = " ".join(text_of(at).split())  # prose lines joined
    assert "was trained on one sentence at a time (self-attention)" in text
    assert "where  did  the  cat  sleep" in text_of(at)  # the question's word pieces, as st.text shows them
    pair = ptc.PAIRS[1]
    lesson = ptc.pretrained_cross_lesson(encoder, pair.first, pair.second, 1, 1)
    assert lesson.trained is not None
    assert f"[CLS] and [SEP] take **{lesson.trained.special_share:.2f}** of an average row" in text


def drawn_weights(at: AppTest) -> list[float]:
    """The cells of the page's one cross-attention heatmap, as Streamlit received them."""
    import pyarrow as pa

    from core.charts import heatmap as heatmaps

    (chart,) = [c for c in at.get("vega_lite_chart") if "Rectangular heatmap" in c.proto.alt]
    (dataset,) = [d for d in chart.proto.datasets if d.name == heatmaps.HEATMAP_DATA]
    return pa.ipc.open_stream(dataset.data.data).read_all().column("value").to_pylist()


def test_lesson_7_takes_your_own_two_sentences(encoder: real_model.RealModel) -> None:
    """A teacher's own pair, from the link: its pieces, its weights, and markup shown as typed."""
    first, second = "The chef cooked a *spicy* soup.", "A spicy soup was cooked by the chef."
    at = app(registry.page("cross_attention"), weights="pretrained", pair="own", first_text=first, second_text=second)
    assert_no_error(at)
    answer(at, "predict_cross_attention")
    assert at.text_input(key="first_text").value == first and at.text_input(key="second_text").value == second
    lesson = ptc.pretrained_cross_lesson(
        encoder, first, second, *pt.DEFAULT_HEADS[pt.WeightSource.ENCODER]["cross_attention"]
    )
    assert "  ".join(lesson.second_tokens) in text_of(at)
    # Both sides rounded to 6 decimals: a float32 difference of 1e-9 across a rounding boundary moves one by
    # exactly 1e-6 (it did, after other tests had changed torch's thread count).
    assert drawn_weights(at) == pytest.approx(lesson.weights["value"].round(6).tolist(), abs=1.5e-6)
    assert "chef" in lesson.tokens and "chef" in lesson.second_tokens  # a shared word for the head to find
    assert lesson.trained is not None
    assert f"Of the **{lesson.trained.shared_words}** content words the two sentences share" in text_of(at)


def test_an_unusable_own_sentence_gets_a_message_and_the_page_goes_on() -> None:
    too_long = " ".join(["antidisestablishmentarianism"] * 12)
    at = app(registry.page("cross_attention"), weights="pretrained", pair="own", second_text=too_long)
    assert not at.exception
    assert [e.value for e in at.error] and all(e.value.startswith("Second sentence:") for e in at.error)
    assert "Showing the book's sentence instead" in at.error[0].value
    prediction_radio(at, "predict_cross_attention").set_value(0).run()
    assert drawn_weights(at)  # the heatmap is still there, for the book's sentence


def test_every_pretrained_prose_section_reaches_a_page() -> None:
    shown = []
    for spec in PRETRAINED:
        at = app(spec, weights="pretrained")
        answer(at, "predict_")
        shown += [m.value.strip() for m in at.markdown]
    for name, body in prose.read_sections("pretrained").items():
        assert any(body.strip() in s for s in shown), name


def test_an_over_long_sentence_falls_back_to_the_book_with_a_message() -> None:
    long_text = " ".join(["antidisestablishmentarianism"] * 12)
    at = app(registry.page("trainable_weights"), weights="pretrained", preset="custom", text=long_text)
    assert not at.exception
    assert any("Showing the book's sentence instead" in e.value for e in at.error)


def test_lesson_7s_many_one_word_options_flow_side_by_side_and_long_ones_stack() -> None:
    """The s30 review: lesson 7's question offers each piece of the second sentence (13 on the default pair), one
    under another, and on a projector its verdict fell below the fold. Many short options now flow across."""
    at = support.open_page("cross_attention", weights="pretrained")
    radio = next(r for r in at.radio if r.label == "Your prediction")
    assert len(radio.options) > 6 and radio.proto.horizontal
    lesson_1 = support.open_page("without_weights")  # a few sentence-long options stay one under another
    assert all(not r.proto.horizontal for r in lesson_1.radio if r.label == "Your prediction")
