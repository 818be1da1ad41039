"""Every AppTest in tests/app runs the frame in st.navigation mode (tests/conftest.py)."""

import pytest


@pytest.fixture(autouse=True)
def _frame_not_pages_directory(navigation_not_pages_directory: None) -> None:
    """Autouse for this folder: see `navigation_not_pages_directory`."""
