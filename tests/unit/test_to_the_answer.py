"""Lesson 11 (from attention to the answer) on the app's own model: SmolLM2-135M in its 4-bit blocks.

The attribution path dequantizes each layer's output matrix on the fly (smollm2.dequantized), so the parts
add up to the lesson's own logit exactly, as the float32 tests (test_attribution.py) check there.
"""

from __future__ import annotations

import dataclasses
import pickle

import numpy as np
import pytest
import torch

from core import recipes
from core.lessons import to_the_answer as lesson11
from core.models import attribution as at
from core.models import patching as pt
from core.models import smollm2

PROMPTS = (
    lesson11.DEFAULT_TEXT,
    "When Tom and James went to the park, James gave a ball to",
    "After Sarah and Emma arrived at the party, Emma handed a gift to",
    "Alice met Bob. Alice gave the book to",
    "Then, Anna and David had a long argument, and afterwards David said to",
)


@pytest.mark.slow
@pytest.mark.parametrize("text", PROMPTS)
def test_the_parts_add_up_to_the_logit_on_the_4_bit_model(decoder, text) -> None:
    assert decoder.precision is smollm2.Precision.Q4_BLOCKS
    for explain in (lesson11.Explain.CONTRAST, lesson11.Explain.ANSWER):
        lesson = lesson11.answer_lesson(decoder, text, explain, "")
        assert lesson.summed == pytest.approx(lesson.logit, abs=1e-3), (text, explain)
        assert lesson.shares_sum == pytest.approx(1.0, abs=1e-4)
        assert lesson.parts_error < 1e-5 * lesson.residual_size
    # the decomposition's answer is the 4-bit forward's answer
    forward = smollm2.forward(decoder, smollm2.encode(decoder, text)).logits[-1]
    assert smollm2.token_texts(decoder, [int(forward.argmax())])[0] == lesson.answer


@pytest.mark.slow
def test_the_opening_prompt_flips_and_its_numbers_are_said(decoder) -> None:
    lesson = lesson11.answer_lesson(decoder, lesson11.DEFAULT_TEXT, lesson11.Explain.CONTRAST, "")
    assert lesson.answer == " Mary" and lesson.explained == "' Mary' - ' John'"
    assert lesson.corrupted == "When Mary and John went to the store, Mary gave a drink to"
    question = lesson11.lens_question(lesson)
    assert question.explanation.endswith(lesson.first_on_top_sentence())
    # The question asks the rank two thirds up (L19 MLP), answered from the lens's ranks: ' Mary' is 966th there.
    point = lesson11.lens_question_point(lesson)
    assert lesson.lens_labels[point] == "L19 MLP" and point == 39
    rank = int(lesson.answer_ranks[point])
    low, high = lesson11.RANK_BANDS[question.answer]
    assert low <= rank and (high is None or rank <= high) and f"ranks {rank:,} of 49,152" in question.explanation
    assert question.options[question.answer] == "101 to 1,000"
    assert question.options[-1] == "lower than 1,000th"  # "below 1,000" read as the opposite (the s25 review)
    assert f"{lesson.summed:.4f}" in lesson.sum_sentence()
    layer, head, value = lesson.top_heads(1)[0]
    assert value == pytest.approx(float(lesson.heads.max()))
    assert f"layer {layer}, head {head}" in lesson11.part_question(lesson).explanation
    with torch.inference_mode():
        attribution = lesson11.patching_lesson(decoder, lesson.text, lesson.corrupted, pt.PatchingMethod.EXACT)
    assert attribution.clean_difference > 0 > attribution.corrupted_difference and not attribution.weak
    # One quantity, one value on the page: patching traced both prompts as a batch and showed +6.09 under
    # attribution's 6.1032 (the s20 review); each prompt's own trace gives attribution's number exactly.
    assert attribution.clean_difference == pytest.approx(lesson.logit, abs=1e-6)
    assert len(pickle.dumps(lesson)) < 2**20 and len(pickle.dumps(attribution)) < 2**14  # the cache's budget


