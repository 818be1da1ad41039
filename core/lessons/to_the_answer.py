"""Lesson 11: from attention to the answer. What each head of SmolLM2-135M writes, and how it becomes the answer.

Every number comes from one traced pass of the student's prompt (core/models/attribution.py) on the app's
own model. On its 4-bit weights the pass runs `by_heads`: each layer's output matrix W_O is dequantized for
that layer only, so the heads' outputs add up to the residual exactly; its logits differ a little from the
ordinary 4-bit forward's (which rounds each attention output to bfloat16), and the page shows this pass's
own numbers everywhere (the answer, its probability, the lens, the attribution).

Shape legend: L layers (30), H heads (9), T tokens, P = 2L lens points, k top tokens.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
import torch

from core import recipes
from core.app.choices import Explain  # what the attribution explains; a link names it too
from core.app.registry import LessonSpec
from core.lessons.common import Prediction
from core.lessons.inside_gpt import MAX_PROMPT_TOKENS
from core.models import attribution as at
from core.models import patching as pt
from core.models import smollm2

# Measured on the app's 4-bit model (tests/unit/test_to_the_answer.py): " Mary" 92%, and swapping the second
# "John" for "Mary" moves logit(" Mary") - logit(" John") from about +6 to about -5.5, a clean flip.
DEFAULT_TEXT = "When Mary and John went to the store, John gave a drink to"
TOP_PARTS = 12  # the residual chart's largest parts
LENS_TOP = 3  # tokens per lens point
RANK_LIMITS = (100, 10)  # the rank sentence says where the answer first enters the top 100, then the top 10
MECHANISM_MIN = 0.5  # a head's effect on the token it reads, in logits, before the page names what it does
WEAK_CHANGE = 1.0  # a corruption that moves the logit difference by less than this leaves shares meaningless
R = TypeVar("R")


EXPLAIN_LABELS = {
    Explain.CONTRAST: "the answer against the repeated name",
    Explain.ANSWER: "the model's answer alone",
    Explain.TOKEN: "a token I type",
}


@dataclass(frozen=True)
class AnswerLesson:
    """One prompt, part by part, at its last position.

    part_labels, part_shares (TOP_PARTS,): the parts with the largest projections on the final residual, as
    shares of it (all 1 + L*H + L shares add up to `shares_sum`, 1 up to rounding); parts_error: the largest
    difference between the parts added up and the residual, against `residual_size` (its largest entry).
    lens_labels (P,), lens_tokens (P, k), lens_probabilities (P, k), answer_probabilities (P,); answer_ranks (P,):
    the answer's rank among all tokens at each lens point, 1 = top (ties counted in its favour).
    heads (L, H), mlps (L,), embedding: each part's direct effect on the explained logit (difference);
    logit: that logit (difference) from the residual, summed: the parts added up; scale: the frozen norm's.
    attentions (L, H, T, T) float16: every head's weights, for the head a click opens.
    """

    text: str
    token_ids: tuple[int, ...]
    tokens: tuple[str, ...]
    answer: str
    answer_probability: float
    part_labels: tuple[str, ...]
    part_shares: np.ndarray
    shares_sum: float
    parts_error: float
    residual_size: float
    lens_labels: tuple[str, ...]
    lens_tokens: tuple[tuple[str, ...], ...]
    lens_probabilities: np.ndarray
    answer_probabilities: np.ndarray
    answer_ranks: np.ndarray
    first_on_top: int | None  # index into the lens points
    explained: str  # "' Mary' - ' John'" or "' Mary'"
    target: str
    minus: str | None
    target_ids: tuple[int, ...]  # the explained token, and the one subtracted if any
    heads: np.ndarray
    mlps: np.ndarray
    embedding: float
    logit: float
    summed: float
    scale: float
    attentions: np.ndarray
    corrupted: str | None  # the suggested corruption of the prompt (same token length), None when none fits
    vocab_size: int  # the tokens an answer is ranked among
    # With a contrast, each head's direct effect on each of the two logits alone (L, H): their difference is
    # `heads`. They say how a head moves the difference: by raising the answer, or by lowering the other token.
    target_heads: np.ndarray | None = None
    minus_heads: np.ndarray | None = None

    @property
    def num_layers(self) -> int:
        return int(self.heads.shape[0])

    def first_on_top_sentence(self) -> str:
        """Where the lens first puts the answer on top, said from the numbers."""
        if self.first_on_top is None:  # cannot happen: the last point is the output itself
            return f"The lens never puts {self.answer!r} on top."
        label = self.lens_labels[self.first_on_top]
        probability = self.answer_probabilities[self.first_on_top]
        if self.first_on_top == len(self.lens_labels) - 1:  # only the output itself: one probability to say
            return (
                f"The lens first puts {self.answer!r} on top at {label}, the last point of "
                f"{len(self.lens_labels)}: the model's own output, with probability {probability:.1%}."
            )
        return (
            f"The lens first puts {self.answer!r} on top at {label} (point {self.first_on_top + 1} of "
            f"{len(self.lens_labels)}), with probability {self.answer_probabilities[self.first_on_top]:.1%}; "
            f"after the last layer it has {self.answer_probabilities[-1]:.1%}."
        )

    def rank_sentence(self) -> str:
        """How the answer climbs the lens's ranking, said from `answer_ranks`: on SmolLM2 the lens is flat (the
        answer tops only the output), so where it enters the top 100 and the top 10 says more than the top token."""
        ranks = [int(r) for r in self.answer_ranks]
        labels = self.lens_labels
        # Limits first reached at one point are said once ("enters the top 100 and the top 10 ... at L29 MLP"):
        # one point named three times read as a stammer (the s29b review).
        reached: list[tuple[int | None, list[str]]] = []  # (first point, the limits it first reaches)
        for limit in RANK_LIMITS:
            first = next((i for i, rank in enumerate(ranks) if rank <= limit), None)
            if reached and reached[-1][0] == first:
                reached[-1][1].append(f"the top {limit}")
            else:
                reached.append((first, [f"the top {limit}"]))
        entries, topped = [], False
        for first, limits in reached:
            tops = " and ".join(limits)
            if first is None:
                entries.append(f"never enters {tops}")
            elif first == 0:
                entries.append(f"is in {tops} from the first point")
            elif first == self.first_on_top:
                entries.append(f"enters {tops} and comes out on top at once, at {labels[first]}")
                topped = True
            else:
                entries.append(f"first enters {tops} at {labels[first]} (rank {ranks[first]:,})")
        if not topped:
            entries.append(
                "never comes out on top"
                if self.first_on_top is None
                else f"comes out on top at {labels[self.first_on_top]}"
            )
        said = entries[0] if len(entries) == 1 else ", ".join(entries[:-1]) + f", and {entries[-1]}"
        return f"Rank of {self.answer!r} among all tokens (1 = top): {ranks[0]:,} at {labels[0]}; it {said}."

    def top_heads(self, k: int = 3) -> list[tuple[int, int, float]]:
        """The k heads with the largest direct effect (signed: largest first)."""
        flat = np.argsort(-self.heads, axis=None)[:k]
        return [(int(i) // self.heads.shape[1], int(i) % self.heads.shape[1], float(self.heads.flat[i])) for i in flat]

    def bottom_heads(self, k: int = 3) -> list[tuple[int, int, float]]:
        """The k heads with the most negative direct effect, most negative first."""
        flat = np.argsort(self.heads, axis=None)[:k]
        return [(int(i) // self.heads.shape[1], int(i) % self.heads.shape[1], float(self.heads.flat[i])) for i in flat]

    def head_sentence(self, layer: int, head: int) -> str:
        """What one head reads from the last position and writes into the explained logit, said from the numbers.

        With a contrast the effect is split into the two tokens' logits, and where the head's most-read token is
        one of them and that token's part dominates, the sentence names the mechanism the numbers show.
        """
        last = self.attentions[layer, head, -1].astype(float)  # (T,): the last position's weights
        looked = int(last.argmax())
        read = self.tokens[looked]
        sentence = (
            f"From the last position, layer {layer} head {head} puts {last[looked]:.0%} of its weight on "
            f"{read!r} (position {looked}), and its output moves {self.explained} by "
            f"{float(self.heads[layer, head]):+.2f}"
        )
        if self.minus is None or self.target_heads is None or self.minus_heads is None:
            return sentence + "."
        up, down = float(self.target_heads[layer, head]), float(self.minus_heads[layer, head])
        sentence += f": {self.target!r} by {up:+.2f} and {self.minus!r} by {down:+.2f}."
        own, other = (up, down) if read == self.target else (down, up) if read == self.minus else (0.0, 0.0)
        if abs(own) >= MECHANISM_MIN and abs(own) > abs(other):  # the token it reads is the one it moves most
            sentence += (
                f" It raises the very token it reads, {read!r}: it copies that token into the answer."
                if own > 0
                else f" It pushes down the very token it reads, {read!r}: it suppresses that token."
            )
        return sentence

    def sum_sentence(self) -> str:
        """The check that the parts add up, from the numbers."""
        return (
            f"1 embedding + {self.heads.size} heads + {self.mlps.size} feed-forwards add up to {self.summed:.4f}; "
            f"the logit {'difference ' if self.minus else ''}read from the residual is {self.logit:.4f} "
            f"(they differ by {abs(self.summed - self.logit):.1e})."
        )


def one_token(model: smollm2.SmolLM2, text: str) -> int:
    """The id of a token typed as text (" Mary", with its space); TextError unless it is exactly one token."""
    if not text.strip():
        raise smollm2.TextError("Type a token to explain, for example ' Mary' (with its leading space).")
    ids = smollm2.encode(model, text, max_tokens=MAX_PROMPT_TOKENS)
    if ids.numel() != 1:
        raise smollm2.TextError(
            f"{text!r} is {ids.numel()} tokens for this model, not one: "
            + " | ".join(repr(t) for t in smollm2.token_texts(model, ids))
            + ". Try one of them."
        )
    return int(ids[0])


def _prompt_ids(model: smollm2.SmolLM2, text: str) -> torch.Tensor:
    ids = smollm2.encode(model, text, max_tokens=MAX_PROMPT_TOKENS)  # TextError when empty or too long
    if ids.numel() < 2:
        raise smollm2.TextError("Give at least two tokens, so that the heads have something to look back at.")
    return ids


def _label(index: int, num_heads: int, num_layers: int) -> str:
    """The name of part `index` in the order embedding, heads (layer by layer), feed-forwards."""
    if index == 0:
        return "embedding"
    if index <= num_layers * num_heads:
        layer, head = divmod(index - 1, num_heads)
        return f"L{layer} H{head}"
    return f"L{index - 1 - num_layers * num_heads} MLP"


def traced_patterns(model: smollm2.SmolLM2, traced: at.ResidualTrace) -> torch.Tensor:
    """Every head's attention weights (L, H, T, T) in the traced pass itself: each layer's queries from the
    residual it read, its keys (after RoPE) as the trace kept them, softmax in float64 as the forward does.
    (The ordinary 4-bit forward's weights differ by its bfloat16 rounding of each attention output.)"""
    config = model.config
    tokens = traced.embedding.shape[0]
    angles = smollm2.rope_angles(torch.arange(tokens), config.head_dim, config.rope_base)  # (T, d / 2)
    future = torch.ones(tokens, tokens, dtype=torch.bool).triu(1)  # True: a later key, hidden
    patterns = []
    for index, layer in enumerate(model.weights.layers):
        normed = smollm2.rms_norm(traced.before_layer(index), layer.attention_norm, config.rms_norm_eps)  # (T, D)
        queries = smollm2.linear_rows(normed, layer.query)  # (T, H * d)
        queries = queries.view(tokens, config.num_heads, config.head_dim).transpose(0, 1)  # (H, T, d)
        queries = smollm2.rotate_pairs(queries, angles).double()  # (H, T, d)
        keys = traced.keys[index].double().repeat_interleave(config.group_size, dim=0)  # (G, T, d) -> (H, T, d)
        scores = queries @ keys.transpose(1, 2) / config.head_dim**0.5  # (H, T, T)
        patterns.append(scores.masked_fill(future, float("-inf")).softmax(dim=-1).float())
    return torch.stack(patterns)  # (L, H, T, T)


def answer_lesson(_model: smollm2.SmolLM2, text: str, explain: Explain, token: str) -> AnswerLesson:
    """The residual as a sum, the logit lens and the direct attribution of one prompt's last position.

    token: the typed token when explain is TOKEN (ignored otherwise). Raises TextError for a prompt or token
    the model cannot take.
    """
    model = _model
    ids = _prompt_ids(model, text)
    traced = at.trace(model, ids, by_heads=True)
    parts = at.decompose(model, traced)
    lens = at.logit_lens(model, traced, k=LENS_TOP)
    answer_id = lens.answer_id
    corruption = pt.suggest_corruption(model, text)
    contrast = corruption.contrast(model) if corruption is not None else None
    if explain is Explain.CONTRAST and contrast is not None:
        target = at.LogitTarget(contrast.answer_id, contrast.other_id)
    elif explain is Explain.TOKEN:
        target = at.LogitTarget(one_token(model, token))
    else:  # the answer itself (also a contrast asked for where the prompt repeats no name)
        target = at.LogitTarget(answer_id)
    attribution = at.direct_attribution(model, parts, target)
    split = (  # each logit of a contrast alone (same frozen scale), (L, H) each
        None
        if target.minus_id is None
        else tuple(
            at.direct_attribution(model, parts, at.LogitTarget(token)).contributions.heads.numpy()
            for token in (target.token_id, target.minus_id)
        )
    )
    shares = parts.shares()
    every = torch.cat(
        (torch.tensor([shares.embedding]), shares.heads.flatten(), shares.mlps)
    )  # (1 + L*H + L,), the order of `_label`
    largest = every.abs().topk(TOP_PARTS).indices
    config = model.config
    names = smollm2.token_texts(model, [target.token_id] + ([] if target.minus_id is None else [target.minus_id]))
    attentions = traced_patterns(model, traced)  # (L, H, T, T)
    contributions = attribution.contributions
    ranks = lens.answer_ranks + 1  # (P,): the lens counts the tokens above the answer (0 = top); a class reads 1 = top
    return AnswerLesson(
        text=text,
        token_ids=tuple(ids.tolist()),
        tokens=traced.tokens,
        answer=lens.answer,
        answer_probability=float(lens.answer_probabilities[-1]),
        part_labels=tuple(_label(int(i), config.num_heads, config.num_layers) for i in largest),
        part_shares=every[largest].numpy(),
        shares_sum=float(every.double().sum()),
        parts_error=float((parts.summed() - parts.residual).abs().max()),
        residual_size=float(parts.residual.abs().max()),
        lens_labels=tuple(point.label() for point in lens.points),
        lens_tokens=lens.top_tokens,
        lens_probabilities=lens.top_probabilities.numpy(),
        answer_probabilities=lens.answer_probabilities.numpy(),
        answer_ranks=ranks.numpy(),
        first_on_top=None if lens.first_on_top is None else lens.points.index(lens.first_on_top),
        explained=" - ".join(repr(n) for n in names),
        target=names[0],
        minus=names[1] if len(names) > 1 else None,
        target_ids=(target.token_id,) + (() if target.minus_id is None else (target.minus_id,)),
        heads=contributions.heads.numpy(),
        mlps=contributions.mlps.numpy(),
        embedding=contributions.embedding,
        logit=contributions.total,
        summed=contributions.summed(),
        scale=attribution.scale,
        attentions=attentions.half().numpy(),  # half the bytes in the cache; weights are in 0..1
        corrupted=None if corruption is None else corruption.corrupted_text,
        vocab_size=config.vocab_size,
        target_heads=None if split is None else split[0],
        minus_heads=None if split is None else split[1],
    )


# ----------------------------------------------------------------------------------------------
# Questions, from the numbers

# The lens question asks where the answer ranks two thirds of the way up, not where it first comes out on top:
# on SmolLM2 that is the output itself on every prompt tried (seven of seven), so a class knew that answer after
# one try (an independent review). Two thirds up, the rank is in the hundreds or thousands and differs by prompt
# (after layer 19's MLP: ' Mary' 966th, ' Sarah' 1,052nd, ' Paris' 2,649th, ' six' 772nd, ' girl' 162nd).
RANK_BANDS = ((1, 10), (11, 100), (101, 1_000), (1_001, None))


def _rank_band(low: int, high: int | None) -> str:
    if low == 1:
        return f"in the top {high}"
    # "below 1,000" read as a rank under 1,000, the opposite (the s25 review): say where it stands in words.
    return f"lower than {low - 1:,}th" if high is None else f"{low:,} to {high:,}"


def lens_question_point(lesson: AnswerLesson) -> int:
    """The lens point the question asks about: after the MLP of the layer two thirds of the way up (layer 19 of 30)."""
    return 2 * (2 * lesson.num_layers // 3 - 1) + 1  # each layer has two points, attention then MLP


def lens_question(lesson: AnswerLesson) -> Prediction:
    """Where does the answer rank two thirds of the way up? (Answered by `answer_ranks` at that point.)"""
    point = lens_question_point(lesson)
    rank = int(lesson.answer_ranks[point])
    answer = next(i for i, (low, high) in enumerate(RANK_BANDS) if rank >= low and (high is None or rank <= high))
    vocabulary = lesson.vocab_size
    return Prediction(
        f"Read the residual stream at {lesson.lens_labels[point]}, two thirds of the way up, as if it were the last. "
        f"Where does the model's answer {lesson.answer!r} rank among all {vocabulary:,} tokens there?",
        tuple(_rank_band(low, high) for low, high in RANK_BANDS),
        answer,
        f"At {lesson.lens_labels[point]}, {lesson.answer!r} ranks {rank:,} of {vocabulary:,} (in the top "
        f"{rank / vocabulary:.1%} of them). {lesson.first_on_top_sentence()}",
        shuffle=False,
    )


PART_KINDS = ("the token's own embedding", "an attention head", "a feed-forward (MLP)")


def part_question(lesson: AnswerLesson) -> Prediction:
    """Which kind of part pushes the explained logit up the most, directly? (Answered by the attribution.)"""
    best_head = float(lesson.heads.max())
    best_mlp = float(lesson.mlps.max())
    values = (lesson.embedding, best_head, best_mlp)
    answer = int(np.argmax(values))
    layer, head, _ = lesson.top_heads(1)[0]
    mlp = int(np.argmax(lesson.mlps))
    return Prediction(
        f"Which single part of the residual stream pushes {lesson.explained} up the most, directly: by what it "
        "writes into this sum itself, not through the layers after it?",
        PART_KINDS,
        answer,
        f"The embedding adds {lesson.embedding:+.2f}, the best head (layer {layer}, head {head}) {best_head:+.2f}, "
        f"the best feed-forward (layer {mlp}) {best_mlp:+.2f}.",
        shuffle=False,
    )


# ----------------------------------------------------------------------------------------------
# Activation patching


@dataclass(frozen=True)
class PatchingLesson:
    """restored (L, H): each head's share of the logit difference restored; the runs' differences."""

    method: pt.PatchingMethod
    clean: str
    corrupted: str
    answer: str
    other: str
    clean_difference: float
    corrupted_difference: float
    restored: np.ndarray

    @property
    def change(self) -> float:
        """How far the corruption moves the logit difference."""
        return abs(self.clean_difference - self.corrupted_difference)

    @property
    def weak(self) -> bool:
        """The corruption barely moves the difference: shares of a tiny change are noise."""
        return self.change < WEAK_CHANGE

    def top_heads(self, k: int = 3) -> list[tuple[int, int, float]]:
        flat = np.argsort(-self.restored, axis=None)[:k]
        heads = self.restored.shape[1]
        return [(int(i) // heads, int(i) % heads, float(self.restored.flat[i])) for i in flat]

    def sentence(self) -> str:
        """The two runs and the heads that restore most, from the numbers."""
        top = ", ".join(f"layer {layer} head {head} ({share:.0%})" for layer, head, share in self.top_heads())
        return (
            f"logit({self.answer!r}) - logit({self.other!r}): {self.clean_difference:+.2f} on the clean prompt, "
            f"{self.corrupted_difference:+.2f} on the corrupted one. The heads that restore the most: {top}."
        )


@dataclass(frozen=True)
class PatchingAgreement:
    """How attribution patching's estimate agrees with exact patching, head by head (issue 42: the estimate is
    the live view, exact patching confirms it).

    r: Pearson's correlation of the two (L, H) maps; shared: how many of each map's top `k` heads the other's
    top k also holds; apart: the head where the two shares differ the most, (layer, head, exact, estimate).
    """

    r: float
    k: int
    top_exact: list[tuple[int, int, float]]
    top_estimate: list[tuple[int, int, float]]
    shared: int
    apart: tuple[int, int, float, float]

    def sentence(self) -> str:
        """The agreement in words, from the numbers."""
        name = lambda heads: ", ".join(f"layer {a} head {b} ({v:.0%})" for a, b, v in heads)  # noqa: E731
        layer, head, exact, estimate = self.apart
        return (
            f"Across the {self.k} heads each method puts on top, they share {self.shared} "
            f"(exact: {name(self.top_exact)}; estimate: {name(self.top_estimate)}); over all heads, r = {self.r:.2f}. "
            f"They differ the most on layer {layer} head {head}: {exact:.0%} exact, {estimate:.0%} estimated. "
            "The estimate is a straight line through each head's change; where a softmax saturates, the real "
            "effect bends away from it."
        )


def patching_agreement(estimate: PatchingLesson, exact: PatchingLesson, k: int = 3) -> PatchingAgreement:
    """Compare the two maps of the same pair of prompts (ValueError for different pairs or methods)."""
    if (estimate.clean, estimate.corrupted) != (exact.clean, exact.corrupted):
        raise ValueError("The two maps patch different pairs of prompts.")
    if (estimate.method, exact.method) != (pt.PatchingMethod.ATTRIBUTION, pt.PatchingMethod.EXACT):
        raise ValueError("Compare an attribution patching map with an exact one.")
    ours, theirs = estimate.restored.flatten(), exact.restored.flatten()  # (L * H,) each
    r = float(np.corrcoef(ours, theirs)[0, 1]) if ours.std() > 0 and theirs.std() > 0 else float("nan")
    top_exact, top_estimate = exact.top_heads(k), estimate.top_heads(k)
    shared = len({(a, b) for a, b, _ in top_exact} & {(a, b) for a, b, _ in top_estimate})
    flat = int(np.argmax(np.abs(ours - theirs)))
    heads = exact.restored.shape[1]
    apart = (flat // heads, flat % heads, float(theirs[flat]), float(ours[flat]))
    return PatchingAgreement(r, k, top_exact, top_estimate, shared, apart)


def patching_lesson(
    _model: smollm2.SmolLM2,
    clean: str,
    corrupted: str,
    method: pt.PatchingMethod,
    _keep_going: Callable[[], bool] | None = None,
) -> PatchingLesson:
    """Patch every head from the clean run into the corrupted one: exactly (a run per head, stoppable by
    `_keep_going`) or by attribution patching (one forward and backward). TextError for prompts of different
    token lengths (said with both lengths) or prompts that cannot be compared."""
    model = _model
    clean_ids, corrupted_ids = _prompt_ids(model, clean), _prompt_ids(model, corrupted)
    if clean_ids.numel() != corrupted_ids.numel():
        raise smollm2.TextError(
            f"The corrupted prompt is {corrupted_ids.numel()} tokens and the clean one {clean_ids.numel()}: "
            "patching compares them position by position, so they need the same number of tokens."
        )
    runs = pt.prepare_runs(model, clean_ids, corrupted_ids, by_heads=True)
    if method is pt.PatchingMethod.EXACT:
        result = pt.exact_head_patching(model, runs, keep_going=_keep_going)
    else:
        result = pt.attribution_patching(model, runs)
    return PatchingLesson(
        method=method,
        clean=clean,
        corrupted=corrupted,
        answer=runs.contrast.answer,
        other=runs.contrast.other,
        clean_difference=runs.clean_difference,
        corrupted_difference=runs.corrupted_difference,
        restored=result.restored.detach().numpy(),
    )


# The opening prompt's logit difference (' Mary' - ' John'), measured both ways: the Code box in float32 and the
# page on the file's 4-bit blocks in bfloat16 (tests/unit/test_to_the_answer.py re-measures both).
OPENING_BOX_LOGIT = 6.12
OPENING_PAGE_LOGIT = 6.10


def code_note(lesson: AnswerLesson) -> str:
    """The Code box's caption: why its numbers differ from the page's, by how much on the opening prompt. The s25
    review found "6.08 here against 6.12 there" hard-coded while the page showed 6.1032; the s30 review, "a few
    hundredths" false on another prompt (6.21 on the page, 6.09 in the box)."""
    return (
        "Plain PyTorch in float32 from the model's file. The page dequantizes the file's 4-bit weights (rounded to "
        "bfloat16), so its numbers differ from the box's by an amount that depends on the prompt: on the opening "
        f"prompt the box prints a logit difference of {OPENING_BOX_LOGIT:.2f} where the page reads "
        f"{OPENING_PAGE_LOGIT:.2f}, and both put the same two heads on top"
        + (f" (this prompt: {lesson.logit:.2f} on the page)" if lesson.text != DEFAULT_TEXT else "")
        + "."
    )


def code(lesson: AnswerLesson) -> str:
    """The filled recipe core/recipes/to_the_answer.py: this prompt's ids, this logit (difference)."""
    return recipes.fill("to_the_answer", {"ids": list(lesson.token_ids), "target": list(lesson.target_ids)})


# Bounds: an answer lesson is at most 30 x 9 x 64 x 64 float16 (2.2 MB) plus small maps; a patching lesson
# is two 30 x 9 maps' worth. tests/unit/test_to_the_answer.py measures both.
ANSWER = LessonSpec(answer_lesson, uses=None, max_entries=8)
PATCHING = LessonSpec(patching_lesson, uses=None, max_entries=32)
LESSONS = (ANSWER, PATCHING)
WHAT = {ANSWER.name: "splitting the answer into every head's part", PATCHING.name: "patching every head"}


def shared_by_everyone(lesson: LessonSpec, args: tuple) -> bool:
    """The default prompt's results at the page's defaults: computed once per process, kept for everyone."""
    if lesson is ANSWER:  # (text, explain, token)
        return tuple(args[:2]) == (DEFAULT_TEXT, Explain.CONTRAST)
    return False


def run_lesson(lesson: LessonSpec[R], model: smollm2.SmolLM2, args: tuple, keep_going: Callable[[], bool]) -> R:
    """As the app's model queue runs it: attribution patching needs autograd (one backward pass), everything
    else runs under inference_mode; exact patching is given `keep_going` (checked before each layer)."""
    if lesson is PATCHING and args[2] is pt.PatchingMethod.EXACT:
        with torch.inference_mode():
            return lesson.compute(model, *args, keep_going)
    if lesson is PATCHING:
        return lesson.compute(model, *args)
    with torch.inference_mode():
        return lesson.compute(model, *args)
