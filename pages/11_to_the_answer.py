"""Lesson 11: from attention to the answer. What SmolLM2-135M's heads write, and how it becomes the answer.

Every number comes from core/lessons/to_the_answer.py through ui.gpt_queue (lesson 10's queue: the model's
runs, queued fairly and shared by every session); no torch here.
"""

from __future__ import annotations

import streamlit as st

from core.app.registry import PageControl
from core.charts import real_model as charts_rm
from core.charts import to_the_answer as charts
from core.inputs.examples import MAX_TEXT_CHARS
from core.lessons import to_the_answer as lesson11
from core.lessons import to_the_answer_frames as frames
from core.models.patching import PatchingMethod
from ui import draw, gpt_queue, widgets
from ui.frame import frame as page_frame
from ui.frame import page_start
from ui.presentation import presenting, step, step_break

LAYER, HEAD = PageControl.ANSWER_LAYER, PageControl.ANSWER_HEAD  # the opened head (clicks on the maps set them)
LENS_QUESTION = "predict_answer_lens"
PART_QUESTION = "predict_answer_part"  # asked in the residual's step; the attribution and patching maps wait for it
EXACT_ASKED = "al_answer_exact"  # the (clean, corrupted) pair this session asked exact patching for


def lesson_or_default(model) -> lesson11.AnswerLesson:
    """The student's prompt and choice, analysed; a prompt or token the model cannot take says why and shows
    the opening prompt instead."""
    from core.models.smollm2 import TextError

    text = st.text_area(
        "Prompt",
        lesson11.DEFAULT_TEXT,
        max_chars=MAX_TEXT_CHARS,
        key=PageControl.ANSWER_TEXT,
        help=f"Up to {lesson11.MAX_PROMPT_TOKENS} tokens. A prompt that names someone twice gets a suggested "
        "corruption for patching.",
        **widgets.LINKED,
    )
    pick, typed = st.columns([2, 1])
    explain = widgets.linked_select(
        "Explain",
        list(lesson11.Explain),
        key=PageControl.ANSWER_EXPLAIN,
        param=PageControl.ANSWER_EXPLAIN,
        code=str,
        name=lesson11.EXPLAIN_LABELS.get,
        default=lesson11.Explain.CONTRAST,
        where=pick,
    )
    token = typed.text_input(
        "Token",
        " Mary",
        key=PageControl.ANSWER_TOKEN,
        disabled=explain is not lesson11.Explain.TOKEN,
        help="One token of the model, with its leading space: ' Mary'.",
        **widgets.LINKED,
    )
    try:
        return gpt_queue.computed(
            lesson11.ANSWER, model, text, explain, token if explain is lesson11.Explain.TOKEN else ""
        )
    except TextError as error:
        problem = error
    if explain is lesson11.Explain.TOKEN:  # a mistyped token keeps the student's prompt (an independent review)
        try:
            own = gpt_queue.computed(lesson11.ANSWER, model, text, lesson11.Explain.ANSWER, "")
        except TextError as error:  # the prompt itself cannot be used either
            problem = error
        else:
            st.error(f"{problem} Explaining the model's own answer on your prompt instead.", icon=":material/error:")
            return own
    st.error(f"{problem} Showing the opening prompt instead.", icon=":material/error:")
    return gpt_queue.computed(lesson11.ANSWER, model, lesson11.DEFAULT_TEXT, lesson11.Explain.CONTRAST, "")


def residual(lesson: lesson11.AnswerLesson) -> bool:
    """The residual section, which asks the attribution question before its chart; whether it is answered.

    The chart's largest parts of the residual (on a model's own answer, the last layers' MLPs) hinted at the
    question's answer when it was asked after them, in the attribution section (the s29b review)."""
    step("The residual stream is a sum")
    widgets.prose("to_the_answer", "residual")
    st.caption(
        f"The model answers {lesson.answer!r} ({lesson.answer_probability:.1%}). All 301 parts' shares add up to "
        f"{lesson.shares_sum:.6f}; the parts added up differ from the real residual by at most "
        f"{lesson.parts_error:.1e} in an entry (its largest entry: {lesson.residual_size:.1f})."
    )
    answered = widgets.predict(lesson11.part_question(lesson), key=PART_QUESTION)
    step_break()  # the chart on a screen of its own: under the question it started below a projector's fold
    if not answered:
        widgets.answer_first("The residual's largest parts appear")
        return False
    draw.draw(
        charts.parts(frames.parts_frame(lesson)),
        f"Bars of the {len(lesson.part_labels)} parts with the largest projections on the final residual.",
    )
    return True


