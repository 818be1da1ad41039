"""The fixed choices of the lessons' controls: what a box offers, so what a link may name.

One definition of each, shared by the lesson that computes with it and by the link rule (core/app/links.py),
which must not import the lessons (a lesson may import the app layer, never the reverse). Where the choices
name a lesson's examples, only their keys live here: the sentences and prompts stay in the lesson, keyed by
these (tests/unit/test_links.py checks that every key has its example, in this order).
Pure Python (no streamlit, no torch).
"""

from __future__ import annotations

from enum import StrEnum

# ---------------------------------------------------------------- lesson 3 (why scale)

MULTIPLIERS = (1.0, 2.0, 4.0, 8.0, 16.0)  # the score multiplier's stops; the sweep chart draws each of them
DEFAULT_MULTIPLIER = 8.0  # peaky enough to see, as the trainable-weights notebook's example
MAX_TRIALS = 100_000  # the dashboard cap: at 200,000 the why-scale page took 11.5x the reference rerun (bench/)
TRIAL_CHOICES = (1_000, 20_000, MAX_TRIALS)  # Monte Carlo draws per d_k; 20,000 lands within a few percent
DEFAULT_TRIALS = 20_000

# ---------------------------------------------------------------- lesson 6 (a real model)


class RealExample(StrEnum):
    """Lesson 6's example sentences (core.lessons.real_model.EXAMPLES), in the selector's order."""

    PRONOUN = "pronoun"
    REPEAT = "repeat"
    LIST = "list"


OWN_SENTENCE = "own"  # the selector's key for the student's sentence

# ---------------------------------------------------------------- lesson 7 (cross-attention, pretrained)


class CrossPair(StrEnum):
    """Lesson 7's prepared sentence pairs (core.lessons.pretrained_cross.PAIRS), in the pair box's order."""

    PARAPHRASE = "paraphrase"
    QUESTION = "question"


OWN_PAIR = "own"  # the pair box's last choice: two sentences typed on the page (?first_text=…&second_text=…)


def pair_choices() -> tuple[str, ...]:
    """The pair box's codes, as the link carries them: the prepared pairs, then your own."""
    return (*(pair.value for pair in CrossPair), OWN_PAIR)


# ---------------------------------------------------------------- lesson 8 (the training lab)

LEARNING_RATES = (1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2)
MAX_STEPS = 3000  # the step box's top; core.lessons.training_lab.within_caps may cap a wide run lower

# ---------------------------------------------------------------- lesson 9 (attention at scale)

# The longest sequence each device measures, so that a first open stays bearable: what costs the time is the
# tiled Python loop (section c), one round of small kernel calls per tile. Measured for the whole section:
# 4,096 tokens on a 2-core CPU took 12.6 s; on an H200, 8,192 took 20 s and 16,384 took 80 s (launch-bound, so a
# GPU is no faster per tile), which is why a GPU stops at 8,192 (2026-11-28).
MAX_TOKENS = {"cpu": 4096, "cuda": 8192}
TOKEN_CHOICES = (1024, 2048, 4096, 8192)
BLOCK_CHOICES = (2, 4, 8, 16)  # the tile picture's query and key block sizes
TIMING_CHOICES = (64, 128, 256, 512)  # generated tokens for the KV cache's timing chart


def token_choices(device_type: str) -> tuple[int, ...]:
    """The longest-sequence choices this device allows."""
    return tuple(t for t in TOKEN_CHOICES if t <= MAX_TOKENS.get(device_type, MAX_TOKENS["cpu"]))


# ---------------------------------------------------------------- lesson 10 (inside a GPT)


class GptPrompt(StrEnum):
    """Lesson 10's example prompts (core.lessons.inside_gpt.EXAMPLES), in the selector's order."""

    COUNT = "count"  # the first opens the page
    CAPITAL = "capital"
    FOX = "fox"
    CODE = "code"


OWN_PROMPT = "own"  # the selector's key for the student's text
MAX_NEW_TOKENS = 16
TEMPERATURES = (0.0, 0.5, 0.7, 1.0, 1.5)
TOP_KS = (0, 5, 20, 50)  # 0: no top-k filter
TOP_PS = (1.0, 0.9, 0.7, 0.5)  # 1.0: no top-p filter
MIN_REPEAT, MAX_REPEAT = 5, 30  # the induction test's repeated tokens


class AblationChoice(StrEnum):
    """How lesson 10 knocks out a head (core.lessons.inside_gpt_induction.ablation_mode gives the model's own mode)."""

    ZERO = "zero"
    MEAN = "mean"


# ---------------------------------------------------------------- lesson 11 (from attention to the answer)


class Explain(StrEnum):
    """What the attribution explains."""

    CONTRAST = "contrast"  # logit(answer) - logit(the repeated name): the suggested corruption's contrast
    ANSWER = "answer"  # the logit of the model's own answer
    TOKEN = "token"  # the logit of a token the student types
