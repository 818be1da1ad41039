"""Lesson 6: a real pretrained encoder (all-MiniLM-L6-v2), its 72 heads computed by our own code.

Each section is drawn by pages/_real_model_ui.py; this script only puts them in order.
"""

from core import real_model_lesson as lesson_rm
from pages import _real_model_ui as parts
from pages import _ui

_ui.page_start()
_ui.prose("real_model", "intro")
parts.model_or_stop()
lesson, example = parts.sentence_picker()
_ui.predict(lesson_rm.previous_token_question(lesson), key="predict_real_model")
_ui.prose("real_model", "input")
parts.word_pieces(lesson, example)
parts.head_grid(lesson)
layer, head = parts.head_picker(lesson)
chosen = lesson_rm.head_frame(lesson, layer, head)
parts.chosen_head(lesson, layer, head, chosen)
parts.measures(lesson, layer, head)
parts.bridge(lesson)
parts.causal(lesson, layer, head, chosen)
parts.code(lesson, layer, head)
