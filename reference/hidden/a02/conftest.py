"""Dimensions, inputs and random-number control for the 02 suite.

d_out = 8 makes 1, sqrt(d_out) and d_out three different scales, so the scaling mistakes
are distinguishable in CausalSelfAttention; context_length = 6 leaves room for shorter
inputs. Dropout is random: ``seed_student(n)`` (served to every suite) seeds the global
generator in the student's process right before a call, and ``student_generator(n)`` builds a ``torch.Generator``
there (a generator cannot cross the boundary; the remote object can be passed as an
argument), so every verdict is deterministic.
"""

import pytest
import torch

from grader.suite import in_eval_mode, seed_reference
from reference.masks import CausalSelfAttention

D_IN, D_OUT, CONTEXT = 6, 8, 6

_RANDOM_HELPER = """
import torch

def generator(n, device):
    return torch.Generator(device=device).manual_seed(n)
"""


@pytest.fixture
def input_scale() -> float:
    """``make_input``'s default here, as in the 01 suite: scaling mistakes show in the values."""
    return 2.0


@pytest.fixture
def make_positive(device):
    """Inputs with no zeros (0.5 to 1.5), so every zero in dropout's output was dropped."""
    def make(*shape: int, seed: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(seed)
        return (0.5 + torch.rand(*shape, generator=generator)).to(device)
    return make


@pytest.fixture
def student_generator(student, device):
    def make(n: int):
        return student.define("random", _RANDOM_HELPER).method("generator", n, str(device))
    return make


@pytest.fixture
def reference_csa(device):
    seed_reference(0)
    return CausalSelfAttention(D_IN, D_OUT, CONTEXT).to(device)


@pytest.fixture
def student_csa(student, reference_csa):
    """The student's CausalSelfAttention holding the reference's parameters (its own mask), in
    eval mode: its values are graded without dropout, which is graded on its own."""
    return in_eval_mode(student.new_like(reference_csa, "CausalSelfAttention", D_IN, D_OUT, CONTEXT))
