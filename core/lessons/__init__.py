"""What each lesson page shows, computed from the sidebar's `Settings`: one module per lesson.

Each lesson returns its own frozen dataclass (pages read attributes) holding plain data:
DataFrames to chart, floats to print, and `code`, the lesson's recipe filled with the same
settings (core/recipes/). Results are cached per setting by the pages.
"""

from core.lessons.common import dims, frame_matrix, generator, matrix_frame, token_labels, unique_labels

__all__ = ["dims", "frame_matrix", "generator", "matrix_frame", "token_labels", "unique_labels"]
