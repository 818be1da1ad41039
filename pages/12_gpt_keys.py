"""Lesson 12: a GPT's keys, rotated (RoPE), shared (grouped-query attention) and cached (the KV cache), on
SmolLM2-135M-Instruct, every number from our own forward pass.

Each function draws one section; the last lines put them in order. The numbers come from
core/lessons/inside_gpt_rope.py and inside_gpt_cache.py through ui.gpt_queue (the model's runs, queued fairly
and shared by every session), the question from core/lessons/gpt_keys.py; no torch here.
"""

from __future__ import annotations

import zlib

import pandas as pd
import streamlit as st

from core.app.markup import token_shown
from core.app.registry import PageControl
from core.charts import inside_gpt as charts_gpt
from core.lessons import gpt_keys
from core.lessons import inside_gpt as gpt
from core.lessons import inside_gpt_cache as gpt_cache
from core.lessons import inside_gpt_frames as frames
from core.lessons import inside_gpt_induction as gpt_induction
from core.lessons import inside_gpt_rope as gpt_rope
from core.lessons import inside_gpt_runs as gpt_runs
from ui import draw, gpt_prompt, gpt_queue, widgets
from ui.frame import page_start
from ui.presentation import step, step_break

SLUG = "gpt_keys"
PREDICT_KEY = "predict_gpt_keys"
HEAD = PageControl.KEYS_HEAD  # the layer-0 head whose query and key RoPE follows (in the link)
QUERY_AT, KEY_AT = "gpt_rope_query", "gpt_rope_key"  # the RoPE pair's boxes, keyed per prompt (positions)
TIMED_PROMPTS = "al_timed_prompts"  # the (text, kind) pairs this session asked the KV cache timed on
ATTEMPTS = "al_kv_attempts"  # (text, kind) -> the timing this session shows: 0, the shared one, or a retiming


def rope_pickers(analysis: gpt.PromptAnalysis) -> tuple[int, int | None, int | None]:
    """Layer 0's head, and the query and key the RoPE section follows (a key at or before its query); a position
    is None while its picker stands at the default, so that every student's default view is one shared run."""
    best = gpt.best_previous_head(analysis)[1]  # the head the warm-up computed for everyone
    positions = list(range(len(analysis.tokens)))
    default_i, default_j = gpt_rope.pair_positions(len(positions), None, None)
    label = lambda at: f"{at}: {token_shown(analysis.tokens[at])}"  # noqa: E731 - the boxes' one format
    # The boxes' labels name this prompt's tokens, and a browser sends a box's label back: after a new prompt the
    # old label named no option, and the page said "A control sent a value the app cannot read (gpt_rope_key)"
    # (the s29b review). Boxes of their own for each prompt start at its default pair instead.
    prompt = f"{zlib.crc32(chr(31).join(analysis.tokens).encode()):08x}"
    query_key, key_key = f"{QUERY_AT}_{prompt}", f"{KEY_AT}_{prompt}"
    c0, c1, c2 = st.columns([1, 2, 2])
    head = int(c0.selectbox("Head of layer 0", list(range(analysis.num_heads)), index=best, key=HEAD, **widgets.LINKED))
    i = int(c1.selectbox("Query token", positions, index=default_i, key=query_key, format_func=label))
    keys = positions[: i + 1]
    if st.session_state.get(key_key) not in keys:  # a query moved before the key: the key follows it
        st.session_state[key_key] = min(default_j, i)
    j = int(c2.selectbox("Key token (at or before the query)", keys, key=key_key, format_func=label))
    return head, (None if i == default_i else i), (None if j == default_j else j)


def shift_table(result: gpt_rope.RopeLesson) -> None:
    widgets.number_table(
        pd.DataFrame(
            {
                "query position": [result.i + s for s in result.shifts],
                "key position": [result.j + s for s in result.shifts],
                "score q·k": result.scores,
            }
        ),
        decimals=5,
        hide_index=True,
    )
    st.caption(
        f"Layer 0, head {result.head}: the query of {result.query_token!r} and the key of {result.key_token!r}, "
        f"moved together by up to {max(result.shifts)} positions: the scores differ by at most "
        f"{result.spread:.1e}. Unrotated, the same two vectors score {result.unrotated:.3f}."
    )


