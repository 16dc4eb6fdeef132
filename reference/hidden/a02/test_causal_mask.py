import pytest
import torch

from grader.suite import expect_equal, expect_follows_device, expect_tensor
from reference.hidden.a02 import variants
from reference.masks import causal_mask

pytestmark = pytest.mark.part("causal_mask")


def test_causal_mask_shape_and_dtype(student):
    got = student.call("causal_mask", 4)
    expect_tensor("causal_mask(4)", got, shape=(4, 4))
    expect_tensor("causal_mask(4)", got, dtype=torch.bool, hint=variants.NOT_BOOL)


@pytest.mark.part("causal_mask", points=3)
def test_causal_mask_values(student, device):
    # Exact: a mask is data, not arithmetic.
    expect_equal("causal_mask(5, device=device)", student.call("causal_mask", 5, device=device),
                 causal_mask(5, device=device), mistakes=variants.causal_mask_mistakes(5, device))


@pytest.mark.parametrize("T", [1, 2, 9])
def test_causal_mask_other_sizes(student, device, T):
    expect_equal(f"causal_mask({T}, device=device)", student.call("causal_mask", T, device=device),
                 causal_mask(T, device=device), mistakes=variants.causal_mask_mistakes(T, device))


def test_causal_mask_without_a_device_is_on_the_cpu(student):
    expect_tensor("causal_mask(3)", student.call("causal_mask", 3), device="cpu")


def test_causal_mask_on_the_given_device(student, device):
    expect_follows_device("causal_mask(3, device=device)", lambda where: student.call("causal_mask", 3, device=where),
                          device, shape=(3, 3), dtype=torch.bool)
