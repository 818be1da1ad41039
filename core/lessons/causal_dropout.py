"""Lesson 4: hiding the future (two masking methods, the leakage check) and dropout on the weights, for every
weight source.

One lesson dataclass and one builder (`lesson_from_masks`, from a head's scaled scores) whatever the source: the
sources' random draws here (`causal_lesson`), a model's head in core/lessons/pretrained.py
(`pretrained_causal_lesson`).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
import torch

from core import recipes
from core.app.registry import Control, LessonSpec
from core.app.settings import PresetKey, Settings
from core.attention import functional as fn
from core.attention.modules import CausalAttention, SimpleAverageSelfAttention, SingleSelfAttentionHead
from core.inputs.examples import BOOK_CAUSAL_MASKED_SCORES, BOOK_CAUSAL_RENORMALISED, BOOK_CAUSAL_WEIGHTS, cats_example
from core.inputs.weights import Provenance
from core.lessons.common import (
    CPU,
    Prediction,
    generator,
    inputs_on_device,
    inputs_source,
    matrix_frame,
    tensor_literal,
    token_name,
    tokens_comment,
    unique_labels,
)

if TYPE_CHECKING:  # the model's modules load only where a model's head is used (memory)
    from core.inputs.pretrained_heads import HeadPattern

NOISE_SIZE = 3.0  # how far the perturbed token is pushed (times a standard-normal vector)
# The book chapter's example rate. The sources' presets set dropout to 0 (their printed weights
# have none), so training mode at the sidebar's 0 would change nothing visible: it shows this rate.
TEACHING_DROPOUT = 0.5

# A cell of the book's printed renormalised table within this of ours differs by rounding (the chapter
# divided unrounded weights; we have them to 4 decimals): one unit in the 4th decimal plus float error.
# A larger difference is a misprint.
ROUNDING_TOLERANCE = 1.5e-4


@dataclass(frozen=True)
class PrintedDifference:
    """How the book's printed renormalised table differs from the same steps on its printed weights."""

    rounding_cells: int  # cells that differ by rounding (0 < |difference| <= ROUNDING_TOLERANCE)
    rounding_max: float  # the largest of those differences
    misprints: tuple[tuple[int, int, float, float], ...]  # (row, column) from 1, printed, recomputed

    def note(self) -> str:
        """The caption's sentence about the differences, from the numbers."""
        parts = []
        if self.rounding_cells:
            parts.append(
                f"Recomputed from the printed weights, {self.rounding_cells} cells of its renormalised table "
                f"differ from the book's by at most {self.rounding_max:.1e} (the chapter divided unrounded "
                "weights; we have them to 4 decimals)."
            )
        for row, column, printed, ours in self.misprints:
            # Named as the renormalised table's cell: "Row 6 column 3 ... reads 0.1555" above the printed weights,
            # whose row 6 column 3 is 0.1565, read as that heatmap's cell (the s27 review).
            parts.append(
                f"In the renormalised table the chapter prints (“rows renormalised” below is ours), row {row} column "
                f"{column} is a misprint: it reads {printed:.4f} where the steps give {ours:.4f}."
            )
        return " ".join(parts) or "The recomputed table matches the book's digit for digit."


def printed_difference(printed: torch.Tensor, recomputed: torch.Tensor) -> PrintedDifference:
    """Compare a printed (T, T) table with ours cell by cell: rounding differences and misprints."""
    # Compare at the printed precision (4 decimals), in whole units of the 4th decimal: float error in
    # the 8th decimal is no difference on the page.
    units = (printed.double() * 1e4).round() - (recomputed.double() * 1e4).round()  # (T, T)
    gap = units.abs() / 1e4  # (T, T)
    rounding = (gap > 0) & (gap <= ROUNDING_TOLERANCE)
    rounding_gaps = gap[rounding]
    misprints = tuple(
        (row + 1, column + 1, float(printed[row, column]), float(recomputed[row, column]))
        for row, column in (gap > ROUNDING_TOLERANCE).nonzero().tolist()
    )
    return PrintedDifference(
        rounding_cells=int(rounding.sum()),
        rounding_max=float(rounding_gaps.max()) if rounding.any() else 0.0,
        misprints=misprints,
    )


