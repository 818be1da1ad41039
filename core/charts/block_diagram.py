"""The overview's map of a decoder block: each part with the lesson that explains it. No streamlit here.

`decoder_block_dot` returns Graphviz DOT text, which st.graphviz_chart draws in the browser (no
Python graphviz package, nothing downloaded). The parts and their lessons are data (`BLOCK_PARTS`),
so a test can check that every lesson of the registry is placed on the map exactly where it says.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from core.app import registry


class Region(StrEnum):
    """Where a part sits: in the stack of blocks, on the way in, on the way out, or beside the block."""

    INPUT = "input"
    BLOCK = "block"  # repeated N times
    OUTPUT = "output"
    BESIDE = "beside"  # not in a decoder-only block, drawn dashed beside it


@dataclass(frozen=True)
class BlockPart:
    """One box of the diagram; `lessons` are the slugs of the lessons that explain it (may be empty)."""

    key: str  # the DOT node name
    label: str
    region: Region
    lessons: tuple[str, ...] = ()


# Bottom to top, as data flows through the decoder-only model the lab runs (SmolLM2, like GPT-2 and Llama): a
# pre-norm block, each sublayer reading a normalised copy of the residual stream and adding its output back to
# it. The original Transformer normalised after each addition (post-norm), which the map drew until an
# independent review; SmolLM2 also rotates q and k by position inside every layer instead of adding position
# embeddings at the input. The edges follow this order within the input, block and output regions; the parts
# beside the block attach to the attention part.
BLOCK_PARTS: tuple[BlockPart, ...] = (
    BlockPart("tokens", "tokens of the text so far", Region.INPUT),
    # A lesson's card lists the labels of its parts, so each label is true of every lesson it names: lesson 1
    # has token embeddings and plain dot products, no positions and no √d_k (the fifth review).
    BlockPart("embed", "token embeddings: the residual stream starts", Region.INPUT, ("without_weights",)),
    BlockPart("norm1", "normalise a copy (RMSNorm)", Region.BLOCK),
    BlockPart("qkv", "queries, keys, values: x W_q, x W_k, x W_v", Region.BLOCK, ("trainable_weights",)),
    # Lesson 12's GPT rotates q and k (RoPE); lesson 8's model, like GPT-2, adds position embeddings to the token
    # embeddings instead: the label says both, as it names both lessons.
    BlockPart(
        "positions",
        "positions: q and k rotated (RoPE), or embeddings added at the input",
        Region.BLOCK,
        ("training_lab", "gpt_keys"),
    ),
    BlockPart("scores", "scores: dot products q·k", Region.BLOCK, ("without_weights", "trainable_weights")),
    BlockPart("divide", "scaled: divided by √d_k", Region.BLOCK, ("trainable_weights", "why_scale")),
    # The mask before the softmax, as in the overview's formula softmax(QKᵀ/√d_k + M): the order was reversed.
    BlockPart("mask", "causal mask: −∞ on future keys", Region.BLOCK, ("causal_dropout",)),
    BlockPart("weights", "softmax: the attention weights", Region.BLOCK, ("without_weights", "causal_dropout")),
    BlockPart("dropout", "dropout on the weights (training only)", Region.BLOCK, ("causal_dropout",)),
    BlockPart("heads", "h heads side by side, joined by W_o", Region.BLOCK, ("multi_head", "real_model", "inside_gpt")),
    BlockPart("residual1", "add the heads' output to the stream", Region.BLOCK, ("to_the_answer",)),
    BlockPart("norm2", "normalise a copy (RMSNorm)", Region.BLOCK),
    BlockPart("mlp", "MLP on each token", Region.BLOCK),
    BlockPart("residual2", "add the MLP's output to the stream", Region.BLOCK, ("to_the_answer",)),
    BlockPart("final_norm", "normalise the last block's stream", Region.OUTPUT, ("to_the_answer",)),
    BlockPart("unembed", "unembedding: one score per word of the vocabulary", Region.OUTPUT, ("to_the_answer",)),
    BlockPart("softmax", "softmax: the next token's probabilities", Region.OUTPUT, ("training_lab", "inside_gpt")),
    BlockPart("cross", "cross-attention: keys and values from an encoder", Region.BESIDE, ("cross_attention",)),
    BlockPart(
        "scale", "long contexts: FlashAttention tiles, KV cache", Region.BESIDE, ("attention_at_scale", "gpt_keys")
    ),
)
_BESIDE_OF = "weights"  # the attention part the side boxes attach to


def part_label(part: BlockPart) -> str:
    """The box's text: its name, then the lessons that explain it by number ("lessons 1, 3")."""
    numbers = [str(registry.page(slug).number) for slug in part.lessons]
    if not numbers:
        return part.label
    return f"{part.label}\\n(lesson{'s' if len(numbers) > 1 else ''} {', '.join(numbers)})"


