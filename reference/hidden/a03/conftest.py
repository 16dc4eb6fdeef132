"""Dimensions and inputs for the 03 suite.

d_model=24 with 3 heads gives d_k=8, so sqrt(d_k), sqrt(d_model) and d_k are three
different scales and each scaling mistake produces a distinguishable output. Inputs are
scaled up so the softmax is far from uniform and scaling mistakes show in the values.
"""

import pytest

from grader.suite import in_eval_mode, seed_reference
from reference.multihead import MultiHeadAttention

D_MODEL, NUM_HEADS = 24, 3


@pytest.fixture
def input_scale() -> float:
    """``make_input``'s default here: inputs scaled up, far from a uniform softmax."""
    return 3.0


@pytest.fixture
def reference_mha(device):
    seed_reference(0)
    return MultiHeadAttention(D_MODEL, NUM_HEADS).to(device)


@pytest.fixture
def student_mha(student, reference_mha):
    """The student's MultiHeadAttention holding the reference's parameters, in eval mode: its
    values are graded without dropout, which is graded on its own."""
    return in_eval_mode(student.new_like(reference_mha, "MultiHeadAttention", D_MODEL, NUM_HEADS))
