"""Lesson 4: hiding the future, and dropout on the attention weights, on random or learned weights.

One script and one lesson (core/lessons/causal_dropout.CausalLesson) for every weight source
(core/inputs/weights.py): the random draws follow the sources' worked examples, with their printed example,
the decoder blog's steps and the leakage check; a model's head (`?weights=pretrained`, `?weights=decoder`)
gets the causal mask under its layer/head picker, beside a head of the other kind once answered.
"""

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from core.app.registry import PageControl
from core.app.settings import Settings
from core.charts import causal as causal_charts
from core.lessons import causal_dropout, common
from core.lessons.causal_dropout import BookCausal, CausalLesson, DecoderBlog, LeakCheck, MaskEffect, perturb_range
from core.lessons.common import token_name
from ui import cache, draw, widgets
from ui import weights as source
from ui.frame import page_start
from ui.presentation import step, step_break

PREDICT_KEY = "predict_causal_dropout"
SLUG = "causal_dropout"


def training_toggle(where: DeltaGenerator, why: str) -> bool:
    """The training-mode toggle (in the link as ?training=true), the same key for every weight source."""
    return where.toggle("Training mode (dropout on)", False, key=PageControl.TRAINING, bind="query-params", help=why)


def perturb_picker(where: DeltaGenerator, settings: Settings) -> int:
    """The token the leakage check pushes (random draws), counted from 1."""
    tokens = cache.computed(common.TOKEN_LABELS, settings)
    bounds = perturb_range(len(tokens))
    if bounds is None or bounds[0] == bounds[1]:
        perturbed = bounds[1] if bounds else 1
        where.caption(
            f"The leakage check pushes token {token_name(perturbed)}"
            + (" (a one-token sentence has no earlier token to protect)." if bounds is None else ".")
        )
        return perturbed
    return where.slider(
        "Perturb token x⁽ⁱ⁾ (counted from 1, as the sources write x⁽¹⁾, x⁽²⁾, …)",
        bounds[0],
        bounds[1],
        min(3, bounds[1]),
        key=PageControl.PERTURB,
        bind="query-params",
    )


def computed(settings: Settings) -> CausalLesson | None:
    """The intro, the pickers and the lesson for this source (None: the model's files are broken)."""
    if not settings.weights.is_model:
        widgets.prose(SLUG, "intro")
        c1, c2 = st.columns(2)
        perturbed = perturb_picker(c1, settings)
        why = "Dropout only acts in training mode; the sidebar sets its rate (at 0, the book's 0.5 is shown)."
        training = training_toggle(c2, why)
        return cache.computed(causal_dropout.LESSON, settings, perturbed, training)
    from core.lessons import pretrained as pt

    # break_before_picker: the head, its pieces and the question; on a projector its options fell below the fold
    chosen = source.pick(SLUG, settings, "causal_intro", break_before_picker=True)
    if chosen is None:
        return None
    why = "Dropout only acts in training mode; the sidebar sets its rate and the seed draws it."
    training = training_toggle(st.container(), why)
    # The sidebar's rate (at 0, training uses the book's 0.5) and seed (it draws the dropout mask).
    lesson = cache.computed(
        pt.CAUSAL,
        settings.weights,
        chosen.model,
        chosen.sentence,
        chosen.layer,
        chosen.head,
        training,
        settings.dropout,
        int(settings.seed),
    )
    source.pieces_line(lesson.tokens, settings.weights)
    return lesson


