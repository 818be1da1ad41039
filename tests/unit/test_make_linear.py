"""make_linear: nn.Linear's own initialisation, from a private generator, built without to_empty()."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from core.attention.modules import make_linear


@pytest.mark.parametrize(("d_in", "d_out", "bias"), [(3, 2, False), (16, 24, True), (64, 64, True)])
def test_same_numbers_as_nn_linear_seeded_the_same(d_in: int, d_out: int, bias: bool) -> None:
    torch.manual_seed(321)
    reference = nn.Linear(d_in, d_out, bias=bias)
    layer = make_linear(d_in, d_out, bias, torch.Generator().manual_seed(321))
    assert torch.equal(layer.weight, reference.weight)
    assert (layer.bias is None) == (reference.bias is None)
    if bias:
        assert torch.equal(layer.bias, reference.bias)


def test_a_real_trainable_cpu_layer_that_leaves_the_global_rng_alone() -> None:
    torch.manual_seed(5)
    before = torch.get_rng_state()
    layer = make_linear(4, 3, True, torch.Generator().manual_seed(0))
    assert torch.equal(torch.get_rng_state(), before)
    assert layer.weight.device.type == "cpu" and not layer.weight.is_meta and layer.weight.requires_grad
    assert layer(torch.ones(2, 4)).shape == (2, 3)
    assert [name for name, _ in layer.named_parameters()] == ["weight", "bias"]
