import pytest
import torch

from grader.suite import expect_equal, expect_follows_device, expect_tensor
from reference.hidden.a02 import variants
from reference.masks import padding_mask

pytestmark = pytest.mark.part("padding_mask")


def tokens(rows, device):
    return torch.tensor(rows, dtype=torch.long, device=device)


def test_padding_mask_shape_and_dtype(student, device):
    x = tokens([[5, 6, 0, 0], [7, 8, 9, 0]], device)
    got = student.call("padding_mask", x, 0)
    expect_tensor("padding_mask(tokens: (2, 4), pad_idx=0)", got, shape=(2, 1, 1, 4),
                  hint=variants.padding_shape_hint(got, x))
    expect_tensor("padding_mask(tokens, pad_idx=0)", got, dtype=torch.bool, hint=variants.NOT_BOOL)


@pytest.mark.part("padding_mask", points=2)
def test_padding_mask_values(student, device):
    x = tokens([[5, 6, 0, 0, 0], [7, 8, 9, 4, 0], [1, 2, 3, 4, 5]], device)
    expect_equal("padding_mask(tokens, pad_idx=0)", student.call("padding_mask", x, 0), padding_mask(x, 0),
                 mistakes=variants.padding_mask_mistakes(x, 0))


@pytest.mark.part("padding_mask", points=2)
def test_padding_mask_with_another_pad_idx(student, device):
    # 0 is a real token here: only 3 is padding.
    x = tokens([[0, 4, 3, 3], [2, 0, 1, 3]], device)
    expect_equal("padding_mask(tokens, pad_idx=3)", student.call("padding_mask", x, 3), padding_mask(x, 3),
                 mistakes=variants.padding_mask_mistakes(x, 3))


def test_padding_mask_of_one_token_and_all_padding(student, device):
    x = tokens([[0], [7]], device)
    expect_equal("padding_mask(tokens: (2, 1), pad_idx=0)", student.call("padding_mask", x, 0), padding_mask(x, 0),
                 mistakes=variants.padding_mask_mistakes(x, 0))


def test_padding_mask_follows_the_input_device(student, device):
    x = tokens([[1, 0]], device)
    expect_follows_device("padding_mask(tokens, pad_idx=0)", lambda where: student.call("padding_mask", x.to(where), 0),
                          device, shape=(1, 1, 1, 2), dtype=torch.bool)
