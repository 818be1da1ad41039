"""Lesson 6: several heads in parallel, two ways to build them."""

import streamlit as st

from core.modules import multihead_parameter_count
from core.snippets import multihead_code
from pages import _ui

_ui.require_frame()

st.title("5 · Multi-head attention")
_ui.show_input_problem()
settings = _ui.settings()
_ui.prose("multi_head", "intro")
st.latex(
    r"\text{MultiHead}(X) = \text{Concat}(\text{head}_1, \dots, \text{head}_h)\,W_o,\quad"
    r"\text{head}_i = \text{softmax}\!\left(\frac{Q_i K_i^\top}{\sqrt{d_{head}}} + M\right) V_i"
)
try:
    lesson = _ui.multihead_lesson(settings)
except ValueError as error:
    st.error(
        f"{error} The rest of this page needs a valid split; the parameter count below still works.",
        icon=":material/error:",
    )
    lesson = None

if lesson is not None:
    values = lesson.values
    st.subheader(f"{settings.num_heads} heads of width {values['head_dim']}")
    per_row = min(settings.num_heads, 2)  # two per row: four leave no room for the numbers
    heads = list(dict.fromkeys(lesson.frames["head_weights"]["head"]))
    for start in range(0, len(heads), per_row):
        cols = st.columns(per_row)
        for col, head in zip(cols, heads[start : start + per_row], strict=False):
            with col:
                frame = lesson.frames["head_weights"]
                _ui.heatmap(
                    frame[frame["head"] == head],
                    head,
                    f"Heatmap of the causal attention weights of {head}.",
                    value_title="weight",
                    show_values=len(lesson.tokens) <= 8,
                )

    st.subheader("Wrapper vs one split matrix")
    _ui.prose("multi_head", "two")
    a, b, c = st.columns(3)
    a.metric("wrapper output width", values["wrapper_width"], help="d_out per head × heads")
    b.metric("max |wrapper − MultiHeadAttention|", f"{values['wrapper_max_diff']:.1e}")
    c.metric("parameters (this layer)", f"{values['params']:,}")
    st.markdown("**Shapes step by step** (batch of one sentence)")
    st.dataframe(
        [
            {"code": code, "what happens": what, "shape": str(tuple(shape))}
            for code, what, shape in values["shape_steps"]
        ],
        hide_index=True,
        width="stretch",
    )
    _ui.heatmap(
        lesson.frames["output"],
        "Output after out_proj",
        "Heatmap of the multi-head attention output.",
        signed=True,
        x_title="dimension",
        y_title="token",
        show_values=settings.d_out <= 8,
    )

st.subheader("Parameter count")
_ui.prose("multi_head", "params")
st.metric("GPT-2-sized layer (768 → 768, 12 heads)", f"{multihead_parameter_count(768, 768):,}")
if lesson is not None:
    _ui.code_expander(multihead_code(settings))
