import pytest
import torch

from grader.suite import CheckFailed, expect_equal, expect_raises, expect_tensor
from reference.hidden.a06 import variants
from reference.training import teacher_forcing_split

pytestmark = pytest.mark.part("teacher_forcing_split")

# [BOS w1 .. wn EOS PAD ..] with BOS=1, EOS=2, PAD=0: rows of different lengths.
TGT = [[1, 5, 9, 4, 2, 0, 0], [1, 7, 2, 0, 0, 0, 0], [1, 3, 8, 11, 6, 10, 2]]


def _pair(what: str, got):
    """The student's result as (decoder_input, labels); a clear failure otherwise."""
    if not (isinstance(got, (tuple, list)) and len(got) == 2):
        kind = f"a {type(got).__name__} of {len(got)}" if isinstance(got, (tuple, list)) else \
            "a tensor" if isinstance(got, torch.Tensor) else getattr(got, "type_name", type(got).__name__)
        raise CheckFailed(f"{what}: expected a pair (decoder_input, labels), got {kind}", variants.NOT_A_PAIR)
    return got


def _expect_split(what: str, got, tgt: torch.Tensor) -> None:
    decoder_input, labels = _pair(what, got)
    want_input, want_labels = teacher_forcing_split(tgt)

    def mistakes(index):
        return {hint: variants.split(tgt, shift=shift)[index] for hint, shift in variants.SPLIT_MISTAKES.items()}

    # Pure data movement: exact.
    for index, (name, got_part, want_part) in enumerate((("decoder_input", decoder_input, want_input),
                                                         ("labels", labels, want_labels))):
        try:
            expect_equal(f"{what}: {name}", got_part, want_part, mistakes=mistakes(index))
        except CheckFailed as failure:
            if not (isinstance(got_part, torch.Tensor) and got_part.shape == want_part.shape
                    and got_part.dtype == want_part.dtype):
                raise
            row = next(i for i, (g, w) in enumerate(zip(got_part.tolist(), want_part.tolist())) if g != w)
            raise failure.reworded(f"{what}: {name} row {row} is {got_part[row].tolist()}, expected "
                                   f"{want_part[row].tolist()} (tgt row {tgt[row].tolist()})") from None


def test_teacher_forcing_split_shapes(student, device):
    tgt = torch.tensor(TGT, device=device)
    decoder_input, labels = _pair("teacher_forcing_split(tgt: (3, 7))", student.call("teacher_forcing_split", tgt))
    for name, got in (("decoder_input", decoder_input), ("labels", labels)):
        expect_tensor(f"teacher_forcing_split(tgt: (3, 7)): {name}", got, shape=(3, 6), dtype=torch.long,
                      device=device, hint=variants.LABELS_NOT_SHIFTED_FULL
                      if isinstance(got, torch.Tensor) and tuple(got.shape) == (3, 7) else None)


@pytest.mark.part("teacher_forcing_split", points=3)
def test_teacher_forcing_split_values(student, device):
    tgt = torch.tensor(TGT, device=device)
    _expect_split("teacher_forcing_split(tgt)", student.call("teacher_forcing_split", tgt), tgt)


def test_teacher_forcing_split_shortest_target(student, device):
    tgt = torch.tensor([[1, 2]], device=device)  # BOS EOS: one input token, one label
    _expect_split("teacher_forcing_split(tgt: [[BOS, EOS]])", student.call("teacher_forcing_split", tgt), tgt)


def test_teacher_forcing_split_rejects_bad_shapes(student, device):
    expect_raises(ValueError, "teacher_forcing_split(tgt: (7,)), a 1-D tensor",
                  lambda: student.call("teacher_forcing_split", torch.tensor(TGT[0], device=device)))
    expect_raises(ValueError, "teacher_forcing_split(tgt: (3, 1)), too short to split",
                  lambda: student.call("teacher_forcing_split", torch.ones(3, 1, dtype=torch.long, device=device)))
