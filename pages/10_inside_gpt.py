"""Lesson 10: inside a GPT (SmolLM2-135M-Instruct), every number from our own forward pass.

Each function draws one section; the last lines put them in order. Every number comes from
core/lessons/inside_gpt*.py through ui.gpt_queue (the model's runs, queued fairly and shared by every
session); no torch here.
"""

from __future__ import annotations

import streamlit as st

from core.app import choices
from core.app.registry import PageControl
from core.charts import inside_gpt as charts_gpt
from core.charts import real_model as charts_rm
from core.lessons import inside_gpt as gpt
from core.lessons import inside_gpt_frames as frames
from core.lessons import inside_gpt_induction as gpt_induction
from core.models.smollm2 import GenerationCancelled
from ui import draw, gpt_prompt, gpt_queue, widgets
from ui.frame import frame as page_frame
from ui.frame import page_start
from ui.presentation import presenting, step, step_break

LAYER, HEAD = PageControl.GPT_LAYER, PageControl.GPT_HEAD  # the chosen head (clicks on the grid set them too)


def seed_box(where, label: str, key: PageControl) -> int:
    """A whole-number seed box, 0 to 9999, in the link (the sampling's and the induction sequence's)."""
    return int(
        where.number_input(
            label, 0.0, 9999.0, float(gpt.DEFAULT_SEED), step=1.0, format="%.0f", key=key, **widgets.LINKED
        )
    )


def next_token(model, analysis: gpt.PromptAnalysis, vocabulary: tuple[str, ...], text: str, kind) -> bool:
    """The first section; whether its question is answered."""
    step("The next token")
    # The chat template only where the prompt is a chat question: the counting prompt opens the page (s28 review).
    widgets.prose("inside_gpt", "prompt_chat" if kind is gpt.PromptKind.CHAT else "prompt")
    st.text(analysis.text)  # what the model reads, template included; st.text: never markdown
    step_break()  # the tokens and the question: on a projector its options started below the fold
    st.caption(f"{len(analysis.tokens)} tokens, as the model reads them:")
    st.text("  ".join(repr(token) for token in analysis.tokens))
    answered = widgets.predict(gpt.top_token_question(analysis, vocabulary), key="predict_gpt_top")
    step_break()  # what the answer unlocks, on a screen of its own: on a projector it started below the fold
    widgets.prose("inside_gpt", "sampling")
    # The controls and the bars they change on a projector screen of their own: under this text the bars ran
    # from 492 to 1,235 px of 720, three of ten showing (the s28 review).
    step_break()
    c1, c2, c3, c4 = st.columns(4)
    temperature = c1.selectbox(
        "Temperature",
        choices.TEMPERATURES,
        index=choices.TEMPERATURES.index(gpt.DEFAULT_TEMPERATURE),
        key=PageControl.GPT_TEMPERATURE,
        **widgets.LINKED,
    )
    top_k = c2.selectbox("Top-k (0: off)", choices.TOP_KS, key=PageControl.GPT_TOP_K, **widgets.LINKED)
    top_p = c3.selectbox("Top-p (1.0: off)", choices.TOP_PS, key=PageControl.GPT_TOP_P, **widgets.LINKED)
    seed = seed_box(c4, "Seed", PageControl.GPT_SEED)
    settings = gpt.sampling_settings(float(temperature), int(top_k), float(top_p))
    view = gpt.sampling_view(analysis, vocabulary, settings, seed)
    if not answered:
        widgets.answer_first("The probabilities and the draw appear")
        step_break()  # generation's place (as below): the step count stays when the answer comes
        widgets.prose("inside_gpt", "generate")
        widgets.answer_first("The generated tokens appear")
        return False
    draw.draw(
        charts_gpt.probabilities(frames.probability_frame(view), projector=presenting()),
        "Bars of the model's ten most probable next tokens: its own probability, and what temperature, top-k "
        "and top-p leave to draw from.",
    )
    kept = "1 token (the top one) can" if view.kept == 1 else f"{view.kept:,} tokens can"
    st.caption(f"{kept} still be drawn; seed {seed} draws {view.sampled!r}.")
    widgets.code_box(
        gpt.next_token_code(analysis, view),
        "Plain PyTorch in float32 from the model's file. The page multiplies the file's 4-bit weights in bfloat16 "
        f"(less memory, faster), so its probabilities can differ from these by up to about "
        f"{gpt.FLOAT32_PROBABILITY_GAP} and the same seed "
        "can draw a neighbouring token; the most probable token stays the same, while lower places can swap.",
        title="the next token from the model's file",
    )
    generation(model, analysis, settings, seed, text, kind)
    return True


