"""CUDA-only checks: skipped cleanly on machines without a GPU."""

from __future__ import annotations

import torch

import core
from tests.conftest import gen, requires_cuda


@requires_cuda
def test_modules_run_on_cuda_and_match_cpu() -> None:
    x = torch.rand(2, 6, 8, generator=gen(0))
    mha = core.MultiHeadAttention(8, 8, 6, 0.0, 2, generator=gen(1)).eval()
    expected = mha(x)
    on_gpu = mha.to("cuda")
    trace = on_gpu.trace(x.cuda())
    assert trace.output.device.type == "cuda" and trace.weights.device.type == "cuda"
    assert torch.allclose(trace.output.cpu(), expected, atol=1e-5)
    on_gpu.fused = True
    assert torch.allclose(on_gpu(x.cuda()).cpu(), expected, atol=1e-4)


@requires_cuda
def test_generator_dropout_on_cuda_is_reproducible() -> None:
    weights = torch.full((64, 64), 0.5, device="cuda")
    first = core.dropout_with_generator(weights, 0.3, torch.Generator("cuda").manual_seed(5))[1]
    second = core.dropout_with_generator(weights, 0.3, torch.Generator("cuda").manual_seed(5))[1]
    assert torch.equal(first, second)
    assert core.resolve_device("cuda").type == "cuda"
