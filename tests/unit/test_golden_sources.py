"""Every number the sources print, reproduced to 4 decimals (atol 1e-4 absorbs their rounding)."""

from __future__ import annotations

import pytest
import torch

import core
from tests.conftest import gen

ATOL = 1e-4  # the sources print 4 decimals


def assert_close(actual: torch.Tensor, expected: list | float, atol: float = ATOL) -> None:
    expected_t = torch.as_tensor(expected, dtype=actual.dtype)
    assert torch.allclose(actual.detach().cpu(), expected_t, atol=atol, rtol=0), (
        f"\n got      {actual.detach().cpu()}\n expected {expected_t}"
    )


SA_V1_123 = [
    [0.2996, 0.8053],
    [0.3061, 0.8210],
    [0.3058, 0.8203],
    [0.2948, 0.7939],
    [0.2927, 0.7891],
    [0.2990, 0.8040],
]
SA_V2_789 = [
    [-0.0739, 0.0713],
    [-0.0748, 0.0703],
    [-0.0749, 0.0702],
    [-0.0760, 0.0685],
    [-0.0763, 0.0679],
    [-0.0754, 0.0693],
]
SCORES_001 = [
    [0.9231, 1.3545, 1.3241, 0.7910, 0.4032, 1.1330],
    [1.2705, 1.8524, 1.8111, 1.0795, 0.5577, 1.5440],
    [1.2544, 1.8284, 1.7877, 1.0654, 0.5508, 1.5238],
    [0.6973, 1.0167, 0.9941, 0.5925, 0.3061, 0.8475],
    [0.6114, 0.8819, 0.8626, 0.5121, 0.2707, 0.7307],
    [0.8995, 1.3165, 1.2871, 0.7682, 0.3937, 1.0996],
]


# ---------------------------------------------------------------- the book chapter and the trainable-weights notebook
@pytest.mark.parametrize("use_generator", [False, True], ids=["global-seed", "generator"])
def test_self_attention_v1_seed_123(journey: torch.Tensor, use_generator: bool) -> None:
    if use_generator:
        module = core.SelfAttention_v1(3, 2, generator=gen(123))
    else:
        torch.manual_seed(123)
        module = core.SelfAttention_v1(3, 2)
    assert_close(module.W_query, [[0.2961, 0.5166], [0.2517, 0.6886], [0.0740, 0.8665]])
    trace = module.trace(journey)
    assert_close(trace.queries[1], [0.4306, 1.4551])
    assert_close(trace.scores[1, 1], 1.8524)
    assert_close(trace.scores, SCORES_001)
    assert_close(trace.weights[1], [0.1500, 0.2264, 0.2199, 0.1311, 0.0906, 0.1820])
    assert_close(trace.context[1], [0.3061, 0.8210])
    assert_close(module(journey), SA_V1_123)
    assert trace.keys.shape == trace.values.shape == trace.queries.shape == (6, 2)


@pytest.mark.parametrize("use_generator", [False, True], ids=["global-seed", "generator"])
def test_self_attention_v2_seed_789(journey: torch.Tensor, use_generator: bool) -> None:
    if use_generator:
        module = core.SelfAttention_v2(3, 2, generator=gen(789))
    else:
        torch.manual_seed(789)
        module = core.SelfAttention_v2(3, 2)
    assert_close(module(journey), SA_V2_789)


SEED_000_RENORMALISED = [
    [1.0000, 0, 0, 0, 0, 0],
    [0.5096, 0.4904, 0, 0, 0, 0],
    [0.3406, 0.3289, 0.3305, 0, 0, 0],
    [0.2494, 0.2433, 0.2441, 0.2633, 0, 0],
    [0.1919, 0.1978, 0.1982, 0.2028, 0.2093, 0],
    # the chapter prints 0.1555 in column 3 here: a typo, row 6 has nothing masked
    # and so equals the unmasked row, 0.1565
    [0.1649, 0.1559, 0.1565, 0.1752, 0.1805, 0.1670],
]


def test_seed_000_causal_renormalisation_of_printed_weights() -> None:
    # The chapter renormalised unrounded weights; we only have them to 4 decimals,
    # so one unit of rounding in the 4th place can carry through (e.g. 0.5095 vs 0.5096).
    steps = core.renormalise_rows(core.BOOK_CAUSAL_WEIGHTS, core.causal_mask(6, 6))
    assert_close(steps, SEED_000_RENORMALISED, atol=2e-4)
    assert torch.all(steps.triu(diagonal=1) == 0)


