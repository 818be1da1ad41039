"""Lesson 6, "Inside a real model": one sentence through all-MiniLM-L6-v2, measured head by head.

The model and its loading live in core/models/minilm.py; the per-head measures in core/attention/head_measures.py.

Everything the page shows is computed here and returned as frozen dataclasses and DataFrames.
Shape legend: L = layers (6), h = heads per layer (12), T = word pieces of the sentence
([CLS] and [SEP] included), queries along rows and keys along columns.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from core import recipes
from core.app.choices import OWN_SENTENCE, RealExample  # the selector's keys, which a link names too
from core.app.registry import LessonSpec
from core.attention.head_measures import (
    THRESHOLDS,
    Finding,
    HeadMeasures,
    HeadScore,
    Measure,
    Pattern,
    find_patterns,
    head_measures,
    pattern_scores,
)
from core.lessons import unique_labels
from core.lessons.common import Prediction
from core.models import minilm

# Re-exported: the page and the tests read the measures through the lesson.
__all__ = ["Finding", "HeadMeasures", "HeadScore", "Measure", "Pattern", "find_patterns", "head_measures"]


@dataclass(frozen=True)
class Contrast:
    """A second sentence where the example's query word means another word: a test of the pair's head."""

    sentence: str
    means: str  # the word piece the query stands for in this sentence, as labelled on the axes


@dataclass(frozen=True)
class ExampleSentence:
    key: str
    label: str  # what the selector shows
    sentence: str
    look_for: str  # one line: what to look for in this example
    query: str  # the pair of word pieces the example is about, as labelled on the axes
    attends_to: str
    contrast: Contrast | None = None  # the same sentence with the query meaning the other word


# One for each RealExample key, in its order (the keys live in core.app.choices, for the link rule).
EXAMPLES: tuple[ExampleSentence, ...] = (
    ExampleSentence(
        RealExample.PRONOUN.value,
        "A pronoun and its noun",
        "The dog chased the ball because it was bored.",
        "Which heads send 'it' to 'dog'? A head that did so because 'it' means the dog would move its "
        "weight to 'ball' when 'it' is the ball.",
        "it",
        "dog",
        Contrast("The dog chased the ball because it was round.", "ball"),
    ),
    ExampleSentence(
        RealExample.REPEAT.value,
        "A repeated word",
        "The cat sat on the mat, and then the cat fell asleep.",
        "Does the second 'cat' find the first one?",
        "cat (2)",
        "cat",
    ),
    ExampleSentence(
        RealExample.LIST.value,
        "A list",
        "We bought apples, pears, plums and cherries at the market.",
        "The fruit names split into word pieces (pear + ##s). Does 'plum' look back at 'pear'?",
        "plum",
        "pear",
    ),
)


@dataclass(frozen=True)
class RealModelLesson:
    """One sentence through the real model: what the page draws.

    attentions (L, h, T, T) float32, each row sums to 1 (no padding: one sentence).
    """

    sentence: str
    tokens: tuple[str, ...]  # word pieces, [CLS] ... [SEP]
    labels: tuple[str, ...]  # the same, made unique for chart axes ('the', 'the (2)')
    attentions: torch.Tensor
    measures: HeadMeasures
    findings: tuple[Finding, ...]
    num_layers: int
    num_heads: int
    head_dim: int
    hidden_size: int
    scale: float  # 1 / sqrt(head_dim)

    def head(self, layer: int, head: int) -> torch.Tensor:
        """One head's weights (T, T)."""
        return self.attentions[layer, head]


def real_model_lesson(model: minilm.RealModel, sentence: str) -> RealModelLesson:
    """Run one sentence and measure every head (raises SentenceError for an unusable one)."""
    output = minilm.encode(model, [sentence])
    tokens = output.tokens[0]
    attentions = output.attentions[:, 0].contiguous()  # (L, B, h, T, T) -> (L, h, T, T), batch of one
    measures = head_measures(attentions, cls_position=0, sep_position=len(tokens) - 1)
    config = model.config
    return RealModelLesson(
        sentence=sentence,
        tokens=tokens,
        labels=tuple(unique_labels(tokens)),
        attentions=attentions,
        measures=measures,
        findings=find_patterns(measures),
        num_layers=config.num_layers,
        num_heads=config.num_heads,
        head_dim=config.head_dim,
        hidden_size=config.hidden_size,
        scale=minilm.scale_factor(config),
    )