@pytest.mark.slow
def test_a_heads_effect_is_split_into_the_two_logits_and_its_mechanism_named_from_them(decoder) -> None:
    lesson = lesson11.answer_lesson(decoder, lesson11.DEFAULT_TEXT, lesson11.Explain.CONTRAST, "")
    assert lesson.target_heads is not None and lesson.minus_heads is not None
    np.testing.assert_allclose(lesson.target_heads - lesson.minus_heads, lesson.heads, atol=1e-4)
    # Each split is that token's own attribution: the same numbers as explaining the token alone.
    alone = lesson11.answer_lesson(decoder, lesson11.DEFAULT_TEXT, lesson11.Explain.TOKEN, " John")
    np.testing.assert_allclose(lesson.minus_heads, alone.heads, atol=1e-4)
    # The top head reads the repeated name from the last position and lowers it (measured: 74% on ' John', -2.51);
    # a head that reads ' Mary' and raises her copies the answer in (layer 23 head 0: +1.15).
    layer, head, _ = lesson.top_heads(1)[0]
    sentence = lesson.head_sentence(layer, head)
    read = lesson.tokens[int(lesson.attentions[layer, head, -1].argmax())]
    assert read == " John" and lesson.minus_heads[layer, head] < -lesson11.MECHANISM_MIN
    assert "It pushes down the very token it reads, ' John'" in sentence
    assert f"' John' by {float(lesson.minus_heads[layer, head]):+.2f}" in sentence
    copies = [
        (lay, hd)
        for lay in range(lesson.num_layers)
        for hd in range(lesson.heads.shape[1])
        if "copies that token into the answer" in lesson.head_sentence(lay, hd)
    ]
    assert (23, 0) in copies
    for lay, hd in copies:  # each one read the answer and raised it by at least the threshold
        assert lesson.target_heads[lay, hd] >= lesson11.MECHANISM_MIN
    # Without a contrast there is nothing to split and no mechanism is named.
    answer = lesson11.answer_lesson(decoder, lesson11.DEFAULT_TEXT, lesson11.Explain.ANSWER, "")
    assert answer.target_heads is None and "very token" not in answer.head_sentence(layer, head)


@pytest.mark.slow
def test_patching_everything_restores_all_and_nothing_none(decoder) -> None:
    clean, corrupted = PROMPTS[1], "When Tom and James went to the park, Tom gave a ball to"
    runs = pt.prepare_runs(decoder, smollm2.encode(decoder, clean), smollm2.encode(decoder, corrupted), by_heads=True)
    every = pt.every_part(decoder.config)
    assert float(runs.share(torch.tensor(pt.patched_difference(decoder, runs, every)))) == pytest.approx(1.0, abs=1e-4)
    assert float(runs.share(torch.tensor(pt.patched_difference(decoder, runs, frozenset())))) == pytest.approx(
        0.0, abs=1e-4
    )
    estimate = lesson11.patching_lesson(decoder, clean, corrupted, pt.PatchingMethod.ATTRIBUTION)  # needs autograd
    assert np.isfinite(estimate.restored).all() and estimate.restored.shape == (30, 9)


def test_bad_input_says_why(decoder) -> None:
    with pytest.raises(smollm2.TextError, match="same number of tokens"):
        lesson11.patching_lesson(decoder, "Alice met Bob.", "Alice met Bob and Carol.", pt.PatchingMethod.ATTRIBUTION)
    with pytest.raises(smollm2.TextError, match="not one"):
        lesson11.one_token(decoder, " Maryxyzzy")
    with pytest.raises(smollm2.TextError):
        lesson11.answer_lesson(decoder, "", lesson11.Explain.ANSWER, "")
    with pytest.raises(smollm2.TextError):
        lesson11.answer_lesson(decoder, "word " * 70, lesson11.Explain.ANSWER, "")


