import pytest
import torch

from grader.suite import expect_close, expect_raises, expect_tensor
from reference.hidden.a03 import variants
from reference.multihead import split_heads

pytestmark = pytest.mark.part("split_heads")


def test_split_heads_shape(student, make_input):
    x = make_input(2, 5, 12, seed=1)
    got = student.call("split_heads", x, 3)
    expect_tensor("split_heads(x: (2, 5, 12), num_heads=3)", got, shape=(2, 3, 5, 4),
                  hint=variants.HEADS_NOT_FIRST if isinstance(got, torch.Tensor) and got.shape == (2, 5, 3, 4) else None)


@pytest.mark.part("split_heads", points=2)
def test_split_heads_values(student, make_input):
    x = make_input(2, 5, 12, seed=2)
    expect_close("split_heads(x, 3)", student.call("split_heads", x, 3), split_heads(x, 3), atol=0.0,
                 mistakes={variants.NO_TRANSPOSE_SPLIT: variants.split_without_transpose(x, 3)})


@pytest.mark.parametrize("shape, heads", [((1, 1, 8), 2), ((3, 4, 6), 1), ((2, 3, 6), 6)])
def test_split_heads_edge_sizes(student, make_input, shape, heads):
    x = make_input(*shape, seed=3)
    expect_close(f"split_heads(x: {shape}, num_heads={heads})", student.call("split_heads", x, heads),
                 split_heads(x, heads), atol=0.0)


def test_split_heads_rejects_indivisible_dimension(student, make_input):
    x = make_input(2, 3, 10, seed=4)
    expect_raises(ValueError, "split_heads(x: (2, 3, 10), num_heads=3)", lambda: student.call("split_heads", x, 3))