def test_seed_000_minus_infinity_method_matches_printed_weights() -> None:
    # softmax over the printed masked scores / sqrt(2) gives the renormalised weights,
    # and for the unmasked last row it gives the printed full-softmax row.
    weights = torch.softmax(core.BOOK_CAUSAL_MASKED_SCORES / 2**0.5, dim=-1)
    assert_close(weights[:5], SEED_000_RENORMALISED[:5])  # rows 1-5 digit for digit
    assert_close(weights[5], core.BOOK_CAUSAL_WEIGHTS[5].tolist(), atol=1.01e-4)  # 0.1806 vs 0.1805
    assert torch.all(weights.triu(diagonal=1) == 0)


def test_seed_000_batch_shapes(journey: torch.Tensor) -> None:
    batch = torch.stack((journey, journey), dim=0)
    assert batch.shape == (2, 6, 3)
    ca = core.CausalAttention(3, 2, batch.shape[1], 0.0, generator=gen(123))
    assert ca(batch).shape == (2, 6, 2)


def test_seed_001_softmax_times_eight() -> None:
    long, _ = core.softmax_multiplier_sweep(torch.tensor([0.1, -0.2, 0.3, -0.2, 0.5]), [1, 8])
    assert_close(torch.tensor(long[long.multiplier == 1].weight.values), [0.1925, 0.1426, 0.2351, 0.1426, 0.2872])
    assert_close(torch.tensor(long[long.multiplier == 8].weight.values), [0.0326, 0.0030, 0.1615, 0.0030, 0.8000])


def test_seed_001_scaled_variance_is_unscaled_over_d() -> None:
    # The trainable-weights notebook's printouts (5.2447 -> 1.0489, 100.447 -> 1.0045) obey var(x/sqrt d) = var(x)/d.
    table = core.dot_product_variance([5, 100], trials=1000, generator=gen(0))
    ratio = table.unscaled_var / table.scaled_var
    assert ratio.round(6).tolist() == [5.0, 100.0]


# ---------------------------------------------------------------- the attention notebook: the second notebook
def test_seed_004_attention_without_weights(random_words: torch.Tensor) -> None:
    scores_3 = core.dot_scores_for_query(random_words, 2)
    assert_close(scores_3, [0.4921, 0.9745, 0.5957, 0.5074, 0.6152, 0.2050])
    assert_close(core.normalize_by_sum(scores_3), [0.1452, 0.2875, 0.1757, 0.1497, 0.1815, 0.0605])
    naive = core.softmax_naive(scores_3)
    assert_close(naive, [0.1509, 0.2445, 0.1674, 0.1532, 0.1707, 0.1133])
    assert_close(core.softmax_stable(scores_3), naive.tolist())
    weights = torch.softmax(core.dot_scores(random_words), dim=-1)
    assert_close(core.context_vector_loop(random_words, weights, 2), [0.5876, 0.4533, 0.3425])


def test_seed_004_all_tokens(random_words: torch.Tensor) -> None:
    scores = core.dot_scores(random_words)
    assert_close(
        scores,
        [
            [0.9371, 0.7265, 0.4921, 0.5031, 0.3650, 0.3320],
            [0.7265, 1.6709, 0.9745, 0.9920, 0.9532, 0.3470],
            [0.4921, 0.9745, 0.5957, 0.5074, 0.6152, 0.2050],
            [0.5031, 0.9920, 0.5074, 0.9125, 0.3021, 0.2960],
            [0.3650, 0.9532, 0.6152, 0.3021, 0.7590, 0.1270],
            [0.3320, 0.3470, 0.2050, 0.2960, 0.1270, 0.1400],
        ],
    )
    assert_close(core.dot_scores_loop(random_words), scores.tolist())
    weights = torch.softmax(scores, dim=1)
    assert_close(
        weights,
        [
            [0.2376, 0.1925, 0.1522, 0.1539, 0.1341, 0.1297],
            [0.1235, 0.3176, 0.1583, 0.1611, 0.1550, 0.0845],
            [0.1509, 0.2445, 0.1674, 0.1532, 0.1707, 0.1133],
            [0.1477, 0.2408, 0.1483, 0.2224, 0.1208, 0.1201],
            [0.1371, 0.2468, 0.1760, 0.1287, 0.2033, 0.1080],
            [0.1818, 0.1846, 0.1601, 0.1754, 0.1481, 0.1500],
        ],
    )
    context = core.context_vectors(random_words, weights)
    assert_close(context[:3], [[0.5279, 0.4187, 0.4037], [0.6281, 0.5036, 0.3311], [0.5876, 0.4533, 0.3425]])
    assert_close(context[3, :2], [0.5420, 0.4984])  # the notebook's printout stops here


