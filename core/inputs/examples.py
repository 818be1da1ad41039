"""The worked-example inputs of the five source texts, and embeddings for any sentence.

Every function returns an `Example`: token labels plus a `(num_tokens, d_in)` tensor.
The numbers are the sources' own, so a student can check them against the page.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import torch

MAX_TOKENS = 24  # a 24x24 heatmap is still readable on a projector
MAX_TEXT_CHARS = 400  # longer input is refused before tokenising
MAX_D_IN = 64  # cap for the embedding width of a student's own sentence


@dataclass(frozen=True)
class Example:
    """Token labels and their embeddings: `embeddings` is (num_tokens, d_in)."""

    name: str
    tokens: tuple[str, ...]
    embeddings: torch.Tensor
    source: str

    @property
    def d_in(self) -> int:
        return int(self.embeddings.shape[-1])


def journey_example() -> Example:
    """'Your journey starts with one step': 6 tokens x 3 dims (the book chapter and the trainable-weights notebook)."""
    inputs = torch.tensor(
        [
            [0.43, 0.15, 0.89],  # Your
            [0.55, 0.87, 0.66],  # journey
            [0.57, 0.85, 0.64],  # starts
            [0.22, 0.58, 0.33],  # with
            [0.77, 0.25, 0.10],  # one
            [0.05, 0.80, 0.55],  # step
        ]
    )
    tokens = ("Your", "journey", "starts", "with", "one", "step")
    return Example("journey", tokens, inputs, "the book chapter and the trainable-weights notebook")


def random_words_example() -> Example:
    """'These are random words and embeddings': 6 tokens x 3 dims (the attention notebook)."""
    inputs = torch.tensor(
        [
            [0.35, 0.15, 0.89],  # These
            [0.97, 0.80, 0.30],  # are
            [0.65, 0.34, 0.24],  # random
            [0.20, 0.87, 0.34],  # words
            [0.86, 0.13, 0.05],  # and
            [0.10, 0.20, 0.30],  # embeddings
        ]
    )
    tokens = ("These", "are", "random", "words", "and", "embeddings")
    return Example("random_words", tokens, inputs, "the attention notebook")


LIFE_SENTENCE = "Life is short, eat dessert first"


def life_vocabulary(sentence: str = LIFE_SENTENCE) -> dict[str, int]:
    """The self-attention article's dictionary: the sentence's words without commas, sorted, numbered."""
    words = sentence.replace(",", "").split()
    return {word: index for index, word in enumerate(sorted(words))}


def life_example(generator: torch.Generator | None = None) -> Example:
    """'Life is short, eat dessert first' through `nn.Embedding(6, 16)` seeded 123 (the self-attention article).

    With `generator=None` a fresh generator seeded 123 is used, so the numbers are
    the article's whatever the global RNG state is.
    """
    gen = generator if generator is not None else torch.Generator().manual_seed(123)
    vocab = life_vocabulary()
    words = LIFE_SENTENCE.replace(",", "").split()
    token_ids = torch.tensor([vocab[w] for w in words])  # (6,) = [0, 4, 5, 2, 1, 3]
    # nn.Embedding initialises its table with one standard-normal draw of (vocab, dim).
    table = torch.randn(len(vocab), 16, generator=gen)  # (6, 16)
    embedded = table[token_ids]  # (6, 16)
    return Example("life", tuple(words), embedded, "the self-attention article")


CATS_SENTENCE = "cats climb trees during storms"


@dataclass(frozen=True)
class ShiftedChunk:
    """The decoder blog's next-token set-up: the input chunk and its target, shifted by one."""

    inputs: tuple[str, ...]
    targets: tuple[str, ...]

    def pairs(self) -> list[tuple[tuple[str, ...], str]]:
        """(context, next token) for every prefix: the training examples in one chunk."""
        return [(self.inputs[: i + 1], self.targets[i]) for i in range(len(self.inputs))]


def cats_example(d_in: int = 4, seed: int = 123) -> tuple[Example, ShiftedChunk]:
    """'cats climb trees during storms' (the decoder blog): inputs are the first four words.

    The article gives no numbers for the embeddings, so they come from `embed_text`.
    """
    words = CATS_SENTENCE.split()
    chunk = ShiftedChunk(inputs=tuple(words[:-1]), targets=tuple(words[1:]))
    example = embed_text(" ".join(chunk.inputs), d_in=d_in, seed=seed)
    return Example("cats", example.tokens, example.embeddings, "the decoder blog"), chunk


_TOKEN_PATTERN = re.compile(r"[\w']+|[^\w\s]")


def tokenize(text: str) -> list[str]:
    """Split into words and punctuation marks: 'Hi, you!' -> ['Hi', ',', 'you', '!']."""
    return _TOKEN_PATTERN.findall(text)


def _token_seed(token: str, seed: int) -> int:
    # blake2b, not hash(): Python salts hash() per process, so embeddings would change
    # between runs and between the server's workers.
    digest = hashlib.blake2b(f"{seed}\x00{token}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") & 0x7FFF_FFFF_FFFF_FFFF