def lens(lesson: lesson11.AnswerLesson) -> None:
    step("The logit lens")
    widgets.prose("to_the_answer", "lens")
    answered = widgets.predict(lesson11.lens_question(lesson), key=LENS_QUESTION)
    step_break()  # what the answer unlocks, on a screen of its own: on a projector it started below the fold
    if answered:
        draw.draw(
            charts.lens(frames.lens_frame(lesson)),
            f"A line of the probability of {lesson.answer!r} at each of {len(lesson.lens_labels)} lens points.",
        )
        st.caption(lesson.first_on_top_sentence())
    else:
        widgets.answer_first("The lens's chart appears")
    # The rank on a screen of its own, answered or not (a teacher's step numbers stay): under the probability's
    # chart it started at 1,000 px.
    step_break()
    if not answered:
        widgets.answer_first("The answer's rank at every point and the lens's table appear", question=LENS_QUESTION)
        return
    draw.draw(
        charts.lens_rank(frames.lens_frame(lesson)),
        f"A line of the rank of {lesson.answer!r} among all tokens at each of {len(lesson.lens_labels)} lens points, "
        "on a log scale with rank 1 at the top.",
    )
    st.caption(lesson.rank_sentence())
    # Its 60 rows took a projector step to 1,373 px (the s30 review): folded, a click away.
    with st.expander(f"The top tokens at each of the {len(lesson.lens_labels)} lens points", icon=":material/table:"):
        widgets.number_table(frames.lens_table(lesson), hide_index=True)


def open_head(layer: int, head: int) -> None:
    st.session_state[LAYER], st.session_state[HEAD] = layer, head


def attribution(lesson: lesson11.AnswerLesson, answered: bool) -> None:
    """The attribution section: its map and the opened head once the first step's question (`residual`) is
    answered. Each on a screen of its own, answered or not (the section's one step ran to 2,495 px)."""
    step("Direct logit attribution")
    widgets.prose("to_the_answer", "attribution")
    st.caption(lesson.sum_sentence() + f" The frozen norm scale: {lesson.scale:.4f}.")
    step_break()
    if answered:
        head_map(lesson)
    else:
        widgets.answer_first("The map of every head's direct effect appears", question=PART_QUESTION)
    step_break()
    if answered:
        opened_head(lesson)
    else:
        widgets.answer_first("The opened head's pattern appears", question=PART_QUESTION)
    widgets.code_box(  # the recipe prints the top heads when run, nothing on screen gives the answer away
        lesson11.code(lesson),
        lesson11.code_note(lesson),
        title="every head's direct effect on this logit, from the model's file",
    )


def head_map(lesson: lesson11.AnswerLesson) -> None:
    """The attribution map (click a head to open it) and what it says."""
    layer, head = int(st.session_state[LAYER]), int(st.session_state[HEAD])
    draw.draw(
        charts.head_map(
            frames.head_map_frame(lesson.heads, layer, head),
            f"Each head's direct effect on {lesson.explained}; click one",
            "effect",
            layers_across=presenting(),
        ),
        f"A 30 by 9 map of each head's direct effect on {lesson.explained}.",
        key="answer_dla_map",
        on_select=lambda: draw.select_head_from_chart("answer_dla_map", charts_rm.HEAD_SELECTION, LAYER, HEAD),
    )
    top = ", ".join(f"layer {a} head {b} ({v:+.2f})" for a, b, v in lesson.top_heads())
    bottom = ", ".join(f"layer {a} head {b} ({v:+.2f})" for a, b, v in lesson.bottom_heads())
    mlp = int(lesson.mlps.argmax())
    st.caption(
        f"Pushing {lesson.explained} up the most: {top}. Pushing it down the most: {bottom}. The embedding adds "
        f"{lesson.embedding:+.2f}, all MLPs together {float(lesson.mlps.sum()):+.2f} (the largest, layer {mlp}, "
        f"{float(lesson.mlps[mlp]):+.2f})."
    )


def opened_head(lesson: lesson11.AnswerLesson) -> None:
    """The opened head's pickers, its attention pattern, and its effect split into the two logits."""
    c1, c2 = st.columns(2)
    linked = {**widgets.LINKED, "help": "Counted from 0, as in the code."}
    layer = int(c1.selectbox("Layer", list(range(lesson.num_layers)), key=LAYER, **linked))
    head = int(c2.selectbox("Head", list(range(lesson.heads.shape[1])), key=HEAD, **linked))
    st.caption(lesson.head_sentence(layer, head))  # above the pattern: under it, below a projector's fold
    draw.heatmap(
        frames.pattern_frame(lesson, layer, head),
        f"Layer {layer}, head {head}: queries down, keys across",
        f"Heatmap of the attention weights of layer {layer}, head {head}.",
        value_title="weight",
        show_values=False,
    )
    widgets.prose("to_the_answer", "mechanism")  # how to read the sentence above the pattern


