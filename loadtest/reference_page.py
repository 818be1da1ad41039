"""The latency yardstick: one slider and one labelled 6x6 Altair heatmap, nothing else."""

import streamlit as st
import torch

from core.charts.heatmap import heatmap_altair
from core.lessons import matrix_frame

value = st.slider("value", 0, 100, 50, key="value")
matrix = torch.arange(36, dtype=torch.float32).reshape(6, 6) / 36 + value / 100
tokens = ["a", "b", "c", "d", "e", "f"]
st.altair_chart(heatmap_altair(matrix_frame(matrix, tokens, tokens), "reference"), theme="streamlit", width="stretch")
