"""Dimensions, inputs and the checked softmax call for the 01 suite.

d_k = 8 makes 1, sqrt(d_k) and d_k three different scales, so each scaling mistake
produces a distinguishable output; d_v = 6 differs from d_k and T_k = 7 from T_q = 5, so
a transposed or swapped result has the wrong shape. Inputs are scaled up so the softmax
is far from uniform and scaling mistakes show in the values.
"""

import pytest
import torch

from grader.suite import CheckFailed, SourceCheck, check_function
from reference.attention import SelfAttention
from reference.hidden.a01 import variants

D_K, D_V = 8, 6
D_IN, D_OUT = 6, 8  # SelfAttention: d_out is the d_k of its attention


@pytest.fixture
def input_scale() -> float:
    """``make_input``'s default here: inputs scaled up, far from a uniform softmax."""
    return 2.0


@pytest.fixture(scope="session")
def softmax_source(student) -> SourceCheck:
    """What the code reachable from the student's softmax references, read from the source
    by the grader: the verdict on the rule, which the student's process cannot change."""
    return check_function(student.program, "softmax", variants.FORBIDDEN_SOFTMAX_OPS)


@pytest.fixture
def call_softmax(student, softmax_source):
    """``call_softmax(x, dim=...)``: the student's softmax, failing the test when it uses a
    built-in softmax: when the source reaches one (torch.softmax, F.softmax, nn.Softmax, a
    method, log_softmax, torch.special, softmin, scaled_dot_product_attention, an alias of
    any), hides what it calls (getattr with a computed name, eval, torch._C...), or when
    one runs (watched in the student's process, which names the route in the hint).
    ``call_softmax.backward(...)`` likewise."""
    def check(seen: list[str], what: str) -> None:
        flags = softmax_source.flags
        if seen:
            raise CheckFailed(f"{what} called torch's built-in {', '.join(seen)}, which this part forbids",
                              variants.forbidden_softmax_hint(seen), flags)
        if softmax_source.forbidden:
            raise CheckFailed(f"{what}: {_listed(softmax_source.forbidden)}: a built-in softmax, which this part "
                              "forbids", variants.forbidden_softmax_hint(softmax_source.names), flags)
        if softmax_source.unverifiable:
            raise CheckFailed(f"{what}: the grader cannot tell from your source what your softmax calls: "
                              f"{_listed(softmax_source.unverifiable)}", variants.UNVERIFIABLE_SOFTMAX, flags)

    class Call:
        def __call__(self, x, *args, **kwargs):
            with student.watching(set(variants.FORBIDDEN_SOFTMAX_OPS)) as seen:
                got = student.call("softmax", x, *args, **kwargs)
            check(seen, "softmax(x)")
            return got

        def backward(self, x, *args, grad_output, **kwargs):
            with student.watching(set(variants.FORBIDDEN_SOFTMAX_OPS)) as seen:
                got = student.backward("softmax", x, *args, grad_output=grad_output, **kwargs)
            check(seen, "softmax(x)")
            return got

    return Call()


def _listed(flags, most: int = 3) -> str:
    shown = "; ".join(f"{flag.detail} ({flag.where})" for flag in flags[:most])
    return shown + (f"; and {len(flags) - most} more" if len(flags) > most else "")


@pytest.fixture
def reference_self_attention(device):
    torch.manual_seed(0)
    return SelfAttention(D_IN, D_OUT).to(device)


@pytest.fixture
def student_self_attention(student, reference_self_attention):
    """The student's SelfAttention holding the reference's parameters."""
    return student.new_like(reference_self_attention, "SelfAttention", D_IN, D_OUT)
