"""Dropout is random, so these tests judge it by statistics over 50,000 elements, with the
student's random numbers seeded (``seed_student``) or drawn from a seeded generator built
in the student's process (``student_generator``). The bounds are 6 standard deviations
wide, so a correct dropout passes for any seed, and each named mistake is far outside them."""

from contextlib import contextmanager

import pytest
import torch

from grader.suite import CheckFailed, expect_close, expect_equal, expect_follows_device, expect_raises, expect_tensor
from reference.hidden.a02 import variants

pytestmark = pytest.mark.part("dropout")

SHAPE = (200, 250)


@contextmanager
def hinted(hint):
    """A check failing within the block gets ``hint`` (when it has none of its own)."""
    try:
        yield
    except CheckFailed as failed:
        raise CheckFailed(failed.message, failed.hint or hint, failed.flags, mistake=failed.mistake) from None


def call_dropout(student, seed_student, seed, *args, **kwargs):
    seed_student(seed)
    return student.call("dropout", *args, **kwargs)


def expect_dropped(what, x, got, p):
    """``got`` is a float tensor shaped like ``x`` without nan or inf."""
    expect_tensor(what, got, shape=x.shape, dtype=x.dtype, device=x.device)
    if not torch.isfinite(got).all():
        raise CheckFailed(f"{what}: your output contains nan or inf", variants.DROPOUT_P_ONE if p == 1 else None)


def test_dropout_keeps_shape_dtype_and_device(student, seed_student, make_positive, device):
    x = make_positive(3, 4, 5, seed=70)
    expect_follows_device("dropout(x: (3, 4, 5), 0.5)",
                          lambda where: call_dropout(student, seed_student, 71, x.to(where), 0.5), device,
                          shape=(3, 4, 5), dtype=torch.float32)


@pytest.mark.part("dropout", points=2)
def test_dropout_zeroes_a_fraction_p(student, seed_student, make_positive):
    x, p = make_positive(*SHAPE, seed=72), 0.2
    got = call_dropout(student, seed_student, 73, x, p)
    expect_dropped(f"dropout(x, p={p})", x, got, p)
    fraction = float((got == 0).float().mean())
    low, high = variants.zero_fraction_bounds(p, x.numel())
    if not low <= fraction <= high:
        raise CheckFailed(f"dropout(x, p={p}): {fraction:.3f} of the elements are zero, expected about {p} "
                          f"(between {low:.3f} and {high:.3f})", variants.diagnose_dropout(x, got, p))


@pytest.mark.part("dropout", points=2)
def test_dropout_scales_the_survivors_by_1_over_1_minus_p(student, seed_student, make_positive):
    x, p = make_positive(*SHAPE, seed=74), 0.2
    got = call_dropout(student, seed_student, 75, x, p)
    expect_dropped(f"dropout(x, p={p})", x, got, p)
    kept = got != 0
    if not kept.any():
        raise CheckFailed(f"dropout(x, p={p}): every element is zero", variants.diagnose_dropout(x, got, p))
    # Survivors are x / (1 - p): float32 rounding only.
    with hinted(variants.diagnose_dropout(x, got, p)):
        expect_close(f"dropout(x, p={p}) at the elements it keeps", got[kept], x[kept] / (1 - p), atol=1e-6, rtol=1e-5)


def test_dropout_preserves_the_mean(student, seed_student, make_positive):
    x, p = make_positive(*SHAPE, seed=76), 0.4
    got = call_dropout(student, seed_student, 77, x, p)
    expect_dropped(f"dropout(x, p={p})", x, got, p)
    # Relative standard deviation of the mean here is ~0.4%: 3% is 7 of them.
    ratio = float(got.double().mean() / x.double().mean())
    if abs(ratio - 1) > 0.03:
        raise CheckFailed(f"dropout(x, p={p}): the mean changed by a factor {ratio:.3f}, expected about 1 "
                          "(between 0.97 and 1.03)", variants.diagnose_dropout(x, got, p))


@pytest.mark.part("dropout", points=2)
def test_dropout_is_the_identity_when_not_training(student, seed_student, make_positive):
    x = make_positive(20, 30, seed=78)
    got = call_dropout(student, seed_student, 79, x, 0.5, training=False)
    with hinted(variants.DROPOUT_IN_EVAL):
        expect_equal("dropout(x, 0.5, training=False)", got, x)


def test_dropout_with_p_0_is_the_identity(student, seed_student, make_positive):
    x = make_positive(20, 30, seed=80)
    expect_equal("dropout(x, 0.0)", call_dropout(student, seed_student, 81, x, 0.0), x)


def test_dropout_with_p_1_gives_zeros(student, seed_student, make_positive):
    x = make_positive(20, 30, seed=82)
    got = call_dropout(student, seed_student, 83, x, 1.0)
    expect_dropped("dropout(x, 1.0)", x, got, 1.0)
    expect_equal("dropout(x, 1.0)", got, torch.zeros_like(x))


def test_dropout_rejects_p_outside_0_1(student, make_positive):
    x = make_positive(2, 3, seed=84)
    for p in (-0.1, 1.5):
        expect_raises(ValueError, f"dropout(x, p={p})", lambda: student.call("dropout", x, p))


def test_dropout_drops_other_elements_on_each_call(student, seed_student, make_positive):
    # Two calls in a row draw from torch's global generator: 600 elements dropped alike by
    # a correct dropout has probability 2 ** -600.
    x = make_positive(20, 30, seed=87)
    seed_student(88)
    first, second = student.call("dropout", x, 0.5), student.call("dropout", x, 0.5)
    for got in (first, second):
        expect_dropped("dropout(x, 0.5)", x, got, 0.5)
    if not bool((first == 0).any()):
        raise CheckFailed("dropout(x, 0.5): nothing was zeroed", variants.DROPOUT_NOTHING_DROPPED)
    if torch.equal(first == 0, second == 0):
        raise CheckFailed("dropout(x, 0.5) called twice in a row: the same elements were dropped both times",
                          variants.DROPOUT_SAME_ELEMENTS)


def test_dropout_with_the_same_generator_seed_is_reproducible(student, student_generator, make_positive):
    x = make_positive(20, 30, seed=85)
    first = student.call("dropout", x, 0.5, generator=student_generator(7))
    student.call("dropout", x, 0.5)  # draws from the global generator in between
    second = student.call("dropout", x, 0.5, generator=student_generator(7))
    expect_tensor("dropout(x, 0.5, generator=torch.Generator().manual_seed(7))", first, shape=x.shape)
    with hinted(variants.DROPOUT_GENERATOR_IGNORED):
        expect_equal("dropout(x, 0.5, generator=...) called twice with generators seeded alike", second, first)


def test_dropout_with_different_generator_seeds_differs(student, student_generator, make_positive):
    x = make_positive(20, 30, seed=86)
    first = student.call("dropout", x, 0.5, generator=student_generator(7))
    second = student.call("dropout", x, 0.5, generator=student_generator(8))
    expect_tensor("dropout(x, 0.5, generator=torch.Generator().manual_seed(7))", first, shape=x.shape)
    if isinstance(second, torch.Tensor) and torch.equal(first.cpu(), second.cpu()):
        raise CheckFailed("dropout(x, 0.5, generator=...): generators seeded 7 and 8 gave the same output",
                          variants.DROPOUT_GENERATOR_IGNORED)
