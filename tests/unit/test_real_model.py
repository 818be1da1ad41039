"""The real model: our forward pass against transformers and sentence-transformers, the file checks,
the head measures, the recipe, the charts, and the page through the frame."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import types
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import pytest
import torch
from streamlit.testing.v1 import AppTest

from core import recipes
from core.attention import functional as fn
from core.charts import heads as charts_heads
from core.charts import heatmap as heatmaps
from core.charts import real_model as charts_rm
from core.lessons import matrix_frame
from core.lessons import real_model as lesson_rm
from core.lessons import real_model_frames as frames_rm
from core.models import minilm as rm
from tests.support import answered, answered_page, validated_spec

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the references read the same local folder; never the network

APP = str(Path(__file__).resolve().parents[2] / "streamlit_app.py")
SENTENCES = [
    "The dog chased the ball because it was bored.",
    "Attention lets every word look at every other word, even unbelievably long ones.",
    "Hi!",
]


def reference_outputs(reference, batch: rm.Batch):
    with torch.no_grad():
        return reference(
            input_ids=batch.input_ids,
            attention_mask=batch.attention_mask.long(),
            token_type_ids=batch.token_type_ids,
            output_attentions=True,
            output_hidden_states=True,
        )


@pytest.mark.parametrize("sentences", [SENTENCES[:1], SENTENCES[1:2], SENTENCES], ids=["one", "long", "padded"])
def test_every_head_and_hidden_state_equals_transformers(
    encoder: rm.RealModel, bert_reference, sentences: list[str]
) -> None:
    batch = rm.tokenize(encoder, sentences)
    ours = rm.forward(encoder, batch)
    theirs = reference_outputs(bert_reference, batch)
    assert ours.attentions.shape == (6, len(sentences), 12, batch.input_ids.shape[1], batch.input_ids.shape[1])
    for layer in range(6):
        torch.testing.assert_close(ours.attentions[layer], theirs.attentions[layer], atol=1e-5, rtol=0)
    # Padding positions' outputs are never used (pooling skips them) and drift by up to 3e-5 over
    # six layers in float32; every real word piece matches to 1e-5.
    real = batch.attention_mask
    for layer in range(7):
        torch.testing.assert_close(
            ours.hidden_states[layer][real], theirs.hidden_states[layer][real], atol=1e-5, rtol=0
        )
    torch.testing.assert_close(ours.last_hidden_state[real], theirs.last_hidden_state[real], atol=1e-5, rtol=0)
    if not real.all():
        on_padding = ours.attentions * (~real)[None, :, None, None, :]  # weights on [PAD] keys
        assert on_padding.abs().max() == 0
        torch.testing.assert_close(ours.last_hidden_state, theirs.last_hidden_state, atol=1e-4, rtol=0)


def test_padding_changes_nothing_for_the_real_word_pieces(encoder: rm.RealModel) -> None:
    alone = rm.encode(encoder, SENTENCES[:1])
    padded = rm.encode(encoder, SENTENCES)  # the first sentence padded to the longest's length
    num = alone.attentions.shape[-1]
    assert padded.attentions.shape[-1] > num
    torch.testing.assert_close(padded.attentions[:, 0, :, :num, :num], alone.attentions[:, 0], atol=1e-5, rtol=0)
    assert padded.attentions[:, 0, :, :num, num:].abs().max() == 0  # no weight on [PAD] keys
    torch.testing.assert_close(padded.sentence_embedding[0], alone.sentence_embedding[0], atol=1e-5, rtol=0)


def test_sentence_embedding_equals_sentence_transformers(encoder: rm.RealModel) -> None:
    sentence_transformers = pytest.importorskip("sentence_transformers")
    reference = sentence_transformers.SentenceTransformer(str(encoder.folder), device="cpu")
    theirs = reference.encode(SENTENCES, convert_to_tensor=True)
    ours = rm.encode(encoder, SENTENCES).sentence_embedding
    assert ours.shape == (3, 384)
    torch.testing.assert_close(ours, theirs.cpu(), atol=1e-5, rtol=0)
    torch.testing.assert_close(ours.norm(dim=-1), torch.ones(3))


def test_paraphrases_are_closer_than_an_unrelated_pair(encoder: rm.RealModel) -> None:
    a, b, c = rm.encode(
        encoder, ["A man is playing a guitar.", "Someone plays the guitar.", "The stock market fell sharply today."]
    ).sentence_embedding
    assert rm.cosine_similarity(a, b) > rm.cosine_similarity(a, c) + 0.3


def test_tokenizer_pads_nothing_and_refuses_what_it_cannot_take(encoder: rm.RealModel) -> None:
    batch = rm.tokenize(encoder, ["Hi!"])
    assert batch.tokens == (("[CLS]", "hi", "!", "[SEP]"),)  # not padded to the packaged 128
    assert batch.input_ids.shape == (1, 4) and bool(batch.attention_mask.all())
    with pytest.raises(rm.SentenceError, match="the limit is 64"):
        rm.tokenize(encoder, ["word " * 70])
    with pytest.raises(rm.SentenceError, match="no words"):
        rm.tokenize(encoder, ["   "])


def test_model_is_not_changed_by_running_it(encoder: rm.RealModel) -> None:
    before = [t.clone() for t in (encoder.weights.word_embeddings, encoder.weights.layers[3].query_weight)]
    rm.encode(encoder, SENTENCES)
    after = (encoder.weights.word_embeddings, encoder.weights.layers[3].query_weight)
    assert all(torch.equal(b, a) for b, a in zip(before, after, strict=True))
    with pytest.raises(AttributeError):
        encoder.config = rm.EncoderConfig()  # type: ignore[misc]  # frozen


def copy_of_model(tmp_path: Path) -> Path:
    folder = rm.default_folder()
    for name in ("config.json", "tokenizer.json", rm.WEIGHTS_FILE):
        shutil.copy(folder / name, tmp_path / name)
    return tmp_path


def test_a_faithful_copy_loads(tmp_path: Path) -> None:
    copy = rm.load_model(copy_of_model(tmp_path))
    assert copy.config.head_dim == 32 and len(copy.weights.layers) == 6


def test_a_corrupted_weights_file_is_rejected_with_a_clear_error(tmp_path: Path) -> None:
    folder = copy_of_model(tmp_path)
    weights = folder / rm.WEIGHTS_FILE
    with weights.open("r+b") as handle:  # flip one byte in the middle: same size, other contents
        handle.seek(rm.WEIGHTS_BYTES // 2)
        byte = handle.read(1)
        handle.seek(rm.WEIGHTS_BYTES // 2)
        handle.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(rm.ModelFilesError, match="not the published one.*damaged.*Reinstall"):
        rm.load_model(folder)


def test_a_truncated_or_missing_file_is_rejected(tmp_path: Path) -> None:
    folder = copy_of_model(tmp_path)
    weights = folder / rm.WEIGHTS_FILE
    with weights.open("r+b") as handle:
        handle.truncate(1000)
    with pytest.raises(rm.ModelFilesError, match="1,000 bytes instead of 90,868,376"):
        rm.load_model(folder)
    weights.unlink()
    with pytest.raises(rm.ModelFilesError, match="missing"):
        rm.load_model(folder)
    (folder / "tokenizer.json").unlink()
    with pytest.raises(rm.ModelFilesError, match="tokenizer.json is missing"):
        rm.load_model(folder)


# --- head measures on hand-made weight matrices ---------------------------------------------


def previous_token_matrix(num_tokens: int) -> torch.Tensor:
    """Every query puts all its weight on the piece before it (the first on itself)."""
    weights = torch.zeros(num_tokens, num_tokens)
    weights[0, 0] = 1.0
    weights[torch.arange(1, num_tokens), torch.arange(num_tokens - 1)] = 1.0
    return weights


def test_measures_of_an_exact_previous_token_head() -> None:
    measures = lesson_rm.head_measures(previous_token_matrix(5))
    assert float(measures.previous) == pytest.approx(1.0)
    assert float(measures.next) == pytest.approx(0.0)
    assert float(measures.entropy) == pytest.approx(0.0)
    assert float(measures.distance) == pytest.approx(4 / 5)  # queries 1..4 look 1 back, query 0 at itself
    assert float(measures.cls) == pytest.approx(2 / 5)  # queries 0 and 1 land on position 0


def test_measures_of_uniform_sink_and_next_token_heads() -> None:
    num = 6
    uniform = torch.full((num, num), 1 / num)
    sink = torch.zeros(num, num)
    sink[:, -1] = 1.0
    following = previous_token_matrix(num).flip(0).flip(1)  # w[i, i+1] = 1, the last on itself
    measures = lesson_rm.head_measures(torch.stack([uniform, sink, following]))
    assert measures.entropy[0] == pytest.approx(math.log(num))
    assert measures.sep[1] == pytest.approx(1.0) and measures.cls[1] == pytest.approx(0.0)
    assert measures.next[2] == pytest.approx(1.0) and measures.previous[2] == pytest.approx(0.0)
    assert measures.distance[0] == pytest.approx(sum(abs(i - j) for i in range(num) for j in range(num)) / num**2)


def test_find_patterns_names_the_heads_that_show_them() -> None:
    num = 5
    stack = torch.full((2, 3, num, num), 1 / num)  # (L, h, T, T): all broad ...
    stack[1, 2] = previous_token_matrix(num)  # ... but one previous-token head
    findings = {f.pattern: f for f in lesson_rm.find_patterns(lesson_rm.head_measures(stack))}
    previous = findings[lesson_rm.Pattern.PREVIOUS]
    assert [(s.layer, s.head) for s in previous.heads] == [(1, 2)]
    assert previous.strongest.value == pytest.approx(1.0)
    assert len(findings[lesson_rm.Pattern.BROAD].heads) == 5
    assert findings[lesson_rm.Pattern.NEXT].heads == ()


def test_measures_table_is_long_and_complete() -> None:
    table = lesson_rm.head_measures(torch.full((2, 3, 4, 4), 0.25)).frame()
    assert len(table) == 2 * 3 * len(lesson_rm.Measure)
    assert set(table["measure"]) == {m.value for m in lesson_rm.Measure}


# --- the lesson, the causal view, the recipe --------------------------------------------------


@pytest.fixture(scope="module")
def lesson(encoder: rm.RealModel) -> lesson_rm.RealModelLesson:
    return lesson_rm.real_model_lesson(encoder, lesson_rm.EXAMPLES[0].sentence)


@pytest.mark.parametrize("example", lesson_rm.EXAMPLES, ids=lambda e: e.key)
def test_every_example_names_word_pieces_it_has(encoder: rm.RealModel, example: lesson_rm.ExampleSentence) -> None:
    lesson = lesson_rm.real_model_lesson(encoder, example.sentence)
    pair = lesson_rm.pair_finding(lesson, example.query, example.attends_to)
    assert pair is not None, lesson.labels
    assert pair.heaviest.value == pytest.approx(float(lesson.attentions[:, :, pair.query_index, pair.key_index].max()))
    assert lesson_rm.pair_finding(lesson, "no such piece", example.attends_to) is None


def other_queries_mean(lesson: lesson_rm.RealModelLesson, layer: int, head: int, query: int, key: int) -> float:
    """What a head's queries other than `query` put on `key`, on average: a loop, not the lesson's sum."""
    column = lesson.head(layer, head)[:, key]
    return float(torch.stack([column[i] for i in range(len(column)) if i != query]).mean())


def synthetic_lesson(attentions: torch.Tensor, labels: tuple[str, ...]) -> lesson_rm.RealModelLesson:
    measures = lesson_rm.head_measures(attentions, cls_position=0, sep_position=len(labels) - 1)
    layers, heads = attentions.shape[:2]
    return lesson_rm.RealModelLesson(
        " ".join(labels), labels, labels, attentions, measures, (), layers, heads, 32, 384, 1 / math.sqrt(32)
    )


def test_the_pair_head_is_the_one_whose_query_stands_out_from_its_other_queries() -> None:
    # The sixth review: layer 5, head 11 "sends 71% of 'it' to 'dog'", but it sends 'dog' 60% from every query:
    # a sink on 'dog', measured against the 72 heads' average (6%) instead of its own other queries.
    labels = ("[CLS]", "dog", "it", "[SEP]")
    sink = torch.tensor([0.05, 0.9, 0.0, 0.05]).expand(4, 4)  # every query: 0.9 on 'dog'
    singles_out = torch.zeros(4, 4)
    singles_out[:, 0] = 1.0  # every query parks on [CLS] ...
    singles_out[2] = torch.tensor([0.5, 0.5, 0.0, 0.0])  # ... but 'it', which sends 0.5 to 'dog'

    lesson = synthetic_lesson(torch.stack([sink, singles_out])[None], labels)  # one layer, two heads
    pair = lesson_rm.pair_finding(lesson, "it", "dog")
    assert pair is not None
    assert (pair.head.layer, pair.head.head, pair.head.value, pair.others) == (0, 1, 0.5, 0.0)
    assert (pair.heaviest.head, pair.heaviest.value) == (0, pytest.approx(0.9))
    assert pair.heaviest_others == pytest.approx(0.9)
    sentence = lesson_rm.pair_sentence(lesson_rm.EXAMPLES[0], pair)
    assert "layer 0, head 1, which sends 50% of 'it' to 'dog' while its other queries send 'dog' 0% on average" in (
        sentence
    )
    assert "Layer 0, head 0 sends more of 'it' to 'dog' than any other head, 90%, but its other queries send " in (
        sentence
    )


@pytest.mark.parametrize(
    ("sentence", "query", "key"),
    [
        (lesson_rm.EXAMPLES[0].sentence, "it", "dog"),
        ("The dog chased the ball because it was round.", "it", "ball"),  # the contrast sentence
        ("The trophy did not fit in the suitcase because it was too big.", "it", "trophy"),
        ("Mary gave the book to John because she was kind.", "she", "mary"),
    ],
)
def test_the_pair_sentence_states_each_heads_weight_and_its_other_queries_weight(
    encoder: rm.RealModel, sentence: str, query: str, key: str
) -> None:
    lesson = lesson_rm.real_model_lesson(encoder, sentence)
    pair = lesson_rm.pair_finding(lesson, query, key)
    assert pair is not None
    q, k = pair.query_index, pair.key_index
    lead = {  # every head's weight query -> key minus its other queries' mean there
        (layer, head): float(lesson.attentions[layer, head, q, k]) - other_queries_mean(lesson, layer, head, q, k)
        for layer in range(6)
        for head in range(12)
    }
    assert max(lead, key=lead.__getitem__) == (pair.head.layer, pair.head.head)
    for found, others in ((pair.head, pair.others), (pair.heaviest, pair.heaviest_others)):
        assert others == pytest.approx(other_queries_mean(lesson, found.layer, found.head, q, k), abs=1e-6)
    text = lesson_rm.pair_sentence(lesson_rm.EXAMPLES[0], pair)
    assert f"sends {pair.head.value:.0%} of '{query}' to '{key}' while its other queries send '{key}' " in text
    assert f"'{key}' {pair.others:.0%} on average." in text
    if (pair.heaviest.layer, pair.heaviest.head) != (pair.head.layer, pair.head.head):
        assert f"{pair.heaviest.value:.0%}, but its other queries send '{key}' {pair.heaviest_others:.0%}" in text
    else:
        assert "than any other head" not in text


def test_the_default_examples_heaviest_head_is_a_sink_on_dog_and_is_not_the_one_opened(encoder: rm.RealModel) -> None:
    # The case the review found: the head that sends most of 'it' to 'dog' sends 'dog' most from every query.
    lesson = lesson_rm.real_model_lesson(encoder, lesson_rm.EXAMPLES[0].sentence)
    pair = lesson_rm.pair_finding(lesson, "it", "dog")
    assert pair is not None and pair.heaviest_others > 0.5
    assert (pair.head.layer, pair.head.head) != (pair.heaviest.layer, pair.heaviest.head)
    assert pair.head.value > 3 * pair.others
    assert lesson_rm.opening_head(lesson, lesson_rm.EXAMPLES[0]) == pair.head


def test_lesson_weights_are_the_forward_pass_weights(encoder: rm.RealModel, lesson) -> None:
    output = rm.encode(encoder, [lesson.sentence])
    assert lesson.tokens[0] == "[CLS]" and lesson.tokens[-1] == "[SEP]"
    assert lesson.attentions.shape == (6, 12, len(lesson.tokens), len(lesson.tokens))
    assert torch.equal(lesson.attentions, output.attentions[:, 0])
    torch.testing.assert_close(lesson.attentions.sum(-1), torch.ones(6, 12, len(lesson.tokens)))
    assert lesson.scale == pytest.approx(1 / math.sqrt(32))


def test_causal_view_equals_masking_the_scores_before_softmax(encoder: rm.RealModel, lesson) -> None:
    scores = rm.encode(encoder, [lesson.sentence]).scaled_scores[:, 0]  # (L, h, T, T)
    for layer, head in [(0, 0), (2, 7), (5, 11)]:
        view = frames_rm.causal_view(lesson, layer, head)
        expected = fn.mask_before_softmax(scores[layer, head])
        torch.testing.assert_close(view.causal_weights, expected, atol=1e-6, rtol=0)
        assert torch.triu(view.causal_weights, diagonal=1).abs().max() == 0
        assert view.future_share[-1] == 0  # [SEP], the last piece, has no later piece
        torch.testing.assert_close(view.future_share, torch.triu(lesson.head(layer, head), diagonal=1).sum(-1))


@pytest.mark.parametrize(
    ("sentence", "layer", "head"),
    [(lesson_rm.EXAMPLES[0].sentence, 0, 2), (lesson_rm.EXAMPLES[1].sentence, 3, 5), ("Hello world", 5, 11)],
)
def test_recipe_reproduces_the_pages_head(encoder: rm.RealModel, sentence: str, layer: int, head: int) -> None:
    code = recipes.fill("real_model", {"sentence": sentence, "layer": layer, "head": head})
    result = recipes.run(code)
    page = lesson_rm.real_model_lesson(encoder, sentence)
    assert tuple(result["tokens"]) == page.tokens
    torch.testing.assert_close(result["weights"], page.head(layer, head), atol=1e-5, rtol=0)


def test_recipe_settings_are_the_pages_choices() -> None:
    assert recipes.settings_of("real_model") == ["sentence", "layer", "head"]


# --- charts -----------------------------------------------------------------------------------


def test_grid_frame_drops_faint_cells_marks_the_chosen_head_and_spec_validates(lesson) -> None:
    frame = frames_rm.grid_frame(lesson, 2, 7)
    assert frame["weight"].min() >= frames_rm.GRID_FLOOR
    kept = int((lesson.attentions >= frames_rm.GRID_FLOOR).sum())
    assert len(frame) == kept < lesson.attentions.numel()
    chosen = frame[frame["chosen"]]
    assert set(zip(chosen["layer"], chosen["head"], strict=True)) == {(2, 7)}
    assert len(chosen) == int((lesson.head(2, 7) >= frames_rm.GRID_FLOOR).sum())
    row = frame.iloc[0]
    assert row["query"] == lesson.labels[row["query_index"]] and row["key"] == lesson.labels[row["key_index"]]
    spec = validated_spec(charts_rm.grid(frame, len(lesson.tokens), lesson.num_layers, lesson.num_heads))
    assert spec["facet"]["row"]["field"] == "layer" and spec["facet"]["column"]["field"] == "head"
    params = spec.get("params", []) + spec["spec"].get("params", [])  # Altair hoists them
    assert [p["name"] for p in params] == [charts_rm.HEAD_SELECTION]
    assert params[0]["select"]["fields"] == ["layer", "head"]


def test_one_layers_panels_hold_that_layers_heads(lesson) -> None:
    # What a phone shows larger than the grid's squares (review #17): layer 3's twelve heads, each its weights.
    frame = frames_rm.layer_frame(lesson, 3)
    tokens = len(lesson.tokens)
    assert len(frame) == lesson.num_heads * tokens * tokens
    assert sorted(frame["head"].unique()) == list(range(lesson.num_heads))
    five = frame[frame["head"] == 5].sort_values(["row_index", "col_index"])
    expected = lesson.attentions[3, 5].double().flatten().numpy()
    assert five["value"].to_numpy() == pytest.approx(expected)
    assert list(five["row"].astype(str)[::tokens]) == list(lesson.labels)
    spec = validated_spec(charts_heads.head_panels(frame, "The 12 heads of layer 3", columns=3))
    assert spec["facet"]["field"] == "head" and spec["columns"] == 3


def test_lines_and_measure_map_specs_validate(lesson) -> None:
    lines = frames_rm.lines_frame(lesson, 0, 2)
    assert lines["weight"].min() >= 0.05
    tokens = frames_rm.tokens_frame(lesson)
    spec = validated_spec(charts_rm.lines(lines, tokens, "head"))
    assert len(spec["layer"]) == 4  # lines, click targets, labels left and right (validated above)
    table = frames_rm.measure_frame(lesson, lesson_rm.Measure.PREVIOUS, 0, 2)
    assert list(table.columns) == ["layer", "head", "value", "chosen"] and len(table) == 72
    assert table[table["chosen"]][["layer", "head"]].values.tolist() == [[0, 2]]
    expected = lesson.measures.previous[3, 5]
    assert table[(table["layer"] == 3) & (table["head"] == 5)]["value"].item() == pytest.approx(float(expected))
    head = frames_rm.head_frame(lesson, 0, 2)
    shared = matrix_frame(lesson.head(0, 2), lesson.labels, lesson.labels)  # core.lessons' frame, the same
    as_text = {"row": object, "col": object}  # matrix_frame's labels are categorical (compact in the cache)
    pd.testing.assert_frame_equal(head.astype(as_text), shared.astype(as_text), check_dtype=False)
    # The chosen head is drawn by the lab's one heatmap path (core.charts.heatmap), on the fixed 0-1 weight scale.
    spec = heatmaps.heatmap(head, "head", value_title="weight").spec()
    assert spec["datasets"][heatmaps.HEATMAP_DATA].num_rows == len(head)
    spec = validated_spec(charts_rm.measure(table, "previous", "score"))
    assert spec["layer"][0]["encoding"]["x"]["field"] == "head"


def test_head_click_callback_sets_layer_and_head(monkeypatch: pytest.MonkeyPatch) -> None:
    from ui import draw

    state = {"grid": {"selection": {charts_rm.HEAD_SELECTION: [{"layer": 4, "head": 9}]}}}
    monkeypatch.setattr(draw.st, "session_state", state)
    draw.select_head_from_chart("grid", charts_rm.HEAD_SELECTION, "layer", "head")
    assert (state["layer"], state["head"]) == (4, 9)
    state["grid"] = {"selection": {charts_rm.HEAD_SELECTION: []}}  # a click on empty space: keep the choice
    draw.select_head_from_chart("grid", charts_rm.HEAD_SELECTION, "layer", "head")
    assert (state["layer"], state["head"]) == (4, 9)


# --- the page ---------------------------------------------------------------------------------


def captions(at: AppTest) -> str:
    return "\n".join(c.value for c in at.caption)


def test_page_renders_the_default_example_with_core_numbers(navigation_not_pages_directory, lesson) -> None:
    at = answered_page("real_model")  # the heads that answer its question appear once answered
    assert at.title[0].value == "6 · Inside a real model"
    assert not at.error
    assert at.sidebar.slider(key="d_in").disabled  # the frame's sidebar ran, greyed out here
    previous = next(f for f in lesson.findings if f.pattern is lesson_rm.Pattern.PREVIOUS)
    best = previous.strongest
    assert f"layer {best.layer}, head {best.head} ({best.value:.2f})" in captions(at)
    # First visit opens the head in which 'it' stands out most by its weight on 'dog'.
    pair = lesson_rm.pair_finding(lesson, "it", "dog")
    assert pair is not None
    # The lesson's headline finding, in body text: in grey caption type it read as a footnote (the s24 review).
    headline = f"sends {pair.head.value:.0%} of 'it' to 'dog' while its other queries send 'dog' {pair.others:.0%}"
    assert headline in "\n".join(m.value for m in at.markdown) and headline not in captions(at)
    opened = (at.selectbox(key="real_layer").value, at.selectbox(key="real_head").value)
    assert opened == (pair.head.layer, pair.head.head)
    at.selectbox(key="real_layer").set_value(0).run()
    at.button[0].click().run()
    assert (at.selectbox(key="real_layer").value, at.selectbox(key="real_head").value) == opened
    assert any("  ".join(lesson.tokens) in t.value for t in at.text)


def test_page_with_own_sentence_and_a_chosen_head(navigation_not_pages_directory, encoder: rm.RealModel) -> None:
    at = answered_page("real_model")
    at.selectbox(key="real_example").set_value(lesson_rm.OWN_SENTENCE).run()
    at.text_input(key="real_sentence").input("Paris is the capital of France.").run()
    at.selectbox(key="real_layer").set_value(4).run()
    at.selectbox(key="real_head").set_value(9).run()
    answered(at)  # a new sentence asks its own question
    assert not at.exception and not at.error
    own = lesson_rm.real_model_lesson(encoder, "Paris is the capital of France.")
    view = frames_rm.causal_view(own, 4, 9)
    assert any(m.value == f"{view.mean_future_share:.0%}" for m in at.metric)
    code = next(c.value for c in at.code)
    assert 'sentence = "Paris is the capital of France."' in code and "layer = 4" in code and "head = 9" in code


def test_over_cap_sentence_shows_the_message_not_an_exception(navigation_not_pages_directory) -> None:
    at = answered_page("real_model")
    at.selectbox(key="real_example").set_value(lesson_rm.OWN_SENTENCE).run()
    at.text_input(key="real_sentence").input("extraordinarily " * 20).run()
    assert not at.exception
    assert any("the limit is 64" in e.value and "first example" in e.value for e in at.error)
    assert at.title  # the rest of the page still renders, with the first example
    assert any("chased" in t.value for t in at.text)


@pytest.mark.parametrize(
    "typed",
    ["**bold** <b>x</b> [link](http://example.com) `code`", "😀😀😀", "x" * 400, "{{7*7}} $x^2$", "\u202eevil"],
)
def test_hostile_own_sentences_are_shown_as_plain_text(navigation_not_pages_directory, typed: str) -> None:
    at = answered_page("real_model")
    at.selectbox(key="real_example").set_value(lesson_rm.OWN_SENTENCE).run()
    at.text_input(key="real_sentence").input(typed).run()
    assert not at.exception, [e.value for e in at.exception]
    assert all(not m.proto.allow_html for m in at.markdown)
    shown = [m.value for m in at.markdown] + [c.value for c in at.caption] + [e.value for e in at.error]
    assert not any(typed in text for text in shown)  # user text never goes through markdown
    assert at.text, "the word pieces are listed as plain text"


def test_the_app_path_never_imports_the_reference_libraries() -> None:
    """transformers and sentence-transformers are test references only (memory, start-up time)."""
    code = (
        "import sys\n"
        "from core.charts import real_model as charts_real_model\n"
        "from core.lessons import real_model\n"
        "from core.models import minilm\n"
        "from ui import cache, draw, frame, widgets\n"
        "real_model.real_model_lesson(minilm.load_model(), 'A short sentence.')\n"
        "print(sorted(m for m in ('transformers', 'sentence_transformers') if m in sys.modules))\n"
    )
    root = Path(APP).parent
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "[]"


def test_sessions_in_threads_share_one_model_safely(encoder: rm.RealModel) -> None:
    """Sessions run in threads of one process and share the cached model."""
    sentences = [example.sentence for example in lesson_rm.EXAMPLES] * 3
    alone = [rm.encode(encoder, [s]).attentions for s in sentences]
    with ThreadPoolExecutor(max_workers=4) as pool:
        together = list(pool.map(lambda s: rm.encode(encoder, [s]).attentions, sentences))
    for a, b in zip(alone, together, strict=True):  # no cross-talk (float noise allowed: threads split GEMMs)
        torch.testing.assert_close(a, b, atol=1e-5, rtol=0)


def test_page_says_so_when_the_model_files_are_broken(
    navigation_not_pages_directory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ui import cache

    monkeypatch.setattr(rm, "default_folder", lambda: tmp_path)  # an empty folder: no files at all
    cache.real_model.clear()
    try:
        at = answered_page("real_model")
        assert any("could not be loaded" in e.value for e in at.error)
        assert any("config.json is missing" in t.value for t in at.text)
    finally:
        cache.real_model.clear()  # the next test loads the real files again


def test_word_distance_ignores_weight_parked_on_cls_and_sep() -> None:
    # Issue 18: the farthest heads by mean attention distance were the heads parking on [CLS]/[SEP]. A head
    # that parks 0.9 on [CLS] and reads the previous word with the rest looks one piece away among the words.
    num_tokens = 8
    parked = torch.zeros(num_tokens, num_tokens)
    parked[:, 0] = 0.9
    for i in range(1, num_tokens):
        parked[i, i - 1] += 0.1
    parked[0, 0] = 1.0
    measures = lesson_rm.head_measures(parked)
    assert float(measures.distance) > 2.5  # all keys: the parked weight counts as far
    # Word queries 2..6 put all their word weight on word i-1 (distance 1); query 1's previous piece is
    # [CLS], so it has no weight on any word and adds 0. Six word queries: 5 / 6.
    assert float(measures.word_distance) == pytest.approx(5 / 6, abs=1e-6)


@pytest.mark.parametrize("example", lesson_rm.EXAMPLES, ids=lambda e: e.key)
def test_distance_caption_holds_on_the_page_numbers(encoder: rm.RealModel, example: lesson_rm.ExampleSentence) -> None:
    lesson = lesson_rm.real_model_lesson(encoder, example.sentence)
    measures = lesson.measures
    parking = (measures.cls + measures.sep) >= 0.5  # (L, h)
    by_all = measures.distance.flatten().argsort(descending=True)[:6]
    by_words = measures.word_distance.flatten().argsort(descending=True)[:6]
    reading = lesson_rm.distance_reading(lesson)
    # The finding, on each example: the six farthest heads over all keys are all parking heads.
    assert reading.parking_all_keys == int(parking.flatten()[by_all].sum()) == 6
    assert reading.parking_words_only == int(parking.flatten()[by_words].sum()) < 6
    caption = lesson_rm.distance_caption(lesson)
    assert f"{reading.parking_all_keys} of the 6" in caption and f"{reading.parking_words_only} of 6" in caption
    far = reading.farthest_words_only
    assert float(measures.word_distance[far.layer, far.head]) == pytest.approx(float(measures.word_distance.max()))


def test_page_explains_the_two_distances_with_the_sentences_numbers(navigation_not_pages_directory, lesson) -> None:
    at = answered_page("real_model")
    assert lesson_rm.distance_caption(lesson) not in captions(at)  # only beside a distance map
    at.selectbox(key="real_measure").set_value(lesson_rm.Measure.WORD_DISTANCE).run()
    assert not at.exception and not at.error
    assert lesson_rm.distance_caption(lesson) in captions(at)
    assert "Words only" in "\n".join(m.value for m in at.markdown)


def test_the_pronoun_example_claims_no_coreference_its_head_does_not_do(encoder: rm.RealModel, lesson) -> None:
    # Issue 18: the example said the head sends 'it' to "the noun it stands for", but layer 5, head 11
    # sends 'it' to 'dog' even when 'it' is the ball. The page now tests the head on that second sentence.
    example = lesson_rm.EXAMPLES[0]
    assert "stands for?" not in example.look_for and example.contrast is not None
    contrast = lesson_rm.real_model_lesson(encoder, example.contrast.sentence)
    reading = lesson_rm.contrast_reading(lesson, contrast, example)
    assert reading is not None
    it, dog, ball = (contrast.labels.index(p) for p in ("it", "dog", "ball"))
    head = contrast.attentions[reading.head.layer, reading.head.head]  # (T, T)
    assert reading.contrast_first == pytest.approx(float(head[it, dog]))
    assert reading.contrast_second == pytest.approx(float(head[it, ball]))
    assert reading.follows_meaning == (float(head[it, ball]) > float(head[it, dog]))
    caption = lesson_rm.contrast_caption(reading, example)
    if reading.follows_meaning:
        assert "moves to 'ball'" in caption
    else:  # what the head measurably does today (5-11: 0.62 to 'dog', 0.10 to 'ball')
        assert "still favours 'dog'" in caption and "does not show which noun" in caption
    # The head named as following the meaning does favour the right noun in both sentences.
    best = reading.best_follower
    first = lesson.attentions[best.layer, best.head, lesson.labels.index("it")]  # (T,)
    second = contrast.attentions[best.layer, best.head, it]  # (T,)
    it_dog_first = float(first[lesson.labels.index("dog")] - first[lesson.labels.index("ball")])
    it_ball_second = float(second[ball] - second[dog])
    assert best.value == pytest.approx(min(it_dog_first, it_ball_second))
    if best.value > 0:
        assert f"layer {best.layer}, head {best.head} follows the meaning best" in caption


def test_page_tests_the_pronoun_head_on_the_contrast_sentence(
    navigation_not_pages_directory, encoder: rm.RealModel, lesson
) -> None:
    at = answered_page("real_model")
    example = lesson_rm.EXAMPLES[0]
    contrast = lesson_rm.real_model_lesson(encoder, example.contrast.sentence)
    reading = lesson_rm.contrast_reading(lesson, contrast, example)
    assert lesson_rm.contrast_caption(reading, example) in captions(at)


def test_a_finding_counts_its_heads_in_words() -> None:
    # The fourth review read "1 head(s) reach" on lesson 6.
    from core.attention.head_measures import Finding, HeadScore, Pattern
    from core.lessons.real_model import described

    one = HeadScore(0, 2, 0.97)
    assert described(Finding(Pattern.PREVIOUS, 0.5, (one,), one)).startswith("In this sentence 1 head reaches 0.50")
    two = Finding(Pattern.PREVIOUS, 0.5, (one, HeadScore(1, 3, 0.6)), one)
    assert described(two).startswith("In this sentence 2 heads reach 0.50") and "(s)" not in described(two)
    # The fifth review: "0-2 (1.00)" beside the verdict's "layer 0, head 2", two notations for one head.
    assert described(two) == "In this sentence 2 heads reach 0.50: layer 0, head 2 (0.97); layer 1, head 3 (0.60)."


@pytest.mark.parametrize(
    ("sentence", "answer"),
    [(lesson_rm.EXAMPLES[0].sentence, "exactly one"), ("Hi!", "six or more"), ("the the the the the the", None)],
)
def test_the_previous_piece_question_counts_the_heads_over_half_and_its_verdict_names_them(
    encoder: rm.RealModel, sentence: str, answer: str | None
) -> None:
    # Reviews s23 and s24: "which of these three heads…" was a lottery (distractors at 0.08 and 0.01), then, with
    # the three heatmaps beside it, a perfect stripe answered it. It now asks for a count, which varies by sentence.
    lesson = lesson_rm.real_model_lesson(encoder, sentence)
    scores = {(layer, head): float(lesson.measures.previous[layer, head]) for layer in range(6) for head in range(12)}
    over = sorted((h for h in scores if scores[h] > 0.5), key=scores.__getitem__, reverse=True)
    question = lesson_rm.previous_token_question(lesson)
    assert question.options == lesson_rm.COUNT_OPTIONS
    assert question.answer == lesson_rm.count_option(len(over))
    if answer is not None:
        assert question.options[question.answer] == answer
    for layer, head in over[:5]:
        assert f"layer {layer}, head {head} ({scores[layer, head]:.2f})" in question.explanation
    below = max((h for h in scores if h not in over), key=scores.__getitem__)
    assert f"The highest under that line, layer {below[0]}, head {below[1]}, puts" in question.explanation
    assert question.explanation.startswith(f"{len(over)} of the 72 heads" if over else "None of the 72 heads")
    # The score is a mean over the queries: "each query's weight" said every query passed the line (s29 review).
    assert "on average over the queries" in question.question and "each query's" not in question.question
    assert "weight, on average, on the piece just before it" in question.explanation


def test_the_previous_piece_verdict_holds_when_every_head_is_over_the_line() -> None:
    # It read ranked[len(over)], an IndexError had all 72 heads been over half (the s24 note).
    lesson = types.SimpleNamespace(
        num_layers=6,
        num_heads=12,
        measures=types.SimpleNamespace(
            previous=torch.linspace(0.6, 0.95, 72).reshape(6, 12)  # (L, h): every head over 0.5
        ),
    )
    question = lesson_rm.previous_token_question(lesson)  # type: ignore[arg-type]
    assert question.options[question.answer] == "six or more"
    assert "72 of the 72 heads put" in question.explanation and "Every head is over that line;" in question.explanation
    assert "highest under" not in question.explanation


def test_the_count_options_cover_every_count() -> None:
    assert [lesson_rm.count_option(n) for n in (0, 1, 2, 5, 6, 72)] == [0, 1, 2, 2, 3, 3]


def test_the_verdict_draws_the_three_highest_heads_highest_first(lesson) -> None:
    frame = frames_rm.question_heads_frame(lesson)
    ranked = lesson_rm.ranked_previous_heads(lesson)[:3]
    names = list(dict.fromkeys(frame["head"]))
    assert names == [f"layer {s.layer}, head {s.head}: {s.value:.2f}" for s in ranked]
    assert ranked[0].value >= ranked[1].value >= ranked[2].value
    for name, score in zip(names, ranked, strict=True):
        panel = frame[frame["head"] == name].sort_values(["row_index", "col_index"])
        expected = lesson.head(score.layer, score.head).double().flatten().numpy()
        assert panel["value"].to_numpy() == pytest.approx(expected)
    spec = validated_spec(charts_heads.head_panels(frame, "three heads"))
    assert spec["facet"]["field"] == "head"