def _quoted(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'


def _node(part: BlockPart, fill: str, indent: str) -> str:
    """One box: filled where a lesson explains it, dashed beside the block."""
    style = ["rounded"] + (["filled"] if part.lessons else []) + (["dashed"] if part.region is Region.BESIDE else [])
    label, styles = _quoted(part_label(part)), _quoted(",".join(style))
    return f"{indent}{part.key} [label={label}, style={styles}, fillcolor={_quoted(fill)}];"


RESIDUAL_LIGHT, RESIDUAL_DARK = "#2f78b3", "#9dcae1"  # the residual stream's line: 4.7:1 on white, 10.8:1 on dark


def decoder_block_dot(dark: bool = False) -> str:
    """The decoder block as DOT, bottom to top: the N-times block in a frame, the side parts dashed.

    Lesson boxes are filled; parts no lesson covers are plain, so a teacher sees what the lab leaves out.
    """
    ink, fill = ("#e6e6e6", "#3b4a6b") if dark else ("#262730", "#dbe7f7")
    stream = RESIDUAL_DARK if dark else RESIDUAL_LIGHT
    lines = [
        "digraph decoder {",
        "  rankdir=BT; nodesep=0.25; ranksep=0.3; bgcolor=transparent;",
        f'  node [shape=box, style="rounded", fontname="sans-serif", fontsize=12, color="{ink}", fontcolor="{ink}"];',
        f'  edge [color="{ink}", fontcolor="{ink}", fontname="sans-serif"];',  # the residual labels: dark mode too
    ]
    lines += [_node(part, fill, "  ") for part in BLOCK_PARTS if part.region is not Region.BLOCK]
    lines.append('  subgraph cluster_block { label="one block, repeated N times"; style="rounded,dashed";')
    lines.append(f'    fontname="sans-serif"; fontsize=11; color={_quoted(ink)}; fontcolor={_quoted(ink)};')
    lines += [_node(part, fill, "    ") for part in BLOCK_PARTS if part.region is Region.BLOCK]
    lines.append("  }")
    chain = [part.key for part in BLOCK_PARTS if part.region is not Region.BESIDE]
    lines += [f"  {a} -> {b};" for a, b in zip(chain, chain[1:], strict=False)]
    # The residual stream: it passes each sublayer by (which reads a normalised copy of it) and takes that
    # sublayer's output back in. Drawn down the right-hand side (east ports), so the lines run beside the boxes
    # instead of across them (an independent review saw the old line cross the block's frame). Solid and in a
    # colour of its own: dashed, it read as one more of the side parts' dashed links where they cross (s29 review).
    for start, end in (("embed", "residual1"), ("residual1", "residual2")):
        lines.append(
            f'  {start} -> {end} [color="{stream}", fontcolor="{stream}", penwidth=2, constraint=false, tailport=e,'
            ' headport=e, label=" residual stream", fontsize=11];'
        )
    beside = [part.key for part in BLOCK_PARTS if part.region is Region.BESIDE]
    lines += [f"  {key} -> {_BESIDE_OF} [style=dashed, arrowhead=none];" for key in beside]
    # The side parts one above the other, not side by side: beside each other they made the diagram some 1,050
    # points wide, and a laptop's column drew its 12-point text about 9 px tall (the s20 review).
    lines += [f"  {key} [group=beside];" for key in beside]  # one column: a straight (invisible) edge between
    lines += [f"  {a} -> {b} [style=invis];" for a, b in zip(beside, beside[1:], strict=False)]
    lines.append("}")
    return "\n".join(lines)


def parts_by_lesson() -> dict[str, tuple[BlockPart, ...]]:
    """Each lesson's slug -> the parts of the diagram it explains (in the diagram's order)."""
    found: dict[str, list[BlockPart]] = {}
    for part in BLOCK_PARTS:
        for slug in part.lessons:
            found.setdefault(slug, []).append(part)
    return {slug: tuple(parts) for slug, parts in found.items()}
