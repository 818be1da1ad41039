"""Every URL parameter the app reads, and the one rule a link's value must pass.

A link carries the sidebar's settings, the frame's presentation mode and step, and each page's
own controls. Each parameter has one entry in `PARAMETERS`: what spellings it takes and the range
or choices it allows. `read` applies the rule: a value is used exactly as written, or it is
ignored with one note that names the parameter, and the control then keeps its default. A number
a box offers is used in any plain spelling of exactly that number ("4" for 4.0, "1024" for 1,024),
respelled as the box binds it.

Streamlit's bound widgets parse a link more loosely than this (int("１２"), int("1_000"),
float("1e3"), float(" 500 "), the start of an over-long text) and crash on some values
(int("1e999") raises OverflowError inside the number box), so the frame reads the link with this
rule first and removes what it ignores before any widget binds it (streamlit_app.py).

To give a new control a link: add its key here with its rule, and to its page's
`core.app.registry.PageSpec.controls`; tests/test_links.py checks that every control has an entry.
Pure Python (no streamlit).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from core.app import choices, registry
from core.app.controls import PRESET_CONTROLS, SIDEBAR_RULES
from core.app.rules import (  # noqa: F401
    CheckedByItsControl,
    Choice,
    Flag,
    NumberChoice,
    Rate,
    Reading,
    Rule,
    Text,
    Whole,
)
from core.app.settings import PRESETS, PresetKey, Settings, settings_for_preset
from core.inputs.examples import MAX_D_IN, MAX_TOKENS
from core.inputs.weights import MAX_HEADS, MAX_LAYERS, MODELS, WeightSource
from core.models import tiny_transformer as tt


def _spelled_with_commas(length: float) -> str:
    return f"{length:,}"  # the longest-sequence box's format_func: it binds "2,048", never "2048"


def _longest_described() -> str:
    def listed(lengths: list[int], last: str) -> str:
        return ", ".join(f"{t:,}" for t in lengths[:-1]) + f" {last} {lengths[-1]:,}"

    cpu = list(choices.token_choices("cpu"))
    more = [t for t in choices.TOKEN_CHOICES if t not in cpu]
    gpu = f" (a GPU also offers {listed(more, 'and')})" if more else ""
    return f"a length the box offers: {listed(cpu, 'or')} tokens{gpu}"


def _each_models_range(what: str, field: str) -> str:
    """'a layer of one of the models: 0 to 5 for all-MiniLM-L6-v2, 0 to 29 for SmolLM2-135M'."""
    ranges = ", ".join(f"0 to {getattr(shape, field) - 1} for {shape.name}" for shape in MODELS.values())
    return f"a {what} of one of the models: {ranges}"


def _real_model_measures() -> tuple[str, ...]:
    from core.attention.head_measures import Measure

    return tuple(measure.value for measure in Measure)


# SmolLM2-135M (lesson 10); tests/unit/test_inside_gpt.py checks them against the model's config.
GPT_LAYERS, GPT_HEADS = MODELS[WeightSource.DECODER].num_layers, MODELS[WeightSource.DECODER].num_heads
MAX_PRESENTATION_STEPS = 30  # more than any page has; the presentation bar checks the page's own count


# Lesson 6's names for a model's head. Lessons 2, 4 and 5 take them too (their own boxes write layer/head):
# a teacher who carries `real_layer=16&real_head=0` over from lesson 6 onto `?weights=decoder` means that head.
MODEL_HEAD_PARAMETERS = ("real_layer", "real_head")


def _model_range(source: WeightSource, what: str, count: int) -> Callable[[], str]:
    return lambda: f"a {what} of {MODELS[source].name}: 0 to {count - 1}"


def model_head_rules(weights: WeightSource) -> Mapping[str, Rule]:
    """`real_layer` and `real_head` for a link whose Weights control says `weights`.

    The decoder's heads where the link chooses them (SmolLM2 has 30 layers of 9 heads, the encoder 6 of 12):
    the encoder's range alone dropped `real_layer=16` from a decoder link. Any other source: the encoder's,
    which lesson 6 always shows and lessons 2, 4 and 5 show on `weights=pretrained`. The note names the model,
    since the range depends on the link's Weights.
    """
    source = WeightSource.DECODER if weights is WeightSource.DECODER else WeightSource.ENCODER
    layers, heads = MODELS[source].num_layers, MODELS[source].num_heads
    return MappingProxyType(
        {
            "real_layer": Whole(0, layers - 1, described=_model_range(source, "layer", layers)),
            "real_head": Whole(0, heads - 1, described=_model_range(source, "head", heads)),
        }
    )


# The sidebar's settings (the fields of core.app.settings.Settings), each by its control's spec
# (core/app/controls.py); the device's choices are the machine's, so `rules` adds that rule when it reads a link.
SIDEBAR_PARAMETERS: Mapping[str, Rule] = SIDEBAR_RULES

# Every other parameter a link can carry: the frame's and each page's own controls.
PAGE_PARAMETERS: Mapping[str, Rule] = MappingProxyType(
    {
        # the frame: presentation mode and its step (?present=1 is what the README tells a teacher to type)
        "present": Flag(also_true=("1",)),
        "step": Whole(1, MAX_PRESENTATION_STEPS, point_zero=True),
        "room": CheckedByItsControl(),  # the class poll's room code (ui/class_poll.py)
        # lessons 1, 2: the query token, counted from 1
        "query": CheckedByItsControl(),
        "logit_scale": Whole(1, 200, point_zero=True),
        "stretch": Flag(),  # lesson 1: colours stretched to the weights' own range
        # lesson 3
        "multiplier": NumberChoice(choices.MULTIPLIERS),
        "trials": NumberChoice(choices.TRIAL_CHOICES),
        "peak_metric": Choice(("mean max weight", "mean entropy (nats)", "effective tokens")),
        # lesson 4: the token pushed, from 2; the page checks it against its sentence
        "perturb": Whole(2, MAX_TOKENS),
        "training": Flag(),
        # lesson 6
        "real_example": Choice((*(key.value for key in choices.RealExample), choices.OWN_SENTENCE)),
        "real_sentence": Text(),
        # lesson 6's encoder; a link that chooses the decoder's weights bounds them by its heads (`model_head_rules`)
        **model_head_rules(WeightSource.ENCODER),
        "real_measure": Choice(_real_model_measures),
        # lesson 10 (inside a GPT)
        "gpt_prompt": Choice((*(key.value for key in choices.GptPrompt), choices.OWN_PROMPT)),
        "gpt_text": Text(),
        "gpt_chat": Flag(),
        "gpt_temperature": NumberChoice(choices.TEMPERATURES),
        "gpt_top_k": NumberChoice(choices.TOP_KS),
        "gpt_top_p": NumberChoice(choices.TOP_PS),
        "gpt_seed": Whole(0, 9999, point_zero=True),
        "gpt_new_tokens": Whole(1, choices.MAX_NEW_TOKENS, point_zero=True),
        "gpt_layer": Whole(0, GPT_LAYERS - 1),
        "gpt_head": Whole(0, GPT_HEADS - 1),
        "gpt_length": Whole(choices.MIN_REPEAT, choices.MAX_REPEAT, point_zero=True),
        "gpt_ablation": Choice(tuple(choice.value for choice in choices.AblationChoice)),
        # lesson 11 (from attention to the answer)
        "answer_text": Text(),
        "answer_explain": Choice(tuple(explain.value for explain in choices.Explain)),
        "answer_token": Text(),
        "answer_corrupted": Text(),
        "answer_layer": Whole(0, GPT_LAYERS - 1),
        "answer_head": Whole(0, GPT_HEADS - 1),
        # lesson 7
        "first_text": Text(),
        "second_text": Text(),
        "d_in_kv": Whole(1, MAX_D_IN, point_zero=True),
        "d_v": Whole(1, 64, point_zero=True),
        # lessons 2, 4, 5, 7 on a model's head: any model's range here; the picker (ui/weights.head_picker)
        # then holds the value to the chosen model's own range, with a note. And lesson 7's pair of sentences.
        "layer": Whole(0, MAX_LAYERS - 1, described=lambda: _each_models_range("layer", "num_layers")),
        "head": Whole(0, MAX_HEADS - 1, described=lambda: _each_models_range("head", "num_heads")),
        "pair": Choice(choices.pair_choices()),
        # lesson 8
        "train_task": Choice(tuple(task.value for task in tt.Task)),
        "train_layers": NumberChoice((1, 2)),
        "train_heads": Whole(1, tt.MAX_HEADS, point_zero=True),
        "train_d_k": NumberChoice(tt.D_K_CHOICES),
        "train_scale": Flag(),
        "train_init": Choice(tuple(init.value for init in tt.Init)),
        "train_lr": NumberChoice(choices.LEARNING_RATES),
        "train_steps": Whole(10, choices.MAX_STEPS, point_zero=True),
        "train_show_layer": NumberChoice((1, 2)),
        # lesson 9: the longest sequence (its box offers this device's share of the choices)
        "scale_longest": NumberChoice(choices.TOKEN_CHOICES, _spelled_with_commas, _longest_described),
        "scale_keys": Whole(2, 16, point_zero=True),
        "scale_block": Whole(1, 16, point_zero=True),
        "scale_block_q": NumberChoice(choices.BLOCK_CHOICES),
        "scale_block_k": NumberChoice(choices.BLOCK_CHOICES),
        "scale_causal": Flag(),
        "scale_generated": NumberChoice(choices.TIMING_CHOICES),
    }
)


@dataclass(frozen=True)
class LinkNote:
    """One link value the app ignores: the parameter, the value as given, and why."""

    parameter: str
    value: str
    reason: str  # plain words that complete "'name=value' ..."


def read(rule: Rule, name: str, values: list[str]) -> tuple[object, LinkNote | None]:
    """One parameter by the rule: (its value, None), or (None, the note that says why it is ignored)."""
    if len(values) != 1:
        return None, LinkNote(name, " & ".join(map(str, values)), f"is given {len(values)} times")
    value, problem = rule.read(str(values[0]))
    return (None, LinkNote(name, str(values[0]), problem)) if problem else (value, None)


def model_head_for(controls: Mapping[str, object], source: WeightSource) -> tuple[dict[str, int], tuple[LinkNote, ...]]:
    """A link's accepted `real_layer`/`real_head` held to the model of `source`: (those in its range, a note
    for each other). For a page that shows one model whatever the link's Weights say (lesson 6, the encoder):
    the link's rule let `real_layer=16` through for `weights=decoder`, and lesson 6's box fell silently to 0."""
    rules = model_head_rules(source)
    kept: dict[str, int] = {}
    notes: list[LinkNote] = []
    for name in MODEL_HEAD_PARAMETERS:
        if name in controls:
            value, note = read(rules[name], name, [str(controls[name])])
            if note:
                notes.append(note)
            else:
                kept[name] = int(str(value))
    return kept, tuple(notes)


@dataclass(frozen=True)
class LinkReading:
    """What a link asks for, after the rule: the settings to show, the page controls' values, what was ignored."""

    settings: Settings  # the link's accepted sidebar values over the defaults
    notes: tuple[LinkNote, ...]  # at most one per known parameter
    unknown: tuple[str, ...]  # names of parameters the app does not know, in link order
    controls: Mapping[str, object] = field(default_factory=dict)  # accepted values of the frame's and pages' controls
    too_long_chars: int = 0  # the link's size when it was over MAX_LINK_CHARS and ignored whole (else 0)
    # Accepted values the link spells otherwise than their bound widget does ("4" for the multiplier's "4.0"):
    # the widget's spelling, which the frame writes into the link before the widget binds it.
    respelled: Mapping[str, str] = field(default_factory=dict)

    def sidebar_notes(self) -> tuple[LinkNote, ...]:
        return tuple(note for note in self.notes if note.parameter in Settings.__dataclass_fields__)

    def page_notes(self) -> tuple[LinkNote, ...]:
        return tuple(note for note in self.notes if note.parameter not in Settings.__dataclass_fields__)


