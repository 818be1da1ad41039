"""The GPT lessons' prompt box (lessons 10 and 12): a checked example or the student's own text, in the link as
?gpt_prompt, ?gpt_text and ?gpt_chat, read through the model queue (ui/gpt_queue.py)."""

from __future__ import annotations

import streamlit as st

from core.app.registry import PageControl
from core.inputs.examples import MAX_TEXT_CHARS
from core.lessons import inside_gpt as gpt
from ui import gpt_queue, widgets


def prompt_picker(model) -> tuple[gpt.PromptAnalysis, str, gpt.PromptKind]:
    """A checked prompt or the student's own -> its analysis (the first example if it cannot be used)."""
    pick, own = st.columns([1, 2])
    choice = widgets.linked_select(
        "Prompt",
        list(gpt.PROMPT_LABELS),
        key=PageControl.GPT_PROMPT,
        param=PageControl.GPT_PROMPT,
        code=str,
        name=gpt.PROMPT_LABELS.__getitem__,  # the options are its keys
        default=gpt.EXAMPLES[0].key,
        where=pick,
    )
    mine = choice == gpt.OWN_PROMPT
    typed = own.text_area(
        "Your text",
        "Once upon a time, there was a little",
        max_chars=MAX_TEXT_CHARS,
        key=PageControl.GPT_TEXT,
        disabled=not mine,
        help=f"Up to {gpt.MAX_PROMPT_TOKENS} tokens, the chat template's included.",
        bind="query-params",  # widgets.LINKED, spelt out for the type checker
        persist_state="session",
    )
    chat = own.toggle(
        "Ask it as a chat question",
        False,
        key=PageControl.GPT_CHAT,
        disabled=not mine,
        bind="query-params",
        persist_state="session",
    )
    example = gpt.EXAMPLES_BY_KEY.get(choice)
    if mine or example is None:
        text, kind = typed, gpt.PromptKind.CHAT if chat else gpt.PromptKind.TEXT
    else:
        text, kind = example.text, example.kind
    from core.models.smollm2 import TextError

    try:
        return gpt_queue.computed(gpt.PROMPT, model, text, kind), text, kind
    except TextError as error:
        st.error(f"{error} Showing the first example instead.", icon=":material/error:")
        first = gpt.EXAMPLES[0]
        return gpt_queue.computed(gpt.PROMPT, model, first.text, first.kind), first.text, first.kind
