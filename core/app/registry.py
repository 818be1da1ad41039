"""The one list of lesson pages: what the frame shows, the tests open and the benchmarks time.

Each page is one row: its script, title, icon, URL path, navigation section, its prose file,
and the sidebar controls it ignores with the reason shown beside them. Pure Python (no
streamlit), so tests and benchmarks read it without a server.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Generic, TypeVar

from core.inputs.weights import MODELS, ModelShape, WeightSource

ROOT = Path(__file__).resolve().parents[2]


class Control(StrEnum):
    """The sidebar's controls; each value is also the name of a `Settings` field and URL key."""

    PRESET = "preset"
    TEXT = "text"
    D_IN = "d_in"
    D_OUT = "d_out"
    SEED = "seed"
    DROPOUT = "dropout"
    NUM_HEADS = "num_heads"
    SCALE = "scale"
    DEVICE = "device"
    WEIGHTS = "weights"  # where W_q, W_k, W_v come from: a core.inputs.weights.WeightSource


R = TypeVar("R")  # what a lesson computation returns


@dataclass(frozen=True)
class LessonSpec(Generic[R]):
    """One cached lesson computation: what it computes, what it reads, how many results are kept.

    The UI layer caches every spec the same way (ui/cache.py `computed`): one st.cache_data per
    spec, bounded by `max_entries` and `ttl_s`. Streamlit bounds a cache by entries and age, so
    `max_entries` is a byte budget divided by the largest value the computation returns (pickled,
    at the largest settings); tests/unit/test_cache_budget.py measures those sizes.
    """

    compute: Callable[..., R]  # a pure function of hashable arguments (core/lessons/)
    # The sidebar controls it reads besides its input (core.app.settings.cache_key), when its first
    # argument is the sidebar's Settings; None when it takes no Settings at all.
    uses: frozenset[Control] | None
    max_entries: int  # results kept per process
    ttl_s: int = 60 * 60  # a lesson: a class's settings are not needed the next hour

    @property
    def name(self) -> str:
        """The computation's name, as the cache budget reports it."""
        return self.compute.__name__


class PageControl(StrEnum):
    """The pages' own widgets bound to the link: each value is the widget's key and its URL parameter.

    A page creates its widget with `key=PageControl.X`; its registry row lists the same names.
    """

    LOGIT_SCALE = "logit_scale"
    STRETCH = "stretch"  # lessons 1 and 7 (random draws): the weights' colours stretched to their own range
    QUERY = "query"
    MULTIPLIER = "multiplier"
    TRIALS = "trials"
    PEAK_METRIC = "peak_metric"
    PERTURB = "perturb"
    TRAINING = "training"
    REAL_EXAMPLE = "real_example"
    REAL_SENTENCE = "real_sentence"
    REAL_LAYER = "real_layer"
    REAL_HEAD = "real_head"
    REAL_MEASURE = "real_measure"
    FIRST_TEXT = "first_text"
    SECOND_TEXT = "second_text"
    D_IN_KV = "d_in_kv"
    D_V = "d_v"
    TRAIN_TASK = "train_task"
    TRAIN_LAYERS = "train_layers"
    TRAIN_HEADS = "train_heads"
    TRAIN_D_K = "train_d_k"
    TRAIN_SCALE = "train_scale"
    TRAIN_INIT = "train_init"
    TRAIN_LR = "train_lr"
    TRAIN_STEPS = "train_steps"
    TRAIN_SHOW_LAYER = "train_show_layer"
    LAYER = "layer"  # pretrained weights (lessons 2, 4, 5, 7): the real head's layer
    HEAD = "head"  # ... and head
    PAIR = "pair"  # lesson 7 with pretrained weights: which two sentences
    SCALE_LONGEST = "scale_longest"  # lesson 9: the longest sequence timed
    SCALE_KEYS = "scale_keys"
    SCALE_BLOCK = "scale_block"
    SCALE_BLOCK_Q = "scale_block_q"
    SCALE_BLOCK_K = "scale_block_k"
    SCALE_CAUSAL = "scale_causal"
    SCALE_GENERATED = "scale_generated"
    GPT_PROMPT = "gpt_prompt"  # lesson 10 (inside a GPT): a checked prompt, or the student's own
    GPT_TEXT = "gpt_text"
    GPT_CHAT = "gpt_chat"  # the student's own text as a chat question (the model's template)
    GPT_TEMPERATURE = "gpt_temperature"
    GPT_TOP_K = "gpt_top_k"
    GPT_TOP_P = "gpt_top_p"
    GPT_SEED = "gpt_seed"
    GPT_NEW_TOKENS = "gpt_new_tokens"
    GPT_LAYER = "gpt_layer"
    GPT_HEAD = "gpt_head"
    GPT_LENGTH = "gpt_length"  # the random sequence's length, before it is repeated
    GPT_REPEAT_SEED = "gpt_repeat_seed"  # draws the random sequence (not the sampling seed: a draw kept the answer)
    GPT_ABLATION = "gpt_ablation"
    ANSWER_TEXT = "answer_text"  # lesson 11 (to the answer): the prompt
    ANSWER_EXPLAIN = "answer_explain"  # which logit the attribution explains (core.app.choices.Explain)
    ANSWER_TOKEN = "answer_token"  # the token typed when it explains a token of the student's
    ANSWER_CORRUPTED = "answer_corrupted"  # the corrupted prompt for patching (blank: the suggested one)
    ANSWER_LAYER = "answer_layer"  # the head opened (clicks on the maps set them too)
    ANSWER_HEAD = "answer_head"
    KEYS_HEAD = "gpt_keys_head"  # lesson 12 (a GPT's keys): the layer-0 head whose query and key RoPE follows


