import pytest
import torch

from grader.suite import expect_close, expect_raises, expect_tensor
from reference.hidden.a04 import variants
from reference.hidden.a04.conftest import D_MODEL, MAX_LEN, as_float32
from reference.positions import sinusoidal_encoding

pytestmark = pytest.mark.part("sinusoidal_encoding")

# The table is exact math: a float32 computation of 64 positions is within ~1e-6 of the
# float64 answer, and every mistake is off by more than 0.1 somewhere.
ATOL = 1e-5


def test_sinusoidal_encoding_shape(student):
    got = student.call("sinusoidal_encoding", MAX_LEN, D_MODEL)
    hint = variants.NO_BATCH_DIMENSION if isinstance(got, torch.Tensor) and got.shape == (1, MAX_LEN, D_MODEL) else None
    expect_tensor(f"sinusoidal_encoding({MAX_LEN}, {D_MODEL})", got, shape=(MAX_LEN, D_MODEL), hint=hint)


def test_sinusoidal_encoding_dtype(student):
    got = student.call("sinusoidal_encoding", 8, 4)
    expect_tensor("sinusoidal_encoding(8, 4)", got, dtype=torch.float32, hint=variants.NOT_FLOAT32)


@pytest.mark.part("sinusoidal_encoding", points=3)
def test_sinusoidal_encoding_values(student):
    got = as_float32(student.call("sinusoidal_encoding", MAX_LEN, D_MODEL))
    expect_close(f"sinusoidal_encoding({MAX_LEN}, {D_MODEL})", got, sinusoidal_encoding(MAX_LEN, D_MODEL), atol=ATOL,
                 mistakes=variants.encoding_mistakes(MAX_LEN, D_MODEL))


@pytest.mark.parametrize("max_len, d_model", [(1, 2), (3, 4), (9, 6)])
def test_sinusoidal_encoding_small_sizes(student, max_len, d_model):
    got = as_float32(student.call("sinusoidal_encoding", max_len, d_model))
    expect_close(f"sinusoidal_encoding({max_len}, {d_model})", got, sinusoidal_encoding(max_len, d_model), atol=ATOL,
                 mistakes=variants.encoding_mistakes(max_len, d_model))


def test_sinusoidal_encoding_long_table(student):
    # Angles up to 4999 rad: float32 rounding alone gives errors up to ~4e-4 (measured for
    # the usual float32 formulas), so allow 1e-3; the mistakes are off by ~1.
    max_len, d_model = 5000, 64
    got = as_float32(student.call("sinusoidal_encoding", max_len, d_model))
    expect_close(f"sinusoidal_encoding({max_len}, {d_model})", got, sinusoidal_encoding(max_len, d_model), atol=1e-3,
                 mistakes=variants.encoding_mistakes(max_len, d_model))


def test_sinusoidal_encoding_rejects_odd_d_model(student):
    expect_raises(ValueError, "sinusoidal_encoding(10, 7)", lambda: student.call("sinusoidal_encoding", 10, 7))
