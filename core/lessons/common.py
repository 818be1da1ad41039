"""What every lesson shares: its inputs, private generators, and tensors as chart tables."""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from core import recipes
from core.app.registry import LessonSpec
from core.app.settings import PresetKey, Settings, load_example
from core.inputs.device import resolve_device
from core.inputs.examples import LIFE_SENTENCE, Example, life_vocabulary, unique_labels


@dataclass(frozen=True)
class Prediction:
    """A predict-then-reveal question whose answer the lesson computed from its own numbers."""

    question: str
    options: tuple[str, ...]
    answer: int  # index into options
    explanation: str  # shown after a choice
    shuffle: bool = True  # show the options in display_order; False where their order means something (tokens)
    tied: tuple[int, ...] = ()  # other options exactly as right as `answer` (a repeated word's equal weight)

    def is_right(self, choice: int) -> bool:
        return choice == self.answer or choice in self.tied

    def display_order(self) -> tuple[int, ...]:
        """The options' order on screen, as indices into `options`.

        A fixed shuffle, drawn from a private generator seeded by the question, its options and its
        explanation (so by the numbers behind the answer): the same question with the same numbers always
        shows the same order (every rerun, every session, the tests), while the answer, which the lessons
        list first or last by habit, lands in varying places as the examples and settings change.
        """
        if not self.shuffle:
            return tuple(range(len(self.options)))
        seed = zlib.crc32("\x1f".join((self.question, *self.options, self.explanation)).encode())
        order = torch.randperm(len(self.options), generator=torch.Generator().manual_seed(seed))
        return tuple(int(i) for i in order)

    def fingerprint(self) -> str:
        """Changes whenever what the question shows or reveals changes (a new setting, new numbers)."""
        return f"{zlib.crc32(repr((self.question, self.options, self.answer, self.explanation)).encode()):08x}"


_SUPERSCRIPT = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def token_name(position: int) -> str:
    """x⁽³⁾ for the 3rd token: the sources' 1-based notation."""
    return f"x⁽{str(position).translate(_SUPERSCRIPT)}⁾"


def strongest_key_question(tokens: tuple[str, ...], query_index: int, weights_row: torch.Tensor) -> Prediction:
    """'Which token will <query> attend to most?', answered by the row of weights (lesson 1's x·x scores)."""
    answer = int(weights_row.argmax())
    # A repeated word has the same embedding, so the same score: every key at the top weight is as right (the s25
    # review chose the second "the" and was told "Not quite").
    top = weights_row[answer]
    tied = tuple(int(i) for i in torch.nonzero(torch.isclose(weights_row, top, rtol=1e-6, atol=0.0)) if i != answer)
    own = "its own embedding" if answer == query_index else f"“{tokens[answer]}”"
    why = (
        "the key with the largest score against this query wins the softmax. A dot product grows with both "
        "length and agreement "
        + (
            "of direction, and here no other key beats the query's own."
            if answer == query_index
            else "of direction, so a longer vector can outscore the token itself, as it does here."
        )
    )
    grows = "A larger multiplier keeps the same winner and only makes its share larger."
    if tied:
        also = " and ".join(f"“{tokens[i]}” ({token_name(i + 1)})" for i in tied)
        own += f", and as much to {also}: the same word, the same embedding, the same score"
        grows = "A larger multiplier keeps the same tied winners and shares the weight out between them equally."
    return Prediction(
        question=f"Which token will “{tokens[query_index]}” attend to most?",
        options=tokens,
        answer=answer,
        # The weight quoted is the softmax of the plain scores (the multiplier at ×1): the lesson's multiplier
        # never changes which key wins, only how large its share is, and the lecture path sets it to ×200.
        explanation=f"With the plain scores (multiplier ×1), the largest weight, {float(top):.4f}, "
        f"goes to {own}: {why} {grows}",
        shuffle=False,  # the tokens in sentence order; where the answer sits says nothing
        tied=tied,
    )


# Where a lesson draws its weights: on the CPU, whatever device it runs on, so that every device
# shows the sources' numbers (a CUDA generator draws a different stream from the same seed).
CPU = torch.device("cpu")


def generator(seed: int, device: torch.device | str) -> torch.Generator:
    """A private generator on `device`: never the global RNG (sessions share one process).

    `device` is the device of the tensors it draws for, and must be said: a CPU generator
    cannot draw for a CUDA tensor ("Expected a 'cuda' device type for generator"). Weights
    drawn on the CPU and moved afterwards pass `CPU`; a draw made on the inputs' own device
    (dropout on the attention weights) passes that device.
    """
    return torch.Generator(device=device).manual_seed(int(seed))


