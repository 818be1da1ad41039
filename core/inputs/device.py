"""Choosing where tensors live: CPU or a CUDA GPU."""

from __future__ import annotations

from typing import Literal

import torch

DeviceName = Literal["auto", "cpu", "cuda"]


def available_devices() -> list[str]:
    """The device names that work on this machine, CPU first."""
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def resolve_device(name: str = "auto") -> torch.device:
    """Turn "auto" | "cpu" | "cuda" into a `torch.device`.

    "auto" picks CUDA when a GPU is present and the CPU otherwise. Asking for
    "cuda" on a machine without a GPU raises a `ValueError` that says so, rather
    than failing later with a driver message.
    """
    choice = str(name).strip().lower()
    if choice == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if choice == "cpu":
        return torch.device("cpu")
    if choice == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                "CUDA was requested, but this machine has no usable NVIDIA GPU. Choose 'cpu' (or 'auto') instead."
            )
        return torch.device("cuda")
    raise ValueError(f"Unknown device {name!r}: choose 'auto', 'cpu' or 'cuda'.")