@dataclass(frozen=True)
class PairFinding:
    """The head in which one query stands out most by its weight on one key, in this sentence.

    A head can send most of a query's weight to a key because all its queries go there (a sink on that
    key, which says nothing about the query): so each head's weight query -> key is measured against
    the mean weight the same head's other queries put on that key, and the head with the largest lead wins.
    """

    query: str
    attends_to: str
    query_index: int
    key_index: int
    head: HeadScore  # the head with the largest lead (value: its weight query -> key)
    others: float  # the mean weight that head's other queries put on the key
    heaviest: HeadScore  # the head with the largest weight query -> key, whatever its other queries do
    heaviest_others: float  # the mean weight the heaviest head's other queries put on the key


def others_weight(lesson: RealModelLesson, query_index: int, key_index: int) -> torch.Tensor:
    """(L, h): the mean weight each head's queries other than `query_index` put on `key_index`
    ([CLS] and [SEP] included: every other row of the head)."""
    column = lesson.attentions[:, :, :, key_index]  # (L, h, T): every query's weight on the key
    return (column.sum(-1) - column[:, :, query_index]) / (column.shape[-1] - 1)


def pair_finding(lesson: RealModelLesson, query: str, attends_to: str) -> PairFinding | None:
    """The head in which the word piece labelled `query` sends the most weight to `attends_to` beyond what
    the head's other queries send there (None if the sentence has no such pieces)."""
    if query not in lesson.labels or attends_to not in lesson.labels:
        return None
    query_index, key_index = lesson.labels.index(query), lesson.labels.index(attends_to)
    weights = lesson.attentions[:, :, query_index, key_index]  # (L, h)
    others = others_weight(lesson, query_index, key_index)  # (L, h)

    def at(flat: int) -> tuple[HeadScore, float]:
        layer, head = divmod(flat, weights.shape[1])
        return HeadScore(layer, head, float(weights[layer, head])), float(others[layer, head])

    head, head_others = at(int((weights - others).argmax()))
    heaviest, heaviest_others = at(int(weights.argmax()))
    return PairFinding(
        query=query,
        attends_to=attends_to,
        query_index=query_index,
        key_index=key_index,
        head=head,
        others=head_others,
        heaviest=heaviest,
        heaviest_others=heaviest_others,
    )


@dataclass(frozen=True)
class ContrastReading:
    """One head's weight from the query to the two nouns, in the example and in its contrast sentence."""

    head: HeadScore  # the example's pair head, PairFinding.head (value: its weight query -> attends_to)
    first_noun: str  # the example's attends_to ('dog')
    second_noun: str  # what the query means in the contrast sentence ('ball')
    contrast_first: float  # the head's weight query -> first_noun in the contrast sentence
    contrast_second: float  # query -> second_noun in the contrast sentence
    follows_meaning: bool  # in the contrast sentence the head favours the noun the query now means
    best_follower: HeadScore  # of all heads, the one whose weight moves most with the meaning (value: margin)
    best_follower_weights: tuple[float, float]  # its weight to first_noun in the example, second in the contrast