def two_ways_to_mask(lesson: CausalLesson, answered: bool) -> None:
    """Random draws: both masking methods side by side, and their difference. The masked triangle (and the
    formula that draws it) shows which rows a token can reach: the question's answer, so only once answered."""
    step("Two ways to mask")
    widgets.prose(SLUG, "methods")
    if not answered:
        widgets.answer_first("The masking formula and both masked weight matrices appear")
    else:
        st.latex(r"\text{masked}_{ij} = \begin{cases}\omega_{ij}/\sqrt{d_k} & j \le i\\ -\infty & j > i\end{cases}")
        # Two side by side: three 6-token heatmaps in a row leave no room for their numbers.
        c1, c2 = st.columns(2)
        with c1:
            draw.heatmap(
                lesson.renormalised,
                "softmax → zero the future → renormalise",
                "Heatmap of causal weights made by masking after the softmax and renormalising.",
                value_title="weight",
                causal=True,
            )
        with c2:
            draw.heatmap(
                lesson.masked,
                "−∞ above the diagonal → softmax",
                "Heatmap of causal weights made by masking with minus infinity before the softmax.",
                value_title="weight",
                causal=True,
            )
    step_break()  # their difference on a screen of its own: under both maps the step was 1,956 px (s27)
    if answered:
        c3, _ = st.columns(2)
        with c3:
            draw.heatmap(
                lesson.difference,
                "difference",
                "Heatmap of the difference between the two methods: all zeros.",
                signed=True,
                min_magnitude=1e-3,
            )
    else:
        widgets.answer_first("The difference between the two masked matrices appears")
    st.success(f"Largest difference between the two methods: {lesson.max_method_difference:.1e}")


def book_example(book: BookCausal, answered: bool) -> None:
    """The book chapter's printed causal example, replayed on its printed numbers; its masked matrices (the
    same sentence's triangle) only once the question is answered. Two screens in presentation mode: the weights
    masked after the softmax, then the scores masked before it (one step of 3,863 px, the s27 review)."""
    with st.expander("The book chapter's printed causal example", expanded=True):
        st.caption(
            "The chapter prints these matrices from a v2 module that no seed reproduces today, so the lab "
            "replays its steps on the printed numbers. " + book.printed_difference.note()
        )
        b1, b2 = st.columns(2)
        b3, _ = st.columns(2)
        with b1:
            draw.heatmap(book.printed_weights, "printed weights", "The book's printed weights.", value_title="weight")
        if not answered:
            widgets.answer_first("The printed weights masked both ways, the masked scores and their code appear")
        else:
            with b2:
                draw.heatmap(
                    book.masked_simple,
                    "future zeroed (masked_simple)",
                    "The printed weights with every entry above the diagonal set to zero.",
                    value_title="weight",
                    causal=True,
                )
            with b3:
                draw.heatmap(
                    book.renormalised,
                    "rows renormalised",
                    "The masked weights with each row divided by its sum.",
                    value_title="weight",
                    causal=True,
                )
    step_break()  # drawn answered or not: the step count stays the same
    with st.expander("The book chapter's example, masked before the softmax", expanded=True):
        if not answered:
            widgets.answer_first("The printed scores masked with −∞, their softmax and the chapter's code appear")
            return
        st.markdown("**The printed scores with −∞ above the diagonal**, and the softmax of them divided by √2:")
        # The table gets the full width: in half a column its six columns of 20 px numbers were cut
        # on a 1280 px projector in presentation mode.
        widgets.number_table(book.masked_scores)
        m2, _ = st.columns(2)
        with m2:
            draw.heatmap(
                book.minus_inf_weights,
                "softmax(masked scores / √2)",
                "Causal weights recomputed from the book's printed masked scores.",
                value_title="weight",
                causal=True,
            )
    # In a closed box, as every lesson's code: shown open, its 40 lines made this screen 2,611 px on a projector.
    widgets.code_box(
        book.code, "The chapter's steps on its printed numbers, in plain PyTorch.", title="the book's steps"
    )


def inputs_and_targets(blog: DecoderBlog, answered: bool) -> None:
    """The decoder blog's shift into input/target pairs, its simple average, then its single head. The average
    over "itself and everything before it" and its triangles answer the question: only once it is answered."""
    step("Inputs and targets: one chunk, many examples")
    widgets.prose(SLUG, "shift")
    s1, s2 = st.columns(2)
    s1.dataframe(blog.shift, hide_index=True, width="stretch", height=widgets.table_height(len(blog.shift)))
    if not answered:
        widgets.answer_first("The decoder blog's simple average and its single head, with their weights, appear")
        return
    with s2:
        draw.heatmap(
            blog.simple_average,
            "Simple average (the decoder blog)",
            "Heatmap of the simple-average causal weights for cats climb trees during.",
            value_title="weight",
            causal=True,
        )
    widgets.prose(SLUG, "average")
    b1, b2 = st.columns(2)
    with b1:
        draw.heatmap(
            blog.head_weights,
            f"Step 2: SingleSelfAttentionHead (head size {blog.head_size})",
            "Heatmap of the decoder blog's single causal head on the same four tokens.",
            value_title="weight",
            causal=True,
        )
    b2.markdown("**Step 1 and step 2, exact weights** (average above, head below):")
    widgets.number_table(blog.simple_average_table, where=b2)
    widgets.number_table(blog.head_table, where=b2)
    widgets.code_box(
        blog.code,
        "The decoder blog's two steps in plain PyTorch, on this page's cats embeddings.",
        title="the decoder blog's two steps",
    )


