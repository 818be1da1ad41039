"""Lesson 7's trained cross-attention: the weights of a tiny encoder–decoder become the word alignment.

The model, its clauses and its training live in core/models/tiny_seq2seq.py; the UI trains it
once per process through the training queue (ui/cross_trained.py). Here is what the page shows
about a finished run: one held-out clause's trained weights next to the random weights of the
sources' `CrossAttention` on the same pair, the alignment measured on every held-out clause, a
table per English word, the training curve, the predict-then-reveal question and the recipe.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from core import recipes
from core.lessons.common import Prediction, frame_matrix, matrix_frame
from core.lessons.cross_attention import CrossLesson
from core.models import tiny_seq2seq
from core.models.tiny_seq2seq import AlignedPair, AlignmentRun, Seq2SeqConfig

DEFAULT_CONFIG = Seq2SeqConfig()  # what the page trains, once per process
TARGET_SHARE = 0.8  # the alignment share on held-out clauses the model is expected to reach


@dataclass(frozen=True)
class TrainedCrossLesson:
    """One held-out clause, trained and random, and the run's measures.

    trained / random: (T, S) weights as heatmap frames; rows are the English words being written,
    columns the German words read. words: per English word, its German partner, the trained and the
    random weight on it, and what the trained model reads most.
    """

    english: tuple[str, ...]
    german: tuple[str, ...]
    trained: pd.DataFrame
    random: pd.DataFrame
    words: pd.DataFrame
    clause_share: float  # this clause: mean trained weight on each English word's partner
    random_share: float  # the same measure on the random weights
    held_out_share: float  # every held-out clause
    held_out_accuracy: float  # next English word right, given the right words before it
    held_out_clauses: int
    train_clauses: int
    correct: int  # English words of this clause that read their partner most
    misses: str  # the words that read another German word most, named with both weights ("" when none)
    curve: pd.DataFrame  # step, loss, share (held-out alignment share)
    seconds: float  # how long the run took to train
    prediction: Prediction
    code: str  # core/recipes/cross_attention_trained.py, filled with the run's config


def example_labels(run: AlignmentRun) -> tuple[str, ...]:
    """The sentence picker's labels: "German → English", one per kept held-out clause."""
    return tuple(f"{p.clause.german_text} → {p.clause.english_text}" for p in run.examples)


def farthest_word(pair: AlignedPair) -> int:
    """The English word whose German partner stands farthest from its own place (the verb at the end)."""
    distances = [abs(j - i) for i, j in enumerate(pair.clause.alignment)]
    return int(np.argmax(distances))


def _question(pair: AlignedPair, random_weights: torch.Tensor) -> Prediction:
    """'While writing <word>, which German word will the trained model read most?', answered by its weights."""
    clause, row = pair.clause, farthest_word(pair)
    word, trained_row = clause.english[row], pair.weights[row]
    answer = int(trained_row.argmax())
    partner = clause.alignment[row]
    random_row = random_weights[row]
    random_best = int(random_row.argmax())
    distance = abs(partner - row)
    places = f"{distance} place{'s' if distance != 1 else ''}"
    return Prediction(
        question=(
            f"After training, while the model writes “{word}”, which German word will its cross-attention read most?"
        ),
        options=clause.german,
        answer=answer,
        explanation=(
            f"The trained model puts {trained_row[answer]:.2f} of “{word}”'s weight on “{clause.german[answer]}”"
            + (
                f", its German partner, {places} from where “{word}” stands."
                if answer == partner
                else f"; its German partner “{clause.german[partner]}”, {places} from where “{word}” stands, gets "
                f"{trained_row[partner]:.2f}."
            )
            + f" The sources' random weights put {float(random_row[partner]):.2f} on the partner and read most from"
            f" “{clause.german[random_best]}” ({float(random_row[random_best]):.2f})."
        ),
        shuffle=False,  # the German words in their order: the order is what the question is about
    )


def curve_frame(run: AlignmentRun) -> pd.DataFrame:
    """The training curve: step, loss (training, mean since the last log) and share (held-out alignment)."""
    return pd.DataFrame({"step": run.steps, "loss": run.losses, "share": run.shares})


