"""Choosing where tensors live: CPU or a CUDA GPU."""

from __future__ import annotations

from typing import Literal

import torch

DeviceName = Literal["auto", "cpu", "cuda"]


def available_devices() -> list[str]:
    """The device names that work on this machine, CPU first."""
    return ["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"]


def machine_word(device_type: str) -> str:
    """What a page calls the device in a sentence: "CPU" or "GPU" ("on this CUDA" read as a typo on an H200)."""
    return "GPU" if device_type == "cuda" else "CPU"


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