def generation(model, analysis: gpt.PromptAnalysis, settings, seed: int, text: str, kind) -> None:
    # A projector screen of its own: under the probabilities and their Code box the step ran to 2,391 px (s26).
    step_break()
    widgets.prose("inside_gpt", "generate")  # (its place before the answer: next_token)
    new_tokens = st.slider(
        "New tokens", 1, gpt.MAX_NEW_TOKENS, gpt.DEFAULT_NEW_TOKENS, key=PageControl.GPT_NEW_TOKENS, **widgets.LINKED
    )
    try:  # stopped between tokens once every student waiting for it has left
        result = gpt_queue.computed(gpt.GENERATION, model, text, kind, settings, seed, int(new_tokens))
    except GenerationCancelled:
        st.stop()
    st.text(f"{analysis.text}⟦{result.text}⟧")  # the new tokens between brackets
    if not result.steps:
        return
    shown = st.select_slider(
        "Show the attention row of new token", list(range(1, len(result.steps) + 1)), value=len(result.steps)
    )
    chosen = result.steps[shown - 1]
    layer, head = st.session_state[LAYER], st.session_state[HEAD]
    tokens = result.prompt_tokens + tuple(s.token for s in result.steps)
    draw.draw(
        charts_gpt.attention_row(
            frames.row_frame(chosen, tokens, layer, head),
            f"Layer {layer}, head {head}: the row that chose {chosen.token!r}",
        ),
        f"Bars of the attention weights of layer {layer}, head {head} from the position that chose new token {shown}.",
    )


def open_head(layer: int, head: int) -> None:
    st.session_state[LAYER], st.session_state[HEAD] = layer, head


def all_heads(analysis: gpt.PromptAnalysis) -> None:
    step(f"All {analysis.num_layers * analysis.num_heads} heads")
    widgets.prose("inside_gpt", "grid")
    st.caption(f"{frames.blocks_sentence(len(analysis.tokens))} {gpt.sink_sentence(analysis)}")
    # Every head small (its weights summed in blocks of positions), then the chosen layer's heads in full: every
    # weight of all 270 heads was one message of up to 4 MB at 64 tokens, over Streamlit's limit (issue 40).
    draw.head_grid(
        charts_gpt.heads_overview(
            frames.overview_frame(analysis),
            frames.overview_heads_frame(analysis, st.session_state[LAYER], st.session_state[HEAD]),
            analysis.num_layers,
            analysis.num_heads,
        ),
        f"A grid of {analysis.num_layers} by {analysis.num_heads} small heatmaps, one per head (layers across, "
        "heads down), each of its weights summed in blocks of positions.",
        key="gpt_grid",
        layer_key=LAYER,
        head_key=HEAD,
        width="content",  # its heads square, whatever the column's width (stretched, they were wide and flat)
    )
    # Three screens on a projector: this step ran to 4,048 px (the s25 review). The grid, then the chosen layer
    # and head, then the two measures.
    step_break()
    c1, c2 = st.columns(2)
    linked = {**widgets.LINKED, "help": "Counted from 0, as in the code."}
    layer = int(c1.selectbox("Layer", list(range(analysis.num_layers)), key=LAYER, **linked))
    head = int(c2.selectbox("Head", list(range(analysis.num_heads)), key=HEAD, **linked))
    draw.layer_head_panels(
        frames.layer_frame(analysis, layer),
        analysis.num_heads,
        analysis.num_heads // analysis.num_kv_heads,
        f"The {analysis.num_heads} heads of layer {layer}",
        f"Small heatmaps of the {analysis.num_heads} heads of layer {layer}, every weight, on one colour scale.",
        key="gpt_layer_panels",
        causal=True,
    )
    draw.heatmap(
        frames.head_frame(analysis, layer, head),
        f"Layer {layer}, head {head}: queries down, keys across",
        f"Heatmap of the attention weights of layer {layer}, head {head}.",
        value_title="weight",
        show_values=False,
    )
    one_token_everywhere(analysis)
    step_break()
    widgets.prose("inside_gpt", "measures")
    left, right = st.columns(2)
    for where, values, title in (
        (left, analysis.sink, "sink share (first token)"),
        (right, analysis.previous, "previous-token score"),
    ):
        with where, draw.shrinks_to_column(f"gpt-{title.split()[0]}-map", projector_vh=draw.PROJECTOR_GRID_VH):
            draw.draw(
                charts_rm.measure(frames.measure_frame(values, layer, head), title, title),
                f"A 30 by 9 map of each head's {title} on this prompt.",
            )
    best_layer, best_head, score = gpt.best_previous_head(analysis)
    st.caption(f"The clearest previous-token head here: layer {best_layer}, head {best_head} ({score:.2f}).")
    st.button(f"Open layer {best_layer}, head {best_head}", on_click=open_head, args=(best_layer, best_head))
    widgets.code_box(
        gpt.heads_code(analysis),
        "Plain PyTorch in float32 from the model's file; it stops before the next token, which the first question "
        "asks for. The page multiplies the file's 4-bit weights in bfloat16, so its sink shares and previous-token "
        "scores differ from these by up to about 0.01 on the example prompts (a head near one half may fall on the "
        "other side of it); the clearest previous-token head is the same.",
        title="every head's sink share and previous-token score from the model's file",
    )