def target_caption(curve: pd.DataFrame, held_out_clauses: int, target: float = TARGET_SHARE) -> str:
    """What the training curve's dotted line is, where the measured curve first reaches it, and what the curve
    measures (a fixed part of the held-out sentences: its last point is not the share above it on all of them)."""
    reached = curve.loc[curve.share >= target, "step"]
    where = (
        f"the curve first reached it at step {int(reached.iloc[0]):,} of {int(curve.step.iloc[-1]):,}"
        if len(reached)
        else f"the curve stayed below it ({curve.share.max():.1%} at best)"
    )
    measured = min(tiny_seq2seq.CURVE_CLAUSES, held_out_clauses)
    sample = (
        f" Each point is measured on the same {measured:,} of the {held_out_clauses:,} held-out sentences (all of "
        f"them at every point would slow training down); the share above is measured on all of them at the end, so "
        f"the last point ({curve.share.iloc[-1]:.1%}) can differ from it a little."
        if measured < held_out_clauses
        else ""
    )
    return f"The dotted line is {target:.0%}, the share this lab set as the trained model's goal; {where}.{sample}"


def recipe_values(config: Seq2SeqConfig) -> dict[str, object]:
    """The recipe's settings, in its order: the run's config."""
    return {
        "d_model": config.d_model,
        "steps": config.steps,
        "batch_size": config.batch_size,
        "learning_rate": config.learning_rate,
        "held_out_share": config.held_out_share,
        "seed": config.seed,
    }


def _misses(english: tuple[str, ...], german: tuple[str, ...], weights: np.ndarray, partners: list[int]) -> str:
    """The English words that read another German word more than their partner, named: "6 of 7" left a student
    asking which one (the s27 review). weights: (T, S), the trained model's."""
    named = [
        f"“{english[i]}” reads “{german[int(row.argmax())]}” ({row.max():.2f}), not its partner "
        f"“{german[partners[i]]}” ({row[partners[i]]:.2f})"
        for i, row in enumerate(weights)
        if int(row.argmax()) != partners[i]
    ]
    return "; ".join(named)


def trained_cross_lesson(run: AlignmentRun, example: int, random: CrossLesson) -> TrainedCrossLesson:
    """Held-out clause `example` of `run`, with `random`: lesson 7's random-weight lesson on the same pair.

    Raises ValueError when `example` is not one of the run's kept clauses, or `random` is not on its words.
    """
    if not 0 <= example < len(run.examples):
        raise ValueError(f"Pick one of the {len(run.examples)} held-out sentences.")
    pair = run.examples[example]
    clause = pair.clause
    if random.tokens != clause.english or random.second_tokens != clause.german:
        raise ValueError("The random-weight lesson must be computed on the same pair of sentences.")
    random_weights = frame_matrix(random.weights)  # (T, S) float64
    rows = torch.arange(len(clause.english))
    partners = list(clause.alignment)
    trained_on = pair.weights[rows.numpy(), partners]  # (T,)
    random_on = random_weights[rows, partners].numpy()  # (T,)
    strongest = pair.weights.argmax(axis=-1)  # (T,)
    words = pd.DataFrame(
        {
            "English word": clause.english,
            "its German partner": [clause.german[j] for j in partners],
            "trained weight on it": trained_on,
            "random weight on it": random_on,
            "trained model reads most": [clause.german[j] for j in strongest],
            "partner read most": pair.correct,
        }
    )
    return TrainedCrossLesson(
        english=clause.english,
        german=clause.german,
        trained=matrix_frame(torch.from_numpy(pair.weights), clause.english, clause.german),
        random=random.weights,
        words=words,
        clause_share=pair.share,
        random_share=float(random_on.mean()),
        held_out_share=run.held_out_share,
        held_out_accuracy=run.held_out_accuracy,
        held_out_clauses=run.held_out_clauses,
        train_clauses=run.train_clauses,
        correct=sum(pair.correct),
        misses=_misses(clause.english, clause.german, pair.weights, partners),
        curve=curve_frame(run),
        seconds=run.seconds,
        prediction=_question(pair, random_weights),
        code=recipes.fill(
            "cross_attention_trained",
            {**recipe_values(run.config), "german_text": clause.german_text, "english_text": clause.english_text},
        ),
    )