@dataclass(frozen=True)
class BookCausal:
    """The book chapter's causal walk-through, replayed on the matrices it prints."""

    printed_weights: pd.DataFrame  # the chapter's attention weights before masking, (6, 6)
    masked_simple: pd.DataFrame  # those weights with the future zeroed (rows no longer sum to 1)
    renormalised: pd.DataFrame  # each row divided by its sum
    masked_scores: pd.DataFrame  # the chapter's printed scores with -inf above the diagonal (a table)
    minus_inf_weights: pd.DataFrame  # softmax(masked scores / sqrt(2)): the efficient method
    printed_difference: PrintedDifference  # the recomputed renormalised table against the printed one
    code: str  # the filled recipe core/recipes/causal_book.py


@dataclass(frozen=True)
class DecoderBlog:
    """The decoder blog's progression on "cats climb trees during": simple average, then one head."""

    shift: pd.DataFrame  # the input/target pairs
    simple_average: pd.DataFrame  # fixed causal average weights, (4, 4)
    head_weights: pd.DataFrame  # SingleSelfAttentionHead's learned-style weights, (4, 4)
    head_size: int  # the head's query/key/value width (the sidebar's d_out)
    simple_average_table: pd.DataFrame  # the same (4, 4) numbers as wide tables, rows = queries
    head_table: pd.DataFrame
    code: str  # the filled recipe core/recipes/causal_blog.py


@dataclass(frozen=True)
class LeakCheck:
    """Random draws: push one token and see which output rows move; and the classic masked_fill bug."""

    perturbed: int  # the token pushed, counted from 1 as x^(i)
    leakage: pd.DataFrame  # token, position (from 1), max change of each output row
    earlier_unchanged: bool  # rows before the perturbed token did not move
    buggy: pd.DataFrame  # weights when masked_fill's result is thrown away: the future leaks
    bug_future_mass: float  # mean weight on future tokens with that bug
    code: str  # the filled recipe core/recipes/causal_leakage.py (leakage check and the bug)


@dataclass(frozen=True)
class MaskEffect:
    """What the causal mask changed on a head, row by row (a model's head: a trained head has something to lose)."""

    unmasked: pd.DataFrame  # (T, T) softmax without the mask: every query reads every key
    rows: pd.DataFrame  # per query: weight it had on the future, its strongest key before and after the mask
    future_mass: float  # mean over rows of the weight the unmasked head put on later tokens
    rows_changed: int  # rows whose strongest key the mask changed


@dataclass(frozen=True)
class CausalLesson:
    """Lesson 4's steps for any weight source (core/inputs/weights.py): one head's scaled scores masked two
    ways, what the mask changed, and dropout on the masked weights. Each matrix is (T, T), rows = queries."""

    tokens: tuple[str, ...]
    masked: pd.DataFrame  # -inf above the diagonal, then softmax
    renormalised: pd.DataFrame  # softmax, zero the future, renormalise: the same numbers
    max_method_difference: float  # the largest |renormalised - masked|
    dropped: pd.DataFrame  # the masked weights after dropout (unchanged in evaluation mode), `marked` = dropped
    training: bool
    dropout: float  # the rate applied in training mode: the sidebar's, or TEACHING_DROPOUT when that is 0
    dropout_note: str | None  # why the rate differs from the sidebar's (None when it does not)
    # Dropout's count over the weights the mask lets through (on and below the diagonal, T(T+1)/2 of them): the
    # masked future is zero before dropout, so a draw there keeps or drops nothing the heatmap shows.
    allowed_weights: int  # the weights the causal mask lets through
    kept_weights: int | None  # of those, the ones dropout kept (None when nothing was drawn)
    kept_fraction: float | None  # kept_weights / allowed_weights (None when nothing was drawn)
    rescale: float  # survivors are multiplied by 1 / (1 - p)
    head_dim: int  # d_k, the scale's root
    prediction: Prediction  # random draws: which rows a push can change; a model: how many rows the mask changes
    code: str  # the filled recipe (core/recipes/causal_dropout.py, pretrained_causal.py, decoder_causal.py)
    trained_causal: bool = False  # a decoder head: trained behind the mask, so `masked` is the model's own
    effect: MaskEffect | None = None  # a model's head: what the mask changed, row by row
    # Random draws: the sources' own sections around the mask.
    leak: LeakCheck | None = None
    book: BookCausal | None = None  # only for the book chapter's own sentence
    blog: DecoderBlog | None = None  # the decoder blog's progression: simple average -> SingleSelfAttentionHead
    batch_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()  # (step, shape) for a batch of two
    # A model's head: what it was measured to do on this sentence, and which model, layer and head it is.
    pattern: HeadPattern | None = None
    provenance: Provenance | None = None

    @property
    def difference(self) -> pd.DataFrame:
        """(T, T) renormalised - masked, zeros up to float error; derived, not stored (the cache keeps less)."""
        return self.renormalised.assign(value=self.renormalised["value"] - self.masked["value"])


