"""Every call to the student's softmax goes through ``call_softmax`` (see conftest.py),
which fails the test when the source of the student's softmax reaches a built-in softmax
or hides what it calls, or when a built-in softmax runs inside it: a softmax that uses
one scores 0 here, however right its values."""

import pytest
import torch

from grader.suite import CheckFailed, expect_close, expect_follows_device, expect_tensor
from reference.attention import softmax
from reference.hidden.a01 import variants

pytestmark = pytest.mark.part("softmax")

# exp, a max and a sum in float32: a correct result differs by rounding (~1e-7); each
# mistake below changes values by more than 1e-2 or turns them into nan.
ATOL, RTOL = 1e-6, 1e-5
# Entries near 1e4, where float32's spacing is 1e-3: exp(x - logsumexp(x)), as stable as the
# max subtracted, is right to about that much there; the mistakes these inputs catch (no max
# subtracted, or one max over the whole tensor) give inf or nan.
LARGE_ATOL = 2e-3


def expect_softmax(what, got, x, dim, atol=ATOL):
    want = softmax(x, dim=dim)
    try:
        expect_close(what, got, want, atol=atol, rtol=RTOL, mistakes=variants.softmax_mistakes(x, dim, got))
    except CheckFailed as failed:
        # nan or inf where the reference is finite is an overflow (or underflow) in exp, even
        # when no variant reproduces the student's exact values.
        if failed.hint is None and isinstance(got, torch.Tensor) and got.shape == want.shape \
                and (~torch.isfinite(got.detach().cpu()) & torch.isfinite(want.cpu())).any():
            raise CheckFailed(failed.message, variants.NO_MAX_SUBTRACTION) from None
        raise


def test_softmax_shape(call_softmax, make_input):
    x = make_input(2, 3, 4, seed=20)
    expect_tensor("softmax(x: (2, 3, 4))", call_softmax(x), shape=(2, 3, 4), dtype=torch.float32)


@pytest.mark.part("softmax", points=2)
def test_softmax_values_over_the_last_dimension(call_softmax, make_input):
    x = make_input(4, 5, 7, seed=21)
    expect_softmax("softmax(x: (4, 5, 7))", call_softmax(x), x, -1)


@pytest.mark.parametrize("dim", [0, 1])
def test_softmax_over_another_dimension(call_softmax, make_input, dim):
    x = make_input(4, 5, 7, seed=22)
    expect_softmax(f"softmax(x: (4, 5, 7), dim={dim})", call_softmax(x, dim=dim), x, dim)


def test_softmax_of_a_square_matrix(call_softmax, make_input):
    x = make_input(6, 6, seed=23)
    expect_softmax("softmax(x: (6, 6), dim=-1)", call_softmax(x, dim=-1), x, -1)


@pytest.mark.part("softmax", points=2)
def test_softmax_of_large_inputs_does_not_overflow(call_softmax, device):
    # Row 1 overflows without the max subtraction; row 2 underflows to 0/0 when the max is
    # taken over the whole tensor; row 3 is fine either way.
    x = torch.tensor([[1e4, 1e4 - 1.0, 0.0, 5e3],
                      [-1e4, -1e4 + 2.0, -1e4 + 1.0, -1e4 + 0.5],
                      [0.5, -1.0, 2.0, 0.0]], device=device)
    expect_softmax("softmax(x with entries of 1e4)", call_softmax(x), x, -1, atol=LARGE_ATOL)


def test_softmax_of_large_inputs_over_dim_0(call_softmax, device):
    x = torch.tensor([[1e4, -1e4, 3.0], [1e4 - 2.0, -1e4 + 1.0, 1.0]], device=device)
    expect_softmax("softmax(x with entries of 1e4, dim=0)", call_softmax(x, dim=0), x, 0, atol=LARGE_ATOL)


@pytest.mark.part("softmax", points=2)
def test_softmax_of_rows_with_some_minus_inf(call_softmax, device):
    inf = float("inf")
    x = torch.tensor([[0.5, -inf, 2.0, -inf], [-inf, -inf, -inf, 3.0], [1.0, 2.0, -inf, 0.0]], device=device)
    expect_softmax("softmax(x with some -inf in each row)", call_softmax(x), x, -1)


def test_softmax_keeps_float64(call_softmax, make_input):
    x = make_input(3, 5, seed=24, dtype=torch.float64)
    got = call_softmax(x)
    expect_tensor("softmax(float64 x)", got, dtype=torch.float64)
    expect_close("softmax(float64 x)", got, softmax(x), atol=1e-12, rtol=1e-12)


def test_softmax_gradient(call_softmax, make_input):
    x = make_input(3, 6, seed=25).requires_grad_(True)
    grad_output = make_input(3, 6, seed=26, scale=1.0)
    softmax(x).backward(grad_output)
    got = call_softmax.backward(x, grad_output=grad_output)
    # A softmax Jacobian-vector product in float32: rounding ~1e-7.
    expect_close("gradient of softmax(x) w.r.t. x", got.input_grads[0], x.grad, atol=1e-5, rtol=1e-4)


def test_softmax_follows_the_input_device(call_softmax, make_input, device):
    x = make_input(2, 3, seed=27)
    expect_follows_device("softmax(x)", lambda where: call_softmax(x.to(where)), device, shape=(2, 3))