class Section(StrEnum):
    START = "Start"
    STEPS = "Attention step by step"
    FURTHER = "Going further"


@dataclass(frozen=True)
class PageSpec:
    """One lesson page."""

    number: int  # the lesson number shown in its title and in the overview (0: the overview)
    slug: str  # URL path, prose file pages/text/<slug>.md, script pages/<number>_<slug>.py
    title: str
    icon: str  # a Material icon name, as st.Page takes it
    section: Section
    ignores: Mapping[Control, str] = field(default_factory=dict)  # control -> why this page ignores it
    controls: tuple[PageControl, ...] = ()  # the page's own widgets bound to the link (keys = URL parameters)
    random_weights: bool = True  # False: the seed only matters where it draws the inputs (own sentence, blog)
    # None: the page runs on random weights only (the Weights control is greyed out there). Otherwise the
    # controls a model's head makes it ignore beyond what every model fixes (`model_fixes`), with the reason.
    pretrained: Mapping[Control, str] | None = None
    decoder: bool = False  # the page also runs on a head of the decoder (SmolLM2), not only the encoder's
    model_keeps: frozenset[Control] = frozenset()  # controls a model's head still uses (lesson 4: the seed)
    summary: str = ""  # the lesson in one sentence, as the overview lists it after its title (markdown)

    @property
    def weight_sources(self) -> tuple[WeightSource, ...]:
        """The Weights control's choices this page runs on."""
        if self.pretrained is None:
            return (WeightSource.RANDOM,)
        models = (WeightSource.ENCODER, WeightSource.DECODER) if self.decoder else (WeightSource.ENCODER,)
        return (WeightSource.RANDOM, *models)

    def ignores_with(self, weights: WeightSource | str) -> Mapping[Control, str]:
        """The controls this page ignores when the Weights control says `weights`."""
        source = WeightSource(weights)
        if self.pretrained is None:  # random weights only: the Weights control is off whatever it says
            return MappingProxyType(
                {**self.ignores, Control.WEIGHTS: _not_offered(WeightSource.ENCODER, "pretrained weights")}
            )
        if source not in self.weight_sources:
            return MappingProxyType({**self.ignores, Control.WEIGHTS: _not_offered(source)})
        if source.is_model:
            fixes = model_fixes(MODELS[source])
            fixed = {c: why for c, why in fixes.items() if c not in self.ignores and c not in self.model_keeps}
            return MappingProxyType({**self.ignores, **fixed, **(self.pretrained or {})})
        return self.ignores

    @property
    def link_parameters(self) -> frozenset[str]:
        """Every link parameter this page reads, and so shows the notes of: its own controls, and on a page
        that picks a model's layer (and head), lesson 6's `real_layer` (and `real_head`) for the same boxes
        (ui/weights.head_picker): without them here, the frame kept a note on such a value off the page."""
        aliases = {PageControl.LAYER: PageControl.REAL_LAYER, PageControl.HEAD: PageControl.REAL_HEAD}
        taken = {aliases[c] for c in self.controls if c in aliases} if self.pretrained is not None else set()
        return frozenset({*self.controls, *taken})

    @property
    def file(self) -> str:
        """The page script, relative to the repository root (as st.Page and AppTest take it)."""
        return f"pages/{self.number}_{self.slug}.py"

    @property
    def heading(self) -> str:
        """The page's title line: lessons carry their number, the overview does not."""
        return self.title if self.number == 0 else f"{self.number} · {self.title}"

    @property
    def prose_path(self) -> Path:
        return ROOT / "pages" / "text" / f"{self.slug}.md"


