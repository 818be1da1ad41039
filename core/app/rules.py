"""The one rule a link's value must pass, by kind of control: a whole number, a rate, a choice, a flag, a text.

Each rule reads the text a link carries and returns (the value, None) or (None, why it is ignored). The
sidebar's controls (core/app/controls.py) and the pages' own (core/app/links.py) each name theirs.
Pure Python (no streamlit).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal

from core.inputs.examples import MAX_TEXT_CHARS

# What a link may spell a number as: ASCII digits only, no sign, exponent or separators.
_DIGITS = re.compile(r"[0-9]{1,10}")
_DIGITS_POINT_ZERO = re.compile(r"[0-9]{1,10}(\.0*)?")  # a float-typed box writes 7 as "7.0"
_DECIMAL = re.compile(r"[0-9]{0,3}(\.[0-9]{1,6})?")
# One of a box's numbers: digits, or thousands grouped by commas as a formatted box shows them ("1,024"),
# and a decimal part ("4.0", "0.0003"). Still no sign, exponent, spaces, "_" or other scripts' digits.
_NUMBER = re.compile(r"([0-9]{1,10}|[1-9][0-9]{0,2}(,[0-9]{3}){1,3})(\.[0-9]{1,10})?")

Reading = tuple[object, str | None]  # (the value, None) or (None, why it is ignored)


@dataclass(frozen=True)
class Whole:
    """A whole number from `low` to `high`, in ASCII digits ("7"; "7.0" too for a float-typed box)."""

    low: int
    high: int
    point_zero: bool = False  # the widget holds a float and writes whole values as "7.0"
    # What the note says instead of "from low to high": where the range depends on another setting
    # (a layer of the encoder runs to 5, of the GPT to 29), the single range would name the wrong one.
    described: Callable[[], str] | None = None

    def read(self, text: str) -> Reading:
        pattern = _DIGITS_POINT_ZERO if self.point_zero else _DIGITS
        number = int(float(text)) if pattern.fullmatch(text) else None
        if number is None or not self.low <= number <= self.high:
            allowed = self.described() if self.described else f"a whole number from {self.low} to {self.high}"
            return None, f"is not {allowed} (digits 0-9 only)"
        return number, None


@dataclass(frozen=True)
class Rate:
    """A decimal from `low` to `high` written with digits and a point ("0.25", ".25")."""

    low: float
    high: float

    def read(self, text: str) -> Reading:
        number = float(text) if text and text != "." and _DECIMAL.fullmatch(text) else None
        if number is None or not self.low <= number <= self.high:
            return None, f"is not a rate from {self.low} to {self.high} (such as 0.25)"
        return number, None


@dataclass(frozen=True)
class Choice:
    """One of a fixed list of codes, spelled exactly as the control writes it into the link.

    `codes` may be a function, for choices whose module only the page loads (the real model's):
    it runs only when a link carries the parameter.
    """

    codes: tuple[str, ...] | Callable[[], tuple[str, ...]]
    # What the note says instead of listing every code: where a value has two spellings ("2,048" and
    # "2048"), the list named each twice.
    described: Callable[[], str] | None = None

    def options(self) -> tuple[str, ...]:
        return self.codes() if callable(self.codes) else self.codes

    def read(self, text: str) -> Reading:
        options = self.options()
        if text in options:
            return text, None
        return None, f"is not {self.described()}" if self.described else f"is not one of {', '.join(options)}"


@dataclass(frozen=True)
class NumberChoice:
    """One of a fixed list of numbers, in any plain spelling of exactly that number ("4" and "4.0" for 4.0,
    "1024" and "1,024" for 1,024), read as the code its control binds (`spell` of the number).

    A bound widget takes only the label it writes itself (str() of the option, or its format_func's) and drops
    any other spelling without a word: "4" never reached the multiplier's 4.0, and "1024" (which a plain
    Choice passed) left the longest-sequence box at 2,048 with no note. So the value read is the widget's
    code, and the frame writes it back into the link before the widget binds it (streamlit_app.py).
    """

    numbers: tuple[float, ...]
    spell: Callable[[float], str] = str  # how the widget labels a number: a select box's default is str()
    # What the note says instead of listing every code (see Choice.described).
    described: Callable[[], str] | None = None

    def options(self) -> tuple[str, ...]:
        return tuple(self.spell(number) for number in self.numbers)

    def read(self, text: str) -> Reading:
        if _NUMBER.fullmatch(text):
            meant = Decimal(text.replace(",", ""))
            for number in self.numbers:
                if Decimal(str(number)) == meant:  # exactly the option: "0.70000000000000001" is not 0.7
                    return self.spell(number), None
        return None, f"is not {self.described()}" if self.described else f"is not one of {', '.join(self.options())}"


@dataclass(frozen=True)
class CheckedByItsControl:
    """A value only its control can judge: the query token (1 to the length of the page's
    sentence), a class poll's room code (a live room or not).

    The control applies the same rule when it reads the value (`ui.widgets.linked_select`,
    `ui.class_poll.read_room_link`): the value as the control writes it, or one note that names
    the parameter, and the control keeps its default. Here the value passes as it is.
    """

    def read(self, text: str) -> Reading:
        return text, None


@dataclass(frozen=True)
class Flag:
    """On or off: "true" or "false" (what a bound toggle writes), plus any extra spellings of on."""

    also_true: tuple[str, ...] = ()

    def read(self, text: str) -> Reading:
        if text in ("true", "false"):
            return text == "true", None
        if text in self.also_true:
            return True, None
        return None, "is not " + ", ".join(("true", *self.also_true)) + " or false"


@dataclass(frozen=True)
class Text:
    """Any text that is not blank, up to `max_chars` characters (never cut to fit)."""

    max_chars: int = MAX_TEXT_CHARS

    def read(self, text: str) -> Reading:
        if not text.strip():
            return None, "is empty"
        if len(text) > self.max_chars:
            return None, f"is longer than {self.max_chars} characters"
        return text, None


Rule = Whole | Rate | Choice | NumberChoice | CheckedByItsControl | Flag | Text