def patching(model, lesson: lesson11.AnswerLesson, answered: bool) -> None:
    from core.models.smollm2 import TextError

    step("Activation patching")
    widgets.prose("to_the_answer", "patching")
    # The runs and their map on a screen of their own, answered or not: under the prose the map's caption fell below
    # a projector's fold at 1,604 px (the s30 review).
    step_break()
    if not answered:  # the heads that restore the most would hint at the attribution question's answer
        widgets.answer_first("Patching's maps appear", question=PART_QUESTION)
        return
    typed = st.text_input(
        "Corrupted prompt (blank: the suggested one)",
        "",
        key=PageControl.ANSWER_CORRUPTED,
        max_chars=MAX_TEXT_CHARS,
        **widgets.LINKED,
    )
    corrupted = typed.strip() or lesson.corrupted
    if corrupted is None:
        st.info(
            "This prompt names nobody twice, so there is no corruption to suggest: type one of the same token "
            "length above (for example, the same prompt with one word swapped).",
            icon=":material/info:",
        )
        return
    st.caption(f"Clean: {lesson.text!r}  \nCorrupted: {corrupted!r}")
    try:
        estimate = gpt_queue.computed(lesson11.PATCHING, model, lesson.text, corrupted, PatchingMethod.ATTRIBUTION)
    except TextError as error:
        st.error(str(error), icon=":material/error:")
        return
    show(estimate, "attribution patching (estimate)", "answer_ap_map")
    pair = (lesson.text, corrupted)
    if st.button("Run exact patching (one run per head: seconds to a minute)"):
        st.session_state[EXACT_ASKED] = pair
    if st.session_state.get(EXACT_ASKED) == pair:
        exact = gpt_queue.computed(lesson11.PATCHING, model, lesson.text, corrupted, PatchingMethod.EXACT)
        show(exact, "exact patching", "answer_exact_map")
        compare(estimate, exact)


def compare(estimate: lesson11.PatchingLesson, exact: lesson11.PatchingLesson) -> None:
    """The estimate against exact patching, head by head (the s29b review: the two maps were never compared)."""
    draw.draw(
        charts.patching_agreement(frames.agreement_frame(estimate, exact)),
        "A scatter of the 270 heads: the share each restores by exact patching across, by the estimate up, with "
        "a dashed line where the two would agree.",
    )
    st.caption(lesson11.patching_agreement(estimate, exact).sentence())


def show(result: lesson11.PatchingLesson, name: str, key: str) -> None:
    layer, head = int(st.session_state[LAYER]), int(st.session_state[HEAD])
    c1, c2 = st.columns(2)
    c1.metric(f"Clean: logit({result.answer!r}) - logit({result.other!r})", f"{result.clean_difference:+.2f}")
    c2.metric("Corrupted", f"{result.corrupted_difference:+.2f}")
    if result.weak:
        st.warning(
            f"The corruption moves the difference by only {result.change:.2f}: "
            "a share of so small a change means little. Try a corruption that flips the answer.",
            icon=":material/warning:",
        )
    draw.draw(
        charts.head_map(
            frames.head_map_frame(result.restored, layer, head),
            f"Share restored by each head: {name}",
            "share",
            layers_across=presenting(),
        ),
        f"A 30 by 9 map of the share of the logit difference each head restores, by {name}.",
        key=key,
        on_select=lambda: draw.select_head_from_chart(key, charts_rm.HEAD_SELECTION, LAYER, HEAD),
    )
    st.caption(result.sentence())


page_start()
widgets.prose("to_the_answer", "intro")
answer_model = gpt_queue.model_or_stop()
gpt_queue.warm_up(answer_model)  # once per process: the opening views, computed for everyone
gpt_queue.begin()
answer_lesson = lesson_or_default(answer_model)
if LAYER not in st.session_state:  # first visit: the link's head, or the head with the largest direct effect
    linked_controls = page_frame().link.controls
    best = answer_lesson.top_heads(1)[0]
    open_head(int(linked_controls.get(LAYER, best[0])), int(linked_controls.get(HEAD, best[1])))
part_answered = residual(answer_lesson)
lens(answer_lesson)
attribution(answer_lesson, part_answered)
patching(answer_model, answer_lesson, part_answered)
gpt_queue.settle()