@pytest.mark.slow
def test_the_code_box_reproduces_the_attribution(decoder) -> None:
    lesson = lesson11.answer_lesson(decoder, lesson11.DEFAULT_TEXT, lesson11.Explain.CONTRAST, "")
    namespace = recipes.run(lesson11.code(lesson))
    # float32 there, the 4-bit blocks dequantized to bfloat16 here: the caption's two figures, measured (the s25
    # review: the caption said "6.08 here against 6.12 there" where the page read 6.1032).
    assert f"{namespace['logit']:.2f}" == f"{lesson11.OPENING_BOX_LOGIT:.2f}"
    assert f"{lesson.logit:.2f}" == f"{lesson11.OPENING_PAGE_LOGIT:.2f}"
    note = lesson11.code_note(lesson)
    assert f"the box prints a logit difference of {namespace['logit']:.2f} where the page reads {lesson.logit:.2f}" in (
        note
    )
    assert namespace["logit"] == pytest.approx(lesson.logit, abs=0.2)
    # The s30 review: "differ by a few hundredths" held on the opening prompt only (another read 6.21 against 6.09).
    assert "hundredths" not in note and "depends on the prompt" in note
    assert namespace["summed"] == pytest.approx(namespace["logit"], abs=1e-3)
    top = namespace["dla"].flatten().topk(2).indices.tolist()
    assert [divmod(i, 9) for i in top] == [(layer, head) for layer, head, _ in lesson.top_heads(2)]


def test_the_patterns_are_the_traced_pass_s_own_and_close_to_the_forward_s(decoder) -> None:
    ids = smollm2.encode(decoder, lesson11.DEFAULT_TEXT)
    with torch.inference_mode():
        traced = at.trace(decoder, ids, by_heads=True)
        patterns = lesson11.traced_patterns(decoder, traced)
        forward = smollm2.forward(decoder, ids, return_attentions=True).attentions
    assert forward is not None and patterns.shape == forward.shape
    assert torch.allclose(patterns.sum(-1), torch.ones(patterns.shape[:-1]), atol=1e-5)
    assert (patterns.triu(1) == 0).all()  # causal
    assert (patterns - forward.float()).abs().max() < 0.05  # the forward rounds attention outputs to bfloat16


def test_the_residual_chart_names_every_bar() -> None:
    """An independent review found 6 of the 12 bars unnamed: on a chart this short Vega hid every other label."""
    import pandas as pd

    from core.charts import to_the_answer as answer_charts

    frame = pd.DataFrame({"part": [f"L{i} MLP" for i in range(12)], "share": [0.05] * 12, "rank": list(range(12))})
    spec = answer_charts.parts(frame).spec()
    assert spec["encoding"]["y"]["axis"]["labelOverlap"] is False
    assert spec["height"] == {"step": answer_charts.PARTS_BAR_PX} and answer_charts.PARTS_BAR_PX >= 20


@pytest.mark.slow
def test_a_token_far_down_the_list_adds_up_to_its_own_logit(decoder) -> None:
    """An independent review: for " Maryland" the parts added up to -5.9909 against a shown logit of -6.0000 (the
    bfloat16 unembedding keeps only each row's 64 largest logits exact). The logit is now the float64 product
    of the final normalised state and the token's row, as the top logits are refined."""
    text = lesson11.DEFAULT_TEXT
    lesson = lesson11.answer_lesson(decoder, text, lesson11.Explain.TOKEN, " Maryland")
    ids = smollm2.encode(decoder, text)
    residual = at.trace(decoder, ids, by_heads=True).points[-1, -1]  # (D,): after the last layer
    normed = smollm2.rms_norm(residual, decoder.weights.final_norm, decoder.config.rms_norm_eps)
    token = lesson11.one_token(decoder, " Maryland")
    expected = float(normed.double() @ decoder.weights.embeddings[token].double())
    assert lesson.logit == pytest.approx(expected, abs=1e-4)
    assert lesson.summed == pytest.approx(lesson.logit, abs=1e-4)


def test_the_lens_sentence_says_one_probability_when_the_answer_tops_only_the_output() -> None:
    """The review read "with probability 92.2%; after the last layer it has 92.2%" on every prompt: on SmolLM2
    the answer first comes out on top at the last point, which is the output itself."""
    from types import SimpleNamespace

    labels = ("L0 attn", "L0 MLP", "L1 attn", "L1 MLP")
    last = SimpleNamespace(
        answer=" Mary", lens_labels=labels, answer_probabilities=(0.0, 0.1, 0.2, 0.922), first_on_top=3
    )
    said = lesson11.AnswerLesson.first_on_top_sentence(last)  # type: ignore[arg-type]
    assert said.count("92.2%") == 1 and "L1 MLP, the last point of 4" in said
    earlier = SimpleNamespace(**{**vars(last), "first_on_top": 2})
    said = lesson11.AnswerLesson.first_on_top_sentence(earlier)  # type: ignore[arg-type]
    assert "at L1 attn (point 3 of 4), with probability 20.0%" in said and "it has 92.2%" in said


