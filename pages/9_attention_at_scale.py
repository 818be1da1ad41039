"""Lesson 9: attention at scale: the cost of T×T, the online softmax, tiling and the KV cache, measured live."""

import streamlit as st

from core.inputs.device import machine_word
from core.lessons import attention_at_scale as lesson
from core.lessons import attention_at_scale_kv as scale_kv
from core.lessons import attention_at_scale_online as scale_online
from ui import cache, draw, widgets
from ui.frame import page_start
from ui.link_notes import link_warning
from ui.presentation import step, step_break


def cost_charts(view: lesson.CostView, device: str) -> None:
    """Time and memory against T, their slopes, the exact values and the bill at 128k tokens."""
    cost = view.cost
    # On a projector the two charts ran from 355 to 882 px of 720 (the s24 review): there they shrink, keeping
    # their shape, and the numbers under them open the next screen.
    with draw.shrinks_to_column("cost-charts", projector_vh=draw.PROJECTOR_CHARTS_VH):
        left, right = st.columns(2)
        with left:
            draw.draw(
                view.time_chart,
                "Log-log chart of the measured time of plain and fused attention against the number of tokens, "
                "with a T squared line.",
            )
        with right:
            draw.draw(
                view.memory_chart,
                "Log-log chart of the measured peak memory of plain and fused attention and the size of one T by T "
                "matrix.",
            )
    step_break()
    m1, m2, m3 = st.columns(3)
    m1.metric(
        "slope of log(time), plain",
        f"{cost.time_slope:.2f}",
        help=f"2 = grows like T²; fitted from {cost.fit_from:,} tokens on",
    )
    m2.metric("slope of log(peak memory), plain", f"{cost.memory_slope:.2f}")
    m3.metric(f"memory ×, {cost.longest // 2:,} → {cost.longest:,} tokens", f"{cost.last_doubling_memory:.2f}")
    for sentence in lesson.time_sentences(cost):
        st.markdown(f"- {sentence}")
    with st.expander("Exact values of these charts"):
        widgets.number_table(view.table, decimals=3, hide_index=True)
    widgets.prose("attention_at_scale", "long_context")
    l1, l2 = st.columns(2)
    l1.metric(f"scores of {lesson.LONG_CONTEXT:,} tokens, one head", lesson.bytes_text(cost.long_scores_bytes))
    l2.metric(f"time on the T² line, this {machine_word(device)}", lesson.duration_text(cost.long_milliseconds))


frame = page_start()
settings = frame.settings
device = settings.device
widgets.prose("attention_at_scale", "intro")

step("(a) Longer contexts, measured")  # "the cost of T×T" answered the doubling question
widgets.prose("attention_at_scale", "cost")
choices = list(lesson.token_choices(device))
# A GPU's length in a link opened on the CPU: the rule takes every device's lengths, and the box, which lacks
# it, dropped it without a word.
if (asked := frame.link.controls.get("scale_longest")) and asked not in [f"{t:,}" for t in choices]:
    link_warning(
        "scale_longest", str(asked), f"is more than this {machine_word(device)} measures ({max(choices):,} tokens)"
    )
longest = st.selectbox(
    "Longest sequence measured (tokens)",
    choices,
    index=choices.index(min(2048, max(choices))),
    format_func=lambda t: f"{t:,}",
    key="scale_longest",
    help=f"Capped at {max(choices):,} tokens on this device ({machine_word(device)}) so that a measurement stays "
    "interactive. Each setting is measured once per server and device, then every student sees the same numbers.",
    **widgets.LINKED,
)
with st.spinner(f"Measuring attention on the {machine_word(device)} (once per setting for the whole class)…"):
    view = cache.computed(lesson.COST, device, int(longest))