def _ignores(**reasons: str) -> Mapping[Control, str]:
    return MappingProxyType({Control(name): reason for name, reason in reasons.items()})


def _gpt_ignores(seed: str) -> Mapping[Control, str]:
    """The sidebar's reasons on the GPT's own pages (lessons 10 to 12): the model fixes all but the seed's."""
    return _ignores(
        preset="this page has its own prompt box",
        text="type your prompt in the page's own box",
        d_in="fixed by the model: 576 numbers per token",
        d_out="fixed by the model: 9 heads of width 64",
        seed=seed,
        dropout="the model runs in evaluation mode, without dropout",
        num_heads="fixed by the model: 9 query heads per layer sharing 3 key/value heads",
        scale="the model was trained with scaling by 1/√64",
        device="the model runs on the CPU",
    )


_RANDOM_VECTORS = "this page uses random vectors"
_NO_HEADS = "a single head on this page"
_DROPOUT_LATER = "dropout arrives with causal attention (lesson 4)"


def model_fixes(shape: ModelShape) -> Mapping[Control, str]:
    """What a model's head fixes, for every page with a model weight source: the sidebar's reasons."""
    return MappingProxyType(
        {
            # The model's own name and its tokenizer's pieces: on the GPT "the pretrained model ... per word piece"
            # named the encoder's (the s20 review).
            Control.D_IN: f"fixed by {shape.name}: {shape.hidden_size} numbers per {shape.piece}",
            Control.D_OUT: f"fixed by {shape.name}: each head is {shape.head_dim} wide",
            Control.SEED: "nothing is drawn: the weights are pretrained",
            Control.SCALE: f"the model was trained with its own scale, 1/√{shape.head_dim}",
            Control.DEVICE: "the model runs on the CPU",
            Control.NUM_HEADS: f"fixed by {shape.name}: {shape.num_heads} heads per layer",
        }
    )


def _not_offered(source: WeightSource, what: str | None = None) -> str:
    """Why the Weights control is off on a page that does not run on `source`: the pages that do, from PAGES."""
    numbers = [str(spec.number) for spec in PAGES if source in spec.weight_sources]
    where = ", ".join(numbers[:-1]) + f" and {numbers[-1]}" if len(numbers) > 1 else "".join(numbers)
    what = what or f"{MODELS[source].name}'s heads"
    return f"{what} are offered on lessons {where}"