@pytest.mark.parametrize("use_generator", [False, True], ids=["global-seed", "generator"])
def test_seed_004_trainable_randn_weights(random_words: torch.Tensor, use_generator: bool) -> None:
    if use_generator:
        w_q, w_k, w_v = core.draw_qkv_weights(3, 2, distribution="randn", generator=gen(123))
    else:
        torch.manual_seed(123)
        w_q, w_k, w_v = core.draw_qkv_weights(3, 2, distribution="randn")
    trace = core.scaled_dot_product_attention(random_words @ w_q, random_words @ w_k, random_words @ w_v)
    assert_close(trace.queries[2], [-0.4854, 0.0467])
    assert_close(trace.scores[2, 2], 0.1998)
    assert_close(trace.scores[2], [0.0214, 0.2577, 0.1998, -0.0948, 0.3484, -0.0249])
    assert_close(trace.weights[2], [0.1547, 0.1828, 0.1755, 0.1425, 0.1949, 0.1497])
    assert_close(trace.context[2], [0.2618, 0.4683])


def test_seed_004_saturation_example() -> None:
    table = core.saturation_sweep((1.0, 0.0, 0.0), [1.0, 8.0])
    one, eight = table.iloc[0], table.iloc[1]
    assert round(one.max_weight, 3) == 0.576  # softmax([1,0,0]) = [0.576, 0.212, 0.212]
    assert round((1 - one.max_weight) / 2, 4) == 0.2119  # printed truncated as 0.211
    assert eight.max_weight > 0.999  # softmax([8,0,0]) ~ [1, 0, 0]
    assert eight.jacobian_norm < one.jacobian_norm / 100  # gradients all but vanish


# ---------------------------------------------------------------- the self-attention article: the article
def test_seed_003_embedding_and_vocabulary() -> None:
    assert core.life_vocabulary() == {"Life": 0, "dessert": 1, "eat": 2, "first": 3, "is": 4, "short": 5}
    example = core.life_example()
    assert example.embeddings.shape == (6, 16)
    assert_close(example.embeddings[0, :4], [0.3374, -0.1778, -0.3035, -0.5880])
    assert_close(example.embeddings[3, 8:12], [0.8805, 1.5542, 0.6266, -0.1755])
    assert_close(example.embeddings[5, -4:], [-0.6596, -0.7979, 0.1838, 0.2293])
    torch.manual_seed(123)
    reference = torch.nn.Embedding(6, 16)(torch.tensor([0, 4, 5, 2, 1, 3])).detach()
    assert torch.equal(reference, example.embeddings)


def test_seed_003_attention_with_dv_28() -> None:
    x = core.life_example().embeddings
    trace = core.CrossAttention(16, 24, 28, generator=gen(123)).trace(x, x)
    assert trace.keys.shape == (6, 24) and trace.values.shape == (6, 28)
    assert_close(trace.scores[1, 4], 11.1466)
    assert_close(trace.scores[1], [8.5808, -7.6597, 3.2558, 1.0395, 11.1466, -0.4800])
    assert_close(trace.weights[1], [0.2912, 0.0106, 0.0982, 0.0625, 0.4917, 0.0458])
    assert_close(
        trace.output[1],
        [
            -1.5993,
            0.0156,
            1.2670,
            0.0032,
            -0.6460,
            -1.1407,
            -0.4908,
            -1.4632,
            0.4747,
            1.1926,
            0.4506,
            -0.7110,
            0.0602,
            0.7125,
            -0.1628,
            -2.0184,
            0.3838,
            -2.1188,
            -0.8136,
            -1.5694,
            0.7934,
            -0.2911,
            -1.3640,
            -0.2366,
            -0.9564,
            -0.5265,
            0.0624,
            1.7084,
        ],
    )


def test_seed_003_cross_attention_shapes() -> None:
    g = gen(123)
    module = core.CrossAttention(16, 24, 28, generator=g)
    second = core.random_second_sequence(8, 16, generator=g)
    trace = module.trace(core.life_example().embeddings, second)
    assert trace.keys.shape == (8, 24) and trace.values.shape == (8, 28)
    assert trace.weights.shape == (6, 8) and trace.output.shape == (6, 28)