def matrix_frame(
    matrix: torch.Tensor, rows: list[str] | tuple[str, ...], cols: list[str] | tuple[str, ...]
) -> pd.DataFrame:
    """(R, C) tensor -> long DataFrame with row, col, value, row_index, col_index.

    The labels are categorical and the positions int32: the frame is what st.cache_data keeps
    (pickled) for every cached lesson, and a 64 x 64 matrix took 200 kB with string and int64
    columns, 77 kB this way (the labels are each stored once, not once per cell). Categories
    sort as the strings do, so a pivot or a groupby orders rows and columns as before.
    """
    values = matrix.detach().cpu().double()
    num_rows, num_cols = values.shape
    row_index = np.repeat(np.arange(num_rows, dtype=np.int32), num_cols)  # (R * C,): 0 0 0 1 1 1 ...
    col_index = np.tile(np.arange(num_cols, dtype=np.int32), num_rows)  # (R * C,): 0 1 2 0 1 2 ...
    return pd.DataFrame(
        {
            "row": pd.Categorical([rows[i] for i in row_index]),
            "col": pd.Categorical([cols[j] for j in col_index]),
            "value": values.flatten().numpy(),
            "row_index": row_index,
            "col_index": col_index,
        }
    )


def frame_matrix(frame: pd.DataFrame) -> torch.Tensor:
    """The inverse of `matrix_frame`: the (R, C) float64 tensor a heatmap table holds."""
    num_rows, num_cols = int(frame.row_index.max()) + 1, int(frame.col_index.max()) + 1
    matrix = torch.zeros(num_rows, num_cols, dtype=torch.float64)
    values = torch.tensor(frame.value.to_numpy(), dtype=torch.float64)
    matrix[frame.row_index.to_numpy(copy=True), frame.col_index.to_numpy(copy=True)] = values
    return matrix


def token_labels(settings: Settings) -> tuple[str, ...]:
    """The (unique) token labels of the current input: what a page needs before choosing a query."""
    return unique_labels(load_example(settings).tokens)


def dims(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i + 1}" for i in range(n))


def inputs_on_device(settings: Settings) -> tuple[Example, torch.Tensor, torch.device]:
    example = load_example(settings)
    device = resolve_device(settings.device)
    return example, example.embeddings.to(device), device


def clamp_index(index: int, length: int) -> int:
    return min(max(0, int(index)), length - 1)


def row_values(matrix: torch.Tensor, row: int) -> tuple[float, ...]:
    return tuple(float(v) for v in matrix[row].detach().cpu())


# ----------------------------------------------------------------- inputs as a recipe writes them
def _number(value: float) -> str:
    """The shortest text that reads back as the same float32 (0.43, not 0.4300000071525574)."""
    return np.format_float_positional(np.float32(value), unique=True, trim="0")


def tensor_literal(matrix: torch.Tensor) -> recipes.Code:
    """A (R, C) tensor as `torch.tensor([...])` source, one row per line."""
    rows = "".join("    [" + ", ".join(_number(v) for v in row) + "],\n" for row in matrix.tolist())
    return recipes.Code("torch.tensor([\n" + rows + "])")


def inputs_source(settings: Settings) -> recipes.Code:
    """The recipe's `inputs` setting: how the page's input embeddings are built, in plain PyTorch."""
    if settings.preset == PresetKey.ARTICLE:
        vocabulary = life_vocabulary()
        ids = ", ".join(str(vocabulary[word]) for word in LIFE_SENTENCE.replace(",", "").split())
        # The self-attention article: nn.Embedding(6, 16) seeded 123 draws a 6x16 standard-normal table.
        return recipes.Code(f"torch.randn(6, 16, generator=torch.Generator().manual_seed(123))[torch.tensor([{ids}])]")
    return tensor_literal(load_example(settings).embeddings)


def tokens_comment(settings: Settings) -> str:
    return " | ".join(load_example(settings).tokens)


# The cached computation the page calls (ui/cache.py `computed`); keyed on the settings it reads.
TOKEN_LABELS = LessonSpec(token_labels, uses=frozenset(), max_entries=256)


@dataclass(frozen=True)
class WeightColours:
    """How a weights heatmap maps weights to colours: the fixed 0–1 scale, or stretched to the weights' range."""

    domain: tuple[float, float] | None  # None: the heatmap's own 0–1 scale
    legend: str  # the legend's title, which says which


def weight_colours(weights: pd.DataFrame, stretch: bool) -> WeightColours:
    """On the fixed 0–1 scale every weight between 0.09 and 0.24 is one dark colour (lesson 1's weights; lesson
    7's random draws all sit near 1/8); stretched, the colours run from the smallest weight to the largest, and
    the legend says so (it then no longer reads as "0 is dark, 1 is bright")."""
    low, high = float(weights["value"].min()), float(weights["value"].max())
    if not stretch or high - low < 1e-6:  # a constant matrix has no range to stretch over
        return WeightColours(None, "weight")
    return WeightColours((low, high), f"weight, colours stretched to {low:.2f}–{high:.2f}")
