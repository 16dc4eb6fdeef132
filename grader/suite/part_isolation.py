"""Part isolation: grade a part on its own work, with the student's other parts as black boxes.

A part built from pieces graded elsewhere (a layer from the student's own attention, a
training step from the student's own loss) is checked twice over: against the reference,
and, failing that, against the contract's wiring of the student's own pieces
(:func:`expect_wiring`). A mistake in a piece then costs points where that piece is graded,
once. A part that fails both has a mistake of its own, which leads its hint (named, or
:data:`OWN_WIRING`); a piece that is wrong by itself is noted after it. Pieces are described by
:class:`Piece` (how to call the student's one, and what the reference's gives on the same
input); :func:`diagnosing` names a piece that raises by itself, and :func:`call_part` names
an unfinished part that the graded one calls.

A part is built holding the reference's weights (:func:`new_graded_like`). Where one of its
pieces has other parameter names than the contract's (an ``nn.Sequential`` FeedForward),
those weights cannot go into it: a grader-owned :class:`StockPiece` with the contract's
names takes its place, so the part is graded on its own wiring, and the hint says so
(:func:`noting_stock`). The part's own names (a misnamed submodule) still cost points here.

The trusted side computes the contract's wiring, and each mistake's, with the student's
pieces; it does so only on values it has checked: a piece is called through a
:class:`BlackBox`, whose every result has the shape the reference's own piece gives on the
same input (else :class:`PieceUnusable`, and the part is graded against the reference).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

import torch
from torch import nn

from grader.core import hints
from grader.sandbox.errors import StudentError, StudentException
from grader.suite.checks import CheckFailed, describe_value, expect_close, expect_derivative, expect_tensor, is_close
from grader.suite.student_protocol import Remote, Student

PIECES_DIFFER = "also wrong by itself (compared with the reference holding the same weights): {pieces}"
# The headline where the part's output is neither the reference's nor the contract's wiring of the
# student's own pieces, and no mistake matched: the part's own mistake, whatever its pieces do.
OWN_WIRING = ("wrong in this part itself: its output is not the contract's wiring of your own pieces either "
              "(they are graded in their own parts)")
PIECE_RAISES = "your {piece} raises an exception on these inputs: fix it first ({where})"
GRAPH_CUT = ("every submodule must take part in forward, and nothing may cut the autograd graph "
             "(.detach(), torch.no_grad(), .data)")
STOCK_REPLACED = ("your {attrs}'s parameters are not named (or shaped) as the contract says ({names}); it was "
                  "replaced by a "
                  "stock {piece} to grade the {part}'s wiring: {piece}'s names cost points there")
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


class PieceUnusable(Exception):
    """A student's piece returned what its reference twin never does on that input (no
    tensor, or another shape): the trusted side does not compute with it."""


class BlackBox:
    """One of the student's modules as the trusted side calls it inside a part's wiring, a
    mistake's or a :class:`Piece`: ``box(*args)`` is ``remote(*args)`` once it is a tensor
    of the shape ``like`` (the reference's own piece) returns for the same arguments; else
    :class:`PieceUnusable`. So a value of the student's choosing (a (400000, 1, 1, 1) reply
    that broadcasts against everything) never enters the grader's arithmetic."""

    def __init__(self, remote: Remote, like: nn.Module):
        self.remote = remote
        self._like = like

    def __call__(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        if not callable(self.remote):  # a plain value the student's process gave for the piece: a number, say
            raise PieceUnusable(f"your code gave {describe_value(self.remote)} where the grader needs your "
                                f"{type(self._like).__name__}")
        got = self.remote(*args, **kwargs)
        try:
            with torch.no_grad():
                want = tuple(self._like(*args, **kwargs).shape)
        except Exception as exc:  # arguments the contract's piece refuses: nothing to check against
            raise PieceUnusable(f"{type(self._like).__name__} cannot take these arguments ({type(exc).__name__})") \
                from None
        if not (isinstance(got, torch.Tensor) and tuple(got.shape) == want):
            raise PieceUnusable(f"your {self.remote.type_name} returned {describe_value(got)} where the contract's "
                                f"{type(self._like).__name__} returns shape {want}")
        if not got.is_floating_point():  # a bool of which units were kept, say: no arithmetic takes it
            raise PieceUnusable(f"your {self.remote.type_name} returned {describe_value(got)} where the contract's "
                                f"{type(self._like).__name__} returns floating-point values")
        return got


def black_box(remote: Remote, like: nn.Module) -> BlackBox:
    """``remote`` (the student's piece) checked against ``like`` (the reference's twin): see :class:`BlackBox`."""
    return BlackBox(remote, like)


def expect_wiring(what: str, got: Any, want_reference: torch.Tensor, want_wiring: Callable[[], torch.Tensor], *,
                  atol: float, rtol: float, mistakes: Mapping[str, Callable[[], torch.Tensor]],
                  unusable_hint: str, pieces: Sequence[Piece] = (), mask: torch.Tensor | None = None,
                  fallback_hint: str | None = None) -> None:
    """Pass when ``got`` matches the reference, or the contract's wiring of the student's own
    modules (``want_wiring()``: part isolation). Otherwise the part's own mistake leads the hint
    (the one matched, else ``fallback_hint``, else :data:`OWN_WIRING`), and a note on those of the
    student's ``pieces`` that are wrong themselves follows: with its own pieces it fails too, so
    they are not its cause.

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
        wrong = differing_pieces(pieces)
        notes = [unusable or failure.hint or fallback_hint or (OWN_WIRING if wrong else None), wrong]
        # The mistake matched is the part's own: computed with the student's own pieces.
        raise CheckFailed(failure.message, "; ".join(note for note in notes if note) or None,
                          mistake=None if unusable else failure.mistake) from None


@contextmanager
def diagnosing(pieces: Sequence[Piece]) -> Iterator[None]:
    """If the student's module raises, and one of its pieces raises by itself, say which."""
    try:
        yield
    except StudentException as exc:
        if exc.stub:
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
        except PieceUnusable:
            continue  # it runs; what it returns is differing_pieces' to judge
    return None


def differing_pieces(pieces: Sequence[Piece]) -> str | None:
    """One note naming every one of ``pieces`` that raises or gives other values than the
    reference piece with the same weights ("fix it first"), or None."""
    wrong: dict[tuple[str, str], list[str]] = {}
    for piece in pieces:
        try:
            got = piece.call()
        except (StudentError, PieceUnusable):
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
    rate the gradient's norm says. Positions where the output is not finite are left out.
    Every gradient and output the module returns is checked for its shape (a parameter's,
    an input's, ``grad_output``'s) before the grader computes with it."""
    got = module.backward(*args, grad_output=grad_output)
    base = {name: p.detach() for name, p in reference.named_parameters()}
    groups: dict[str, dict[str, torch.Tensor]] = {}
    for name in base:
        grad = got.param_grads.get(name)
        if isinstance(grad, torch.Tensor):
            expect_tensor(f"{what}: gradient of {name}", grad, shape=base[name].shape)
        groups.setdefault(_submodule(name), {}).update({name: grad} if isinstance(grad, torch.Tensor) else {})
    missing = sorted(group for group, grads in groups.items() if _norm(grads) == 0)
    if missing:
        raise CheckFailed(f"{what}: no gradient reached {missing}", GRAPH_CUT)
    for position, (name, hint) in inputs.items():
        grad = got.input_grads[position] if position < len(got.input_grads) else None
        if not isinstance(grad, torch.Tensor) or _norm({name: grad}) == 0:
            raise CheckFailed(f"{what}: no gradient reached {name}", hint)
        expect_tensor(f"{what}: gradient of {name}", grad, shape=args[position].shape)

    def output(call_args: tuple) -> torch.Tensor:
        with torch.no_grad():
            return expect_tensor(f"{what} output", module(*call_args), shape=grad_output.shape).detach()

    finite = torch.isfinite(output(args))

    def loss(parameters: dict, moved_args: tuple) -> float:
        with module.holding(parameters):
            return float((output(moved_args).double() * grad_output.double()).where(finite, 0.0).sum())

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
        callee = exc.stub_owner or hints.stub_owner(exc.message)
        if not exc.stub or callee in (None, name):
            raise
        detail = f" ({exc.message})" if exc.message else ""
        raise CheckFailed(f"{name} calls {callee}, which is not implemented yet{detail}", hints.NOT_IMPLEMENTED) from None


# ---- stock pieces: a part graded on its own wiring when a piece's names differ ------------


@dataclass(frozen=True)
class StockPiece:
    """A grader-owned stand-in for every sub-module of the reference of class ``name``.

    ``build`` takes the reference's sub-module and returns a stock twin with the same
    parameter names, built in the student's process (from source the suite sends there
    with ``student.define``); it gets the reference's weights with the rest of the part."""

    name: str  # the reference sub-module's class, e.g. "FeedForward"
    build: Callable[[nn.Module], Remote]