# The longest link the app writes is about 1,500 characters (a 400-character sentence and every
# control of a page); a link over this bound is ignored whole, with one note. Under it, each ignored
# value gets its own note (a 10 kB number included), and the cleaned link goes back in one message:
# what the server sends never grows with what a link holds beyond its valid values.
MAX_LINK_CHARS = 16_000


def link_chars(params: Mapping[str, str | list[str]]) -> int:
    """A link's size as "name=value&" per value, in characters of its decoded query parameters."""
    return sum(
        len(name) + len(value) + 2
        for name, raw in params.items()
        for value in (raw if isinstance(raw, list) else [raw])
    )


def rules(devices: list[str], weights: WeightSource = WeightSource.RANDOM) -> Mapping[str, Rule]:
    """The rule of every parameter a link can carry, on a machine with these devices, for a link whose
    Weights control says `weights` (a model's head is bounded by that model)."""
    return {**SIDEBAR_PARAMETERS, "device": Choice(tuple(devices)), **PAGE_PARAMETERS, **model_head_rules(weights)}


def link_weights(params: Mapping[str, str | list[str]]) -> WeightSource:
    """The weight source a link chooses, by the Weights control's own rule (the default where it chooses none)."""
    raw = params.get("weights")
    if raw is None:
        return Settings().weights
    value, note = read(SIDEBAR_PARAMETERS["weights"], "weights", raw if isinstance(raw, list) else [raw])
    return Settings().weights if note else WeightSource(str(value))