def one_token_everywhere(analysis: gpt.PromptAnalysis) -> None:
    """BertViz's model view for one token: its attention row in every head of every layer, behind an expander
    (the page is long already)."""
    with st.expander("One token in every head at once (the model view)", icon=":material/grid_view:"):
        widgets.prose("inside_gpt", "model_view")
        shown = frames.labels(analysis.tokens)
        query = st.selectbox(
            "Token",
            list(range(1, len(analysis.tokens))),  # the first token sees only itself: its row is 1 in every head
            index=len(analysis.tokens) - 2,
            format_func=lambda i: shown[i],
            help="Its row in every head: the weights it puts on itself and the tokens before it.",
        )
        view = gpt.token_across_model(analysis, int(query))
        with draw.shrinks_to_column("gpt-model-view"):
            draw.draw(
                charts_gpt.model_view(
                    frames.model_view_frame(view),
                    f"Where {shown[view.query]} looks, in every head: layers down, keys across",
                    analysis.num_heads // analysis.num_kv_heads,  # a row of panels per key/value head
                ),
                f"{analysis.num_heads} small heatmaps, one per head, each with a row per layer: the weights the token "
                "puts on each key.",
            )
        st.caption(gpt.model_view_sentence(view))


def induction(model) -> tuple[gpt_induction.InductionLesson, bool]:
    """The induction section; whether its question is answered (the next two sections show losses and scores)."""
    step("Induction heads, measured")
    widgets.prose("inside_gpt", "induction")
    step_break()  # the slider and the question: on a projector its options started below the fold
    c1, c2 = st.columns([3, 1])
    length = int(
        c1.slider(
            "Random tokens before the repeat",
            choices.MIN_REPEAT,
            choices.MAX_REPEAT,
            gpt.DEFAULT_REPEAT,
            key=PageControl.GPT_LENGTH,
            **widgets.LINKED,
        )
    )
    # Its own seed: it was the sampling seed of "The next token", so a student trying another draw there got a new
    # random sequence here and a fresh, unanswered question (the s28b review).
    seed = seed_box(c2, "Seed of the random tokens", PageControl.GPT_REPEAT_SEED)
    lesson = gpt_queue.computed(gpt_induction.INDUCTION, model, length, seed)
    st.caption(
        f"{length} random tokens, then the same {length} again (seed {seed}): "
        + " ".join(repr(t) for t in lesson.tokens[:8])
        + " …"
    )
    answered = widgets.predict(gpt_induction.induction_question(lesson), key="predict_gpt_induction")
    step_break()  # what the answer unlocks, on a screen of its own: on a projector it started below the fold
    if not answered:
        widgets.answer_first("The scores and the losses appear")
        step_break()  # the copying scores' place (as below): the step count stays when the answer comes
        widgets.answer_first("Each top head's copying score appears")
        return lesson, False
    m1, m2, m3, m4 = st.columns(4)
    m1.metric("loss, first copy (nats)", f"{lesson.first_loss:.2f}")
    m2.metric("loss, second copy (nats)", f"{lesson.second_loss:.2f}")
    m3.metric("accuracy, first copy", f"{lesson.first_accuracy:.0%}")
    m4.metric("accuracy, second copy", f"{lesson.second_accuracy:.0%}")
    # On a projector the 30 by 9 map shrinks to fit under the losses (stretched, it ran 1,300 px; s26): its
    # colours show where the induction heads are, and the table under it names them.
    with draw.shrinks_to_column("gpt-induction-map", projector_vh=draw.PROJECTOR_GRID_VH):
        draw.draw(
            charts_rm.measure(frames.measure_frame(lesson.scores, -1, -1), "induction score", "induction score"),
            "A 30 by 9 map of each head's induction score on the repeated sequence.",
        )
    widgets.number_table(frames.top_heads_frame(lesson), decimals=2, hide_index=True)
    groups = "; ".join(
        f"layer {lay}, KV head {kv}: query head{'s' if len(heads) > 1 else ''} {', '.join(map(str, heads))}"
        for (lay, kv), heads in lesson.groups_of_top().items()
    )
    st.caption(
        f"An even spread would score about {lesson.chance:.2f}. The top heads by shared key/value head: {groups}."
    )
    step_break()  # copying on a projector screen of its own: with the scores above, the step ran to 2,441 px (s26)
    widgets.prose("inside_gpt", "copying")
    st.markdown(gpt_induction.copying_sentence(lesson))
    widgets.code_box(
        gpt_induction.code(lesson),
        "Plain PyTorch in float32 from the model's file, without our model code: the same random sequence. The page "
        "multiplies the file's 4-bit weights in bfloat16, so its induction scores differ from these by up to about "
        "0.01, its losses by up to about 0.06 nats and the top heads' copying scores by up to about 0.03; the top "
        "heads are the same.",
        title="induction heads from the model's file",
    )
    return lesson, True


