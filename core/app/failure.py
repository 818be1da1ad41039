"""What the frame says when a page fails unexpectedly: words that are true of this page and its settings.

The message used to say "hit a problem with these settings" and offer "Back to the book's example"
on every page. A teacher's review (#3) met it on Inside a GPT and Attention at scale at their
defaults: there were no settings of the student's to blame, and neither page reads the book's
example, so the button changed nothing there. Now the message blames the settings only when the
page reads one that differs from its default, and offers the book's example only where the page
reads the sidebar's Input and the settings are not the book's already; otherwise its button runs
the page again. Pure Python: streamlit_app.py draws the note `failure_note` returns.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, fields
from enum import StrEnum

from core.app.registry import Control, PageSpec
from core.app.settings import Settings, input_fields


class Remedy(StrEnum):
    """What the note's button does."""

    BOOK = "book"  # the sidebar back to the book's example (a page that reads it)
    AGAIN = "again"  # the page run again, as it is (a click reruns the script)


BUTTON_LABELS = {Remedy.BOOK: "Back to the book's example", Remedy.AGAIN: "Run it again"}


@dataclass(frozen=True)
class FailureNote:
    text: str
    remedy: Remedy

    @property
    def button(self) -> str:
        return BUTTON_LABELS[self.remedy]


def changed_sidebar(spec: PageSpec, settings: Settings) -> tuple[str, ...]:
    """The sidebar's settings this page reads that are not at their defaults (the sentence and d_in only
    where the preset reads them: the book's, the notebook's and the article's inputs are fixed)."""
    ignored = spec.ignores_with(settings.weights)
    default = Settings()
    fixed_inputs = {Control.TEXT, Control.D_IN} - input_fields(settings.preset)
    return tuple(
        field.name
        for field in fields(Settings)
        if Control(field.name) not in ignored
        and Control(field.name) not in fixed_inputs
        and getattr(settings, field.name) != getattr(default, field.name)
    )


def changed_own(spec: PageSpec, linked: Collection[str]) -> tuple[str, ...]:
    """The page's own controls not at their defaults. `linked`: the link's parameter names (a bound control
    is in the link exactly when its value is not the default)."""
    return tuple(control.value for control in spec.controls if control.value in linked)


def failure_note(spec: PageSpec, settings: Settings, linked: Collection[str]) -> FailureNote:
    """The message for an unexpected error on page `spec` at `settings`, and its button."""
    part = "This part of the lesson" if spec.number > 0 else "This part of the page"
    this_one = "this one" if spec.number > 0 else "this page"
    sidebar = changed_sidebar(spec, settings)
    if not sidebar and not changed_own(spec, linked):
        return FailureNote(
            f"{part} stopped on an unexpected problem, not on anything you chose: its settings are the "
            "defaults. The server's log has the details. Everything else still works: the sidebar and the "
            "other lessons. The button below runs it again.",
            Remedy.AGAIN,
        )
    if sidebar and Control.PRESET not in spec.ignores_with(settings.weights):  # the book's example is one click
        return FailureNote(
            f"{part} hit a problem with these settings, so it stops here. Everything else still works: the "
            f"sidebar, the other lessons, and {this_one} with other settings. The button below goes back to the "
            "book's example.",
            Remedy.BOOK,
        )
    return FailureNote(
        f"{part} hit a problem with these settings, so it stops here. Everything else still works: the "
        f"sidebar, the other lessons, and {this_one} with other settings: change one, or press the button below "
        "to run it again.",
        Remedy.AGAIN,
    )