# ---------------------------------------------------------------- the decoder blog: the blog post
def test_seed_002_shift_and_simple_average() -> None:
    example, chunk = core.cats_example()
    assert chunk.inputs == ("cats", "climb", "trees", "during")
    assert chunk.targets == ("climb", "trees", "during", "storms")
    assert chunk.pairs()[1] == (("cats", "climb"), "trees")
    weights = core.SimpleAverageSelfAttention(4).attention_weights(4)
    expected = torch.tensor([[1, 0, 0, 0], [1 / 2, 1 / 2, 0, 0], [1 / 3] * 3 + [0], [1 / 4] * 4])
    assert torch.allclose(weights, expected)
    out = core.SimpleAverageSelfAttention(4)(example.embeddings)
    assert torch.allclose(out[2], example.embeddings[:3].mean(dim=0))


def test_seed_002_single_head_creates_key_query_value_in_that_order() -> None:
    head = core.SingleSelfAttentionHead(4, 3, 2, generator=gen(7))
    g = gen(7)
    first = core.make_linear(3, 2, False, g)
    assert torch.equal(head.key.weight, first.weight)
    trace = head.trace(torch.rand(4, 3, generator=gen(1)))
    assert trace.scale == pytest.approx(2**-0.5)
    assert torch.all(trace.weights.triu(diagonal=1) == 0)


def test_gpt2_parameter_count() -> None:
    assert core.multihead_parameter_count(768, 768) == 2_360_064
    small = core.MultiHeadAttention(8, 8, 4, 0.0, 2, generator=gen(0))
    assert core.count_parameters(small) == core.multihead_parameter_count(8, 8)


# ---------------------------------------------------------------- the sources' numbers, as the lessons show them
NOTEBOOK_SCORES = [
    [0.9371, 0.7265, 0.4921, 0.5031, 0.3650, 0.3320],
    [0.7265, 1.6709, 0.9745, 0.9920, 0.9532, 0.3470],
    [0.4921, 0.9745, 0.5957, 0.5074, 0.6152, 0.2050],
    [0.5031, 0.9920, 0.5074, 0.9125, 0.3021, 0.2960],
    [0.3650, 0.9532, 0.6152, 0.3021, 0.7590, 0.1270],
    [0.3320, 0.3470, 0.2050, 0.2960, 0.1270, 0.1400],
]


def test_notebook_numbers_in_view_on_lesson_1(navigation_not_pages_directory: None) -> None:
    """Lesson 1 opened on the attention notebook's preset, following x(3): its numbers on screen."""
    from core.app.settings import settings_for_preset
    from core.lessons.without_weights import without_weights_lesson
    from tests.support import answered_page, assert_clean, markdown_text

    # The shares answer the page's question: shown once it is answered.
    at = answered_page("without_weights", preset="notebook", query="3")
    assert_clean(at)
    shown = markdown_text(at)
    assert "puts **28.75%** of its attention on “are”" in shown and "only **6.05%** on “embeddings”" in shown
    assert "divide by sum **0.9999998807907104**" in shown and "`torch.softmax` **1.0000001192092896**" in shown
    scores = next(df.value for df in at.dataframe if df.value.shape == (6, 6))  # the page's score table
    assert_close(torch.tensor(scores.to_numpy(dtype=float)), NOTEBOOK_SCORES)

    lesson = without_weights_lesson(settings_for_preset("notebook"), 2, 1.0)
    assert_close(torch.tensor(lesson.scores_table.to_numpy()), NOTEBOOK_SCORES)  # the full 6x6 table
    assert_close(torch.tensor(lesson.by_sum_weights), [0.1452, 0.2875, 0.1757, 0.1497, 0.1815, 0.0605])
    # "28.75% of the attention of x(3) is placed on x(2) ... only 6.05% on x(6)"
    assert lesson.largest_share[0] == "are" and f"{lesson.largest_share[1]:.2%}" == "28.75%"
    assert lesson.smallest_share[0] == "embeddings" and f"{lesson.smallest_share[1]:.2%}" == "6.05%"
    assert_close(torch.tensor(lesson.weights_table.to_numpy()[2]), [0.1509, 0.2445, 0.1674, 0.1532, 0.1707, 0.1133])
    assert_close(
        torch.tensor(lesson.context_table.to_numpy()[:3]),
        [[0.5279, 0.4187, 0.4037], [0.6281, 0.5036, 0.3311], [0.5876, 0.4533, 0.3425]],
    )
    # the printed float32 sums, bit for bit: rounding, not a bug
    assert lesson.sums.by_sum == 0.9999998807907104
    assert lesson.sums.naive_softmax == 1.0
    assert lesson.sums.torch_softmax == 1.0000001192092896