# The book's printed walk-through and the decoder blog's simple average depend on no setting: built once
# per process, not on every new seed (bench/NOTES.md). Nothing mutates them; st.cache_data hands
# each session its own copy of the lesson that holds them.
@functools.lru_cache(maxsize=4)
def _book(tokens: tuple[str, ...]) -> BookCausal:
    keep = fn.causal_mask(6, 6)  # (6, 6), True on and below the diagonal
    masked = BOOK_CAUSAL_WEIGHTS * keep
    renormalised = fn.renormalise_rows(BOOK_CAUSAL_WEIGHTS, keep)  # (6, 6)
    return BookCausal(
        printed_weights=matrix_frame(BOOK_CAUSAL_WEIGHTS, tokens, tokens),
        masked_simple=matrix_frame(masked, tokens, tokens),
        renormalised=matrix_frame(renormalised, tokens, tokens),
        printed_difference=printed_difference(BOOK_CAUSAL_RENORMALISED, renormalised),
        masked_scores=pd.DataFrame(BOOK_CAUSAL_MASKED_SCORES.numpy(), index=list(tokens), columns=list(tokens)),
        minus_inf_weights=matrix_frame(torch.softmax(BOOK_CAUSAL_MASKED_SCORES / 2**0.5, dim=-1), tokens, tokens),
        code=recipes.fill(
            "causal_book",
            {
                "printed_weights": tensor_literal(BOOK_CAUSAL_WEIGHTS),
                # the printed scores below the diagonal; the recipe puts the -inf back above it
                "printed_scores": tensor_literal(BOOK_CAUSAL_MASKED_SCORES.nan_to_num(neginf=0.0)),
            },
        ),
    )


@functools.lru_cache(maxsize=1)
def _decoder_blog() -> tuple[pd.DataFrame, pd.DataFrame]:
    _, chunk = cats_example()
    shift = pd.DataFrame(
        [{"context (input)": " ".join(ctx), "next token (target)": target} for ctx, target in chunk.pairs()]
    )
    weights = SimpleAverageSelfAttention(4).attention_weights(4)  # (4, 4)
    return shift, matrix_frame(weights, list(chunk.inputs), list(chunk.inputs))


def _leak_question(perturbed: int, num_tokens: int, row_change: torch.Tensor) -> Prediction:
    options = ("Every row", f"Rows {perturbed} to {num_tokens}", f"Rows 1 to {perturbed}")
    changed = [i + 1 for i, change in enumerate(row_change.tolist()) if change > 0]
    if changed == list(range(perturbed, num_tokens + 1)):
        answer = 1
    elif changed == list(range(1, num_tokens + 1)):
        answer = 0
    else:
        answer = 2
    return Prediction(
        question=f"Push token {token_name(perturbed)} and run causal attention again. Which output rows can change?",
        options=options,
        answer=answer,
        explanation=(
            f"Rows {', '.join(map(str, changed)) or 'none'} changed. Row i only mixes the values of tokens "
            "1 to i, so a token can only change its own row and the rows after it."
        ),
    )


def _wide(matrix: torch.Tensor, tokens: list[str]) -> pd.DataFrame:
    return pd.DataFrame(matrix.detach().cpu().double().numpy(), index=tokens, columns=tokens)


