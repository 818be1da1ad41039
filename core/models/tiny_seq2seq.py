"""A tiny encoder–decoder with one cross-attention layer, trained live on a word-order task.

The task: German clauses whose verb stands at the end, written in English word order. Two
clause forms, generated from a small vocabulary, each word with one known English partner:

- "Kannst du mir helfen diesen Satz zu übersetzen" -> "Can you help me translate this sentence"
  (the overview's clause: a modal question with a zu-infinitive at the very end);
- "dass ich dir das Buch gebe" -> "that I give you the book" (a subordinate clause).

Because every English word has exactly one German partner, the right alignment is known, and
the cross-attention weights can be checked against it: the share of each English word's weight
that lands on its German partner (`alignment_share`).

The model, kept so that its cross-attention weights can only mean "which German word is read":

- encoder: each German word is its word embedding plus its position embedding, nothing more.
  An encoder self-attention layer would let a column carry other words' information, and a
  weight on a column would stop saying which word was read.
- decoder: the previous English word plus its position, one causal self-attention layer (so a
  query knows which clause form it is writing and where it is), then the cross-attention.
- the English word written comes from the cross-attention's output alone (no residual around
  it): whatever the decoder writes, it must have read.

Every random draw comes from one private generator seeded with `config.seed`, in this order:
the held-out split, the weights, then one training batch per step. The same seed gives the same
run; core/recipes/cross_attention_trained.py repeats exactly these draws in plain PyTorch.

Shape legend: B = batch, S = German (source) words, T = English (target) words, D = d_model,
V = vocabulary.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

import numpy as np
import torch

# torch._dynamo is imported with this module, not by PyTorch at the first layer built on the meta device:
# two sessions' threads making that first import at once (torch._dynamo and torch._inductor import each
# other) got "ImportError: ... partially initialized module 'torch._inductor.utils'" and the lesson its
# error box (issue 40's load runs). Python's import lock lets one thread import a module while the others wait.
import torch._dynamo  # noqa: F401
import torch.nn as nn
import torch.nn.functional as F
from torch.nn import init

from core.attention.functional import AttentionTrace, scaled_dot_product_attention
from core.attention.modules import make_linear

# ----------------------------------------------------------------------------------------
# The clauses
# ----------------------------------------------------------------------------------------

# (German subject, English subject, German dative object, English object), one row per person.
PERSONS = (
    ("ich", "I", "mir", "me"),
    ("du", "you", "dir", "you"),
    ("er", "he", "ihm", "him"),
    ("sie", "she", "ihr", "her"),
    ("wir", "we", "uns", "us"),
    ("ihr", "you", "euch", "you"),
)
# The subjects: every person but "ihr". A value carries the German word alone (see TinySeq2Seq),
# so one German word must have one English word: "ihr" would be "you" as a subject and "her" as
# an object, and "ihr zeigt" is the same verb form as "er zeigt" ("show" against "shows").
SUBJECTS = range(5)
# A modal per subject (the order of PERSONS), capitalised: it opens the question.
MODALS = (
    ("Can", ("Kann", "Kannst", "Kann", "Kann", "Können")),
    ("Must", ("Muss", "Musst", "Muss", "Muss", "Müssen")),
    ("Should", ("Soll", "Sollst", "Soll", "Soll", "Sollen")),
)
# Accusative nouns with their gender's "the" and "this".
NOUNS = (
    ("Satz", "sentence", "den", "diesen"),
    ("Brief", "letter", "den", "diesen"),
    ("Text", "text", "den", "diesen"),
    ("Buch", "book", "das", "dieses"),
    ("Wort", "word", "das", "dieses"),
    ("Gedicht", "poem", "das", "dieses"),
    ("Seite", "page", "die", "diese"),
    ("Frage", "question", "die", "diese"),
    ("Geschichte", "story", "die", "diese"),
)
INFINITIVES = (
    ("übersetzen", "translate"),
    ("lesen", "read"),
    ("schreiben", "write"),
    ("verstehen", "understand"),
    ("finden", "find"),
    ("prüfen", "check"),
    ("lernen", "learn"),
)
# Verbs with a dative and an accusative, conjugated for the five SUBJECTS; English 3rd person
# singular adds -s.
GIVING_VERBS = (
    ("give", ("gebe", "gibst", "gibt", "gibt", "geben")),
    ("show", ("zeige", "zeigst", "zeigt", "zeigt", "zeigen")),
    ("send", ("schicke", "schickst", "schickt", "schickt", "schicken")),
    ("bring", ("bringe", "bringst", "bringt", "bringt", "bringen")),
)
THIRD_SINGULAR = (2, 3)  # er, sie


class Form(StrEnum):
    """The clause forms, each with its fixed word order (English word i renders German word ORDERS[form][i])."""

    HELP_TO = "help_to"  # Kannst du mir helfen diesen Satz zu übersetzen -> Can you help me translate this sentence
    HELP = "help"  # Kannst du mir helfen -> Can you help me
    MODAL = "modal"  # Kannst du diesen Satz übersetzen -> Can you translate this sentence
    DASS = "dass"  # dass ich dir das Buch gebe -> that I give you the book


ORDERS = {
    Form.HELP_TO: (0, 1, 3, 2, 7, 4, 5),
    Form.HELP: (0, 1, 3, 2),
    Form.MODAL: (0, 1, 4, 2, 3),
    Form.DASS: (0, 1, 5, 2, 3, 4),
}
# Why HELP and MODAL: in HELP_TO alone "helfen" and "zu" always come together, so nothing in the
# data says which of the two means "help" (a run did read "zu" for it). HELP has "helfen" without
# "zu"; MODAL moves the infinitive to the end without "helfen".


@dataclass(frozen=True)
class Clause:
    """A German clause, its English word order, and which German word each English word renders.

    alignment[i] = j: English word i is German word j (a word-for-word task: every English word
    has one partner; "zu" has none).
    """

    form: Form
    german: tuple[str, ...]
    english: tuple[str, ...]

    @property
    def alignment(self) -> tuple[int, ...]:
        return ORDERS[self.form]

    @property
    def german_text(self) -> str:
        return " ".join(self.german)

    @property
    def english_text(self) -> str:
        return " ".join(self.english)


OVERVIEW_CLAUSE = Clause(
    Form.HELP_TO,
    german=("Kannst", "du", "mir", "helfen", "diesen", "Satz", "zu", "übersetzen"),
    english=("Can", "you", "help", "me", "translate", "this", "sentence"),
)


def _clashes(subject: int, obj: int) -> bool:
    """A person helping or giving to themselves, or the same English word twice ("you help you")."""
    return subject == obj or PERSONS[subject][1] == PERSONS[obj][3]


def _object(noun: tuple[str, str, str, str], this: bool) -> tuple[tuple[str, str], tuple[str, str]]:
    """((German determiner, noun), (English determiner, noun)): "diesen Satz", "this sentence"."""
    return ((noun[3] if this else noun[2], noun[0]), ("this" if this else "the", noun[1]))


def _questions() -> list[Clause]:
    """Every clause of the question forms HELP_TO, HELP and MODAL, in a fixed order."""
    clauses = []
    people = [(s, o) for s, o in itertools.product(SUBJECTS, range(len(PERSONS))) if not _clashes(s, o)]
    for (modal_en, modal_de), (subject, obj) in itertools.product(MODALS, people):
        opening_de = (modal_de[subject], PERSONS[subject][0])
        opening_en = (modal_en, PERSONS[subject][1])
        helped_de, helped_en = PERSONS[obj][2], PERSONS[obj][3]
        clauses.append(Clause(Form.HELP, (*opening_de, helped_de, "helfen"), (*opening_en, "help", helped_en)))
        for noun, this, (verb_de, verb_en) in itertools.product(NOUNS, (False, True), INFINITIVES):
            thing_de, thing_en = _object(noun, this)
            german: tuple[str, ...] = (*opening_de, helped_de, "helfen", *thing_de, "zu", verb_de)
            clauses.append(Clause(Form.HELP_TO, german, (*opening_en, "help", helped_en, verb_en, *thing_en)))
    for (modal_en, modal_de), subject, noun, this, (verb_de, verb_en) in itertools.product(
        MODALS, SUBJECTS, NOUNS, (False, True), INFINITIVES
    ):
        thing_de, thing_en = _object(noun, this)
        german = (modal_de[subject], PERSONS[subject][0], *thing_de, verb_de)
        clauses.append(Clause(Form.MODAL, german, (modal_en, PERSONS[subject][1], verb_en, *thing_en)))
    return clauses


def _subordinate_clauses() -> list[Clause]:
    """'dass ich dir das Buch gebe' and every clause of its form."""
    clauses = []
    for (verb_en, forms), subject, obj, noun, this in itertools.product(
        GIVING_VERBS, SUBJECTS, range(len(PERSONS)), NOUNS, (False, True)
    ):
        if _clashes(subject, obj):
            continue
        thing_de, thing_en = _object(noun, this)
        german = ("dass", PERSONS[subject][0], PERSONS[obj][2], *thing_de, forms[subject])
        verb = verb_en + "s" if subject in THIRD_SINGULAR else verb_en
        english = ("that", PERSONS[subject][1], verb, PERSONS[obj][3], *thing_en)
        clauses.append(Clause(Form.DASS, german, english))
    return clauses


@functools.cache
def all_clauses() -> tuple[Clause, ...]:
    """Every clause of the task, in a fixed order (the overview's clause among them)."""
    return tuple(_questions() + _subordinate_clauses())


PAD = "<pad>"
BOS = "<start>"


@dataclass(frozen=True)
class Vocabulary:
    """Word <-> index for each side; index 0 is padding on both, 1 the decoder's start word on the English side."""

    german: tuple[str, ...]
    english: tuple[str, ...]

    def german_ids(self, words: tuple[str, ...]) -> list[int]:
        index = _positions(self.german)
        return [index[w] for w in words]

    def english_ids(self, words: tuple[str, ...]) -> list[int]:
        index = _positions(self.english)
        return [index[w] for w in words]


@functools.cache
def _positions(words: tuple[str, ...]) -> dict[str, int]:
    return {w: i for i, w in enumerate(words)}


@functools.cache
def vocabulary() -> Vocabulary:
    clauses = all_clauses()
    german = sorted({w for c in clauses for w in c.german})
    english = sorted({w for c in clauses for w in c.english})
    return Vocabulary((PAD, *german), (PAD, BOS, *english))


MAX_GERMAN = max(len(c.german) for c in all_clauses())  # 8
MAX_ENGLISH = max(len(c.english) for c in all_clauses())  # 7
IGNORE_INDEX = -100  # cross_entropy's default: padded English positions are not scored


# ----------------------------------------------------------------------------------------
# Config, data
# ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Seq2SeqConfig:
    """One training run; frozen and hashable, so it is the cache key (and the training queue's)."""

    d_model: int = 32  # width of every embedding, query, key and value
    steps: int = 300  # optimiser steps, one fresh batch each
    batch_size: int = 64  # clauses per step
    learning_rate: float = 0.01  # Adam's step size
    held_out_share: float = 0.2  # clauses never trained on, where the alignment is measured
    seed: int = 123  # seeds the one generator every draw comes from


@dataclass(frozen=True)
class Batch:
    """german (B, S) ids, PAD-padded; decoder_in (B, T): start word then the English words but the last;
    targets (B, T): the English words, IGNORE_INDEX where padded."""

    german: torch.Tensor
    decoder_in: torch.Tensor
    targets: torch.Tensor


def make_batch(clauses: list[Clause] | tuple[Clause, ...]) -> Batch:
    """The clauses as padded id tensors (teacher forcing: the decoder sees the right previous word)."""
    vocab = vocabulary()
    german, decoder_in, targets = [], [], []
    for clause in clauses:
        words = vocab.english_ids(clause.english)
        english_pad = MAX_ENGLISH - len(words)
        german.append(vocab.german_ids(clause.german) + [0] * (MAX_GERMAN - len(clause.german)))  # 0 = PAD
        decoder_in.append([1, *words[:-1]] + [0] * english_pad)  # 1 = BOS
        targets.append(words + [IGNORE_INDEX] * english_pad)
    return Batch(torch.tensor(german), torch.tensor(decoder_in), torch.tensor(targets))  # (B, S), (B, T), (B, T)


@dataclass(frozen=True)
class Split:
    train: tuple[Clause, ...]
    held_out: tuple[Clause, ...]  # the overview's clause first


def split_clauses(held_out_share: float, generator: torch.Generator) -> Split:
    """A seeded split of every clause; the overview's clause is always held out (never trained on)."""
    clauses = all_clauses()
    order = torch.randperm(len(clauses), generator=generator).tolist()  # the generator's first draw
    count = round(held_out_share * len(clauses))
    held = [clauses[i] for i in order[:count]]
    train = [clauses[i] for i in order[count:]]
    if OVERVIEW_CLAUSE in train:
        train.remove(OVERVIEW_CLAUSE)
    else:
        held.remove(OVERVIEW_CLAUSE)
    return Split(tuple(train), (OVERVIEW_CLAUSE, *held))


def form_rows(clauses: tuple[Clause, ...]) -> list[torch.Tensor]:
    """Per form (in Form's order), the indices of its clauses in `clauses`."""
    return [torch.tensor([i for i, c in enumerate(clauses) if c.form is form]) for form in Form]


def draw_rows(by_form: list[torch.Tensor], batch_size: int, generator: torch.Generator) -> torch.Tensor:
    """A batch's clause indices: a form drawn uniformly, then a clause of that form uniformly.

    Each form gets a quarter of the batch on average: HELP has 60 clauses against thousands of
    HELP_TO, and drawn by clause it would hardly ever be seen.
    """
    forms = torch.randint(0, len(by_form), (batch_size,), generator=generator)  # (B,)
    place = torch.rand(batch_size, generator=generator)  # (B,) in [0, 1)
    counts = torch.tensor([len(rows) for rows in by_form])
    inside = (place * counts[forms]).long()  # (B,) index inside the drawn form
    return torch.stack([by_form[f][i] for f, i in zip(forms.tolist(), inside.tolist(), strict=True)])


def check(config: Seq2SeqConfig) -> None:
    """Raise ValueError for a config no run can use."""
    if not (isinstance(config.d_model, int) and 1 <= config.d_model <= 256):
        raise ValueError(f"d_model must be a whole number from 1 to 256, got {config.d_model!r}.")
    if not (isinstance(config.steps, int) and 1 <= config.steps <= 5000):
        raise ValueError(f"steps must be a whole number from 1 to 5000, got {config.steps!r}.")
    if not (isinstance(config.batch_size, int) and config.batch_size >= 1):
        raise ValueError(f"batch_size must be a whole number of at least 1, got {config.batch_size!r}.")
    if not 0.0 < float(config.learning_rate) <= 0.1:
        raise ValueError("the learning rate must be above 0 and at most 0.1.")
    if not 0.0 < float(config.held_out_share) < 1.0:
        raise ValueError("held_out_share must be between 0 and 1.")


# ----------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------


def make_embedding(num: int, width: int, generator: torch.Generator) -> nn.Embedding:
    """An `nn.Embedding` initialised like PyTorch's default (standard normal), from `generator`."""
    layer = nn.Embedding(num, width, device="meta").to_empty(device="cpu")
    init.normal_(layer.weight, generator=generator)
    return layer


@dataclass(frozen=True)
class Seq2SeqTrace:
    """logits (B, T, V_en); cross: the cross-attention's trace, weights (B, T, S)."""

    logits: torch.Tensor
    cross: AttentionTrace


class TinySeq2Seq(nn.Module):
    """German embeddings (the encoder), a one-layer causal decoder, one cross-attention, the unembedding."""

    def __init__(self, d_model: int, generator: torch.Generator):
        super().__init__()
        vocab = vocabulary()
        self.german_embedding = make_embedding(len(vocab.german), d_model, generator)
        self.german_position = make_embedding(MAX_GERMAN, d_model, generator)
        self.english_embedding = make_embedding(len(vocab.english), d_model, generator)
        self.english_position = make_embedding(MAX_ENGLISH, d_model, generator)
        self.self_query = make_linear(d_model, d_model, False, generator)
        self.self_key = make_linear(d_model, d_model, False, generator)
        self.self_value = make_linear(d_model, d_model, False, generator)
        # The cross-attention's W_query starts at zero: every English word first reads all German words
        # equally, so the values learn what each German word means before the weights pick one. Drawn at
        # random, the weights turned sharp on wrong words early and some seeds never left them.
        self.W_query = nn.Linear(
            d_model, d_model, bias=False, device="meta"
        )  # meta: draws nothing, global RNG untouched
        self.W_query.weight = nn.Parameter(torch.zeros(d_model, d_model))  # (d_out, d_in), as nn.Linear stores it
        self.W_key = make_linear(d_model, d_model, False, generator)  # from the German words
        self.W_value = make_linear(d_model, d_model, False, generator)
        self.unembedding = make_linear(d_model, len(vocab.english), False, generator)

    def encode(self, german: torch.Tensor) -> torch.Tensor:
        """(B, S) ids -> (B, S, D): each German word and its place, nothing mixed in."""
        return self.german_embedding(german) + self.german_position(torch.arange(german.shape[1]))

    def decode_queries(self, decoder_in: torch.Tensor) -> torch.Tensor:
        """(B, T) ids -> (B, T, D): the previous English word and its place, plus a causal self-attention."""
        x = self.english_embedding(decoder_in) + self.english_position(torch.arange(decoder_in.shape[1]))
        mixed = scaled_dot_product_attention(self.self_query(x), self.self_key(x), self.self_value(x), is_causal=True)
        return x + mixed.output  # (B, T, D)

    def trace(self, german: torch.Tensor, decoder_in: torch.Tensor) -> Seq2SeqTrace:
        source = self.encode(german)  # (B, S, D)
        state = self.decode_queries(decoder_in)  # (B, T, D)
        may_read = (german != 0)[:, None, :]  # (B, 1, S): padding is never read
        # Keys carry each German word and its place (where to look); values the word alone (what is
        # there). With the place in the values too, a slot could pass on "I am position 3" instead of
        # its word, and training settled on reading the wrong places.
        values = self.W_value(self.german_embedding(german))  # (B, S, D)
        cross = scaled_dot_product_attention(
            self.W_query(state), self.W_key(source), values, attn_mask=may_read
        )  # weights (B, T, S), output (B, T, D)
        return Seq2SeqTrace(self.unembedding(cross.output), cross)  # no residual: it writes what it read

    def forward(self, german: torch.Tensor, decoder_in: torch.Tensor) -> torch.Tensor:
        return self.trace(german, decoder_in).logits  # (B, T, V_en)


# ----------------------------------------------------------------------------------------
# Measures
# ----------------------------------------------------------------------------------------


def aligned_weights(weights: torch.Tensor, clauses: list[Clause] | tuple[Clause, ...]) -> torch.Tensor:
    """Per English word, the weight on its German partner: weights (B, T, S) -> flat (words,)."""
    return torch.cat([weights[b, : len(c.english)][torch.arange(len(c.english)), list(c.alignment)]
                      for b, c in enumerate(clauses)])  # fmt: skip


def alignment_share(weights: torch.Tensor, clauses: list[Clause] | tuple[Clause, ...]) -> float:
    """The mean share of an English word's cross-attention weight that lands on its German partner."""
    return float(aligned_weights(weights, clauses).mean())


def correct_flags(weights: torch.Tensor, clause: Clause) -> tuple[bool, ...]:
    """Per English word of one clause (weights (T, S)): is its German partner the word it reads most?"""
    strongest = weights[: len(clause.english), : len(clause.german)].argmax(dim=-1)  # (T,)
    return tuple(int(j) == a for j, a in zip(strongest.tolist(), clause.alignment, strict=True))


def loss_of(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the written English words. logits (B, T, V), targets (B, T)."""
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE_INDEX)  # (B*T, V)


def accuracy_of(logits: torch.Tensor, targets: torch.Tensor) -> float:
    """Share of English words whose most likely word is the right one (given the right words before it)."""
    scored = targets != IGNORE_INDEX
    return float((logits.argmax(dim=-1)[scored] == targets[scored]).float().mean())


# ----------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------

LOG_POINTS = 15  # curve points per run (plus step 0)
CURVE_CLAUSES = 256  # held-out clauses the curve is measured on (all of them at the end: they cost time)
EXAMPLES = 12  # held-out clauses whose weights a run keeps for the page (the overview's first)
ProgressCallback = Callable[[int, int], None]  # (steps done, steps in all)


@dataclass(frozen=True)
class AlignedPair:
    """One held-out clause and the trained model's cross-attention on it.

    weights (T, S): row i is English word i (the word being written), column j German word j;
    each row sums to 1. correct[i]: English word i reads its German partner most.
    """

    clause: Clause
    weights: np.ndarray
    correct: tuple[bool, ...]
    written: tuple[str, ...]  # the word the model writes at each place, given the right words before it

    @property
    def share(self) -> float:
        """This clause's alignment share: the mean weight on each English word's partner."""
        rows = np.arange(len(self.clause.english))
        return float(self.weights[rows, list(self.clause.alignment)].mean())


@dataclass(frozen=True)
class AlignmentRun:
    """What one run shows (small: cached once per process and shared by every session).

    steps, losses, shares: one entry per logged step (step 0 = before training): the mean training
    loss since the previous log, and the alignment share on the held-out clauses.
    held_out_share / held_out_accuracy: at the end, on all held-out clauses (`held_out_clauses` of them).
    examples: held-out clauses with their weights, the overview's clause first.
    """

    config: Seq2SeqConfig
    steps: tuple[int, ...]
    losses: tuple[float, ...]
    shares: tuple[float, ...]
    held_out_share: float
    held_out_accuracy: float
    held_out_clauses: int
    train_clauses: int
    examples: tuple[AlignedPair, ...]
    seconds: float


def log_steps(steps: int) -> list[int]:
    """The steps at which a run logs: 0, then about LOG_POINTS evenly spaced, always the last."""
    every = max(1, steps // LOG_POINTS)
    return sorted({0, *range(every, steps + 1, every), steps})


def example_clauses(held_out: tuple[Clause, ...]) -> tuple[Clause, ...]:
    """The overview's clause, then held-out clauses of every form in turn (EXAMPLES in all)."""
    first, rest = held_out[0], held_out[1:]
    by_form = [[c for c in rest if c.form is form] for form in (Form.DASS, Form.HELP_TO, Form.MODAL, Form.HELP)]
    mixed = [c for group in itertools.zip_longest(*by_form) for c in group if c is not None]
    return (first, *mixed[: EXAMPLES - 1])


def _pair(model: TinySeq2Seq, clause: Clause) -> AlignedPair:
    batch = make_batch([clause])
    with torch.no_grad():
        traced = model.trace(batch.german, batch.decoder_in)
    weights = traced.cross.weights[0, : len(clause.english), : len(clause.german)]  # (T, S)
    written = traced.logits[0, : len(clause.english)].argmax(dim=-1).tolist()  # (T,)
    return AlignedPair(
        clause=clause,
        weights=weights.numpy().astype(np.float64),
        correct=correct_flags(weights, clause),
        written=tuple(vocabulary().english[i] for i in written),
    )


def _held_out_share(model: TinySeq2Seq, held_out: Batch, clauses: tuple[Clause, ...]) -> tuple[float, float]:
    """(alignment share, next-word accuracy) on the held-out clauses."""
    with torch.no_grad():
        traced = model.trace(held_out.german, held_out.decoder_in)
    return alignment_share(traced.cross.weights, clauses), accuracy_of(traced.logits, held_out.targets)


def train(config: Seq2SeqConfig, on_progress: ProgressCallback | None = None) -> AlignmentRun:
    """Train a fresh model on the clause task; measure its alignment on the held-out clauses."""
    check(config)
    started = time.perf_counter()
    generator = torch.Generator().manual_seed(int(config.seed))
    split = split_clauses(config.held_out_share, generator)
    model = TinySeq2Seq(config.d_model, generator)
    training, held_out = make_batch(split.train), make_batch(split.held_out)
    by_form = form_rows(split.train)
    curve_clauses = split.held_out[:CURVE_CLAUSES]
    curve_batch = make_batch(curve_clauses)
    optimizer = torch.optim.Adam(model.parameters(), lr=config.learning_rate)
    logged = set(log_steps(config.steps))
    steps, losses, shares = [0], [_loss(model, curve_batch)], [_held_out_share(model, curve_batch, curve_clauses)[0]]
    since_log: list[float] = []
    for step in range(1, config.steps + 1):
        rows = draw_rows(by_form, config.batch_size, generator)  # (B,)
        loss = loss_of(model(training.german[rows], training.decoder_in[rows]), training.targets[rows])
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        since_log.append(loss.item())
        if step in logged:
            steps.append(step)
            losses.append(sum(since_log) / len(since_log))
            shares.append(_held_out_share(model, curve_batch, curve_clauses)[0])
            since_log = []
            if on_progress is not None:
                on_progress(step, config.steps)
    share, accuracy = _held_out_share(model, held_out, split.held_out)
    return AlignmentRun(
        config=config,
        steps=tuple(steps),
        losses=tuple(losses),
        shares=tuple(shares),
        held_out_share=share,
        held_out_accuracy=accuracy,
        held_out_clauses=len(split.held_out),
        train_clauses=len(split.train),
        examples=tuple(_pair(model, c) for c in example_clauses(split.held_out)),
        seconds=time.perf_counter() - started,
    )


def _loss(model: TinySeq2Seq, batch: Batch) -> float:
    with torch.no_grad():
        return float(loss_of(model(batch.german, batch.decoder_in), batch.targets))


def estimated_seconds(config: Seq2SeqConfig) -> float:
    """Expected seconds on one quiet core (measured: about 4 ms a step at the defaults, with margin)."""
    return 0.5 + config.steps * config.batch_size * (config.d_model / 32) ** 2 * 1e-4