# The memory chart, its slope, the doubling's factor and the table answer the question: they wait for a choice.
doubling_answered = widgets.predict(view.prediction, key="predict_scale_doubling")
step_break()  # what the answer unlocks, on a screen of its own: on a projector it started below the fold
if doubling_answered:
    widgets.prose("attention_at_scale", "cost_line")  # "a T² law" would answer the question before it
    cost_charts(view, device)
    # After the answer too: its shape comment "(1, T, T): the matrix that grows like T^2" is the answer.
    widgets.code_box(
        lesson.cost_code(int(longest)),
        view.code_note,
        title="time and memory of plain attention",
    )
else:
    widgets.answer_first("The measured time and memory appear")
    # The numbers under the charts open a screen of their own once answered (cost_charts): a break here too, so
    # the step count stays (13 became 14 with the first answer, the s27b review).
    step_break()
    widgets.answer_first("Their slopes, the 128k-token bill and their code appear")

step("(b) The online softmax, step by step")
widgets.prose("attention_at_scale", "online")
# One update a line: the three on one line ran past a 390 px phone's right edge.
st.latex(
    r"\begin{aligned}m_{\text{new}} &= \max(m_{\text{old}}, \max_j s_j)\\"
    r"\ell &\leftarrow \ell\, e^{m_{\text{old}} - m_{\text{new}}} + \sum_j e^{s_j - m_{\text{new}}}\\"
    r"o &\leftarrow o\, e^{m_{\text{old}} - m_{\text{new}}} + \sum_j e^{s_j - m_{\text{new}}} v_j\end{aligned}"
)
step_break()
k1, k2 = st.columns(2)
# Select boxes, not number boxes: a number typed out of range turned the box red and silently kept the old
# result. A block wider than the row is read as the whole row, and the page says so.
key_choices, block_choices = list(scale_online.KEY_CHOICES), list(scale_online.BLOCK_CHOICES)
num_keys = k1.selectbox("Keys in the row", key_choices, key_choices.index(12), key="scale_keys", **widgets.LINKED)
block_size = k2.selectbox("Keys per block", block_choices, block_choices.index(4), key="scale_block", **widgets.LINKED)
if block_size > num_keys:
    st.caption(f"A block of {block_size} keys holds the whole row of {num_keys}: one block of {num_keys}.")
online = cache.computed(scale_online.ONLINE, settings.seed, int(num_keys), min(int(block_size), int(num_keys)))
# The question before the blocks' table: under the table, its verdict ran to 832 px on a projector (the s22
# re-review). The table shows the running max and sum, which do not say whether the result is exact.
online_answered = widgets.predict(online.prediction, key="predict_scale_online")
widgets.number_table(online.table, hide_index=True)
if online_answered:  # the two results side by side answer it
    widgets.prose("attention_at_scale", "online_exact")
    o1, o2 = st.columns(2)
    o1.metric("online result", scale_online.vector_text(online.output))
    o2.metric("softmax · V in one go", scale_online.vector_text(online.reference))
    st.caption(scale_online.online_caption(online))
else:
    widgets.answer_first("The online result appears beside softmax · V in one go, with their difference,")
widgets.code_box(
    online.code,
    "The online softmax in plain PyTorch, with the page's query, keys, values and blocks.",
    title="the online softmax, block by block",
)

step("(c) FlashAttention's tiling")
widgets.prose("attention_at_scale", "tiling")
step_break()
t1, t2, t3 = st.columns(3)
blocks = list(lesson.BLOCK_CHOICES)
block_q = t1.selectbox("Query block (rows)", blocks, index=blocks.index(8), key="scale_block_q", **widgets.LINKED)
block_k = t2.selectbox("Key block (columns)", blocks, index=blocks.index(8), key="scale_block_k", **widgets.LINKED)
causal = t3.toggle("Causal mask", value=True, key="scale_causal", **widgets.LINKED)
tiling = cache.computed(lesson.TILING, settings.seed, int(block_q), int(block_k), bool(causal))
tiles_answered = widgets.predict(tiling.prediction, key="predict_scale_tiles")
if tiles_answered:  # the grid counts the skipped tiles
    draw.draw(
        tiling.chart,
        f"Grid of {len(tiling.tiles)} tiles: {tiling.computed} computed and {tiling.skipped} skipped.",
    )
    st.caption(lesson.tiling_caption(tiling))