def ablation(model, lesson: gpt_induction.InductionLesson, answered: bool) -> None:
    step("Switch a head off")
    widgets.prose("inside_gpt", "ablation")
    if not answered:  # the loss on the second copy, and the top induction head, answer the question above
        widgets.answer_first("Switching a head off, and the losses it changes, appear")
        return
    layer, head = st.session_state[LAYER], st.session_state[HEAD]
    top_layer, top_head, _ = lesson.top[0]
    previous_layer, previous_head, _ = lesson.top_previous
    choice = st.selectbox(
        "Switch off by",
        list(choices.AblationChoice),
        format_func=lambda c: c.value,
        key=PageControl.GPT_ABLATION,
        **widgets.LINKED,
    )
    # Two buttons of half the width each, under the box: three in a row cut their labels, the head's number
    # included, on a laptop and a projector (an independent review).
    c1, c2 = st.columns(2)
    c1.button(
        f"Top induction head: layer {top_layer}, head {top_head}",
        on_click=open_head,
        args=(top_layer, top_head),
        width="stretch",
    )
    c2.button(
        f"Top previous-token head: layer {previous_layer}, head {previous_head}",
        on_click=open_head,
        args=(previous_layer, previous_head),
        width="stretch",
    )
    result = gpt_queue.computed(
        gpt_induction.ABLATION, model, lesson.length, lesson.seed, layer, head, choices.AblationChoice(choice)
    )
    m1, m2, m3 = st.columns(3)
    m1.metric(f"loss on the second copy, layer {layer} head {head} on", f"{result.loss_before:.2f}")
    how = "switched off" if result.choice is choices.AblationChoice.ZERO else "replaced by its mean"  # the mode's words
    m2.metric(f"... {how}", f"{result.loss_after:.2f}", f"{result.loss_change:+.2f}", delta_color="inverse")
    m3.metric(
        "next-token probabilities moved",  # short: the longer label was cut on a projector (the s19 review)
        f"{result.probability_shift:.3f}",
        help="Total variation distance between the last position's next-token distributions, head on and head "
        "changed: 0 when nothing moved, 1 when they share nothing.",
    )
    st.markdown(gpt_induction.expected_token_sentence(result))
    before, after = st.columns(2)
    before.caption("Top next tokens, head on: " + ", ".join(f"{t!r} {p:.1%}" for t, p in result.top_before))
    after.caption("Head off: " + ", ".join(f"{t!r} {p:.1%}" for t, p in result.top_after))
    st.markdown(gpt_induction.composition_sentence(lesson, result))
    widgets.code_box(
        gpt_induction.ablation_code(lesson, result),
        "Plain PyTorch in float32 from the model's file: the induction section's sequence, this head, this way of "
        "switching it off. The page multiplies the file's 4-bit weights in bfloat16, so its losses differ from these "
        "by up to about 0.1 nats (1.5%) and the change by up to about 0.07: a smaller change, such as a sink head's, "
        "is rounding and may even change sign; a large one, such as the top induction head's, is the same.",
        title="one head switched off in the model's file",
    )


page_start()
widgets.prose("inside_gpt", "intro")
gpt_model = gpt_queue.model_or_stop()
gpt_queue.warm_up(gpt_model)  # once per process: the first example's default view, computed for everyone
gpt_queue.begin()  # the model runs this session waited for are stale until this run asks for them again
vocabulary = gpt_queue.computed(gpt.VOCABULARY, gpt_model)
analysis, prompt_text, prompt_kind = gpt_prompt.prompt_picker(gpt_model)
if LAYER not in st.session_state:  # first visit: the link's head, or the clearest previous-token head
    linked_controls = page_frame().link.controls
    best = gpt.best_previous_head(analysis)
    open_head(int(linked_controls.get(LAYER, best[0])), int(linked_controls.get(HEAD, best[1])))
next_token(gpt_model, analysis, vocabulary, prompt_text, prompt_kind)
all_heads(analysis)
induction_lesson, induction_answered = induction(gpt_model)
ablation(gpt_model, induction_lesson, induction_answered)
gpt_queue.settle()  # the runs an earlier page run asked for and this one did not: no longer waited for
