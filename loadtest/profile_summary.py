"""Where a profiled server spent its time: `python -m loadtest.profile_summary PROFILE [PROFILE ...]`.

Reads py-spy's collapsed stacks (`loadtest/capacity.py --profile`) and prints, for each file, the share
of the samples in which one of a list of places was on the stack (inclusive time): our modules by
job, and Streamlit's and the libraries' own work. Two profiles side by side give a before and after.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

# (name, pattern a frame must match): a sample counts once per place, however deep it is.
PLACES: tuple[tuple[str, str], ...] = (  # py-spy names a frame "function (path/relative/to/sys.path.py:line)"
    ("all samples", r""),
    ("our page scripts (pages/, ui/)", r"\((?:pages|ui)/"),
    ("our computation (core/)", r"\(core/"),
    ("chart builders (core/chart*)", r"\(core/chart"),
    ("lesson computations (core/lessons/)", r"\(core/lessons/"),
    ("st.vega_lite_chart", r"\bvega_lite_chart \(streamlit/"),
    ("st.dataframe and our tables", r"\b(?:dataframe|number_table) \("),
    ("Arrow serialisation", r"\((?:pyarrow/|streamlit/dataframe_util)"),
    ("markdown, LaTeX and prose", r"\b(?:markdown|latex|prose|_section) \("),
    ("Streamlit widgets", r"\(streamlit/elements/widgets/"),
    ("session state", r"\(streamlit/runtime/state/"),
    ("websocket and protobuf (uvicorn, starlette)", r"\((?:uvicorn|starlette|websockets|google/protobuf)/"),
    ("torch", r"\(torch/"),
    ("pandas", r"\(pandas/"),
    ("Altair", r"\(altair/"),
)


def read(path: Path) -> tuple[Counter, int]:
    """Samples per place in one profile, and the total number of samples."""
    places = [(name, re.compile(pattern)) for name, pattern in PLACES]
    counts: Counter = Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, number = line.rpartition(" ")
        if not number.isdigit():
            continue
        samples = int(number)
        total += samples
        frames = stack.split(";")
        for name, pattern in places:
            if any(pattern.search(frame) for frame in frames):
                counts[name] += samples
    return counts, total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profiles", nargs="+", type=Path)
    args = parser.parse_args()
    read_all = [read(path) for path in args.profiles]
    print("| place | " + " | ".join(path.name for path in args.profiles) + " |")
    print("| --- |" + " --- |" * len(args.profiles))
    for name, _ in PLACES:
        shares = [f"{100 * counts[name] / max(total, 1):.1f}%" for counts, total in read_all]
        print(f"| {name} | " + " | ".join(shares) + " |")


if __name__ == "__main__":
    main()
