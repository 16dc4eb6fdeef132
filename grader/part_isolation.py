"""Part isolation: grade a part on its own work, with the student's other parts as black boxes.

A part built from pieces graded elsewhere (a layer from the student's own attention, a
training step from the student's own loss) is checked twice over: against the reference,
and, failing that, against the contract's wiring of the student's own pieces
(:func:`expect_wiring`). A mistake in a piece then costs points where that piece is graded,
once; here it only adds a note saying which piece to fix first. Pieces are described by
:class:`Piece` (how to call the student's one, and what the reference's gives on the same
input); :func:`diagnosing` names a piece that raises by itself, and :func:`call_part` names
an unfinished part that the graded one calls.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from grader import hints
from grader.checks import CheckFailed, expect_close, expect_derivative, is_close
from grader.sandbox.errors import StudentError, StudentException
from grader.student_protocol import Remote, Student

PIECES_DIFFER = "also wrong (compared with the reference holding the same weights), fix first: {pieces}"
PIECE_RAISES = "your {piece} raises an exception on these inputs: fix it first ({where})"
GRAPH_CUT = ("every submodule must take part in forward, and nothing may cut the autograd graph "
             "(.detach(), torch.no_grad(), .data)")
# Along a unit direction. The reference's central differences are within 0.05% of its
# gradients' norms; at 1e-2 the curvature of a whole layer's parameters makes that 5-12%.
GRADIENT_STEP = 1e-3


@dataclass(frozen=True)
class Piece:
    """One of the student's pieces inside the module under test, for the hint only.

    ``call`` runs it on some input; ``want`` gives what it should return (None: only
    check that it runs); ``where`` says where it is graded."""

    name: str  # e.g. "MultiHeadAttention"
    attr: str  # e.g. "self_attn" or "decoder_layers[0]"
    where: str  # e.g. "assignment 03", "the FeedForward part"
    call: Callable[[], object]
    want: Callable[[], torch.Tensor] | None = None


def describe_piece(name: str, attrs: list[str], where: str) -> str:
    """How PIECES_DIFFER names one piece: 'your MultiHeadAttention (self_attn; assignment 03)'."""
    return f"your {name} ({'; '.join([', '.join(attrs)] * bool(attrs) + [where])})"


def expect_wiring(what: str, got: Any, want_reference: torch.Tensor, want_wiring: Callable[[], torch.Tensor], *,
                  atol: float, rtol: float, mistakes: Mapping[str, Callable[[], torch.Tensor]],
                  unusable_hint: str, pieces: Sequence[Piece] = (), mask: torch.Tensor | None = None,
                  fallback_hint: str | None = None) -> None:
    """Pass when ``got`` matches the reference, or the contract's wiring of the student's own
    modules (``want_wiring()``: part isolation). Otherwise name the mistake, and add a note
    on those of the student's ``pieces`` that are wrong themselves ("fix it first").

    ``mask``: bool, broadcastable to the output; only these positions are compared.
    ``unusable_hint`` (with ``{error}``): the hint when the student's pieces cannot be
    combined as the contract says, e.g. one returns a tuple."""
    def only(value):
        if mask is None or not isinstance(value, torch.Tensor) or value.shape != want_reference.shape:
            return value
        return torch.where(mask, value, want_reference)

    got = only(got)
    if is_close(got, want_reference, atol=atol, rtol=rtol):
        return
    unusable = None
    try:
        with torch.no_grad():
            want = only(want_wiring())
    except StudentError:
        raise
    except Exception as exc:  # a piece returns what the contract does not (a tuple, a wrong shape)
        want, mistakes = want_reference, {}
        unusable = unusable_hint.format(error=f"{type(exc).__name__}: {str(exc)[:200]}")
    if is_close(got, want, atol=atol, rtol=rtol):
        return
    try:
        expect_close(what, got, want, atol=atol, rtol=rtol,
                     mistakes={hint: (lambda run=run: only(run())) for hint, run in quietly(mistakes).items()})
    except CheckFailed as failure:
        notes = [unusable or failure.hint or fallback_hint, differing_pieces(pieces)]
        raise CheckFailed(failure.message, "; ".join(note for note in notes if note) or None) from None


@contextmanager
def diagnosing(pieces: Sequence[Piece]) -> Iterator[None]:
    """If the student's module raises, and one of its pieces raises by itself, say which."""
    try:
        yield
    except StudentException as exc:
        if exc.type_name == "NotImplementedError":
            raise
        note = raising_piece(pieces)
        if note is None:
            raise
        raise CheckFailed(f"{exc}\n{exc.traceback}".strip(), note) from None


def raising_piece(pieces: Sequence[Piece]) -> str | None:
    """The note for the first of ``pieces`` that raises by itself, if any."""
    for piece in pieces:
        try:
            piece.call()
        except StudentError:
            return PIECE_RAISES.format(piece=f"{piece.name} ({piece.attr})", where=piece.where)
    return None


