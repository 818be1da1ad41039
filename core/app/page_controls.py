"""The frame's and the pages' own linked controls: one typed spec each, read by the link rule and the tests.

A `LinkedControl` says which control it is (a `FrameControl` or a `PageControl`, whose value is the widget's
key and the URL parameter), the rule a link's value must pass (core/app/rules.py), and one value as its
widget writes it into a shared link. From the specs follow the link rule's table of page parameters
(`core.app.links.PAGE_PARAMETERS`), the pages that bind each control (`pages`, the inverse of each registry
row's `controls`), and the tests' table of what every widget writes (tests/unit/test_links.py).
Giving a page a new linked control is one `PageControl` member, one entry here and the key in its
registry row's `controls`; `check` fails while any of the three is missing. The sidebar's controls have
their own specs (core/app/controls.py).

Pure Python (no streamlit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType

from core.app import choices, registry
from core.app.registry import FrameControl, PageControl
from core.app.rules import CheckedByItsControl, Choice, Flag, NumberChoice, Rule, Text, Whole
from core.inputs.examples import MAX_D_IN, MAX_TOKENS
from core.inputs.weights import MAX_HEADS, MAX_LAYERS, MODELS, WeightSource
from core.models import tiny_transformer as tt

# SmolLM2-135M (lessons 10 and 11); tests/unit/test_inside_gpt.py checks them against the model's config.
GPT_LAYERS, GPT_HEADS = MODELS[WeightSource.DECODER].num_layers, MODELS[WeightSource.DECODER].num_heads
MAX_PRESENTATION_STEPS = 30  # more than any page has; the presentation bar checks the page's own count


@dataclass(frozen=True)
class LinkedControl:
    """One widget of the frame or of a page that a link can set."""

    control: FrameControl | PageControl
    rule: Rule
    # A value as the widget itself writes it into a shared link (not its default): the rule must read it back.
    written: str

    @property
    def key(self) -> str:
        """The widget's key and the URL parameter: one name."""
        return self.control.value

    def pages(self) -> tuple[str, ...]:
        """The slugs of the pages that bind this control (every page, for the frame's)."""
        if isinstance(self.control, FrameControl):
            return tuple(spec.slug for spec in registry.PAGES)
        return tuple(spec.slug for spec in registry.PAGES if self.control in spec.controls)


def _model_range(source: WeightSource, what: str, count: int) -> Callable[[], str]:
    return lambda: f"a {what} of {MODELS[source].name}: 0 to {count - 1}"


def model_head_rules(weights: WeightSource) -> Mapping[PageControl, Whole]:
    """Lesson 6's `real_layer` and `real_head` for a link whose Weights control says `weights`.

    The decoder's heads where the link chooses them (SmolLM2 has 30 layers of 9 heads, the encoder 6 of 12):
    the encoder's range alone dropped `real_layer=16` from a decoder link. Any other source: the encoder's,
    which lesson 6 always shows and lessons 2, 4 and 5 show on `weights=pretrained`. The note names the model,
    since the range depends on the link's Weights.
    """
    source = WeightSource.DECODER if weights is WeightSource.DECODER else WeightSource.ENCODER
    layers, heads = MODELS[source].num_layers, MODELS[source].num_heads
    return MappingProxyType(
        {
            PageControl.REAL_LAYER: Whole(0, layers - 1, described=_model_range(source, "layer", layers)),
            PageControl.REAL_HEAD: Whole(0, heads - 1, described=_model_range(source, "head", heads)),
        }
    )


def _each_models_range(what: str, field: str) -> str:
    """'a layer of one of the models: 0 to 5 for all-MiniLM-L6-v2, 0 to 29 for SmolLM2-135M'."""
    ranges = ", ".join(f"0 to {getattr(shape, field) - 1} for {shape.name}" for shape in MODELS.values())
    return f"a {what} of one of the models: {ranges}"


def _real_model_measures() -> tuple[str, ...]:
    from core.attention.head_measures import Measure  # only a link that carries the parameter loads it

    return tuple(measure.value for measure in Measure)


def _spelled_with_commas(length: float) -> str:
    return f"{length:,}"  # the longest-sequence box's format_func: it binds "2,048", never "2048"


