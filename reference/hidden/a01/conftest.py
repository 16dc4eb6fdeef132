"""Dimensions, inputs and the checked softmax call for the 01 suite.

d_k = 8 makes 1, sqrt(d_k) and d_k three different scales, so each scaling mistake
produces a distinguishable output; d_v = 6 differs from d_k and T_k = 7 from T_q = 5, so
a transposed or swapped result has the wrong shape. Inputs are scaled up so the softmax
is far from uniform and scaling mistakes show in the values.
"""

import pytest

from grader.suite import CheckFailed, seed_reference
from reference.attention import SelfAttention
from reference.hidden.a01 import variants

D_K, D_V = 8, 6
D_IN, D_OUT = 6, 8  # SelfAttention: d_out is the d_k of its attention


@pytest.fixture
def input_scale() -> float:
    """``make_input``'s default here: inputs scaled up, far from a uniform softmax."""
    return 2.0


@pytest.fixture
def call_softmax(student):
    """``call_softmax(x, dim=...)``: the student's softmax, failing the test when a built-in
    softmax ran inside it: an operator of ``variants.FORBIDDEN_SOFTMAX_OPS``, recorded in the
    student's process as it runs, however the code reached it (an alias, a star import,
    ``torch.ops``, a cross-entropy). Only what ran counts: how the source is spelled, and code
    that never runs, cost nothing. ``call_softmax.backward(...)`` likewise."""
    def call(request, *args, **kwargs):
        with student.watching(variants.FORBIDDEN_SOFTMAX_OPS) as seen:
            got = request(*args, **kwargs)
        if seen:
            raise CheckFailed(f"softmax(x) ran torch's built-in {', '.join(seen)}, which this part forbids",
                              variants.forbidden_softmax_hint(seen))
        return got

    class Call:
        def __call__(self, x, *args, **kwargs):
            return call(student.call, "softmax", x, *args, **kwargs)

        def backward(self, x, *args, grad_output, **kwargs):
            return call(student.backward, "softmax", x, *args, grad_output=grad_output, **kwargs)

    return Call()


@pytest.fixture
def reference_self_attention(device):
    seed_reference(0)
    return SelfAttention(D_IN, D_OUT).to(device)


@pytest.fixture
def student_self_attention(student, reference_self_attention):
    """The student's SelfAttention holding the reference's parameters."""
    return student.new_like(reference_self_attention, "SelfAttention", D_IN, D_OUT)