PAGES: tuple[PageSpec, ...] = (
    PageSpec(
        0,
        "overview",
        "Overview",
        ":material/home:",
        Section.START,
        _ignores(
            d_out="no projections on this page",
            dropout="no attention weights here",
            num_heads="no heads here",
            scale="no scores here",
            device="nothing to compute here",
        ),
        random_weights=False,
    ),
    PageSpec(
        1,
        "without_weights",
        "Attention without trainable weights",
        ":material/looks_one:",
        Section.STEPS,
        _ignores(
            d_out="no weights: inputs are their own queries, keys and values",
            dropout=_DROPOUT_LATER,
            num_heads="one head only",
            scale="raw dot products, as in the sources' first version",
        ),
        controls=(PageControl.LOGIT_SCALE, PageControl.STRETCH),
        random_weights=False,
        summary=(
            "each token scores every token by a dot product, turns the scores into weights with a softmax, and "
            "mixes the token vectors with them."
        ),
    ),
    PageSpec(
        2,
        "trainable_weights",
        "Self-attention with trainable weights",
        ":material/looks_two:",
        Section.STEPS,
        _ignores(dropout=_DROPOUT_LATER, num_heads=_NO_HEADS),
        controls=(PageControl.QUERY, PageControl.LAYER, PageControl.HEAD),
        pretrained={},
        decoder=True,
        summary=(
            "three learned matrices turn each token into a *query*, a *key* and a *value*, and the scores are "
            "scaled by 1/√d_k."
        ),
    ),
    PageSpec(
        3,
        "why_scale",
        "Why scale by √d_k",
        ":material/looks_3:",
        Section.STEPS,
        _ignores(
            preset=_RANDOM_VECTORS,
            text=_RANDOM_VECTORS,
            d_in="random vectors of every d_k are drawn",
            d_out="d_k is swept from 1 to 512",
            dropout="no dropout in these experiments",
            num_heads="no heads here",
            device="small experiments run on the CPU",
        ),
        controls=(PageControl.MULTIPLIER, PageControl.TRIALS, PageControl.PEAK_METRIC),
        summary="what goes wrong with the softmax and its gradients without the scale.",
    ),
    PageSpec(
        4,
        "causal_dropout",
        "Causal attention and dropout",
        ":material/looks_4:",
        Section.STEPS,
        _ignores(num_heads="a single causal head on this page"),
        controls=(PageControl.PERTURB, PageControl.TRAINING, PageControl.LAYER, PageControl.HEAD),
        pretrained={},
        decoder=True,
        model_keeps=frozenset({Control.SEED}),  # the seed still draws the dropout mask
        summary=(
            "a token may not peek at later tokens, so the future is masked; dropout randomly removes some weights"
            " while training."
        ),
    ),
    PageSpec(
        5,
        "multi_head",
        "Multi-head attention",
        ":material/looks_5:",
        Section.STEPS,
        _ignores(dropout="the heads are shown in evaluation mode, where dropout does nothing (see lesson 4)"),
        controls=(PageControl.LAYER,),
        pretrained={},
        decoder=True,
        summary='several attention "heads" run side by side and their results are combined.',
    ),
    PageSpec(
        6,
        "real_model",
        "Inside a real model",
        ":material/neurology:",
        Section.FURTHER,
        _ignores(
            preset="this page has its own sentence box",
            text="type your sentence in the page's own box",
            d_in="fixed by the pretrained model: 384 numbers per token",
            d_out="fixed by the pretrained model: 12 heads of width 32",
            seed="nothing is random: the weights are pretrained",
            dropout="the model runs in evaluation mode, without dropout",
            num_heads="fixed by the pretrained model: 12 heads per layer",
            scale="the model was trained with scaling by 1/√32",
            device="the model runs on the CPU",
        ),
        controls=(
            PageControl.REAL_EXAMPLE,
            PageControl.REAL_SENTENCE,
            PageControl.REAL_LAYER,
            PageControl.REAL_HEAD,
            PageControl.REAL_MEASURE,
        ),
        summary="the heads of a trained model, on your own sentence.",
    ),
    PageSpec(
        7,
        "cross_attention",
        "Cross-attention",
        ":material/compare_arrows:",
        Section.FURTHER,
        _ignores(dropout="no dropout in this example", num_heads=_NO_HEADS),
        controls=(
            PageControl.FIRST_TEXT,
            PageControl.SECOND_TEXT,
            PageControl.D_IN_KV,
            PageControl.D_V,
            PageControl.PAIR,
            PageControl.LAYER,
            PageControl.HEAD,
            PageControl.STRETCH,
        ),
        pretrained=_ignores(
            preset="the two sentences come from the page's pair box",
            text="the two sentences come from the page's pair box",
        ),
        summary="queries from one sentence, keys and values from another, as in translation.",
    ),
    PageSpec(
        8,
        "training_lab",
        "Train it yourself",
        ":material/model_training:",
        Section.FURTHER,
        _ignores(
            preset="the model trains on random token sequences",
            text="the model trains on random token sequences",
            d_in="the model's width is heads × d_k, set beside Train",
            d_out="d_k is set beside Train",
            dropout="no dropout while learning to copy",
            num_heads="heads are set beside Train",
            scale="scaling is switched beside Train, so two runs can differ only in it",
            device="training runs on the server's CPU",
        ),
        controls=(
            PageControl.TRAIN_TASK,
            PageControl.TRAIN_LAYERS,
            PageControl.TRAIN_HEADS,
            PageControl.TRAIN_D_K,
            PageControl.TRAIN_SCALE,
            PageControl.TRAIN_INIT,
            PageControl.TRAIN_LR,
            PageControl.TRAIN_STEPS,
            PageControl.TRAIN_SHOW_LAYER,
        ),
        summary="train a small attention layer and watch its heads learn.",
    ),
    PageSpec(
        9,
        "attention_at_scale",
        "Attention at scale",
        ":material/speed:",
        Section.FURTHER,
        _ignores(
            preset="random queries, keys and values of many tokens",
            text="random queries, keys and values of many tokens",
            d_in="one head of width 64 is timed; the examples have their own widths",
            d_out="one head of width 64 is timed; the examples have their own widths",
            dropout="no dropout at inference",
            num_heads="one head is timed; the real models' heads are in the table",
            scale="every path scales by 1/√d_k, as real models do",
        ),
        controls=(
            PageControl.SCALE_LONGEST,
            PageControl.SCALE_KEYS,
            PageControl.SCALE_BLOCK,
            PageControl.SCALE_BLOCK_Q,
            PageControl.SCALE_BLOCK_K,
            PageControl.SCALE_CAUSAL,
            PageControl.SCALE_GENERATED,
        ),
        summary=(
            "why long contexts are expensive, how FlashAttention avoids holding all the scores at once, and why a"
            " model that writes text keeps a KV cache, measured live."
        ),
    ),
    PageSpec(  # the navigation follows this order, and shows each lesson's number
        10,
        "inside_gpt",
        "Inside a GPT",
        ":material/smart_toy:",
        Section.FURTHER,
        _gpt_ignores(seed="the page has its own seed, beside the sampling controls"),
        controls=(
            PageControl.GPT_PROMPT,
            PageControl.GPT_TEXT,
            PageControl.GPT_CHAT,
            PageControl.GPT_TEMPERATURE,
            PageControl.GPT_TOP_K,
            PageControl.GPT_TOP_P,
            PageControl.GPT_SEED,
            PageControl.GPT_NEW_TOKENS,
            PageControl.GPT_LAYER,
            PageControl.GPT_HEAD,
            PageControl.GPT_LENGTH,
            PageControl.GPT_REPEAT_SEED,
            PageControl.GPT_ABLATION,
        ),
        summary=(
            "a real decoder that writes text: next-token probabilities and sampling, its 270 causal heads, "
            "induction heads found and switched off."
        ),
    ),
    PageSpec(
        11,
        "to_the_answer",
        "From attention to the answer",
        ":material/functions:",
        Section.FURTHER,
        _gpt_ignores(seed="nothing is drawn at random here"),
        controls=(
            PageControl.ANSWER_TEXT,
            PageControl.ANSWER_EXPLAIN,
            PageControl.ANSWER_TOKEN,
            PageControl.ANSWER_CORRUPTED,
            PageControl.ANSWER_LAYER,
            PageControl.ANSWER_HEAD,
        ),
        summary=(
            "what each head writes, and how it becomes the answer: the residual stream as a sum, the logit lens, "
            "every head's direct effect on a logit, and activation patching."
        ),
    ),
    PageSpec(
        12,
        "gpt_keys",
        "A GPT's keys: rotated, shared, cached",
        ":material/key:",
        Section.FURTHER,
        _gpt_ignores(seed="nothing is drawn at random here"),
        controls=(PageControl.GPT_PROMPT, PageControl.GPT_TEXT, PageControl.GPT_CHAT, PageControl.KEYS_HEAD),
        summary=(
            "what modern GPTs do to their keys, on SmolLM2: rotated by position (RoPE, so a score depends only on "
            "distance), shared between heads (grouped-query attention) and cached while it writes (the KV cache, "
            "timed)."
        ),
    ),
)

HOME = PAGES[0]


def page(slug: str) -> PageSpec:
    """The page with this URL path; KeyError for an unknown one."""
    for spec in PAGES:
        if spec.slug == slug:
            return spec
    raise KeyError(slug)


class FrameControl(StrEnum):
    """The frame's own bound widgets outside Settings, on every page: each value is the widget's key and URL key."""

    PRESENT = "present"  # presentation mode
    STEP = "step"  # ... and its step
    ROOM = "room"  # the class poll's room code (ui/class_poll.py)


FRAME_CONTROLS = tuple(FrameControl)


def link_keys() -> frozenset[str]:
    """Every URL parameter some widget reads: the sidebar's, the frame's and every page's own."""
    return frozenset({*(c.value for c in Control), *FRAME_CONTROLS, *(k for spec in PAGES for k in spec.controls)})


def lessons() -> tuple[PageSpec, ...]:
    """Every page but the overview, in order."""
    return tuple(spec for spec in PAGES if spec.number > 0)


def lesson_list() -> str:
    """The overview's numbered list of the lessons (markdown): each one's number, title and summary."""
    return "\n".join(f"{spec.number}. **{spec.title}**: {spec.summary}" for spec in lessons())
