"""greedy_decode on stock models that live in the student's process.

The model greedy_decode receives is one a caller could pass: the stock seq2seq model
(``stock.TinySeq2Seq``, the one train_step trains), steered only by its parameters, with
its twin here giving the expected output. Most tests use it trained briefly on the reversal
task, so its rows finish after as many words as their sources hold: with sources of 2 to 5
words and max_len 6, rows end at different steps or never (``ROWS``). One test gives it
parameters that put all the probability on EOS, so a row ends at once. Nothing in the model
tells these tests apart, or from a caller's model.

The contract allows an output of any width up to max_len: the reference stops once every
row has finished, but a loop that runs to max_len and pads is correct too, so outputs are
compared with trailing all-PAD columns removed.

On the trained model some mistakes give the same tokens: fed BOS over and over, it predicts
what it predicts after BOS alone, as the logits at the first position do. Where a test's
output is that of several mistakes, an untrained stock model (``PROBE_SEED``), on which they
all differ (tests/test_variants_06.py checks it), tells which one the code makes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import pytest
import torch

from grader.suite import CheckFailed, StudentError, expect_equal, expect_raises, expect_tensor
from reference.hidden.a06 import variants
from reference.hidden.a06.conftest import BOS, EOS, PAD, reverse_batch, trained_parameters
from reference.training import greedy_decode

# Every test here holds the model the reference trained (the `trained` fixture), answers: they
# share one student process, which ends before end_to_end's tests, where they would be the answer.
pytestmark = [pytest.mark.part("greedy_decode"), pytest.mark.answers("the stock model trained by the reference")]

# Sources of 2, 3, 4 and 5 words: with max_len=6 the trained model's rows end after 3, 4 and
# 5 steps, and never (tests/test_variants_06.py checks it).
ROWS = [[5, 7, 0, 0, 0], [6, 9, 4, 0, 0], [8, 3, 10, 5, 0], [4, 11, 6, 9, 7]]
# An untrained stock model whose logits at every position depend on what it is fed: greedy
# decoding of ROWS to max_len=6 gives other tokens under each mistake that reads the wrong
# logits or feeds the model the wrong tokens (tests/test_variants_06.py checks it).
PROBE_SEED, PROBE_MAX_LEN = 0, 6


@pytest.fixture
def trained(make_pair, device):
    """(the trained stock model in the student's process, its twin here)."""
    (remote, _), (model, _) = make_pair(seed=3)
    parameters = {name: value.to(device) for name, value in trained_parameters().items()}
    model.load_state_dict(parameters)
    # Trained by the reference: the answer to end_to_end's training, so no later test's process may hold it.
    remote.load_parameters(parameters, answers=True)
    return remote, model


@pytest.fixture
def tell_apart(student, make_pair, device):
    """tell_apart(hints) -> which of ``hints`` (mistakes that gave the same tokens on a test's
    inputs) the student's greedy_decode makes, by its output on the probe model (``PROBE_SEED``);
    the first of them when that output is none of theirs or theirs alike."""
    @cache
    def probe() -> tuple:
        (remote, _), (model, _) = make_pair(seed=PROBE_SEED)
        src = torch.tensor(ROWS, device=device)
        try:
            got = student.call("greedy_decode", remote, src, BOS, EOS, PAD, PROBE_MAX_LEN)
        except StudentError:
            got = None
        return got, model, src

    def tell(hints: list[str]) -> str:
        got, model, src = probe()
        if not (isinstance(got, torch.Tensor) and got.dim() == 2 and got.dtype == torch.long):
            return hints[0]
        made = [hint for hint in hints if any(same_tokens(got, decoded(model, src, PROBE_MAX_LEN, hint, stop))
                                              for stop in (None, "never"))]
        return made[0] if len(made) == 1 else hints[0]

    return tell


def decoded(model: torch.nn.Module, src: torch.Tensor, max_len: int, hint: str, stop: str | None) -> torch.Tensor:
    """What greedy decoding with the mistake ``hint`` gives, stopping as ``stop`` says (None: as
    the mistake does)."""
    change = dict(variants.DECODE_MISTAKES[hint])
    if stop is not None and "stop" not in change:
        change["stop"] = stop
    return variants.greedy_decode(model, src, BOS, EOS, PAD, max_len, **change)


def same_tokens(got: torch.Tensor, want: torch.Tensor) -> bool:
    """The same token ids, up to trailing all-PAD columns."""
    got, want = strip_padding(got), strip_padding(want)
    return got.shape == want.shape and torch.equal(got.cpu(), want.cpu())


def eos_first_parameters(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``model``'s parameters, but its output layer puts all the probability on EOS."""
    parameters = {name: p.detach().clone() for name, p in model.named_parameters()}
    parameters["out.weight"].zero_()
    parameters["out.bias"].zero_()[EOS] = 10.0
    return parameters


def strip_padding(tokens: torch.Tensor) -> torch.Tensor:
    """Drop trailing columns that are all PAD (every row finished): the canonical width."""
    width = tokens.size(1)
    while width > 1 and bool((tokens[:, width - 1] == PAD).all()):
        width -= 1
    return tokens[:, :width]


def expect_decoded(what: str, got, model: torch.nn.Module, src: torch.Tensor, max_len: int,
                   tell_apart: Callable[[list[str]], str]) -> None:
    """``got`` is what greedy decoding of ``model`` gives, up to padding columns; else name
    the mistake whose output it is (``tell_apart`` picks one where several give it)."""
    want = greedy_decode(model, src, BOS, EOS, PAD, max_len)
    expect_tensor(what, got, dtype=torch.long, device=src.device,
                  hint=variants.NOT_LONG if isinstance(got, torch.Tensor) and got.dtype != torch.long else None)

    @cache
    def variant(hint: str, stop: str | None) -> torch.Tensor:
        return decoded(model, src, max_len, hint, stop)

    def named(matches) -> str | None:
        made = [hint for hint in variants.DECODE_MISTAKES
                if any(matches(variant(hint, stop)) for stop in (None, "never"))]
        return tell_apart(made) if len(made) > 1 else next(iter(made), None)

    if got.dim() != 2 or got.size(0) != src.size(0) or not 1 <= got.size(1) <= max_len:
        raise CheckFailed(f"{what}: wrong shape: got {tuple(got.shape)}, expected ({src.size(0)}, at most "
                          f"max_len={max_len}); here ({src.size(0)}, {want.size(1)})",
                          named(lambda made: made.shape == got.shape and torch.equal(made, got)))
    if same_tokens(got, want):  # token ids: exact
        return
    stripped, want = strip_padding(got), strip_padding(want)
    mistake = named(lambda made: same_tokens(got, made))  # whose output ``stripped`` is
    try:
        expect_equal(what, stripped, want, mistakes={mistake: stripped} if mistake else None)
    except CheckFailed as failure:
        raise failure.reworded(f"{what}: {first_wrong_row(stripped, want)}") from None


def first_wrong_row(got: torch.Tensor, want: torch.Tensor) -> str:
    """Token ids are read row by row: show the first row that differs, whole."""
    rows, wanted = got.tolist(), want.tolist()
    index = next(i for i, (g, w) in enumerate(zip(rows, wanted)) if g != w)
    return f"row {index} is {rows[index]}, expected {wanted[index]} (trailing all-pad columns removed)"


def test_greedy_decode_returns_token_ids_starting_with_bos(student, trained, device):
    remote, _ = trained
    src = torch.tensor(ROWS, device=device)
    got = student.call("greedy_decode", remote, src, BOS, EOS, PAD, 6)
    what = "greedy_decode(model, src: (4, 5), bos_idx=1, eos_idx=2, pad_idx=0, max_len=6)"
    expect_tensor(what, got, dtype=torch.long, device=device,
                  hint=variants.NOT_LONG if isinstance(got, torch.Tensor) and got.dtype != torch.long else None)
    if got.dim() != 2 or got.size(0) != 4 or not 1 <= got.size(1) <= 6:
        raise CheckFailed(f"{what}: wrong shape: got {tuple(got.shape)}, expected (4, at most 6)",
                          variants.MAX_LEN_OFF_BY_ONE if got.dim() == 2 and got.size(1) == 7 else None)
    if not bool((got[:, 0] == BOS).all()):
        raise CheckFailed(f"{what}: the first column is {got[:, 0].tolist()}, expected BOS (1) in every row",
                          variants.NO_BOS)


@pytest.mark.part("greedy_decode", points=3)
def test_greedy_decode_rows_finish_at_different_steps(student, trained, device, tell_apart):
    remote, model = trained
    src = torch.tensor(ROWS, device=device)
    expect_decoded("greedy_decode(..., max_len=6) with rows ending after 3, 4, 5 steps and never",
                   student.call("greedy_decode", remote, src, BOS, EOS, PAD, 6), model, src, 6, tell_apart)


@pytest.mark.part("greedy_decode", points=2)
def test_greedy_decode_stops_when_every_row_has_finished(student, trained, device, tell_apart):
    remote, model = trained
    src = torch.tensor([[3, 4, 0, 0, 0], [9, 6, 0, 0, 0], [11, 5, 8, 0, 0]], device=device)
    expect_decoded("greedy_decode(..., max_len=10) where every row ends within 3 steps",
                   student.call("greedy_decode", remote, src, BOS, EOS, PAD, 10), model, src, 10, tell_apart)


def test_greedy_decode_reaches_max_len_without_eos(student, trained, device, tell_apart):
    remote, model = trained
    src = torch.tensor([[3, 4, 5, 6, 0], [10, 9, 8, 7, 6]], device=device)
    expect_decoded("greedy_decode(..., max_len=4) where no row produces EOS",
                   student.call("greedy_decode", remote, src, BOS, EOS, PAD, 4), model, src, 4, tell_apart)


def test_greedy_decode_batch_of_one_ending_at_once(student, trained, device, tell_apart):
    remote, model = trained
    parameters = eos_first_parameters(model)
    model.load_state_dict(parameters)
    remote.load_parameters(parameters)
    src = torch.tensor([[5, 7, 0, 0, 0]], device=device)
    expect_decoded("greedy_decode(..., max_len=5) for one row whose first token is EOS",
                   student.call("greedy_decode", remote, src, BOS, EOS, PAD, 5), model, src, 5, tell_apart)


def test_greedy_decode_with_max_len_one_is_bos_only(student, trained, device, tell_apart):
    remote, model = trained
    src = torch.tensor(ROWS[:2], device=device)
    expect_decoded("greedy_decode(..., max_len=1)", student.call("greedy_decode", remote, src, BOS, EOS, PAD, 1),
                   model, src, 1, tell_apart)


@pytest.mark.part("greedy_decode", points=2)
def test_greedy_decode_with_a_trained_translation_model(student, trained, device, tell_apart):
    remote, model = trained
    src, _ = reverse_batch(8, seed=310, device=device)
    expect_decoded("greedy_decode(trained model, src: (8, 5), ..., max_len=8)",
                   student.call("greedy_decode", remote, src, BOS, EOS, PAD, 8), model, src, 8, tell_apart)


def test_greedy_decode_rejects_max_len_zero(student, trained, device):
    remote, _ = trained
    src = torch.tensor(ROWS[:1], device=device)
    expect_raises(ValueError, "greedy_decode(..., max_len=0): no room even for BOS",
                  lambda: student.call("greedy_decode", remote, src, BOS, EOS, PAD, 0))
