import pytest
import torch

from grader.suite import expect_close, expect_follows_device, expect_tensor
from reference.attention import attention_scores
from reference.hidden.a01 import variants

pytestmark = pytest.mark.part("attention_scores")

# One matmul in float32: a correct result differs by rounding only (~1e-6 at these sizes);
# the scaled and transposed mistakes differ by far more, or in shape.
ATOL, RTOL = 1e-5, 1e-5


def test_attention_scores_shape(student, make_input):
    query, keys = make_input(2, 5, 8, seed=1), make_input(2, 7, 8, seed=2)
    got = student.call("attention_scores", query, keys)
    hint = variants.SCORES_TRANSPOSED if isinstance(got, torch.Tensor) and tuple(got.shape) == (2, 7, 5) else None
    expect_tensor("attention_scores(query: (2, 5, 8), keys: (2, 7, 8))", got, shape=(2, 5, 7), hint=hint)


@pytest.mark.part("attention_scores", points=2)
def test_attention_scores_values(student, make_input):
    query, keys = make_input(2, 5, 8, seed=3), make_input(2, 7, 8, seed=4)
    expect_close("attention_scores(query, keys)", student.call("attention_scores", query, keys),
                 attention_scores(query, keys), atol=ATOL, rtol=RTOL,
                 mistakes=variants.scores_mistakes(query, keys))


def test_attention_scores_with_extra_batch_dimensions(student, make_input):
    query, keys = make_input(2, 3, 4, 8, seed=5), make_input(2, 3, 6, 8, seed=6)
    expect_close("attention_scores(query: (2, 3, 4, 8), keys: (2, 3, 6, 8))",
                 student.call("attention_scores", query, keys), attention_scores(query, keys),
                 atol=ATOL, rtol=RTOL, mistakes=variants.scores_mistakes(query, keys))


def test_attention_scores_without_batch_dimension(student, make_input):
    query, keys = make_input(4, 8, seed=7), make_input(3, 8, seed=8)
    expect_close("attention_scores(query: (4, 8), keys: (3, 8))", student.call("attention_scores", query, keys),
                 attention_scores(query, keys), atol=ATOL, rtol=RTOL, mistakes=variants.scores_mistakes(query, keys))


def test_attention_scores_keeps_float64(student, make_input):
    query, keys = make_input(1, 2, 3, seed=9, dtype=torch.float64), make_input(1, 4, 3, seed=10, dtype=torch.float64)
    expect_close("attention_scores(float64 query, keys)", student.call("attention_scores", query, keys),
                 attention_scores(query, keys), atol=1e-12, rtol=1e-12)


def test_attention_scores_follows_the_input_device(student, make_input, device):
    query, keys = make_input(1, 2, 8, seed=11), make_input(1, 3, 8, seed=12)
    expect_follows_device("attention_scores(query, keys)",
                          lambda where: student.call("attention_scores", query.to(where), keys.to(where)), device,
                          shape=(1, 2, 3))