def one_pair(result: gpt_rope.RopeLesson) -> None:
    """The pair up close: the rotated query and key, dimension by dimension, and the products that sum to its
    score (BertViz's neuron view, on a grouped-query model with RoPE)."""
    widgets.prose(SLUG, "pair")
    draw.draw(
        charts_gpt.pair_strips(frames.pair_frame(result)),
        f"Three rows of {len(result.rotated_query)} coloured cells, one per dimension: the rotated query, the "
        "rotated key, and their products, whose sum is the score; each row coloured on its own scale.",
    )
    st.caption(gpt_rope.pair_sentence(result))


def rope_contrast(analysis: gpt.PromptAnalysis, result: gpt_rope.RopeLesson) -> None:
    widgets.prose(SLUG, "rope_contrast")
    draw.draw(
        charts_gpt.rope_curves(frames.rope_frame(result)),
        "Lines of the score of one query and one key against their distance: rotated, the two starts give one "
        "line; with sinusoidal positions added, two different lines.",
    )
    st.caption(
        f"At the same distance, moving the pair from position {gpt_rope.STARTS[0]} to {gpt_rope.STARTS[1]} changes the "
        f"rotated score by at most {result.rope_start_gap:.1e}, and the score with added positions by up to "
        f"{result.additive_start_gap:.2f}."
    )
    widgets.code_box(
        gpt_rope.rope_code(analysis, result),
        "Plain PyTorch in float32 from layer 0's tensors in the model's file. The page multiplies the file's 4-bit "
        "weights in bfloat16, so its query and key differ slightly, and its scores and curves differ from these by "
        "up to about 0.5% (0.15 at most on the example prompts); in both, moving the pair changes the rotated score "
        "by float rounding only (about 1e-5).",
        title="RoPE on layer 0's query and key from the model's file",
    )


def rope(model, analysis: gpt.PromptAnalysis, text: str, kind: gpt.PromptKind) -> None:
    step("Position by rotation (RoPE)")
    widgets.prose(SLUG, "rope")
    head, query_at, key_at = rope_pickers(analysis)
    picked = () if query_at is None and key_at is None else (query_at, key_at)  # the default pair: the shared run
    result = gpt_queue.computed(gpt_rope.ROPE, model, text, kind, head, *picked)
    # The question on a projector screen of its own: under the prose and the pickers its options
    # reached the fold, and with a class poll's tally beside them only the first showed (the s29c review).
    step_break()
    answered = widgets.predict(gpt_keys.shift_question(result), key=PREDICT_KEY)
    # What the answer unlocks, on a projector screen of its own (lesson 10's RoPE step ran to 3,178 px).
    step_break()
    if answered:
        widgets.prose(SLUG, "rope_why")
        shift_table(result)
    else:
        widgets.answer_first("Why, and the scores as the pair moves, appear")
    step_break()
    one_pair(result)
    step_break()
    if answered:
        rope_contrast(analysis, result)
    else:
        widgets.answer_first("The scores against distance, rotated and with added positions, appear")


def grouped_query(model) -> None:
    step("Grouped-query attention")
    widgets.prose(SLUG, "gqa")
    # The dots: lesson 10's induction scores on its default sequence (one shared run, computed for everyone).
    lesson = gpt_queue.computed(gpt_induction.INDUCTION, model, gpt.DEFAULT_REPEAT, gpt.DEFAULT_SEED)
    groups = gpt_cache.kv_groups(lesson.num_heads, lesson.num_kv_heads)
    # What sharing saves first, then the map, shrunk on a projector: under the 30-row map the two sizes stood at
    # 1,185 px of 720 (the s29c review).
    sizes = gpt_queue.computed(gpt_cache.CACHE_SIZES, model)
    m1, m2 = st.columns(2)
    m1.metric(
        f"KV cache per token, {sizes.num_kv_heads} KV heads (float32)", f"{sizes.per_token_shared / 1024:.0f} KiB"
    )
    m2.metric(f"... with {sizes.num_heads} KV heads, one per query head", f"{sizes.per_token_full / 1024:.0f} KiB")
    step_break()
    with draw.shrinks_to_column("gpt-keys-groups", projector_vh=draw.PROJECTOR_GRID_VH):
        draw.draw(
            charts_gpt.groups(
                frames.group_frame(lesson.scores.shape[0], lesson.num_heads, groups, lesson.scores), True
            ),
            "A 30 by 9 map of query heads coloured by the key/value head they read, with a dot on each head sized "
            "by its induction score.",
        )
    st.caption(
        f"Dots: each head's induction score as lesson 10 measures it, on {lesson.length} random tokens repeated "
        f"(seed {lesson.seed}). " + gpt_keys.groups_sentence(lesson.scores, groups)
    )