def decoder_blog(settings: Settings) -> DecoderBlog:
    """The blog's chunk through its simple average and through its `SingleSelfAttentionHead`.

    The blog prints no embeddings: they come from `embed_text` at the blog preset's width
    (the sidebar's d_in with that preset, 4 otherwise) and the sidebar's seed.
    """
    d_in = settings.d_in if settings.preset == PresetKey.BLOG else 4
    example, _ = cats_example(d_in=d_in, seed=settings.seed)
    shift, simple_average = _decoder_blog()
    average = SimpleAverageSelfAttention(4).attention_weights(4)  # (4, 4)
    head = SingleSelfAttentionHead(4, d_in, settings.d_out, generator=generator(settings.seed, CPU))
    with torch.no_grad():
        trace = head.trace(example.embeddings, scale=settings.scale_factor)
    code = recipes.fill(
        "causal_blog",
        {
            "inputs": tensor_literal(example.embeddings),
            "seed": settings.seed,
            "head_size": settings.d_out,
            "scale_scores": settings.scale,
        },
    )
    tokens = list(example.tokens)
    return DecoderBlog(
        shift=shift,
        simple_average=simple_average,
        head_weights=matrix_frame(trace.weights, tokens, tokens),
        head_size=settings.d_out,
        simple_average_table=_wide(average, tokens),
        head_table=_wide(trace.weights, tokens),
        code=code,
    )


def perturb_range(num_tokens: int) -> tuple[int, int] | None:
    """Which tokens (from 1) the leakage check may push: from the 2nd on; None for one token."""
    return (2, num_tokens) if num_tokens >= 2 else None


def _dropped_cells(keep: torch.Tensor, allowed: torch.Tensor) -> np.ndarray:
    """(T*T,) row by row: the weights dropout zeroed among those the mask lets through (a future cell, already
    0, is not counted as one)."""
    return (~keep & allowed).flatten().cpu().numpy()


def applied_rate(sidebar_rate: float, training: bool) -> float:
    """The rate lesson 4 applies, for every weight source: the sidebar's, or the book's 0.5 when training
    is on at a rate of 0 (switching training on must show dropout at work)."""
    return TEACHING_DROPOUT if training and sidebar_rate == 0 else sidebar_rate


def dropout_rate(settings: Settings, training: bool) -> float:
    """`applied_rate` of the sidebar's dropout."""
    return applied_rate(settings.dropout, training)


def rate_note(sidebar_rate: float, training: bool) -> str | None:
    """Why the rate applied differs from the sidebar's, or None when it does not."""
    if applied_rate(sidebar_rate, training) == sidebar_rate:
        return None
    return (
        f"The sidebar's dropout rate is 0, so training mode uses the book's {TEACHING_DROPOUT:g} here "
        "to show dropout at work; set another rate in the sidebar."
    )


def dropout_note(settings: Settings, training: bool) -> str | None:
    """`rate_note` of the sidebar's dropout."""
    return rate_note(settings.dropout, training)


@dataclass(frozen=True)
class CausalMasks:
    """One head's scaled scores masked both ways, left unmasked, and the masked weights after dropout; each
    matrix (T, T), rows = queries."""

    unmasked: torch.Tensor  # softmax of the scaled scores: every query reads every key
    masked: torch.Tensor  # -inf above the diagonal, then softmax
    renormalised: torch.Tensor  # softmax, zero the future, renormalise each row
    dropped: torch.Tensor  # `masked` after dropout (the same tensor when nothing was drawn)
    keep: torch.Tensor | None  # bool, True = kept by dropout; None when nothing was drawn
    training: bool
    sidebar_rate: float  # the sidebar's dropout rate (applied_rate gives the one used)

    @property
    def future(self) -> torch.Tensor:
        """(T,): the weight each unmasked row put on later tokens."""
        return self.unmasked.triu(diagonal=1).sum(dim=-1)

    @property
    def rows_changed(self) -> int:
        """Rows whose strongest key the mask changed."""
        return int((self.unmasked.argmax(dim=-1) != self.masked.argmax(dim=-1)).sum())


