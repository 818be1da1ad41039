"""Lesson 7's trained cross-attention section: one call from pages/7_cross_attention.py.

The tiny encoder–decoder (core/models/tiny_seq2seq.py) is trained once per process, on a queue
of the kind the training lab uses (services/training_queue.py): one slot, one run, kept for a
week. The first student to open the section waits a few seconds with a progress bar; everyone
after gets the finished run at once.
"""

from __future__ import annotations

import time
from dataclasses import replace

import streamlit as st

from core.app.markup import literal
from core.app.settings import PresetKey, Settings, effective_d_in
from core.charts import cross_trained as charts
from core.lessons import cross_attention
from core.lessons import cross_attention_trained as ct
from core.models import tiny_seq2seq
from core.models.tiny_seq2seq import AlignmentRun, Seq2SeqConfig
from services.training_queue import ProgressCallback, State, TrainingQueue
from ui import cache, draw, sessions, widgets
from ui.presentation import step, step_break

UPDATE_S = 0.3  # how often the waiting student's bar is redrawn
KEPT_S = 7 * 24 * 3600  # the one run is kept a week (one result: the cache stays bounded)
EXAMPLE_KEY = "cross_trained_example"


def _train(config: Seq2SeqConfig, on_progress: ProgressCallback) -> AlignmentRun:
    return tiny_seq2seq.train(config, on_progress=on_progress)


WARM_UP = "warm-up"  # the queue's session for the run asked for before any student opens the lesson (`warm_up`)


def _alive(session: str) -> bool:
    return session == WARM_UP or sessions.session_alive(session)


@st.cache_resource(show_spinner=False)
def training_queue() -> TrainingQueue[Seq2SeqConfig, AlignmentRun]:
    """The process's queue for this model: one run at a time, one result kept."""
    return TrainingQueue(
        _train,
        tiny_seq2seq.estimated_seconds,
        slots=1,
        is_alive=_alive,
        max_results=1,
        result_ttl_s=KEPT_S,
    )


@st.cache_resource(show_spinner=False)
def warm_up() -> bool:
    """Once per process, from the overview: the translator is trained in the background while the teacher talks,
    so the first student to open lesson 7 does not wait for it (51 s on a loaded server, the s25 review)."""
    training_queue().request(WARM_UP, (ct.DEFAULT_CONFIG,))
    return True


def trained_run(config: Seq2SeqConfig = ct.DEFAULT_CONFIG) -> AlignmentRun | None:
    """The finished run: at once when this process has it, else after a wait shown in place (None if it failed)."""
    queue, session = training_queue(), sessions.session_id()
    status = queue.status(session, config)
    if status.state == State.DONE:
        return status.result
    queue.request(session, (config,))
    bar = st.progress(0.0, text="Training the tiny encoder–decoder (once for the whole server)…")
    while True:
        status = queue.status(session, config)
        if status.state == State.DONE:
            bar.empty()
            queue.finish(session)
            return status.result
        if status.state == State.FAILED:
            bar.empty()
            st.error(f"The model could not be trained ({status.error}).", icon=":material/error:")
            return None
        if status.state == State.UNKNOWN:
            queue.request(session, (config,))  # the queue lost the request (a dropped tab reconnected)
        text = f"Training the tiny encoder–decoder: {status.progress:.0%} done, about {status.wait_s:.0f} s left."
        bar.progress(min(status.progress, 1.0), text=text)  # also where a newer rerun stops this loop
        time.sleep(UPDATE_S)


def _random_settings(settings: Settings) -> Settings:
    """The sidebar's settings for the random-weight lesson on a given pair: the article's preset keeps
    its own second sequence whatever the texts, so it is read as your own sentence at its width."""
    if settings.preset != PresetKey.ARTICLE:
        return settings
    return replace(settings, preset=PresetKey.CUSTOM, d_in=effective_d_in(settings))


def section(settings: Settings, d_v: int, shape_answered: bool) -> None:
    """The step: a held-out sentence, the question, then the trained weights beside the random ones.

    `shape_answered`: the page's shape question has a choice. Until then the random weights wait too: on the
    default pair their 7 rows and 8 columns are that question's answer."""
    step("Trained: a tiny encoder–decoder")  # the old heading named the answer to its question
    widgets.prose("cross_attention", "trained")
    step_break()  # on a projector, the question started below the fold of the paragraph
    run = trained_run()
    if run is None:
        return
    labels = ct.example_labels(run)
    example = st.selectbox(
        "A held-out sentence (the model never trained on it)",
        range(len(labels)),
        format_func=labels.__getitem__,
        key=EXAMPLE_KEY,
    )
    clause = run.examples[int(example or 0)].clause
    random = cache.computed(
        cross_attention.LESSON, _random_settings(settings), clause.german_text, d_v, clause.english_text
    )
    lesson = ct.trained_cross_lesson(run, int(example or 0), random)
    answered = widgets.predict(lesson.prediction, key="predict_cross_trained")
    step_break()  # what the answer unlocks, on a screen of its own: on a projector it started below the fold
    heatmaps = charts.alignment_heatmaps(lesson.trained, lesson.random)
    left, right = st.columns(2)
    with left:
        if shape_answered:
            draw.draw(
                heatmaps.random,
                "Heatmap of the sources' random cross-attention weights on the picked sentence pair.",
            )
        else:
            st.caption(
                ":material/lock: The random weights on this pair appear once you have answered the first "
                "question, on the weights' shape."
            )
    with right:
        if answered:  # the trained weights, and every number measured on them, answer the question
            draw.draw(heatmaps.trained, "Heatmap of the trained cross-attention weights on the picked sentence pair.")
        else:
            widgets.answer_first("The trained weights appear")
    step_break()  # the alignment measured, on a screen of its own: under the two maps the step was 2,336 px (s27)
    if answered:
        _measures(lesson)
    else:
        widgets.answer_first("How well the trained weights align the words, measured, appears")
    widgets.code_box(lesson.code, title="train it and measure the alignment")


def _measures(lesson: ct.TrainedCrossLesson) -> None:
    """The alignment measured: held-out share, this sentence's, per word, and the training curve."""
    m1, m2, m3 = st.columns(3)
    m1.metric(
        f"held-out share ({lesson.held_out_clauses:,} sentences)",
        f"{lesson.held_out_share:.1%}",
        help="Of each English word's weight, the share on its German partner, averaged over every held-out sentence.",
    )
    m2.metric("this sentence, trained", f"{lesson.clause_share:.1%}")
    m3.metric("this sentence, random weights", f"{lesson.random_share:.1%}")
    misses = f" ({literal(lesson.misses)})" if lesson.misses else ""
    st.markdown(
        f"On this sentence **{lesson.correct} of {len(lesson.english)}** English words read their German partner "
        f"most{misses}. A second measure, of what the model writes rather than where it reads: given the right English "
        f"words before it, it writes the next one right **{lesson.held_out_accuracy:.1%}** of the time on the "
        f"held-out sentences (trained on {lesson.train_clauses:,} others, in {lesson.seconds:.1f} s)."
    )
    st.caption(
        "The toy is built so that this measure means something: every English word here has exactly one German "
        "partner, so the right alignment is word for word. A real translator's attention is rarely that clean "
        "(one word can read several, and idioms read none one-to-one)."
    )
    widgets.number_table(lesson.words, hide_index=True)
    draw.draw(
        charts.share_curve(lesson.curve, ct.TARGET_SHARE),
        "Line chart of the held-out alignment share against the training step, with the 80% target.",
    )
    st.caption(ct.target_caption(lesson.curve, lesson.held_out_clauses))
