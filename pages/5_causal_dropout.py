"""Lesson 5: hiding the future, and dropout on the attention weights."""

import streamlit as st

from core import charts
from core.snippets import causal_code
from pages import _ui

_ui.require_frame()

st.title("4 · Causal attention and dropout")
_ui.show_input_problem()
settings = _ui.settings()
_ui.prose("causal_dropout", "intro")
tokens = _ui.token_labels(settings)
c1, c2 = st.columns(2)
position = _ui.whole_number_slider("Perturb the token at position", 1, max(1, len(tokens) - 1), 2, "perturb", c1)
training = c2.toggle(
    "Training mode (dropout on)",
    False,
    key="training",
    help="Dropout only acts in training mode; the sidebar sets its rate.",
)
lesson = _ui.causal_lesson(settings, position, training)
values = lesson.values

st.subheader("Two ways to mask")
_ui.prose("causal_dropout", "methods")
st.latex(r"\text{masked}_{ij} = \begin{cases}\omega_{ij}/\sqrt{d_k} & j \le i\\ -\infty & j > i\end{cases}")
c1, c2, c3 = st.columns(3)
with c1:
    _ui.heatmap(
        lesson.frames["after"],
        "softmax → zero the future → renormalise",
        "Heatmap of causal weights made by masking after the softmax and renormalising.",
        value_title="weight",
    )
with c2:
    _ui.heatmap(
        lesson.frames["before"],
        "−∞ above the diagonal → softmax",
        "Heatmap of causal weights made by masking with minus infinity before the softmax.",
        value_title="weight",
    )
with c3:
    _ui.heatmap(
        lesson.frames["difference"],
        "difference",
        "Heatmap of the difference between the two methods: all zeros.",
        signed=True,
        min_magnitude=1e-3,
    )
st.success(f"Largest difference between the two methods: {values['max_method_difference']:.1e}")
if "book_weights" in lesson.frames:
    with st.expander("The book's printed causal example (seed 000)", expanded=False):
        st.caption(
            "The chapter prints these matrices from a v2 module no seed reproduces today, so the lab "
            "replays its steps on the printed numbers. Its renormalised table has one typo: "
            "row 6 column 3 reads 0.1555; nothing in row 6 is masked, so it is 0.1565."
        )
        b1, b2 = st.columns(2)
        with b1:
            _ui.heatmap(
                lesson.frames["book_weights"],
                "printed weights",
                "The book's printed attention weights.",
                value_title="weight",
            )
        with b2:
            _ui.heatmap(
                lesson.frames["book_minus_inf"],
                "softmax(printed −∞ scores / √2)",
                "Causal weights recomputed from the book's printed masked scores.",
                value_title="weight",
            )

st.subheader("Inputs and targets: one chunk, many examples")
_ui.prose("causal_dropout", "shift")
s1, s2 = st.columns(2)
s1.dataframe(lesson.frames["shift"], hide_index=True, width="stretch")
with s2:
    _ui.heatmap(
        lesson.frames["simple_average"],
        "Simple average (seed 002)",
        "Heatmap of the simple-average causal weights for cats climb trees during.",
        value_title="weight",
    )

st.subheader("Does anything leak from the future?")
_ui.prose("causal_dropout", "leak")
_ui.chart(
    charts.leakage_chart(lesson.frames["leakage"], values["perturb_position"]),
    "Bars of how much each output row changed after perturbing one token; earlier rows stay at zero.",
)
if values["earlier_unchanged"]:
    st.success(f"Rows before position {values['perturb_position'] + 1} are unchanged: no leakage.")
else:
    st.error("An earlier row changed: the mask leaks!")
l1, l2 = st.columns(2)
with l1:
    _ui.heatmap(
        lesson.frames["buggy"],
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
    )
    st.metric("average weight on future tokens, buggy", f"{values['bug_future_mass']:.3f}")

st.subheader("Dropout on the attention weights")
_ui.prose("causal_dropout", "dropout")
st.latex(
    rf"\tilde\alpha_{{ij}} = \frac{{m_{{ij}}\,\alpha_{{ij}}}}{{1-p}},\quad m_{{ij}}\sim\text{{Bernoulli}}(1-p),"
    rf"\quad p = {settings.dropout:g}"
)
d1, d2 = st.columns(2)
with d1:
    _ui.heatmap(
        lesson.frames["dropped"],
        "Weights after dropout" + (" (training)" if training else " (evaluation: unchanged)"),
        "Heatmap of the attention weights after dropout.",
        value_title="weight",
    )
with d2:
    if not training:
        st.info("Evaluation mode: dropout is the identity. Switch on training mode above.")
    elif settings.dropout == 0:
        st.info("The dropout rate is 0: raise it in the sidebar.")
    else:
        st.metric(
            "fraction of weights kept", f"{values['kept_fraction']:.2f}", help=f"expected {1 - settings.dropout:.2f}"
        )
        st.metric("survivors are multiplied by", f"{values['rescale']:.3f}")
    st.markdown("**Batched shapes**")
    st.dataframe(
        [{"step": s, "shape": str(tuple(shape))} for s, shape in values["batch_shapes"]],
        hide_index=True,
        width="stretch",
    )
_ui.code_expander(causal_code(settings, training))
