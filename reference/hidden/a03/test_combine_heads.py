import pytest

from grader.suite import expect_close, expect_tensor
from reference.hidden.a03 import variants
from reference.multihead import combine_heads, split_heads

pytestmark = pytest.mark.part("combine_heads")


def test_combine_heads_shape(student, make_input):
    got = student.call("combine_heads", make_input(2, 3, 5, 4, seed=5))
    expect_tensor("combine_heads(x: (2, 3, 5, 4))", got, shape=(2, 5, 12))


@pytest.mark.part("combine_heads", points=2)
def test_combine_heads_values(student, make_input):
    x = make_input(2, 3, 5, 4, seed=6)
    expect_close("combine_heads(x)", student.call("combine_heads", x), combine_heads(x), atol=0.0,
                 mistakes={variants.NO_TRANSPOSE_COMBINE: variants.combine_without_transpose(x)})


def test_combine_heads_inverts_split_heads(student, make_input):
    x = make_input(3, 7, 8, seed=7)
    expect_close("combine_heads(split_heads(x, 4))", student.call("combine_heads", split_heads(x, 4)), x, atol=0.0)


def test_combine_heads_batch_and_length_of_one(student, make_input):
    x = make_input(1, 2, 1, 3, seed=8)
    expect_close("combine_heads(x: (1, 2, 1, 3))", student.call("combine_heads", x), combine_heads(x), atol=0.0)