_STOCK_NOTES: WeakKeyDictionary = WeakKeyDictionary()  # module -> the notes on its stock pieces


def new_graded_like(student: Student, reference: nn.Module, class_name: str, *args: Any,
                    stock: Sequence[StockPiece] = (), **kwargs: Any) -> Remote:
    """``student.new_like``, but a piece of the part whose parameter names or shapes are
    not the contract's is first replaced by its :class:`StockPiece` (see :func:`with_stock`)."""
    parameters = dict(reference.named_parameters())
    built = student.build(class_name, args, kwargs, device=_device_of(reference), parameters=parameters)
    replaced = _put_stock(built.module, built.inspection, reference, stock)
    if parameters and (replaced or not built.loaded):
        built.module.load_parameters(parameters)  # strict; this also materializes lazy modules
    return built.module


def new_with_stock(student: Student, reference: nn.Module, class_name: str, *args: Any,
                   stock: Sequence[StockPiece] = (), **kwargs: Any) -> Remote:
    """``with_stock(student.new(class_name, *args, **kwargs), reference, stock)``: built, moved
    and inspected in one request, its own parameters kept (a check of its names)."""
    built = student.build(class_name, args, kwargs, device=_device_of(reference))
    _put_stock(built.module, built.inspection, reference, stock)
    return built.module