def embed_text(text: str, d_in: int = 3, seed: int = 123) -> Example:
    """Tokens and toy embeddings for any sentence: (num_tokens, d_in), values in [0, 1).

    Each distinct token gets its own vector (a lookup table, like `nn.Embedding`), drawn
    from a generator seeded by the token and `seed`, and rounded to two decimals like the
    book's example. The same text, d_in and seed give the same numbers on any machine.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("Type a sentence: the text is empty.")
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"The text has {len(text)} characters; the limit is {MAX_TEXT_CHARS}. Use a shorter sentence.")
    if not 1 <= int(d_in) <= MAX_D_IN:
        raise ValueError(f"d_in must be between 1 and {MAX_D_IN}, got {d_in}.")
    tokens = tokenize(text)
    if not tokens:
        raise ValueError("The text has no words or punctuation to attend over.")
    if len(tokens) > MAX_TOKENS:
        raise ValueError(
            f"The sentence has {len(tokens)} tokens; the limit is {MAX_TOKENS} so that "
            "every heatmap stays readable. Use a shorter sentence."
        )
    rows = []
    for token in tokens:
        gen = torch.Generator().manual_seed(_token_seed(token.lower(), int(seed)))
        rows.append(torch.rand(int(d_in), generator=gen))
    embeddings = torch.round(torch.stack(rows), decimals=2)  # (num_tokens, d_in)
    return Example("custom", tuple(tokens), embeddings, "your sentence")


def random_second_sequence(
    num_tokens: int = 8, d_in: int = 16, generator: torch.Generator | None = None
) -> torch.Tensor:
    """The self-attention article's second sentence for cross-attention: `torch.rand(8, 16)` -> (8, 16)."""
    return torch.rand(num_tokens, d_in, generator=generator)


# The book chapter prints the causal-masking walk-through from a `SelfAttention_v2` whose weights
# no seed reproduces with today's PyTorch (seeds 0-30,000 searched; the book's seed 789
# gives 0.1921 where the chapter prints 0.1690). The printed matrices are therefore
# kept as data: the dashboard replays the masking steps on them.
BOOK_CAUSAL_WEIGHTS = torch.tensor(
    [
        [0.1690, 0.1607, 0.1609, 0.1706, 0.1710, 0.1677],
        [0.1615, 0.1555, 0.1563, 0.1762, 0.1844, 0.1662],
        [0.1614, 0.1558, 0.1566, 0.1759, 0.1841, 0.1661],
        [0.1636, 0.1596, 0.1601, 0.1727, 0.1776, 0.1664],
        [0.1602, 0.1651, 0.1655, 0.1693, 0.1748, 0.1652],
        [0.1649, 0.1559, 0.1565, 0.1752, 0.1805, 0.1670],
    ]
)  # (6, 6) softmax(scores / sqrt(2)) as printed in the book chapter

# The chapter's renormalised table (masked_simple / row sums) as printed, padded to (6, 6): its first
# three rows print five columns. The chapter divided unrounded weights, so a few cells differ from
# BOOK_CAUSAL_WEIGHTS renormalised by one unit in the 4th decimal; row 6 column 3 is a misprint
# (0.1555 for 0.1565: nothing in row 6 is masked). The lesson counts both from the numbers.
BOOK_CAUSAL_RENORMALISED = torch.tensor(
    [
        [1.0000, 0.0000, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.5096, 0.4904, 0.0000, 0.0000, 0.0000, 0.0000],
        [0.3406, 0.3289, 0.3305, 0.0000, 0.0000, 0.0000],
        [0.2494, 0.2433, 0.2441, 0.2633, 0.0000, 0.0000],
        [0.1919, 0.1978, 0.1982, 0.2028, 0.2093, 0.0000],
        [0.1649, 0.1559, 0.1555, 0.1752, 0.1805, 0.1670],
    ]
)  # (6, 6) the chapter's rows renormalised, as printed

_NEG_INF = float("-inf")
BOOK_CAUSAL_MASKED_SCORES = torch.tensor(
    [
        [-0.1193, _NEG_INF, _NEG_INF, _NEG_INF, _NEG_INF, _NEG_INF],
        [-0.3330, -0.3871, _NEG_INF, _NEG_INF, _NEG_INF, _NEG_INF],
        [-0.3263, -0.3761, -0.3691, _NEG_INF, _NEG_INF, _NEG_INF],
        [-0.2094, -0.2444, -0.2400, -0.1329, _NEG_INF, _NEG_INF],
        [-0.1138, -0.0713, -0.0680, -0.0359, 0.0092, _NEG_INF],
        [-0.2850, -0.3639, -0.3583, -0.1993, -0.1564, -0.2669],
    ]
)  # (6, 6) raw scores with -inf above the diagonal, as printed in the book chapter


def unique_labels(tokens: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """Token labels made unique for chart axes: 'the', 'cat', 'the (2)'."""
    seen: dict[str, int] = {}
    labels = []
    for token in tokens:
        seen[token] = seen.get(token, 0) + 1
        labels.append(token if seen[token] == 1 else f"{token} ({seen[token]})")
    return tuple(labels)