def _fake_lens(**changes):
    """A stand-in lesson with just the lens's fields: two layers, four points (the frames read nothing else)."""
    from types import SimpleNamespace

    fields = dict(
        answer=" Mary",
        lens_labels=("L0 attn", "L0 MLP", "L1 attn", "L1 MLP"),
        lens_tokens=(("\xa0", " the", "\n"),) * 3 + ((" Mary", "\u200b", " John"),),
        lens_probabilities=np.full((4, 3), 0.1),
        answer_probabilities=np.array([0.0, 0.01, 0.2, 0.9]),
        answer_ranks=np.array([4000, 120, 9, 1]),
        first_on_top=3,
    )
    return SimpleNamespace(**{**fields, **changes})


def test_the_lens_names_invisible_tokens_in_its_table_and_chart() -> None:
    """The review saw the lens table write a no-break space as the escape text '\\xa0'. Table and chart show each
    token as lesson 10 does (quoted), with an invisible character named."""
    from core.lessons import to_the_answer_frames as frames

    lesson = _fake_lens()
    table = frames.lens_table(lesson)  # type: ignore[arg-type]
    chart = frames.lens_frame(lesson)  # type: ignore[arg-type]
    shown = " ".join(table.astype(str).to_numpy().flatten()) + " ".join(chart["top"])
    assert "'⟨no-break space⟩'" in shown and "'⟨zero width space⟩'" in shown
    assert "\\xa0" not in shown and "\xa0" not in shown and "\\u200b" not in shown
    assert "' Mary'" in shown and "'\\n'" in shown  # ordinary tokens as lesson 10 writes them


def test_the_answers_rank_is_1_at_the_output_and_matches_a_direct_sort_of_the_lens_logits(decoder) -> None:
    """The lens is flat on SmolLM2 (the answer tops only the output), so the page shows the answer's rank at every
    point: 1 = top, from the same lens logits as the probabilities."""
    text = lesson11.DEFAULT_TEXT
    lesson = lesson11.answer_lesson(decoder, text, lesson11.Explain.ANSWER, "")
    with torch.inference_mode():
        logits = at.lens_logits(decoder, at.trace(decoder, smollm2.encode(decoder, text), by_heads=True))  # (P, V)
    answer = int(logits[-1].argmax())  # the model's own top token at the last point, its output
    assert smollm2.token_texts(decoder, [answer])[0] == lesson.answer and int(lesson.answer_ranks[-1]) == 1
    order = logits.argsort(dim=-1, descending=True)  # (P, V): token ids, largest logit first
    sorted_at = (order == answer).int().argmax(dim=-1) + 1  # (P,): 1 + the answer's place in that order
    # Where the answer ties other tokens, the sort may put either first; the rank counts ties in its favour.
    tied = (logits == logits[:, answer : answer + 1]).sum(dim=-1) - 1  # (P,): tokens with the answer's logit
    ranks = torch.as_tensor(lesson.answer_ranks)
    assert lesson.answer_ranks.shape == (2 * lesson.num_layers,)
    assert bool(((ranks <= sorted_at) & (sorted_at <= ranks + tied)).all()), (ranks, sorted_at)
    assert int(ranks.max()) > 10  # not a constant: early points rank the answer far down


