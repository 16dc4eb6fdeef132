"""Fixtures every hidden suite gets without importing them, next to ``student`` and
``device`` (:class:`grader.plugin.GradingPlugin` registers this module).

An assignment's conftest may override one by name, as pytest allows: a suite whose
values need larger inputs returns its own ``input_scale``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch


@pytest.fixture
def input_scale() -> float:
    """The scale ``make_input`` uses unless a call names one."""
    return 1.0


@pytest.fixture
def make_input(device: torch.device, input_scale: float) -> Callable[..., torch.Tensor]:
    """``make_input(*shape, seed=n, scale=..., dtype=torch.float32)``: ``scale`` times a
    standard normal tensor of that shape on the suite's device, the same for the same seed."""
    def make(*shape: int, seed: int, scale: float = input_scale, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        return (scale * torch.randn(*shape, generator=generator, dtype=dtype)).to(device)
    return make