else:
    widgets.answer_first("The grid of computed and skipped tiles appears")
step_break()  # the fused kernel, timed, on a screen of its own: under the grid the step was 1,973 px (s27)
if tiles_answered:
    widgets.prose("attention_at_scale", "fused")
    # After the choice: the measured verdict names the share of tiles skipped at its own length.
    st.info(view.verdict, icon=":material/speed:")
else:
    widgets.answer_first("The tiled loop timed against the fused kernel appears")
widgets.code_box(
    tiling.code,
    "Tiled attention in plain PyTorch, checked against PyTorch's own kernel.",
    title="tiled attention",
)


def real_gpt_timing() -> None:
    """The same comparison on the lab's own GPT (SmolLM2-135M), where its wheel is installed."""
    from core.lessons import inside_gpt as gpt
    from core.lessons import inside_gpt_cache as gpt_cache
    from core.models.smollm2 import ModelFilesError

    try:
        model = cache.gpt_model()
    except ModelFilesError:
        st.caption("With SmolLM2-135M installed (README, Quick start), the same comparison runs on a real GPT here.")
        return
    example = gpt.EXAMPLES[scale_kv.REAL_GPT_PROMPT_INDEX]
    with st.spinner("Generating on SmolLM2-135M with and without the cache…"):
        timing = cache.computed(gpt_cache.CACHE_TIMING, model, example.text, example.kind, scale_kv.REAL_GPT_NEW_TOKENS)
    st.caption(scale_kv.real_gpt_caption(timing))


step("(d) The KV cache")
widgets.prose("attention_at_scale", "kv_cache")
step_break()
generated = st.selectbox(
    "Generated tokens to time",
    list(scale_kv.TIMING_CHOICES),
    index=list(scale_kv.TIMING_CHOICES).index(256),
    key="scale_generated",
    **widgets.LINKED,
)
with st.spinner("Training the lab's model once, then generating with and without the cache…"):
    kv = cache.computed(scale_kv.KV, device, int(generated))
st.caption(scale_kv.generation_caption(kv))
if widgets.predict(kv.prediction, key="predict_scale_cache"):  # the growth table shows the step per token
    widgets.number_table(kv.growth, hide_index=True)
else:
    widgets.answer_first("The table of the cache growing token by token appears")
step_break()  # the timing on a screen of its own: under the growth table the step was 2,401 px (s27)
widgets.prose("attention_at_scale", "cache_timing")
draw.draw(
    kv.chart,
    "Scatter chart of the milliseconds per generated token against the tokens so far, with and without the cache.",
)
st.metric(f"speed-up over {kv.timed_tokens} generated tokens", f"{kv.speedup:.1f}×")
st.caption(scale_kv.speedup_sentence(kv))
real_gpt_timing()
widgets.code_box(
    kv.code,
    "A one-layer model with a KV cache in plain PyTorch: identical logits both ways.",
    title="generation with and without a KV cache",
)
step_break()  # the caches of real models, and their question, on a screen of their own
widgets.prose("attention_at_scale", "real_models")
grouping_answered = widgets.predict(scale_kv.grouping_question(), key="predict_scale_grouping")
step_break()  # what the answer unlocks, on a screen of its own: on a projector it started below the fold
if grouping_answered:  # the table's sizes answer it
    widgets.prose("attention_at_scale", "real_models_answer")
    widgets.number_table(scale_kv.real_cache_table(8192), hide_index=True)
else:
    widgets.answer_first("The caches of SmolLM2-135M, GPT-2 small and Llama 3 8B, with and without sharing, appear")
st.caption(scale_kv.REAL_MODEL_SOURCES)