def leak_verdict(leak: LeakCheck, answered: bool) -> None:
    """Which rows moved: the question's answer, so only once it is answered."""
    if not answered:
        widgets.answer_first(f"The rows that changed after pushing {token_name(leak.perturbed)} appear")
    else:
        draw.draw(
            causal_charts.leakage(leak.leakage, leak.perturbed),
            "Bars of how much each output row changed after perturbing one token; earlier rows stay at zero.",
        )
    if leak.perturbed == 1:
        st.info(f"Token {token_name(1)} has no earlier token: every row may change.")
    elif not answered:
        pass  # the verdict below says which rows changed: the question's answer
    elif leak.earlier_unchanged:
        st.success(
            f"Rows 1 to {leak.perturbed - 1} are unchanged after pushing {token_name(leak.perturbed)}: no leakage."
        )
    else:
        st.error("An earlier row changed: the mask leaks!")


def leak_check(leak: LeakCheck, answered: bool) -> None:
    """Random draws: push one token and see which rows move; then the masked_fill bug."""
    step("Does anything leak from the future?")
    widgets.prose(SLUG, "leak")
    leak_verdict(leak, answered)
    # The bug on a projector screen of its own: with it in one paragraph above, the bars that answer the question
    # started at 594 px of 720 and the step was 1,969 px (the s27b review).
    step_break()
    widgets.prose(SLUG, "leak_bug")
    l1, l2 = st.columns(2)
    with l1:
        draw.heatmap(
            leak.buggy,
            "With the masked_fill bug",
            "Heatmap of weights computed with the masking bug: the future is not masked.",
            value_title="weight",
        )
    with l2:
        st.code(
            "scores.masked_fill(mask, -torch.inf)   # result thrown away: no mask!\n"
            "scores = scores.masked_fill(mask, -torch.inf)   # correct\n"
            "scores.masked_fill_(mask, -torch.inf)           # correct, in place",
            language="python",
            wrap_lines=True,  # no sideways scrolling box (a keyboard cannot reach it)
        )
        st.metric("average weight on future tokens, buggy", f"{leak.bug_future_mass:.4f}")
    if not answered:  # its comments say which rows a push leaves alone: the question's answer (s22 re-review)
        widgets.answer_first("The leakage check's Code box appears")
        return
    widgets.code_box(
        leak.code,
        "The leakage check and the masked_fill bug in plain PyTorch.",
        title="the leakage check and the masked_fill bug",
    )


def mask_on_a_head(lesson: CausalLesson, effect: MaskEffect, answered: bool) -> None:
    """A model's head: its weights without and with the mask, and the rows the mask changed (after the answer)."""
    step("The mask on a real head")
    if answered:  # side by side, the two heatmaps show which rows lost their strongest key
        left, right = st.columns(2)
        with left:
            draw.heatmap(
                effect.unmasked,
                "Without the mask (never run so)" if lesson.trained_causal else "As the model runs it (no mask)",
                "Heatmap of the head's weights, every piece reading every piece.",
                value_title="weight",
            )
        with right:
            draw.heatmap(
                lesson.masked,
                "As the model runs it: −∞ above the diagonal"
                if lesson.trained_causal
                else "Causal: −∞ above the diagonal, then softmax",
                "Heatmap of the same head's weights with the future masked.",
                value_title="weight",
                causal=True,
            )
    else:
        widgets.answer_first("The head's weights with and without the mask, and the rows the mask changed appear")
    root = rf"\sqrt{{{lesson.head_dim}}}"
    st.latex(
        rf"\text{{softmax}}\big(\text{{mask}}(q K^\top/{root})\big)"
        rf" = \text{{renormalise}}\big(\text{{zero future}}(\text{{softmax}}(q K^\top/{root}))\big)"
    )
    if answered:
        st.markdown(
            f"The two ways of masking differ by at most **{lesson.max_method_difference:.1e}** here. Unmasked, an "
            f"average row put **{effect.future_mass:.2f}** of its weight on later "
            f"{'tokens' if lesson.trained_causal else 'pieces'}; the mask gave another "
            f"strongest key to **{effect.rows_changed}** of {len(lesson.tokens)} rows."
        )
        widgets.number_table(effect.rows, hide_index=True)
    else:
        st.markdown(f"The two ways of masking differ by at most **{lesson.max_method_difference:.1e}** here.")