def with_stock(module: Remote, reference: nn.Module, stock: Sequence[StockPiece]) -> Remote:
    """Move ``module`` to the reference's device, and put a stock piece in place of each of
    its sub-modules that stands where the reference has a piece ``stock`` covers, but with
    other parameter names or shapes. A sub-module the student named otherwise (no
    parameters under the contract's name) is the part's own mistake: left as it is."""
    module.method("to", _device_of(reference))
    _put_stock(module, module.inspect(), reference, stock)
    return module


def _device_of(reference: nn.Module) -> torch.device:
    first = next(reference.parameters(), None)
    return first.device if first is not None else torch.device("cpu")


def _put_stock(module: Remote, found: dict, reference: nn.Module, stock: Sequence[StockPiece]) -> bool:
    """:func:`with_stock`'s replacements in ``module``, already on the reference's device,
    which ``found`` inspected; whether it replaced any."""
    if not found["module"]:
        return False
    device = _device_of(reference)
    by_class = {piece.name: piece for piece in stock}
    got = {**found["parameters"], **{name: None for name in found["uninitialized"]}}  # None: shape not known yet
    shapes = {name: list(p.shape) for name, p in reference.named_parameters()}
    replaced: dict[str, list[tuple[str, list[str]]]] = {}
    for path, sub in reference.named_modules():
        piece = by_class.get(type(sub).__name__)
        if piece is None or not path or any(path.startswith(done + ".") for done, _ in _flat(replaced)):
            continue
        want = {name[len(path) + 1:]: shape for name, shape in shapes.items() if name.startswith(path + ".")}
        have = {name[len(path) + 1:]: shape for name, shape in got.items() if name.startswith(path + ".")}
        if not have or (have.keys() == want.keys() and all(have[n] in (None, want[n]) for n in want)):
            continue
        owner = module
        *parents, attr = path.split(".")
        for parent in parents:
            owner = owner.attr(parent)
        owner.method("__setattr__", attr, piece.build(sub).method("to", device))
        replaced.setdefault(piece.name, []).append((path, sorted({n.rpartition(".")[0] or n for n in have})))
    notes = [STOCK_REPLACED.format(attrs=_some([path for path, _ in paths]), names=", ".join(paths[0][1]),
                                   piece=name, part=type(reference).__name__) for name, paths in replaced.items()]
    if notes:
        _STOCK_NOTES[module] = "; ".join(notes)
    return bool(replaced)


@contextmanager
def noting_stock(module: Remote) -> Iterator[None]:
    """A check that fails on ``module`` says which of its pieces are stock, and why."""
    try:
        yield
    except CheckFailed as failure:
        note = _STOCK_NOTES.get(module)
        if note is None:
            raise
        raise CheckFailed(failure.message, "; ".join(filter(None, [failure.hint, note])), failure.flags,
                          mistake=failure.mistake) from None


def materialized(module: Remote, forward: Callable[[], Any]) -> Remote:
    """``module``, after ``forward()`` ran once if it is lazy (``nn.LazyLinear``): only then
    can its parameters' shapes be inspected."""
    if module.inspect()["uninitialized"]:
        with torch.no_grad():
            forward()
    return module


def _flat(replaced: dict[str, list[tuple[str, list[str]]]]) -> list[tuple[str, list[str]]]:
    return [entry for entries in replaced.values() for entry in entries]


def _some(paths: list[str]) -> str:
    return ", ".join(paths) if len(paths) <= 2 else f"{paths[0]} (and {len(paths) - 1} more like it)"


def randomize_norms(module: nn.Module, seed: int) -> nn.Module:
    """``module`` with random weights and biases in every LayerNorm (seeded), so that a
    reference's norms differ and each wiring mistake changes its output visibly."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for norm in (m for m in module.modules() if isinstance(m, nn.LayerNorm)):
            norm.weight.copy_(1 + 0.3 * torch.randn(norm.weight.shape, generator=generator))
            norm.bias.copy_(0.3 * torch.randn(norm.bias.shape, generator=generator))
    return module
