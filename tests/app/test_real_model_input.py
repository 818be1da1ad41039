"""What a student types into the real model's sentence box (issue 19, item 4).

A typed "[PAD]" became piece 0 and was attended to like any word, and a linked sentence longer
than the box's 400 characters was cut to 400 without a word.
"""

from __future__ import annotations

import pytest

from core.inputs.examples import MAX_TEXT_CHARS
from core.models import minilm as rm
from tests.support import open_page

SPECIAL = ("[PAD]", "[CLS]", "[SEP]", "[MASK]", "[UNK]")


@pytest.mark.parametrize("typed", SPECIAL)
def test_a_typed_special_piece_is_read_as_the_text_it_is(encoder: rm.RealModel, typed: str) -> None:
    batch = rm.tokenize(encoder, [f"the cat {typed} sat"])
    ids = batch.input_ids[0].tolist()
    special_ids = {token.content: token_id for token_id, token in encoder.tokenizer.get_added_tokens_decoder().items()}
    assert ids[0] == special_ids["[CLS]"] and ids[-1] == special_ids["[SEP]"]
    assert not set(ids[1:-1]) & set(special_ids.values()), batch.tokens  # no special piece inside the sentence
    assert batch.tokens == rm.tokenize(encoder, [f"the cat {typed.lower()} sat"]).tokens
    assert bool(batch.attention_mask.all())  # nothing padded: every piece is a word of the sentence


def test_other_text_is_left_alone(encoder: rm.RealModel) -> None:
    sentence = "Brackets [like these] and CAPITALS stay as the tokenizer reads them."
    assert rm.typed_as_text(encoder, sentence) == sentence


def test_an_over_long_linked_sentence_gets_a_note_not_a_cut() -> None:
    at = open_page("real_model", real_example="own", real_sentence="word " * (MAX_TEXT_CHARS // 5 + 1))
    notes = [w.value for w in at.main.warning]
    assert len(notes) == 1 and "`real_sentence=" in notes[0] and f"longer than {MAX_TEXT_CHARS}" in notes[0], notes
    assert at.text_input(key="real_sentence").value == open_page("real_model").text_input(key="real_sentence").value
