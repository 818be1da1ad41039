"""Shared services of one server process, not computation: the class poll's store and the training queue.

Neither imports streamlit; `ui/` shows them.
"""
