"""Fixtures every hidden suite gets without importing them, next to ``student`` and
``device`` (:class:`grader.engine.plugin.GradingPlugin` registers this module).

An assignment's conftest may override one by name, as pytest allows: a suite whose
values need larger inputs returns its own ``input_scale``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from torch import nn

from grader.suite.part_isolation import StockPiece, new_graded_like, new_with_stock
from grader.suite.student_protocol import Remote, Student


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


# The generators the student's dropout draws from: the CPU's, and on a GPU the CUDA context the
# child made as it started. torch.manual_seed would also format a stack trace for each GPU
# backend that has not started (grader/suite/seeding.py), 2 ms a call in a child on the CPU.
SEED_HELPER = """
import torch


def seed(n):
    torch.default_generator.manual_seed(n)
    if torch.cuda.is_initialized():
        torch.cuda.manual_seed_all(n)
"""


@pytest.fixture
def seed_student(student: Student) -> Callable[[int], None]:
    """seed_student(n): seeds torch's global generator in the student's process, right before a
    call whose random numbers matter (dropout in training mode), so its verdict is the same on
    every run. Grader helper code, not an answer: the process goes on after the test."""
    def seed(n: int) -> None:
        student.define("seed", SEED_HELPER).method("seed", n)
    return seed


@pytest.fixture
def stock_pieces() -> list[StockPiece]:
    """The suite's stock pieces (:class:`grader.suite.part_isolation.StockPiece`): none, unless its
    conftest gives some for the parts whose pieces may not fit the reference's weights."""
    return []


@pytest.fixture
def new_graded(student: Student, stock_pieces: list[StockPiece]) -> Callable[..., Remote]:
    """new_graded(reference, class_name, *args, **kwargs): the student's module holding the
    reference's weights, stock pieces where its own do not fit them."""
    def new(reference: nn.Module, class_name: str, *args, **kwargs) -> Remote:
        return new_graded_like(student, reference, class_name, *args, stock=stock_pieces, **kwargs)
    return new


@pytest.fixture
def new_for_names(student: Student, stock_pieces: list[StockPiece]) -> Callable[..., Remote]:
    """new_for_names(reference, class_name, *args): the student's module for a check of its
    own parameter names, stock pieces where its pieces' names are not the contract's."""
    def new(reference: nn.Module, class_name: str, *args, **kwargs) -> Remote:
        return new_with_stock(student, reference, class_name, *args, stock=stock_pieces, **kwargs)
    return new