def kv_cache(model, analysis: gpt.PromptAnalysis, text: str, kind: gpt.PromptKind) -> None:
    step("The KV cache, measured")
    widgets.prose(SLUG, "kvcache")
    step_break()  # the measured numbers and their chart on a screen of their own: the chart started at 570 px (s29c)
    timing = cache_timing_when_asked(model, text, kind)
    if timing is not None:
        # The measured numbers above their chart: under it they fell below a projector's fold (the seventh review).
        st.caption(gpt_cache.cache_caption(timing))
        draw.draw(
            charts_gpt.timing(frames.timing_frame(timing)),
            "Lines of the time per generated token with and without the KV cache.",
        )
    widgets.code_box(
        gpt_cache.kv_cache_code(analysis, gpt_cache.TIMED_TOKENS),
        "Plain PyTorch in float32 from the model's file, the cache a list of tensors. In float32 the logits with "
        "and without the cache differ by at most about 4e-5 on the example prompts, float rounding from adding in "
        "another order (the page sums attention in float64, so its two runs agree exactly). The bytes per token "
        "follow from the file's sizes and equal the page's. On the four example prompts the eight greedy tokens "
        "are the page's too.",
        title="a KV cache written out, from the model's file",
    )


def cache_timing_when_asked(model, text: str, kind: gpt.PromptKind) -> gpt_cache.CacheTiming | None:
    """The example prompts' timing (shared, computed once); on the student's own prompt, once they ask. A run
    that cannot show the speed-up through the server's noise can be timed again (up to MAX_ATTEMPTS a prompt)."""
    asked = st.session_state.setdefault(TIMED_PROMPTS, set())
    if not gpt_runs.timed_without_asking(text, kind) and (text, kind) not in asked:
        st.caption(
            f"Timing the cache generates {gpt_cache.TIMED_TOKENS} tokens twice, with and without it: the model's "
            "longest job on this page, and the class shares one model, so it waits for you to ask on a prompt of your "
            "own."
        )
        if not st.button("Time the KV cache on my prompt", icon=":material/timer:", key="al_time_kv_cache"):
            return None
        st.session_state[TIMED_PROMPTS] = asked | {(text, kind)}
    attempts = st.session_state.setdefault(ATTEMPTS, {})
    attempt = int(attempts.get((text, kind), 0))
    again = () if attempt == 0 else (attempt,)  # the first timing is the shared one (the warm-up's key)
    timing = gpt_queue.computed(gpt_cache.CACHE_TIMING, model, text, kind, gpt_cache.TIMED_TOKENS, *again)
    if not gpt_cache.shows_speed_up(timing) and attempt + 1 < gpt_cache.MAX_ATTEMPTS:
        st.button(
            "Time it again",
            icon=":material/replay:",
            key="al_time_kv_cache_again",
            on_click=lambda: attempts.update({(text, kind): attempt + 1}),
            help=f"A new run of its own (up to {gpt_cache.MAX_ATTEMPTS} on one prompt): the class shares the model.",
        )
    return timing


page_start()
widgets.prose(SLUG, "intro")
gpt_model = gpt_queue.model_or_stop()
gpt_queue.warm_up(gpt_model)  # once per process: the first example's default view, computed for everyone
gpt_queue.begin()  # the model runs this session waited for are stale until this run asks for them again
analysis, prompt_text, prompt_kind = gpt_prompt.prompt_picker(gpt_model)
rope(gpt_model, analysis, prompt_text, prompt_kind)
grouped_query(gpt_model)
kv_cache(gpt_model, analysis, prompt_text, prompt_kind)
gpt_queue.settle()  # the runs an earlier page run asked for and this one did not: no longer waited for
