"""Text from a link or a student, made inert for Streamlit's markdown.

Streamlit renders st.markdown, st.caption, st.warning, headers and widget labels as markdown
with its own extensions: links, images, LaTeX between dollar signs, `:red-background[...]`
directives, `:emoji:` and `:material/icon:` short codes. Anything a visitor typed must reach
the screen as the characters they typed, never as formatting.
"""

from __future__ import annotations

import re
import string
import unicodedata

# CommonMark lets a backslash escape every ASCII punctuation mark; Streamlit's markdown honours it.
_PUNCTUATION = re.compile("([" + re.escape(string.punctuation) + "])")
_BACKTICKS = re.compile("`+")


def counted(number: int, noun: str) -> str:
    """'1 head', '12 heads': a count with its noun in the number it needs (a regular plural)."""
    return f"{number} {noun}" + ("" if number == 1 else "s")


def visible(text: str) -> str:
    """Control and format characters (newlines, right-to-left overrides, NUL) as \\n, \\u202e, \\x00.

    A blank line would end a markdown paragraph (and a code span with it), and a direction
    override would reorder the app's own words around it.
    """
    return "".join(ch if ch.isprintable() or ch == " " else ascii(ch)[1:-1] for ch in text)


def token_shown(token: str) -> str:
    """A model's token as the lessons show it (lesson 10's repr(): quoted, so a leading space shows), with each
    invisible character named: ' Mary' stays ' Mary', '\\xa0' reads '⟨no-break space⟩', a zero-width space
    '⟨zero width space⟩': repr() writes such characters as escape codes ('\\xa0') a class cannot read. Newlines
    and tabs keep repr's \\n and \\t (lesson 10 shows them so); a character without a name keeps its escape.
    """
    named = "".join(
        ch if ch.isprintable() or ch in " \n\t" or not unicodedata.name(ch, "") else f"⟨{unicodedata.name(ch).lower()}⟩"
        for ch in token
    )
    return repr(named)


def shorten(text: str, limit: int = 40) -> str:
    """At most `limit` characters, ending in '…' when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def literal(text: str) -> str:
    """`text` escaped for running markdown: every punctuation mark stays a character.

    'Hello __init__ $x$' renders as typed, not bold and not as LaTeX. A colon is escaped too,
    which keeps ':red[...]' and ':smile:' from being read as a directive or an emoji.
    """
    return _PUNCTUATION.sub(r"\\\1", visible(text))


def code_span(text: str, limit: int = 40) -> str:
    """`text` shortened and shown as inline code: monospace, and nothing inside is markup.

    The fence is one backtick longer than any run of backticks inside, as CommonMark requires.
    """
    shown = shorten(visible(text), limit)
    fence = "`" * (max((len(run) for run in _BACKTICKS.findall(shown)), default=0) + 1)
    pad = " " if shown.startswith("`") or shown.endswith("`") or not shown.strip() else ""
    return f"{fence}{pad}{shown}{pad}{fence}"
