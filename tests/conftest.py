"""Shared fixtures: the worked-example inputs and the devices this machine has."""

from __future__ import annotations

import pytest
import torch

import core

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
requires_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture
def journey() -> torch.Tensor:
    return core.journey_example().embeddings


@pytest.fixture
def random_words() -> torch.Tensor:
    return core.random_words_example().embeddings


@pytest.fixture(params=DEVICES)
def device(request: pytest.FixtureRequest) -> torch.device:
    return torch.device(request.param)


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)