def causal_masks(scaled_scores: torch.Tensor, *, training: bool, sidebar_rate: float, dropout_seed: int) -> CausalMasks:
    """A head's (T, T) scaled scores (from its trace) through both masking methods and without a mask; in
    training mode dropout on the masked weights, drawn from `dropout_seed` on their device."""
    rate = applied_rate(sidebar_rate, training)
    with torch.no_grad():
        masked = fn.mask_before_softmax(scaled_scores)
        if training and rate > 0:
            dropped, keep = fn.dropout_with_generator(masked, rate, generator(dropout_seed, masked.device))
        else:
            dropped, keep = masked, None
        return CausalMasks(
            unmasked=torch.softmax(scaled_scores, dim=-1),
            masked=masked,
            renormalised=fn.mask_after_softmax(scaled_scores).renormalised,
            dropped=dropped,
            keep=keep,
            training=training,
            sidebar_rate=sidebar_rate,
        )


def mask_effect(tokens: tuple[str, ...], masks: CausalMasks) -> MaskEffect:
    """The head without the mask, and per query the weight it had on later tokens and its strongest key
    without and with the mask."""
    before, after = masks.unmasked.argmax(dim=-1), masks.masked.argmax(dim=-1)  # (T,) each
    rows = pd.DataFrame(
        {
            "query": tokens,
            "weight on later pieces": masks.future.cpu().double().numpy(),
            "strongest before": [tokens[i] for i in before.tolist()],
            "strongest after": [tokens[i] for i in after.tolist()],
        }
    )
    return MaskEffect(
        unmasked=matrix_frame(masks.unmasked, tokens, tokens),
        rows=rows,
        future_mass=float(masks.future.mean()),
        rows_changed=masks.rows_changed,
    )


def lesson_from_masks(
    tokens: tuple[str, ...],
    masks: CausalMasks,
    *,
    head_dim: int,
    prediction: Prediction,
    code: str,
    trained_causal: bool = False,
    effect: MaskEffect | None = None,
    leak: LeakCheck | None = None,
    book: BookCausal | None = None,
    blog: DecoderBlog | None = None,
    batch_shapes: tuple[tuple[str, tuple[int, ...]], ...] = (),
    pattern: HeadPattern | None = None,
    provenance: Provenance | None = None,
) -> CausalLesson:
    """The lesson's tables from one head's masks, whatever the source; the source adds its question, its Code
    box and its own sections."""
    masked, renormalised, keep = masks.masked, masks.renormalised, masks.keep
    rate = applied_rate(masks.sidebar_rate, masks.training)
    num_queries, num_keys = masked.shape
    allowed = fn.causal_mask(num_queries, num_keys, device=masked.device)  # (T, T), True = the mask lets it in
    allowed_weights = int(allowed.sum())
    kept_weights = None if keep is None else int((keep & allowed).sum())
    return CausalLesson(
        tokens=tokens,
        masked=matrix_frame(masked, tokens, tokens),
        renormalised=matrix_frame(renormalised, tokens, tokens),
        max_method_difference=float((renormalised - masked).abs().max()),
        dropped=matrix_frame(masks.dropped, tokens, tokens).assign(
            marked=False if keep is None else _dropped_cells(keep, allowed)
        ),
        training=masks.training,
        dropout=rate,
        dropout_note=rate_note(masks.sidebar_rate, masks.training),
        allowed_weights=allowed_weights,
        kept_weights=kept_weights,
        kept_fraction=None if kept_weights is None else kept_weights / allowed_weights,
        rescale=1.0 / (1.0 - rate),
        head_dim=head_dim,
        prediction=prediction,
        code=code,
        trained_causal=trained_causal,
        effect=effect,
        leak=leak,
        book=book,
        blog=blog,
        batch_shapes=batch_shapes,
        pattern=pattern,
        provenance=provenance,
    )