def beside_the_other_kind(settings: Settings, lesson: CausalLesson, answered: bool) -> None:
    """The other model's default head for this lesson on the same sentence: a decoder head trained behind the
    mask beside an encoder head given it afterwards, once answered. Skipped where the other model is not
    installed."""
    from core.inputs.weights import MODELS
    from core.lessons import pretrained as pt

    other = pt.OTHER_MODEL[settings.weights]
    if not source.model_ready(other, quiet=True):
        return
    if not answered:
        widgets.answer_first(f"The same sentence through a head of {MODELS[other].name} appears")
        return
    sentence, _, _ = source.usable_sentence(other, pt.lesson_sentence(settings))
    layer, head = pt.DEFAULT_HEADS[other][SLUG]
    seed = int(settings.seed)  # evaluation mode: the seed draws nothing here
    theirs = cache.computed(pt.CAUSAL, other, source.model(other), sentence, layer, head, False, 0.0, seed)
    st.markdown("**Beside a head of the other kind.** " + pt.mask_contrast(lesson, theirs, MODELS[other].name))
    effect, head = theirs.effect, theirs.provenance  # a model's lesson has both
    if effect is None or head is None:
        return
    # Only the other head's two matrices: this head's stand above, and drawing its unmasked map again here showed
    # one matrix twice on one screen (the s28b review).
    named = f"{MODELS[other].name}, layer {head.layer}, head {head.head}"
    left, right = st.columns(2)
    with left:
        draw.heatmap(
            effect.unmasked,
            f"Without the mask: {named}",
            f"Heatmap of {MODELS[other].name}'s weights without the causal mask.",
            value_title="weight",
        )
    with right:
        draw.heatmap(
            theirs.masked,
            f"With it: {named}",
            f"Heatmap of {MODELS[other].name}'s weights with the future masked.",
            value_title="weight",
            causal=True,
        )


def dropout_rate_line(lesson: CausalLesson) -> None:
    """A model's head: how much dropout kept, in words."""
    if lesson.kept_fraction is None:
        if not lesson.training:
            st.markdown(
                "Nothing is dropped: training mode is off, so these are the masked weights above, unchanged. Switch "
                "on **Training mode (dropout on)** under the head picker to see dropout zero some of them and scale "
                "up the rest."
            )
        else:
            st.markdown("Nothing is dropped: the dropout rate is 0, so these are the masked weights above, unchanged.")
    else:
        # The expected share beside the drawn one: "20 of the 21 survived (95%)" at rate 0.30 read as a wrong rate
        # (the s28 review); with so few weights the draw strays far from it.
        st.markdown(
            f"Rate {lesson.dropout:.2f}: **{lesson.kept_weights} of the {lesson.allowed_weights}** weights the mask "
            f"lets through survived ({lesson.kept_fraction:.0%}; each survives with probability "
            f"{1 - lesson.dropout:.0%}, so with {lesson.allowed_weights} weights the share strays from that from "
            f"seed to seed), each multiplied by {lesson.rescale:.4f}."
        )


def dropout_metrics(lesson: CausalLesson, where: DeltaGenerator, answered: bool) -> None:
    """Random draws: what dropout kept and the batched shapes, beside the heatmap. How many weights the mask lets
    through (T(T+1)/2) tells its triangle: that count only once the question is answered."""
    with where:
        if not lesson.training:
            st.info("Evaluation mode: dropout is the identity. Switch on training mode above.")
        elif not answered:
            st.metric("survivors are multiplied by", f"{lesson.rescale:.4f}")
        else:
            st.metric(
                f"fraction kept of the {lesson.allowed_weights} weights the mask lets through",
                f"{lesson.kept_fraction:.2f}",
                help=f"{lesson.kept_weights} of {lesson.allowed_weights} kept (the masked future is 0 whatever "
                f"dropout draws, so it is not counted); expected {1 - lesson.dropout:.2f}.",
            )
            st.metric("survivors are multiplied by", f"{lesson.rescale:.4f}")
        st.markdown("**Batched shapes**")
        st.dataframe(
            [{"step": step, "shape": str(shape)} for step, shape in lesson.batch_shapes],
            hide_index=True,
            width="stretch",
            height="content",  # every row: a shape table is short
        )