def contrast_reading(
    lesson: RealModelLesson, contrast_lesson: RealModelLesson, example: ExampleSentence
) -> ContrastReading | None:
    """Does the example's pair head follow the meaning when the contrast sentence changes it? From the weights.

    None when the example has no contrast or a sentence lacks the pieces."""
    contrast = example.contrast
    if contrast is None:
        return None
    pair = pair_finding(lesson, example.query, example.attends_to)
    needed = (example.query, example.attends_to, contrast.means)
    if pair is None or contrast.means not in lesson.labels or any(p not in contrast_lesson.labels for p in needed):
        return None

    def weights(of: RealModelLesson, key: str) -> torch.Tensor:  # (L, h): query -> key in every head
        return of.attentions[:, :, of.labels.index(example.query), of.labels.index(key)]

    example_first, example_second = weights(lesson, example.attends_to), weights(lesson, contrast.means)
    contrast_first, contrast_second = (
        weights(contrast_lesson, example.attends_to),
        weights(contrast_lesson, contrast.means),
    )
    # A head follows the meaning by as much as the smaller of its two right-noun margins.
    margin = torch.minimum(example_first - example_second, contrast_second - contrast_first)  # (L, h)
    best = int(margin.argmax())
    best_layer, best_head = divmod(best, lesson.num_heads)
    layer, head = pair.head.layer, pair.head.head
    return ContrastReading(
        head=pair.head,
        first_noun=example.attends_to,
        second_noun=contrast.means,
        contrast_first=float(contrast_first[layer, head]),
        contrast_second=float(contrast_second[layer, head]),
        follows_meaning=bool(contrast_second[layer, head] > contrast_first[layer, head]),
        best_follower=HeadScore(best_layer, best_head, float(margin[best_layer, best_head])),
        best_follower_weights=(
            float(example_first[best_layer, best_head]),
            float(contrast_second[best_layer, best_head]),
        ),
    )


def contrast_caption(reading: ContrastReading, example: ExampleSentence) -> str:
    """What the pair head does when the meaning changes, and the head that follows it best: from the numbers."""
    assert example.contrast is not None  # contrast_reading returns None otherwise
    head, first, second = reading.head, reading.first_noun, reading.second_noun
    query = example.query
    verdict = (
        f"its weight moves to '{second}'."
        if reading.follows_meaning
        else f"it still favours '{first}'. Its weight follows the word, not what '{query}' means here, so it does "
        f"not show which noun '{query}' stands for."
    )
    best = reading.best_follower
    to_first, to_second = reading.best_follower_weights
    follower = (
        f"Of the 72 heads, layer {best.layer}, head {best.head} follows the meaning best: {to_first:.0%} to "
        f"'{first}' in the first sentence, {to_second:.0%} to '{second}' in the second."
        if best.value > 0
        else "None of the 72 heads favours the right noun in both sentences."
    )
    return (
        f"In “{example.contrast.sentence}”, where '{query}' is the {second}, layer {head.layer}, head {head.head} "
        f"sends {reading.contrast_first:.0%} of '{query}' to '{first}' and {reading.contrast_second:.0%} to "
        f"'{second}': {verdict} {follower}"
    )


QUESTION_HEADS = 3  # the heads drawn under the verdict: the three highest previous-piece scores
PREVIOUS_SHARE = 0.5  # the question's line: on average over its queries, more than half on the piece before each
COUNT_OPTIONS = ("none of them", "exactly one", "two to five", "six or more")


def head_name(score: HeadScore) -> str:
    """'layer 0, head 2', as everywhere on the page."""
    return f"layer {score.layer}, head {score.head}"