def _leak_check(
    settings: Settings,
    module: CausalAttention,
    batch: torch.Tensor,
    scaled: torch.Tensor,
    tokens: tuple[str, ...],
    perturbed: int,
) -> tuple[LeakCheck, Prediction]:
    """Push token `perturbed` (from 1) of the (1, T, d_in) batch and measure each output row's change; and the
    masked_fill bug on the module's (T, T) scaled scores. The question it answers comes with it."""
    num_tokens = len(tokens)
    with torch.no_grad():
        buggy = fn.mask_with_classic_bug(scaled.clone())
        changed = batch.clone()
        noise = torch.randn(batch.shape[-1], generator=generator(settings.seed + 7, CPU)).to(batch.device)
        changed[0, perturbed - 1] += NOISE_SIZE * noise
        row_change = (module(changed)[0] - module(batch)[0]).abs().amax(dim=-1)  # (T,)
    code = recipes.fill(
        "causal_leakage",
        {
            "tokens": tokens_comment(settings),
            "inputs": inputs_source(settings),
            "seed": settings.seed,
            "d_out": settings.d_out,
            "perturbed": perturbed,
            "scale_scores": settings.scale,
        },
    )
    leak = LeakCheck(
        perturbed=perturbed,
        leakage=pd.DataFrame(
            {"token": tokens, "position": range(1, num_tokens + 1), "max change": row_change.cpu().numpy()}
        ),
        earlier_unchanged=bool(torch.all(row_change[: perturbed - 1] == 0)),
        buggy=matrix_frame(buggy, tokens, tokens),
        bug_future_mass=float(buggy.triu(diagonal=1).sum(dim=-1).mean()),
        code=code,
    )
    return leak, _leak_question(perturbed, num_tokens, row_change)


def _batch_shapes(num_tokens: int, d_in: int, d_out: int) -> tuple[tuple[str, tuple[int, ...]], ...]:
    return (
        ("inputs, one sentence", (num_tokens, d_in)),
        ("batch = torch.stack((inputs, inputs))", (2, num_tokens, d_in)),
        ("queries / keys / values", (2, num_tokens, d_out)),
        ("attn_scores = queries @ keys.transpose(1, 2)", (2, num_tokens, num_tokens)),
        ("context_vecs", (2, num_tokens, d_out)),
    )


def causal_lesson(settings: Settings, perturbed: int, training: bool) -> CausalLesson:
    """Lesson 4 on the sources' random draws (their worked examples, digit for digit), with their own sections:
    the book's printed example, the decoder blog's steps, the leakage check and batched shapes."""
    example, x, device = inputs_on_device(settings)  # x: (T, d_in)
    tokens = unique_labels(example.tokens)
    num_tokens = len(tokens)
    batch = x.unsqueeze(0)  # (1, T, d_in)
    # Dropout is drawn by causal_masks on the masked weights; the module only gives the head's scores.
    module = CausalAttention(x.shape[-1], settings.d_out, num_tokens, 0.0, generator=generator(settings.seed, CPU))
    module = module.to(device).eval()
    bounds = perturb_range(num_tokens)
    perturbed = min(max(bounds[0], int(perturbed)), bounds[1]) if bounds else 1
    with torch.no_grad():
        scaled = module.trace(batch, scale=settings.scale_factor).scaled_scores[0]  # (T, T)
    # the recipe's torch.manual_seed(seed + 1); drawn before any number is read (tests/unit/test_lesson_devices.py)
    masks = causal_masks(scaled, training=training, sidebar_rate=settings.dropout, dropout_seed=settings.seed + 1)
    leak, prediction = _leak_check(settings, module, batch, scaled, tokens, perturbed)
    code = recipes.fill(
        "causal_dropout",
        {
            "tokens": tokens_comment(settings),
            "inputs": inputs_source(settings),
            "seed": settings.seed,
            "d_out": settings.d_out,
            "scale_scores": settings.scale,
            "dropout": dropout_rate(settings, training),
            "training": training,
        },
    )
    return lesson_from_masks(
        tokens,
        masks,
        head_dim=settings.d_out,
        prediction=prediction,
        code=code,
        leak=leak,
        book=_book(tokens) if settings.preset == PresetKey.BOOK else None,
        blog=decoder_blog(settings),
        batch_shapes=_batch_shapes(num_tokens, x.shape[-1], settings.d_out),
    )


# The cached computation the page calls (ui/cache.py `computed`); keyed on the settings it reads.
LESSON = LessonSpec(
    causal_lesson,
    uses=frozenset({Control.D_OUT, Control.SEED, Control.SCALE, Control.DROPOUT, Control.DEVICE}),
    max_entries=96,
)