def test_dk64_example_in_view_on_lesson_3() -> None:
    from core.lessons.why_scale import dk64_example

    example = dk64_example()
    assert example.typical_score == 8.0  # "d_k = 64 ... around 8"; 8 / sqrt(64) = 1
    assert_close(torch.tensor(example.scaled_weights), [0.5761, 0.2119, 0.2119])
    # the attention notebook prints [0.576, 0.211, 0.211]: 0.2119 cut off, not rounded
    assert [round(v, 3) for v in example.scaled_weights] == [0.576, 0.212, 0.212]
    assert [int(v * 1000) / 1000 for v in example.scaled_weights] == [0.576, 0.211, 0.211]
    assert example.unscaled_weights[0] > 0.999  # softmax([8, 0, 0]) ~ [1, 0, 0]
    assert example.unscaled_gradient < example.scaled_gradient / 100


def test_notebook_variance_experiment_in_view_on_lesson_3() -> None:
    from core.lessons.why_scale import notebook_variance

    table = notebook_variance(123).table
    assert table.d.tolist() == [5, 100]
    # what the notebook printed (its run had no seed), shown beside our run
    assert table.printed_unscaled.round(4).tolist() == [5.2447, 100.4474]
    assert table.printed_scaled.round(4).tolist() == [1.0489, 1.0045]
    # the law, which every run obeys: scaled = unscaled / d exactly, unscaled ~ d, scaled ~ 1
    assert (table.unscaled_var / table.scaled_var).round(9).tolist() == [5.0, 100.0]
    assert (table.printed_unscaled / table.printed_scaled).round(9).tolist() == [5.0, 100.0]
    assert abs(table.scaled_var - 1).max() < 0.2  # 1,000 draws: a few standard errors


def test_cross_attention_article_shapes_in_view_on_lesson_7() -> None:
    from core.app.settings import settings_for_preset
    from core.lessons.cross_attention import cross_lesson

    lesson = cross_lesson(settings_for_preset("article"), "ignored", 28, "ignored too", 5)
    shapes = dict(lesson.shapes)
    assert shapes["x_1 (first sequence)"] == (6, 16) and shapes["x_2 (second sequence)"] == (8, 16)
    assert shapes["keys"] == (8, 24) and shapes["values"] == (8, 28)  # the article's printed shapes
    assert shapes["weights"] == (6, 8) and shapes["context"] == (6, 28)


def test_article_three_heads_in_view_on_lesson_5() -> None:
    from core.app.settings import settings_for_preset
    from core.lessons.multi_head import multihead_lesson

    article = multihead_lesson(settings_for_preset("article")).article
    assert article is not None
    # the self-attention article's printed shapes, in its order
    assert [list(step.shape) for step in article.shape_steps[:6]] == [
        [3, 24],
        [3, 16, 6],
        [3, 24, 6],
        [3, 28, 6],
        [3, 6, 24],
        [3, 6, 28],
    ]
    assert article.shape_steps[-1].shape == (3, 28)  # "an h x d_v (here: 3 x d_v) dimensional context vector"
    assert article.params == 3 * (24 + 24 + 28) * 16  # full-width heads: three times one head's weights


def test_article_vocabulary_in_view_on_the_overview() -> None:
    from core.app.settings import settings_for_preset
    from core.lessons.overview import overview_lesson

    lesson = overview_lesson(settings_for_preset("article"))
    assert dict(lesson.vocabulary) == {"Life": 0, "dessert": 1, "eat": 2, "first": 3, "is": 4, "short": 5}
    assert lesson.token_ids == (0, 4, 5, 2, 1, 3)  # the article's sentence_int
    assert overview_lesson(settings_for_preset("book")).vocabulary == ()


def test_decoder_blog_progression_in_view_on_lesson_4() -> None:
    from core.app.settings import settings_for_preset
    from core.lessons.causal_dropout import decoder_blog

    blog = decoder_blog(settings_for_preset("blog"))
    assert list(blog.simple_average_table.index) == ["cats", "climb", "trees", "during"]
    expected = torch.tensor([[1, 0, 0, 0], [1 / 2, 1 / 2, 0, 0], [1 / 3] * 3 + [0], [1 / 4] * 4], dtype=torch.float64)
    assert torch.allclose(torch.tensor(blog.simple_average_table.to_numpy()), expected)
    head = torch.tensor(blog.head_table.to_numpy())
    assert torch.all(head.triu(diagonal=1) == 0) and torch.allclose(head.sum(dim=-1), torch.ones(4, dtype=head.dtype))
    assert not torch.allclose(head, expected, atol=1e-3)  # learned-style shares, no longer equal