def dropout_step(lesson: CausalLesson, settings: Settings, answered: bool) -> None:
    """Dropout on the masked weights, for every source; the random draws' heatmap marks what was dropped."""
    model = settings.weights.is_model
    if model:
        step("Dropout on the real weights")
        widgets.prose(source.text(settings.weights), "causal_dropout")
    else:
        step("Dropout on the attention weights")
        widgets.prose(SLUG, "dropout")
        # Two lines: on one, the formula ran past a 390 px phone's right edge (review 5); no stacked fraction,
        # whose numerator the formula's box cut by 2 px on a phone and a laptop (review 6).
        st.latex(
            rf"\begin{{gathered}}\tilde\alpha_{{ij}} = m_{{ij}}\,\alpha_{{ij}}\,/\,(1-p)\\"
            rf"m_{{ij}}\sim\text{{Bernoulli}}(1-p),\quad p = {lesson.dropout:g}\end{{gathered}}"
        )
    if lesson.dropout_note:
        st.info(lesson.dropout_note, icon=":material/info:")
    if model:
        dropout_rate_line(lesson)
        if lesson.kept_fraction is None:
            pass  # nothing dropped: the weights are the masked map above, and drawing them again repeats it
        elif answered:
            draw.heatmap(
                lesson.dropped,
                "Masked weights after dropout",
                "Heatmap of the weights after dropout.",
                value_title="weight",
                causal=True,
            )
        else:
            widgets.answer_first("The masked weights after dropout appear")
        widgets.code_box(lesson.code, source.code_caption(settings.weights), title=source.code_title(settings.weights))
        return
    d1, d2 = st.columns(2)
    with d1:
        if not answered:  # the masked weights after dropout: the same triangle as the two ways above
            widgets.answer_first(
                "The weights after dropout, and how many of them dropout kept, appear"
                if lesson.training
                else "The weights after dropout appear"
            )
        else:
            draw.heatmap(
                lesson.dropped,
                "Weights after dropout"
                + (" (training; ✕ = dropped)" if lesson.training else " (evaluation: unchanged)"),
                "Heatmap of the attention weights after dropout; dropped weights are outlined and marked with a cross.",
                value_title="weight",
                causal=True,
                marked="dropped",
            )
    dropout_metrics(lesson, d2, answered)
    widgets.code_box(lesson.code, title="causal attention and dropout with these numbers")


def lesson_4(settings: Settings) -> None:
    lesson = computed(settings)
    if lesson is None:
        return
    # Token 1 has no question (every row may change); otherwise the leakage bars answer it.
    answered = (lesson.leak is not None and lesson.leak.perturbed == 1) or widgets.predict(
        lesson.prediction, key=PREDICT_KEY
    )
    if lesson.pattern is not None:
        source.head_caption(lesson.pattern, answered)
    if lesson.effect is not None:  # a model's head
        mask_on_a_head(lesson, lesson.effect, answered)
        # The other kind of head on a projector screen of its own: below this head's maps, latex and table it made
        # the step 2,481 px tall (the s25 review). After the answer: its numbers sit beside this head's.
        step_break()
        beside_the_other_kind(settings, lesson, answered)
    else:
        two_ways_to_mask(lesson, answered)
    if lesson.book is not None:
        # On a projector the chapter's replay (six heatmaps and their code) opens a screen of its own: inside the
        # masking step it made that step 5,432 px tall (the s25 review).
        step_break()
        book_example(lesson.book, answered)
    if lesson.blog is not None:
        inputs_and_targets(lesson.blog, answered)
    if lesson.leak is not None:
        leak_check(lesson.leak, answered)
    dropout_step(lesson, settings, answered)


lesson_4(page_start().settings)
