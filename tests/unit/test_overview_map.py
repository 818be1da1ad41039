"""The overview's decoder-block map and lecture path (issue 30): every lesson placed, nothing downloaded."""

from __future__ import annotations

import re

from core.app import registry
from core.charts import block_diagram
from core.lessons import overview


def test_every_lesson_is_on_the_map_at_the_part_it_explains() -> None:
    placed = block_diagram.parts_by_lesson()
    assert set(placed) == {spec.slug for spec in registry.lessons()}
    dot = block_diagram.decoder_block_dot()
    for spec in registry.lessons():
        for part in placed[spec.slug]:
            label = re.search(rf"\b{part.key} \[label=\"([^\"]*)\"", dot)
            assert label is not None and str(spec.number) in label.group(1).split("(lesson")[-1], (spec.slug, part)


def test_the_map_runs_from_embeddings_through_the_block_to_the_next_token() -> None:
    dot = block_diagram.decoder_block_dot(dark=True)
    # The mask comes before the softmax, as in the page's formula (the fourth review: the map had it after).
    # Pre-norm, as SmolLM2 and GPT-2 run: each sublayer reads a normalised copy and adds its output to the stream
    # (an independent review: the map drew the original post-norm block), and q and k are rotated inside the block.
    chain = [
        "tokens", "embed", "norm1", "qkv", "positions", "scores", "divide", "mask", "weights", "dropout", "heads",
        "residual1", "norm2", "mlp", "residual2", "final_norm", "unembed", "softmax",
    ]
    for a, b in zip(chain, chain[1:], strict=False):
        assert f"  {a} -> {b};" in dot
    # Edge labels ("residual") in the theme's ink: Graphviz's default black vanished on the dark theme.
    assert 'edge [color="#e6e6e6", fontcolor="#e6e6e6"' in dot
    assert "subgraph cluster_block" in dot and dot.count("{") == dot.count("}")
    # The residual stream passes each sublayer by: from the block's input to the first addition, then to the second.
    # Solid and in its own colour: dashed, it read as one of the side parts' dashed links where they cross (s29).
    stream = f'[color="{block_diagram.RESIDUAL_DARK}", fontcolor="{block_diagram.RESIDUAL_DARK}", penwidth=2'  # dark
    assert f"  embed -> residual1 {stream}" in dot and f"  residual1 -> residual2 {stream}" in dot
    labels = {part.key: part.label for part in block_diagram.BLOCK_PARTS}
    assert "normalise" not in labels["residual1"] + labels["residual2"]  # adding, then the next sublayer normalises
    assert "http" not in dot  # nothing to fetch


def test_each_lessons_card_names_only_what_the_lesson_does() -> None:
    # The fifth review: lesson 1's card read "token embeddings + position embeddings; scores q·k / √d_k", and
    # lesson 1 has neither positions nor the scale.
    lesson_one = " ".join(part.label for part in block_diagram.parts_by_lesson()["without_weights"])
    assert "position" not in lesson_one and "√d_k" not in lesson_one
    assert "dropout" not in lesson_one  # the sixth review: its card ended "(dropout while training)", lesson 4's
    assert "√d_k" in " ".join(part.label for part in block_diagram.parts_by_lesson()["why_scale"])


def test_the_lecture_path_lists_every_lesson_in_order_with_its_minutes() -> None:
    plan = overview.lecture_path()
    assert list(plan["lesson"]) == [f"{s.number} · {s.title}" for s in registry.lessons()]  # no "10." list marker
    assert (plan["minutes"] > 0).all() and plan["after (min)"].iloc[-1] == plan["minutes"].sum() == 90
    assert plan["what to show"].str.len().min() > 20


def test_the_side_parts_stand_in_one_column() -> None:
    # The s20 review: side by side, the two dashed boxes made the diagram so wide that a laptop drew its text about
    # 9 px tall. One above the other (one group, an invisible edge between them), it is drawn some 1.35 times larger.
    dot = block_diagram.decoder_block_dot()
    beside = [part.key for part in block_diagram.BLOCK_PARTS if part.region is block_diagram.Region.BESIDE]
    assert len(beside) == 2
    assert all(f"{key} [group=beside];" in dot for key in beside)
    assert f"{beside[0]} -> {beside[1]} [style=invis];" in dot