def test_the_rank_sentence_says_the_pages_own_numbers() -> None:
    lesson = _fake_lens(answer_ranks=np.array([4000, 60, 9, 1]))
    said = lesson11.AnswerLesson.rank_sentence(lesson)  # type: ignore[arg-type]
    assert said == (
        "Rank of ' Mary' among all tokens (1 = top): 4,000 at L0 attn; it first enters the top 100 at L0 MLP "
        "(rank 60), first enters the top 10 at L1 attn (rank 9), and comes out on top at L1 MLP."
    )
    early = _fake_lens(answer_ranks=np.array([50, 120, 9, 1]))
    said = lesson11.AnswerLesson.rank_sentence(early)  # type: ignore[arg-type]
    assert "is in the top 100 from the first point, first enters the top 10 at L1 attn (rank 9)" in said
    # The s29b review: "first enters the top 100 at L29 MLP (rank 1), first enters the top 10 at L29 MLP (rank 1),
    # and comes out on top at L29 MLP". One point is named once.
    late = _fake_lens(answer_ranks=np.array([4000, 900, 300, 1]))
    said = lesson11.AnswerLesson.rank_sentence(late)  # type: ignore[arg-type]
    assert said.endswith("it enters the top 100 and the top 10 and comes out on top at once, at L1 MLP.")
    assert said.count("L1 MLP") == 1


def test_the_rank_chart_has_rank_1_on_top_of_a_log_axis() -> None:
    from core.charts import to_the_answer as answer_charts
    from core.lessons import to_the_answer_frames as frames

    spec = answer_charts.lens_rank(frames.lens_frame(_fake_lens())).spec()  # type: ignore[arg-type]
    y = spec["encoding"]["y"]
    assert y["field"] == "rank" and y["scale"]["type"] == "log" and y["scale"]["reverse"] is True
    assert spec["datasets"][answer_charts.LENS_DATA].column("rank").to_pylist() == [4000, 120, 9, 1]
    # Drawn, its axis labels every power of ten and nothing between (Vega's culling had left "1, 20, 300").
    import re

    from core.charts import export

    svg = export.to_svg(spec).decode()
    labels = re.findall(r"<text[^>]*>([^<]+)</text>", svg)
    assert {"1", "10", "100", "1,000"} <= set(labels) and not {"20", "300", "2", "5"} & set(labels), labels


def test_the_patching_agreement_reads_its_numbers_from_the_two_maps() -> None:
    """The estimate against exact patching (the s29b review): r, the shared top heads, the head most apart, on maps
    made by hand; the frame names the heads on top of either map; the scatter's spec is valid."""
    from core.charts import to_the_answer as charts
    from core.lessons import to_the_answer_frames as frames
    from core.models.patching import PatchingMethod
    from tests.support import validated_spec

    exact_map = np.zeros((3, 2))
    exact_map[2, 1], exact_map[1, 0], exact_map[0, 1] = 0.6, 0.3, 0.1
    estimate_map = exact_map.copy()
    estimate_map[1, 0], estimate_map[0, 0] = 0.05, 0.2  # one head underestimated, one overestimated

    def made(method: PatchingMethod, restored: np.ndarray) -> lesson11.PatchingLesson:
        return lesson11.PatchingLesson(method, "clean", "corrupted", " B", " A", 4.0, -4.0, restored)

    estimate, exact = made(PatchingMethod.ATTRIBUTION, estimate_map), made(PatchingMethod.EXACT, exact_map)
    found = lesson11.patching_agreement(estimate, exact, k=2)
    assert found.r == pytest.approx(np.corrcoef(estimate_map.flatten(), exact_map.flatten())[0, 1])
    assert [(a, b) for a, b, _ in found.top_exact] == [(2, 1), (1, 0)]
    assert [(a, b) for a, b, _ in found.top_estimate] == [(2, 1), (0, 0)]
    assert found.shared == 1 and found.apart == (1, 0, pytest.approx(0.3), pytest.approx(0.05))
    assert "they share 1" in found.sentence() and "layer 1 head 0: 30% exact, 5% estimated" in found.sentence()
    with pytest.raises(ValueError, match="different pairs"):
        lesson11.patching_agreement(estimate, dataclasses.replace(exact, corrupted="other"))
    with pytest.raises(ValueError, match="attribution patching map"):
        lesson11.patching_agreement(exact, estimate)
    frame = frames.agreement_frame(estimate, exact, named=1)
    assert len(frame) == 6 and set(frame.loc[frame["label"] != "", "head"]) == {"L2H1"}
    assert frame.loc[frame["head"] == "L1H0", ["exact", "estimate"]].values.tolist() == [[0.3, 0.05]]
    spec = validated_spec(charts.patching_agreement(frame))
    assert len(spec["layer"]) == 3  # the agreement line, the dots, the names
