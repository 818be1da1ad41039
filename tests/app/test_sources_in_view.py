"""AppTest: the sources' numbers and the new lesson blocks reach the screen (issue 9)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from tests.support import answered_page  # the numbers that answer a question appear once it is answered


def shown_text(at: AppTest) -> str:
    return "\n".join([m.value for m in at.markdown] + [c.value for c in at.caption])


def test_cross_attention_defaults_to_the_translation_pair_and_shows_its_context() -> None:
    at = answered_page("cross_attention")
    assert at.text_input(key="first_text").value == "Can you help me translate this sentence"
    assert at.text_input(key="second_text").value == "Kannst du mir helfen diesen Satz zu übersetzen"
    strongest = next(df.value for df in at.dataframe if "reads most from" in df.value.columns)
    assert len(strongest) == 7  # one row per English token
    assert set(strongest["reads most from"]) <= {"Kannst", "du", "mir", "helfen", "diesen", "Satz", "zu", "übersetzen"}
    # The shapes answer the page's question (what shape will the weights have?): shown once it is answered.
    next(r for r in at.radio if r.key and r.key.startswith("predict_")).set_value(0).run()
    shapes = next(df.value for df in at.dataframe if "tensor" in df.value.columns)
    assert dict(zip(shapes.tensor, shapes["shape"], strict=True))["weights"] == "(7, 8)"
    at.number_input(key="d_in_kv").set_value(5).run()
    assert not at.exception
    assert "first sequence **3**, second sequence **5**" in shown_text(at)
    shapes = next(df.value for df in at.dataframe if "tensor" in df.value.columns)
    assert dict(zip(shapes.tensor, shapes["shape"], strict=True))["x_2 (second sequence)"] == "(8, 5)"


def test_cross_attention_names_the_bad_sequence() -> None:
    at = answered_page("cross_attention")
    at.text_input(key="first_text").input("   ").run()
    assert any(e.value.startswith("First sequence") for e in at.error)


def test_cross_attention_article_preset_keeps_the_articles_shapes() -> None:
    at = answered_page("cross_attention", preset="article")
    next(r for r in at.radio if r.key and r.key.startswith("predict_")).set_value(0).run()  # shapes answer it
    shapes = next(df.value for df in at.dataframe if "tensor" in df.value.columns)
    table = dict(zip(shapes.tensor, shapes["shape"], strict=True))
    assert table["x_2 (second sequence)"] == "(8, 16)"
    assert table["keys"] == "(8, 24)" and table["values"] == "(8, 28)" and table["context"] == "(6, 28)"


def test_notebook_numbers_on_lesson_1() -> None:
    at = answered_page("without_weights", preset="notebook")
    text = shown_text(at)
    assert "**28.75%** of its attention on “are”" in text
    assert "**6.05%** on “embeddings”" in text
    assert "**0.9999998807907104**" in text and "**1.0000001192092896**" in text


def test_why_scale_shows_the_notebook_experiment_and_the_dk64_example() -> None:
    at = answered_page("why_scale")
    table = next(df.value for df in at.dataframe if "the notebook's run (no seed)" in df.value.columns)
    assert table.d.tolist() == [5, 100]
    assert any(m.value == "[0.5761, 0.2119, 0.2119]" for m in at.metric)
    assert "0.2119 cut off" in shown_text(at)


def test_cross_attention_with_your_own_sentence_asks_with_it() -> None:
    at = answered_page("cross_attention", preset="custom", text="the cat sat")
    assert at.text_input(key="first_text").disabled
    strongest = next(df.value for df in at.dataframe if "reads most from" in df.value.columns)
    assert list(strongest["query (first sequence)"]) == ["the", "cat", "sat"]


def test_overview_shows_the_articles_vocabulary_and_ids() -> None:
    at = answered_page("overview", preset="article")
    assert "The sentence as ids: **[0, 4, 5, 2, 1, 3]**" in shown_text(at)