def ranked_previous_heads(lesson: RealModelLesson) -> tuple[HeadScore, ...]:
    """Every head by its previous-piece score (value: the score), highest first."""
    scores = lesson.measures.previous.flatten()  # (L * h,)
    order = scores.argsort(descending=True)
    return tuple(HeadScore(int(i) // lesson.num_heads, int(i) % lesson.num_heads, float(scores[i])) for i in order)


def count_option(count: int) -> int:
    """The COUNT_OPTIONS index a number of heads falls in."""
    return 0 if count == 0 else 1 if count == 1 else 2 if count <= 5 else 3


def previous_token_question(lesson: RealModelLesson) -> Prediction:
    """'How many of the 72 heads put more than half their weight on the piece just before?', answered by the
    measures.

    Reviews s23 and s24: asked "which of these three heads…", it was a lottery with nothing to reason from, and
    with the three heatmaps drawn beside it, a perfect stripe gave it away. A count is a real prediction (are
    heads specialists, or does every head do a bit of everything?); the heatmaps come with the verdict.
    """
    ranked = ranked_previous_heads(lesson)
    over = [s for s in ranked if s.value > PREVIOUS_SHARE]
    below = ranked[len(over)] if len(over) < len(ranked) else None  # the highest head under the line, if any
    total = lesson.num_layers * lesson.num_heads
    named = "; ".join(f"{head_name(s)} ({s.value:.2f})" for s in over[:5])
    if len(over) > 5:
        named += f"; and {len(over) - 5} more"
    counted = f"{len(over)} of the {total} heads " + ("puts" if len(over) == 1 else "put")
    if not over:
        counted = f"None of the {total} heads puts"
    highest_under = ""
    if below is not None:
        # Next to the line, two decimals can read 0.50 for a head under it: one more decimal there.
        under = f"{below.value:.3f}" if f"{below.value:.2f}" == f"{PREVIOUS_SHARE:.2f}" else f"{below.value:.2f}"
        highest_under = f" The highest under that line, {head_name(below)}, puts {under};"
    return Prediction(
        # "On average": the previous-token score is the mean over the queries, and "each query's" claimed every
        # query of the head passed the line (the s29 review).
        question=f"Of this model's {total} heads, how many put more than half of a query's weight, on average over "
        "the queries, on the word piece just before it, in this sentence?",
        options=COUNT_OPTIONS,
        answer=count_option(len(over)),
        shuffle=False,  # counts read in order; the answer varies with the sentence ("exactly one", "six or more")
        explanation=(
            f"{counted} more than {PREVIOUS_SHARE:.1f} of a query's weight, on average, on the piece just before it"
            + (f": {named}." if over else ".")
            + (highest_under or " Every head is over that line;")
            + " the median head "
            f"{float(lesson.measures.previous.flatten().median()):.2f}. The three highest are drawn below: their "
            "weight just below the diagonal is what the score counts."
        ),
    )


EXAMPLES_BY_KEY = {example.key: example for example in EXAMPLES}
# What the sentence selector shows for each key: the examples, then the student's own sentence.
SENTENCE_LABELS = {**{example.key: example.label for example in EXAMPLES}, OWN_SENTENCE: "Your own sentence"}
SCORE_NAMES = {
    Pattern.PREVIOUS: "previous-token score",
    Pattern.NEXT: "next-token score",
    Pattern.SINK: "weight on [CLS] + [SEP]",
    Pattern.BROAD: "entropy / log(number of pieces)",
}


def opening_head(lesson: RealModelLesson, example: ExampleSentence | None) -> HeadScore:
    """The head the page opens first: the example's pair head, or the clearest previous-token head."""
    pair = pair_finding(lesson, example.query, example.attends_to) if example else None
    if pair is not None:
        return pair.head
    return next(f.strongest for f in lesson.findings if f.pattern is Pattern.PREVIOUS)


def pair_sentence(example: ExampleSentence, pair: PairFinding) -> str:
    """What the example asks, and the head that answers it in this sentence: its weight from the query to the
    key against its other queries' weight there; and the heaviest head too, when it is another one."""
    head, query, key = pair.head, pair.query, pair.attends_to
    text = (
        f"{example.look_for} In this sentence, '{query}' stands out most in layer {head.layer}, head {head.head}, "
        f"which sends {head.value:.0%} of '{query}' to '{key}' while its other queries send '{key}' "
        f"{pair.others:.0%} on average."
    )
    heaviest = pair.heaviest
    if (heaviest.layer, heaviest.head) == (head.layer, head.head):
        return text
    # The heaviest head alone would read as "this head links the pair": its other queries say whether it does.
    return (
        f"{text} Layer {heaviest.layer}, head {heaviest.head} sends more of '{query}' to '{key}' than any other "
        f"head, {heaviest.value:.0%}, but its other queries send '{key}' {pair.heaviest_others:.0%} on average too."
    )


def described(finding: Finding) -> str:
    """One line about a pattern's heads in this sentence (numbers only: no user text)."""
    best = finding.strongest
    strongest = f"the strongest is {head_name(best)} ({best.value:.2f})"
    if not finding.heads:
        return f"In this sentence no head reaches {finding.threshold:.2f}; {strongest}."
    # "layer 0, head 2" as everywhere else on the page: a reviewer read "0-2" beside it as another notation.
    named = "; ".join(f"{head_name(s)} ({s.value:.2f})" for s in finding.heads[:6])
    more = f" and {len(finding.heads) - 6} more" if len(finding.heads) > 6 else ""
    heads = "1 head reaches" if len(finding.heads) == 1 else f"{len(finding.heads)} heads reach"
    return f"In this sentence {heads} {finding.threshold:.2f}: {named}{more}."


def finding_caption(finding: Finding) -> str:
    """The caption under a pattern's prose: how it is measured, and which heads show it here."""
    return f"Measured by the {SCORE_NAMES[finding.pattern]}. {described(finding)}"


FARTHEST = 6  # how many of the farthest-looking heads the distance caption checks for parking


@dataclass(frozen=True)
class DistanceReading:
    """The two mean attention distances on one sentence, and how many far heads are parking heads."""

    parking_all_keys: int  # of the FARTHEST heads by distance over all keys, those at the sink threshold
    parking_words_only: int  # the same for the distance over the words only
    farthest_words_only: HeadScore  # the head that looks farthest over the words only


def distance_reading(lesson: RealModelLesson) -> DistanceReading:
    """Rank heads by both distances; count parking heads ([CLS] + [SEP] weight at the sink threshold)."""
    parking = pattern_scores(lesson.measures)[Pattern.SINK] >= THRESHOLDS[Pattern.SINK]  # (L, h)

    def parking_among_farthest(distance: torch.Tensor) -> int:  # distance: (L, h)
        farthest = distance.flatten().argsort(descending=True)[:FARTHEST]
        return int(parking.flatten()[farthest].sum())

    words = lesson.measures.word_distance  # (L, h)
    best = int(words.flatten().argmax())
    return DistanceReading(
        parking_all_keys=parking_among_farthest(lesson.measures.distance),
        parking_words_only=parking_among_farthest(words),
        farthest_words_only=HeadScore(best // lesson.num_heads, best % lesson.num_heads, float(words.flatten()[best])),
    )


def distance_caption(lesson: RealModelLesson) -> str:
    """What the two distances show on this sentence, from the numbers."""
    reading = distance_reading(lesson)
    far = reading.farthest_words_only
    return (
        f"Over all keys, {reading.parking_all_keys} of the {FARTHEST} farthest-looking heads park at least "
        f"{THRESHOLDS[Pattern.SINK]:.0%} of their weight on [CLS] and [SEP], which sit at the two ends of the "
        f"sentence; over the words only, {reading.parking_words_only} of {FARTHEST} do. Over the words only, "
        f"{head_name(far)} looks farthest: {far.value:.2f} pieces on average."
    )


def code(lesson: RealModelLesson, layer: int, head: int) -> str:
    """The filled recipe core/recipes/real_model.py: this sentence, this head."""
    return recipes.fill("real_model", {"sentence": lesson.sentence, "layer": layer, "head": head})


def sentence_lesson(_model: minilm.RealModel, sentence: str) -> RealModelLesson:
    """`real_model_lesson` as the page caches it. The model is the process's one shared encoder: the
    leading underscore keeps it out of st.cache_data's key (the sentence alone is the key)."""
    return real_model_lesson(_model, sentence)


# The cached computation the page calls (ui/cache.py `computed`): ~1.2 MB at the 64-piece cap,
# so 32 entries stay under 40 MB.
LESSON = LessonSpec(sentence_lesson, uses=None, max_entries=32)