def differing_pieces(pieces: Sequence[Piece]) -> str | None:
    """One note naming every one of ``pieces`` that raises or gives other values than the
    reference piece with the same weights ("fix it first"), or None."""
    wrong: dict[tuple[str, str], list[str]] = {}
    for piece in pieces:
        try:
            got = piece.call()
        except StudentError:
            got = None
        if piece.want is None and got is not None:
            continue
        try:
            with torch.no_grad():
                want = piece.want()
        except Exception:  # its own sub-pieces return what the contract does not: blame it
            want = None
        # Looser than the part checks: this only picks what to blame.
        if got is None or want is None or not is_close(got, want, atol=1e-4, rtol=1e-3):
            wrong.setdefault((piece.name, piece.where), []).append(piece.attr)
    if not wrong:
        return None
    return PIECES_DIFFER.format(pieces=", ".join(
        describe_piece(name, attrs if len(attrs) <= 2 else [], where) for (name, where), attrs in wrong.items()))


def quietly(mistakes: Mapping[str, Callable[[], Any]]) -> dict[str, Callable[[], Any]]:
    """Mistake variants call the student's modules: one that raises (there, or here on what
    they return) just does not match."""
    def guard(candidate):
        def run():
            try:
                with torch.no_grad():
                    return candidate()
            except Exception:
                return None
        return run
    return {hint: guard(candidate) for hint, candidate in mistakes.items()}


def expect_gradients(what: str, module: Remote, reference: nn.Module, args: tuple, grad_output: torch.Tensor, *,
                     inputs: dict[int, tuple[str, str]]) -> None:
    """A gradient reaches every submodule of ``module`` (which holds ``reference``'s
    parameters) and each input ``inputs`` names (position -> (name, hint when none does)).
    Per submodule, not per parameter, and not against the reference's values: an attention
    that leaves W_o unused is assignment 03's mistake, not this part's (part isolation).

    Which gradients arrive is the student's process's word, so each one is checked against
    the loss ``<module(*args), grad_output>`` the same module computes: moved a little along
    the reported gradient, its parameters (or the input) must change that loss at the
    rate the gradient's norm says. Positions where the output is not finite are left out."""
    got = module.backward(*args, grad_output=grad_output)
    base = {name: p.detach() for name, p in reference.named_parameters()}
    groups: dict[str, dict[str, torch.Tensor]] = {}
    for name in base:
        grad = got.param_grads.get(name)
        groups.setdefault(_submodule(name), {}).update({name: grad} if isinstance(grad, torch.Tensor) else {})
    missing = sorted(group for group, grads in groups.items() if _norm(grads) == 0)
    if missing:
        raise CheckFailed(f"{what}: no gradient reached {missing}", GRAPH_CUT)
    for position, (name, hint) in inputs.items():
        grad = got.input_grads[position] if position < len(got.input_grads) else None
        if not isinstance(grad, torch.Tensor) or _norm({name: grad}) == 0:
            raise CheckFailed(f"{what}: no gradient reached {name}", hint)

    with torch.no_grad():
        finite = torch.isfinite(module(*args).detach())

    def loss(parameters: dict, moved_args: tuple) -> float:
        module.load_parameters(parameters)
        return float((module(*moved_args).detach().double() * grad_output.double()).where(finite, 0.0).sum())

    for group, grads in groups.items():
        norm = _norm(grads)
        moved = lambda t, grads=grads, norm=norm: {**base, **{n: base[n] + t * g / norm for n, g in grads.items()}}
        expect_derivative(f"{what}: gradient of {group}", norm, lambda t: loss(moved(t), args),
                          step=GRADIENT_STEP, hint=GRAPH_CUT)
    for position, (name, hint) in inputs.items():
        grad = got.input_grads[position]
        norm = _norm({name: grad})
        moved = lambda t, position=position, grad=grad, norm=norm: tuple(
            arg.detach() + t * grad / norm if i == position else arg for i, arg in enumerate(args))
        expect_derivative(f"{what}: gradient of {name}", norm, lambda t: loss(base, moved(t)),
                          step=GRADIENT_STEP, hint=hint)


def _norm(grads: dict[str, torch.Tensor]) -> float:
    return math.sqrt(sum(float(g.detach().double().pow(2).sum()) for g in grads.values()))


def _submodule(name: str) -> str:
    """'self_attn.W_q.weight' -> 'self_attn'; 'encoder_layers.1.ffn.linear1.bias' -> 'encoder_layers[1]'."""
    parts = name.split(".")
    return f"{parts[0]}[{parts[1]}]" if len(parts) > 2 and parts[1].isdigit() else parts[0]


def call_part(student: Student, name: str, *args: Any, **kwargs: Any) -> Any:
    """``student.call``, but a NotImplementedError raised by another, unfinished part that
    ``name`` calls is reported as such, not as ``name`` itself being unimplemented."""
    try:
        return student.call(name, *args, **kwargs)
    except StudentException as exc:
        if exc.type_name != "NotImplementedError" or exc.message.startswith(name):
            raise
        callee = exc.message.split(":")[0]
        raise CheckFailed(f"{name} calls {callee}, which is not implemented yet ({exc.message})",
                          hints.NOT_IMPLEMENTED) from None