def read_link(params: Mapping[str, str | list[str]], devices: list[str]) -> LinkReading:
    """Read a link's query parameters by the one rule (see the module docstring).

    `params` maps each name to its value, or to all its values when it was repeated. A link over
    MAX_LINK_CHARS gives the defaults, with its size in `too_long_chars`.
    """
    if (size := link_chars(params)) > MAX_LINK_CHARS:
        return LinkReading(Settings(), (), (), too_long_chars=size)
    by_name = rules(devices, link_weights(params))
    accepted: dict[str, object] = {}
    notes: list[LinkNote] = []
    unknown: list[str] = []
    respelled: dict[str, str] = {}
    for name, raw in params.items():
        rule = by_name.get(name)
        if rule is None:
            unknown.append(name)
            continue
        given = raw if isinstance(raw, list) else [raw]
        value, note = read(rule, name, given)
        if note:
            notes.append(note)
            continue
        accepted[name] = value
        if isinstance(rule, NumberChoice) and value != given[0]:
            respelled[name] = str(value)
    # Any: each sidebar rule returns its Settings field's type (tests/test_links.py), which no static type states.
    sidebar: dict[str, Any] = {name: value for name, value in accepted.items() if name in Settings.__dataclass_fields__}
    if "preset" in sidebar:
        sidebar["preset"] = PresetKey(sidebar["preset"])
    if "weights" in sidebar:
        sidebar["weights"] = WeightSource(sidebar["weights"])
    controls = {name: value for name, value in accepted.items() if name not in sidebar}
    return LinkReading(Settings(**sidebar), tuple(notes), tuple(unknown), controls, respelled=respelled)


def controls_without_a_rule() -> frozenset[str]:
    """Link keys some widget binds that have no rule here (tests/test_links.py keeps this empty)."""
    return registry.link_keys() - set(rules(["cpu"]))


def settings_implied_by_link(params: Mapping[str, str | list[str]], devices: list[str]) -> dict[str, object]:
    """What a link opens with beyond what it spells out: its source preset's value for every
    control the link does not give (or gives as a value the app ignores).

    `?preset=article` alone thus opens the article's d_in 16, d_out 24 and 3 heads, as choosing
    the preset in the box does; `?preset=article&seed=7` keeps the link's seed. A link without a
    valid preset, or with "custom" (no source behind it), implies nothing: the sidebar's defaults
    hold. Values come typed as the sidebar widgets hold them.
    """
    raw = params.get("preset")
    key = raw[-1] if isinstance(raw, list) else raw
    if key is None or key not in PRESETS or key == PresetKey.CUSTOM:
        return {}
    ignored = {note.parameter for note in read_link(params, devices).notes}
    given = set(params) - ignored
    chosen = settings_for_preset(PresetKey(key))
    return {name.value: kind(getattr(chosen, name)) for name, kind in PRESET_CONTROLS.items() if name not in given}