def _longest_described() -> str:
    def listed(lengths: list[int], last: str) -> str:
        spelled = [f"{t:,}" for t in lengths]
        if len(spelled) == 1:  # a GPU's one extra length: "offers 8,192", not "offers  and 8,192"
            return spelled[0]
        return ", ".join(spelled[:-1]) + f" {last} {spelled[-1]}"

    cpu = list(choices.token_choices("cpu"))
    more = [t for t in choices.TOKEN_CHOICES if t not in cpu]
    gpu = f" (a GPU also offers {listed(more, 'and')})" if more else ""
    return f"a length the box offers: {listed(cpu, 'or')} tokens{gpu}"


def _values(kind: type[Enum]) -> tuple[str, ...]:
    return tuple(str(member.value) for member in kind)


_ENCODER_HEAD = model_head_rules(WeightSource.ENCODER)
F, P = FrameControl, PageControl  # the table below reads as one line per control

# The frame's controls, then each lesson's in page order.
LINKED: tuple[LinkedControl, ...] = (
    # the frame: presentation mode and its step (?present=1 is what the README tells a teacher to type)
    LinkedControl(F.PRESENT, Flag(also_true=("1",)), "true"),
    LinkedControl(F.STEP, Whole(1, MAX_PRESENTATION_STEPS, point_zero=True), "3"),
    LinkedControl(F.ROOM, CheckedByItsControl(), "ABCD2345"),  # the class poll's room code (ui/class_poll.py)
    # lessons 1 and 2: the query token, counted from 1 (its box checks it against the page's sentence)
    LinkedControl(P.QUERY, CheckedByItsControl(), "2"),
    LinkedControl(P.LOGIT_SCALE, Whole(1, 200, point_zero=True), "5.0"),
    LinkedControl(P.STRETCH, Flag(), "true"),  # lessons 1 and 7: colours stretched to the weights' own range
    # lesson 3
    LinkedControl(P.MULTIPLIER, NumberChoice(choices.MULTIPLIERS), "4.0"),
    LinkedControl(P.TRIALS, NumberChoice(choices.TRIAL_CHOICES), "1000"),
    LinkedControl(
        P.PEAK_METRIC, Choice(("mean max weight", "mean entropy (nats)", "effective tokens")), "mean entropy (nats)"
    ),
    # lesson 4: the token pushed, from 2 (the page checks it against its sentence)
    LinkedControl(P.PERTURB, Whole(2, MAX_TOKENS), "4"),
    LinkedControl(P.TRAINING, Flag(), "true"),
    # lesson 6 (the encoder's heads; a link that chooses the decoder's weights bounds them by its heads)
    LinkedControl(P.REAL_EXAMPLE, Choice((*_values(choices.RealExample), choices.OWN_SENTENCE)), "own"),
    LinkedControl(P.REAL_SENTENCE, Text(), "A cat."),
    LinkedControl(P.REAL_LAYER, _ENCODER_HEAD[P.REAL_LAYER], "3"),
    LinkedControl(P.REAL_HEAD, _ENCODER_HEAD[P.REAL_HEAD], "5"),
    LinkedControl(P.REAL_MEASURE, Choice(_real_model_measures), "entropy"),
    # lessons 2, 4, 5 and 7 on a model's head: any model's range here; the picker (ui/weights.head_picker)
    # then holds the value to the chosen model's own range, with a note
    LinkedControl(P.LAYER, Whole(0, MAX_LAYERS - 1, described=lambda: _each_models_range("layer", "num_layers")), "1"),
    LinkedControl(P.HEAD, Whole(0, MAX_HEADS - 1, described=lambda: _each_models_range("head", "num_heads")), "8"),
    # lesson 7
    LinkedControl(P.PAIR, Choice(choices.pair_choices()), "question"),
    LinkedControl(P.FIRST_TEXT, Text(), "Hello there"),
    LinkedControl(P.SECOND_TEXT, Text(), "Bonjour"),
    LinkedControl(P.D_IN_KV, Whole(1, MAX_D_IN, point_zero=True), "5"),
    LinkedControl(P.D_V, Whole(1, 64, point_zero=True), "7.0"),
    # lesson 8
    LinkedControl(P.TRAIN_TASK, Choice(_values(tt.Task)), "induction"),
    LinkedControl(P.TRAIN_LAYERS, NumberChoice((1, 2)), "2"),
    LinkedControl(P.TRAIN_HEADS, Whole(1, tt.MAX_HEADS, point_zero=True), "3"),
    LinkedControl(P.TRAIN_D_K, NumberChoice(tt.D_K_CHOICES), "32"),
    LinkedControl(P.TRAIN_SCALE, Flag(), "false"),
    LinkedControl(P.TRAIN_INIT, Choice(_values(tt.Init)), "book"),
    LinkedControl(P.TRAIN_LR, NumberChoice(choices.LEARNING_RATES), "0.0003"),
    LinkedControl(P.TRAIN_STEPS, Whole(10, choices.MAX_STEPS, point_zero=True), "400"),
    LinkedControl(P.TRAIN_SHOW_LAYER, NumberChoice((1, 2)), "1"),
    # lesson 9: the longest sequence (its box offers this device's share of the choices)
    LinkedControl(
        P.SCALE_LONGEST, NumberChoice(choices.TOKEN_CHOICES, _spelled_with_commas, _longest_described), "2,048"
    ),
    LinkedControl(P.SCALE_KEYS, Whole(2, 16, point_zero=True), "12"),
    LinkedControl(P.SCALE_BLOCK, Whole(1, 16, point_zero=True), "4"),
    LinkedControl(P.SCALE_BLOCK_Q, NumberChoice(choices.BLOCK_CHOICES), "8"),
    LinkedControl(P.SCALE_BLOCK_K, NumberChoice(choices.BLOCK_CHOICES), "4"),
    LinkedControl(P.SCALE_CAUSAL, Flag(), "false"),
    LinkedControl(P.SCALE_GENERATED, NumberChoice(choices.TIMING_CHOICES), "256"),
    # lesson 10 (inside a GPT)
    LinkedControl(P.GPT_PROMPT, Choice((*_values(choices.GptPrompt), choices.OWN_PROMPT)), "own"),
    LinkedControl(P.GPT_TEXT, Text(), "Once upon a time"),
    LinkedControl(P.GPT_CHAT, Flag(), "true"),
    LinkedControl(P.GPT_TEMPERATURE, NumberChoice(choices.TEMPERATURES), "0.7"),
    LinkedControl(P.GPT_TOP_K, NumberChoice(choices.TOP_KS), "20"),
    LinkedControl(P.GPT_TOP_P, NumberChoice(choices.TOP_PS), "0.9"),
    LinkedControl(P.GPT_SEED, Whole(0, 9999, point_zero=True), "7.0"),
    LinkedControl(P.GPT_NEW_TOKENS, Whole(1, choices.MAX_NEW_TOKENS, point_zero=True), "8"),
    LinkedControl(P.GPT_LAYER, Whole(0, GPT_LAYERS - 1), "29"),
    LinkedControl(P.GPT_HEAD, Whole(0, GPT_HEADS - 1), "8"),
    LinkedControl(P.GPT_LENGTH, Whole(choices.MIN_REPEAT, choices.MAX_REPEAT, point_zero=True), "20"),
    LinkedControl(P.GPT_REPEAT_SEED, Whole(0, 9999, point_zero=True), "3.0"),
    LinkedControl(P.GPT_ABLATION, Choice(_values(choices.AblationChoice)), "mean"),
    # lesson 11 (from attention to the answer)
    LinkedControl(P.ANSWER_TEXT, Text(), "Alice met Bob. Alice gave the book to"),
    LinkedControl(P.ANSWER_EXPLAIN, Choice(_values(choices.Explain)), "token"),
    LinkedControl(P.ANSWER_TOKEN, Text(), " Bob"),
    LinkedControl(P.ANSWER_CORRUPTED, Text(), "Alice met Bob. Bob gave the book to"),
    LinkedControl(P.ANSWER_LAYER, Whole(0, GPT_LAYERS - 1), "23"),
    LinkedControl(P.ANSWER_HEAD, Whole(0, GPT_HEADS - 1), "3"),
    # lesson 12 (a GPT's keys): the RoPE section's head of layer 0 (its query and key tokens depend on the prompt,
    # and their boxes' labels name its tokens: they stay out of the link)
    LinkedControl(P.KEYS_HEAD, Whole(0, GPT_HEADS - 1), "4"),
)

BY_KEY: Mapping[str, LinkedControl] = MappingProxyType({spec.key: spec for spec in LINKED})


def check() -> None:
    """The specs cover every `FrameControl` and `PageControl` member once, and every control a registry row
    binds is one of them (tests/unit/test_links.py)."""
    members = {*FrameControl, *PageControl}
    if len(BY_KEY) != len(LINKED) or {spec.control for spec in LINKED} != members:
        raise AssertionError("core/app/page_controls.py LINKED must list every FrameControl and PageControl once")
    unbound = [spec.key for spec in LINKED if isinstance(spec.control, PageControl) and not spec.pages()]
    if unbound:
        raise AssertionError(f"no registry row in core/app/registry.py lists the page controls {unbound}")
