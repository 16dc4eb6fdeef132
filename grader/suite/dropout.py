"""Dropout in training mode, judged from values the grader checks, for every correct way to
draw the random numbers.

Dropout is random, so a part's output in training mode is not compared with one expected
value. It is compared, element by element, with what the same part gives with dropout off
(``kept``: the output of the same weights built with ``dropout=0.0``, in eval mode, or what
the grader recovers from it, such as the attention weights behind an attention's output,
:func:`weights_behind`; not the module's own eval mode, which a test of its own grades): each
element must be zero or
``kept / (1 - p)``, and about a fraction ``p`` of them zero. That holds for ``nn.Dropout``,
``F.dropout``, a mask from ``torch.rand`` or ``torch.bernoulli`` and any generator, and it
judges the dropout alone: a wrong value elsewhere in the part is in ``kept`` too, and costs
points in the value tests only. A rate the part ignores (a hard-coded ``nn.Dropout(0.1)``)
shows with ``p = 0``: the output in training mode must then be the eval-mode one
(:func:`expect_no_dropout_at_zero`). Dropout that drops the same units on every call (a fixed
seed) passes those checks on one call; a second call in a row must drop others
(:func:`expect_new_draws`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from grader.core import hints
from grader.suite.checks import CheckFailed, expect_tensor, is_close


@dataclass(frozen=True)
class DropoutHints:
    """What a failing dropout check names: ``missing`` (nothing is dropped in training mode),
    ``misplaced`` (values are dropped, but not the ones the contract drops)."""

    missing: str
    misplaced: str
    unscaled: str = hints.DROPOUT_UNSCALED
    rate: str = hints.DROPOUT_RATE_IGNORED


def zero_fraction_bounds(p: float, n: int) -> tuple[float, float]:
    """Where the fraction of zeros of ``n`` independent elements dropped with probability
    ``p`` lies: 6 standard deviations either side, plus 0.002 for p near 0 or 1."""
    half_width = 6 * math.sqrt(p * (1 - p) / n) + 0.002
    return p - half_width, p + half_width


def in_eval_mode(module: Any) -> Any:
    """``module`` (the student's, remote) after ``module.eval()``: a part's values are graded with
    its dropout off, whatever rate it uses, and its dropout by the checks above, once."""
    module.method("eval")
    return module


def expect_no_dropout_at_zero(what: str, train: Any, eval_: Any, *, atol: float, rtol: float) -> None:
    """Built with ``dropout=0.0``, the part gives in training mode what it gives in eval mode
    (``train``, ``eval_``: its two outputs on one input); else it drops at a rate of its own."""
    if isinstance(eval_, torch.Tensor) and isinstance(train, torch.Tensor) and not is_close(train, eval_, atol=atol,
                                                                                             rtol=rtol):
        raise CheckFailed(f"{what}: built with dropout=0.0, its output in training mode differs from its output "
                          "in eval mode", hints.DROPOUT_RATE_IGNORED)


def expect_new_draws(what: str, first: torch.Tensor, again: Any, kept: torch.Tensor, *, atol: float,
                     rtol: float) -> None:
    """Two training-mode calls in a row on one input drop different units, as dropout drawing
    from torch's global generator does (``nn.Dropout``, ``F.dropout``, a mask from ``torch.rand``),
    whatever it drops: ``first`` and ``again`` are the part's outputs, the grader's seed set
    before the first, ``kept`` its output with dropout off. The same output twice is dropout
    with a fixed seed: ``torch.manual_seed`` in forward (which also resets the state the
    grader seeded) or a generator of its own seeded again on each call. Only an output that
    dropped something is asked to change (one that differs from ``kept``): dropout missing,
    or ``p = 0``, gives the same output twice, and other checks grade that. For correct dropout
    at rate ``p`` on ``n`` elements the two calls agree with probability at most
    ``max(p, 1-p) ** n``, ``n`` the elements whose dropping shows."""
    if not isinstance(first, torch.Tensor) or is_close(first, kept, atol=atol, rtol=rtol):
        return
    again = expect_tensor(f"{what}, called again", again, shape=first.shape)
    if is_close(again, first, atol=atol, rtol=rtol):
        raise CheckFailed(f"{what}: called twice in a row on the same input, it dropped the same units both "
                          "times", hints.DROPOUT_SAME_UNITS)


def expect_dropout(what: str, dropped: torch.Tensor | None, kept: torch.Tensor, p: float, *, atol: float,
                   rtol: float, named: DropoutHints, scales: Sequence[float] = (),
                   elsewhere: Mapping[str, tuple[Any, torch.Tensor]] | None = None) -> None:
    """``dropped`` (the part's value in training mode: from the student's process, so its
    shape is checked here first; None when the grader found none of the kind ``kept`` is, such
    as no attention weights behind an output) is ``kept`` (the same value with dropout off)
    with each element zeroed with probability ``p`` and the others scaled by ``1 / (1 - p)``,
    or by one of ``scales`` (those of a student's own dropout function that the part may
    call, graded in its own part). Else the hint names the mistake: nothing dropped,
    survivors not scaled, another rate, one of ``elsewhere`` (hint -> (dropped, kept) of a
    value that shows the pattern when dropout sits there instead), or ``named.misplaced``."""
    if dropped is not None:
        expect_tensor(what, dropped, shape=kept.shape)
    scale = 1 / (1 - p)
    allowed = (scale, *scales)
    zeros = None if dropped is None else _dropped_by(dropped, kept, allowed, atol, rtol)
    low, high = zero_fraction_bounds(p, max(1, int(_visible(kept, atol).sum())))
    if zeros is not None and low <= zeros <= high:
        return
    if dropped is not None and is_close(dropped, kept, atol=atol, rtol=rtol):
        hint = named.missing
    elif zeros is not None:
        hint = named.rate
    elif dropped is not None and _dropped_by(dropped, kept, (1.0, 1 - p), atol, rtol) is not None:
        hint = named.unscaled
    else:
        hint = next((name for name, (other, other_kept) in (elsewhere or {}).items()
                     if isinstance(other, torch.Tensor) and other.shape == other_kept.shape
                     and (_dropped_by(other, other_kept, (*allowed, 1.0), atol, rtol) or 0.0) > 0), named.misplaced)
    found = f"{zeros:.0%} of them zeroed" if zeros is not None else "other values than zeros and kept ones"
    raise CheckFailed(f"{what}: expected about {p:.0%} of the values zeroed and the rest multiplied by "
                      f"1/(1-p) = {scale:g}; found {found}", hint)


def weights_behind(output: Any, values: torch.Tensor, *, atol: float, rtol: float = 0.0) -> torch.Tensor | None:
    """The weights ``W`` with ``output = W @ values`` (over the last two dimensions; ``values``
    has at most as many rows as columns, so they are unique), or None when ``output`` is no
    weighted sum of the rows of ``values`` (within ``atol + rtol * max |output|``). For an
    attention output and its value vectors these are the attention weights, dropped or not.
    ``output``, from the student's process, must be checked for its shape first (its batch
    dimensions are those of ``values`` here, its rows are not)."""
    if not (isinstance(output, torch.Tensor) and output.is_floating_point()
            and output.shape[:-1] == values.shape[:-2] + output.shape[-2:-1] and output.shape[-1] == values.shape[-1]):
        return None
    got, rows = output.detach().double().cpu(), values.detach().double().cpu()
    if got.numel() == 0 or not bool(torch.isfinite(got).all()):
        return None
    solution = torch.linalg.lstsq(rows.transpose(-2, -1), got.transpose(-2, -1)).solution.transpose(-2, -1)
    # Against the largest value, not each one: rounding errors carry through the solve as a whole.
    residual = float((solution @ rows - got).abs().max())
    return solution if residual <= atol + rtol * float(got.abs().max()) else None


def _visible(kept: torch.Tensor, atol: float) -> torch.Tensor:
    """Elements whose dropping shows: far enough from zero."""
    return kept.detach().double().cpu().abs() > 10 * atol


def _dropped_by(dropped: torch.Tensor, kept: torch.Tensor, scales: Sequence[float], atol: float,
                rtol: float) -> float | None:
    """The fraction of the visible elements zeroed, when every element of ``dropped`` is zero
    or ``kept`` times one of ``scales`` (the same for all); else None."""
    got, want = dropped.detach().double().cpu(), kept.detach().double().cpu()
    visible = _visible(kept, atol)
    zero = got.abs() <= atol
    for scale in scales:
        survived = (got - scale * want).abs() <= atol + rtol * (scale * want).abs()
        if bool((zero | survived).all()) and bool(visible.any()):
            return float(zero[visible].double().mean())
    return None
