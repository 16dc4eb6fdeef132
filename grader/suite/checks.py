"""Checks for hidden suites: compare the student's values with the reference, name mistakes.

A failing check raises :class:`CheckFailed` with a message written for the student (shape,
dtype, got/expected, the largest error) and, when the student's value matches what a known
mistake would produce, a ``hint`` that names it. Messages never quote test source.
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Any

import torch

from grader.core import hints
from grader.core.hints import contract_mistake
from grader.core.report import Flag
from grader.sandbox.errors import StudentException
from grader.suite.student_protocol import Remote

Mistakes = Mapping[str, "torch.Tensor | Callable[[], torch.Tensor]"]


class CheckFailed(AssertionError):
    """``flags``: what a source check found behind the failure, for the report's flags.
    ``mistake``: the evidence for the rubric, the contract's words for the mistake whose
    value the student's matched (a :class:`~grader.core.hints.Mistake`'s ``contract``). Only
    a check that compared the student's value with the mistake's passes one: a hint that is a
    guess (from an exception, a statistic) carries none, and the tests decide that part's score."""

    def __init__(self, message: str, hint: str | None = None, flags: Sequence[Flag] = (), *,
                 mistake: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.flags = tuple(flags)
        self.mistake = mistake

    def reworded(self, message: str) -> CheckFailed:
        """The same failure told with ``message``: its hint, flags and evidence kept, so a check
        that says more about where it failed still prices the mistake its value matched."""
        return CheckFailed(message, self.hint, self.flags, mistake=self.mistake)


def expect_tensor(
    what: str,
    got: Any,
    *,
    shape: tuple[int, ...] | torch.Size | None = None,
    dtype: torch.dtype | None = None,
    device: torch.device | str | None = None,
    floating: bool = False,
    hint: str | None = None,
) -> torch.Tensor:
    """``got`` is a tensor with this shape, dtype and device type; returns it. ``floating``: of
    any floating-point dtype (what a module's output is before the grader computes with it;
    its exact dtype is the value tests' to grade)."""
    if not isinstance(got, torch.Tensor):
        raise CheckFailed(f"{what}: expected a tensor, got {_kind(got)}", hint or _not_a_tensor_hint(got))
    if shape is not None and tuple(got.shape) != tuple(shape):
        raise CheckFailed(f"{what}: wrong shape: got {tuple(got.shape)}, expected {tuple(shape)}", hint)
    if dtype is not None and got.dtype != dtype:
        raise CheckFailed(f"{what}: wrong dtype: got {_name(got.dtype)}, expected {_name(dtype)}", hint)
    if floating and not got.is_floating_point():
        raise CheckFailed(f"{what}: wrong dtype: got {_name(got.dtype)}, expected a floating-point tensor", hint)
    if device is not None and got.device.type != torch.device(device).type:
        raise CheckFailed(f"{what}: on the wrong device: got {got.device}, expected {torch.device(device)} "
                          "(create tensors on the input's device, never a fixed one)", hint)
    return got


# How torch says that a tensor on one device met one on another.
_DEVICE_MISMATCH = re.compile(r"Expected all tensors to be on the same device|is not on the expected device")


def expect_follows_device(
    what: str,
    output_on: Callable[[torch.device], Any],
    device: torch.device,
    *,
    shape: tuple[int, ...] | torch.Size | Sequence[tuple[int, ...]],
    dtype: torch.dtype | None = None,
) -> None:
    """The code computes on its input's device: ``output_on(where)`` runs it with its inputs
    (and module) on ``where`` and returns its output, which must be a tensor of ``shape`` on
    ``where`` (or a tuple of them, ``shape`` then a tuple of shapes). On a grader without a
    GPU, ``where`` is the ``meta`` device, which holds no data, so a tensor the code creates
    on a fixed device (the CPU) shows there as it would on a GPU. Code whose steps need
    values (``.item()``, a Python branch on a tensor) cannot run on ``meta``; it is run on
    ``device`` instead, which is all that can be seen then."""
    where = torch.device("meta") if device.type == "cpu" else device
    try:
        got = output_on(where)
    except StudentException as exc:
        if _DEVICE_MISMATCH.search(exc.message):
            raise CheckFailed(f"{what}, its input on the {where.type} device: {exc.type_name}: {exc.message}",
                              hints.FIXED_DEVICE) from None
        if where == device or exc.type_name == "NotImplementedError" and "meta" not in exc.message.lower():
            raise
        got, where = output_on(device), device
    several = bool(shape) and not isinstance(shape[0], int)
    if where != device and _on_where_of_another_shape(got, where, shape if several else (shape,)):
        got, where = output_on(device), device  # a shape that follows values, which meta holds none of
    if several and not (isinstance(got, tuple) and len(got) == len(shape)):
        raise CheckFailed(f"{what}: expected {len(shape)} tensors, got {describe_value(got)}",
                          _not_a_tensor_hint(got))
    for value, value_shape in zip(got if several else (got,), shape if several else (shape,)):
        hint = hints.FIXED_DEVICE if isinstance(value, torch.Tensor) and value.device.type != where.type else None
        expect_tensor(f"{what}, its input on the {where.type} device", value, device=where, hint=hint)
        expect_tensor(what, value, shape=value_shape, dtype=dtype)


def _on_where_of_another_shape(got: Any, where: torch.device, shapes: Sequence[tuple[int, ...]]) -> bool:
    """Whether ``got`` is all on ``where``, as tensors, and some is not of its shape."""
    values = got if isinstance(got, tuple) else (got,)
    return (len(values) == len(shapes) and all(isinstance(value, torch.Tensor) and value.device == where
                                               for value in values)
            and any(tuple(value.shape) != tuple(value_shape) for value, value_shape in zip(values, shapes)))


def expect_token_ids(
    what: str,
    got: Any,
    vocab_size: int,
    *,
    shape: tuple[int, ...] | torch.Size | None = None,
    device: torch.device | str | None = None,
    hint: str | None = None,
) -> torch.Tensor:
    """``got`` is a LongTensor (of this shape and device) of token ids in ``0..vocab_size-1``;
    returns it. Check ids with this before counting, indexing or one-hot encoding by them:
    an id out of range is the student's mistake, named here, and never sizes a tensor the
    grader allocates (a ``bincount`` of one id of 10**8 holds 10**8 counts)."""
    expect_tensor(what, got, shape=shape, dtype=torch.long, device=device, hint=hint)
    outside = (got < 0) | (got >= vocab_size)
    if bool(outside.any()):
        index = _first(outside)
        raise CheckFailed(f"{what}: token id {int(got[index])} (at index {list(index)}) is outside the vocabulary "
                          f"(0..{vocab_size - 1})", hint or f"token ids index the vocabulary: each is in 0..{vocab_size - 1}")
    return got


def expect_named_tensors(
    what: str,
    got: Any,
    like: Mapping[str, torch.Tensor],
    *,
    others_allowed: bool = False,
    hint: str | None = None,
) -> dict[str, torch.Tensor]:
    """``got`` (a state dict from the student's process) holds, under each of ``like``'s
    names, a tensor of that shape, floating where ``like``'s is; and no other name unless
    ``others_allowed`` (buffers beside the parameters). Returns those tensors detached, in
    ``like``'s dtypes and devices: safe to load into a module or to compare with ``like``."""
    if not (isinstance(got, dict) and all(isinstance(name, str) for name in got)):
        raise CheckFailed(f"{what}: expected tensors by name (a dict), got {_kind(got)}", hint)
    if any(name not in got for name in like) or not (others_allowed or got.keys() <= like.keys()):
        names = names_mismatch(like, got if not others_allowed else [name for name in got if name in like])
        raise CheckFailed(f"{what}: the names are not the expected ones: {names}", hint)
    wrong = [f"{name}: got {describe_value(got[name])}, expected {tuple(want.shape)} ({_name(want.dtype)})"
             for name, want in like.items()
             if not (isinstance(got[name], torch.Tensor) and tuple(got[name].shape) == tuple(want.shape)
                     and got[name].is_floating_point() == want.is_floating_point())]
    if wrong:
        raise CheckFailed(f"{what}: {_bounded(wrong, 3, separator='; ')}", hint)
    return {name: got[name].detach().to(want.device, want.dtype) for name, want in like.items()}


def expect_objects(what: str, got: Any, count: int) -> tuple[Remote, ...]:
    """``got``, a tuple of ``count`` objects of the student's process (a model and its
    optimizer, say), as a request that makes them returns them; else the test fails."""
    objects = got if isinstance(got, tuple) else (got,)
    if len(objects) != count or not all(isinstance(obj, Remote) for obj in objects):
        raise CheckFailed(f"{what}: expected {count} object(s) of your process, got {_kind(got)}",
                          "return the objects themselves (the modules), not numbers or tensors made from them")
    return objects


def describe_value(value: Any) -> str:
    """What came back, in a few words: "(400000, 1, 1, 1) (float32)", "None (did you forget to return?)"."""
    if isinstance(value, torch.Tensor):
        return f"{tuple(value.shape)} ({_name(value.dtype)})"
    return _kind(value)


def expect_close(
    what: str,
    got: Any,
    want: torch.Tensor,
    *,
    atol: float,
    rtol: float = 0.0,
    mistakes: Mistakes | None = None,
) -> None:
    """``got`` equals ``want`` within ``atol + rtol * |want|``; else name the nearest mistake."""
    mistakes = mistakes or {}
    if isinstance(got, torch.Tensor) and (tuple(got.shape) != tuple(want.shape) or got.dtype != want.dtype):
        hint = _representation_hint(got, want, mistakes, atol, rtol)
        try:
            expect_tensor(what, got, shape=want.shape, dtype=want.dtype, hint=hint)
        except CheckFailed as failure:  # a mistake named alone is its value, matched: evidence
            failure.mistake = contract_mistake(hint)
            raise
    expect_tensor(what, got, shape=want.shape, dtype=want.dtype, device=want.device)
    if _close(got, want, atol, rtol):
        return
    named = _matching_mistake(got, mistakes, atol, rtol)
    raise CheckFailed(f"{what}: {describe_difference(got, want)} (tolerance atol={atol:g}, rtol={rtol:g})",
                      named, mistake=contract_mistake(named))


def expect_equal(what: str, got: Any, want: torch.Tensor, *, mistakes: Mistakes | None = None) -> None:
    """Exact equality, for integer and boolean results."""
    expect_close(what, got, want, atol=0.0, rtol=0.0, mistakes=mistakes)


def expect_same_gradients(module: Any, reference: torch.nn.Module, x: torch.Tensor, grad_output: torch.Tensor, *,
                          atol: float = 1e-4, rtol: float = 1e-3,
                          mistakes: Callable[[dict[str, torch.Tensor]], Mistakes] | None = None) -> None:
    """Backpropagating ``grad_output`` through the student's module (holding the reference's
    parameters) gives the reference's gradients for the input ``x`` and for every parameter.
    The default tolerance covers float32 backward passes through projections and a softmax
    (rounding ~1e-6). ``mistakes(tensors)``: the mistakes' outputs computed from ``tensors``
    (``"x"`` and the parameters by name), whose gradients name a mistake (:func:`gradient_mistakes`)."""
    x = x.detach().requires_grad_(True)
    reference.zero_grad(set_to_none=True)
    reference(x).backward(grad_output)
    got = module.backward(x, grad_output=grad_output)
    named = gradient_mistakes(mistakes or (lambda tensors: {}), {"x": x, **dict(reference.named_parameters())},
                              grad_output)
    expect_close("gradient of the loss w.r.t. x", got.input_grads[0] if got.input_grads else None, x.grad,
                 atol=atol, rtol=rtol, mistakes=named["x"])
    for name, param in reference.named_parameters():
        expect_close(f"gradient of {name}", got.param_grads.get(name), param.grad, atol=atol, rtol=rtol,
                     mistakes=named[name])


def gradient_mistakes(mistakes: Callable[[dict[str, torch.Tensor]], Mistakes], at: Mapping[str, torch.Tensor],
                      grad_output: torch.Tensor) -> dict[str, dict[str, Callable[[], torch.Tensor | None]]]:
    """What each mistake's gradients are, for gradient checks: by name of ``at`` (the inputs and
    parameters a test differentiates by), the mistakes whose values are that tensor's gradient of
    ``<output, grad_output>``. ``mistakes(tensors)`` gives the mistakes' outputs, as
    :func:`expect_close` takes them, computed from ``tensors``: copies of ``at`` that record
    gradients. Each mistake is backpropagated once, when a check first asks for it; one whose
    output is not differentiable from ``tensors`` (the student's own pieces) matches nothing."""
    leaves = {name: tensor.detach().clone().requires_grad_(True) for name, tensor in at.items()}
    table = mistakes(leaves)

    @functools.cache
    def gradients(hint: str) -> dict[str, torch.Tensor | None]:
        candidate = table[hint]
        with torch.enable_grad():
            output = candidate() if callable(candidate) else candidate
            if not (isinstance(output, torch.Tensor) and output.requires_grad
                    and tuple(output.shape) == tuple(grad_output.shape)):
                return {}
            found = torch.autograd.grad(output, list(leaves.values()), grad_output, allow_unused=True)
        return dict(zip(leaves, found))

    return {name: {hint: (lambda hint=hint, name=name: gradients(hint).get(name)) for hint in table}
            for name in leaves}


def expect_raises(exc_type: type[BaseException], what: str, call: Callable[[], Any]) -> None:
    """``call()`` makes the student's code raise ``exc_type`` (by name, across the boundary)."""
    name = exc_type.__name__
    try:
        call()
    except StudentException as exc:
        if exc.type_name == name:
            return
        if exc.stub:
            raise
        hint = "raise ValueError with a message; a bare assert is not an argument check" \
            if exc.type_name == "AssertionError" and name == "ValueError" else None
        raise CheckFailed(f"{what}: expected {name}, but your code raised {exc.type_name}: {exc.message}", hint) from None
    raise CheckFailed(f"{what}: expected {name}, but nothing was raised")


def expect_contract_parameters(
    what: str,
    module: Any,
    reference: torch.nn.Module,
    *,
    names_hint: str,
    shape_hint: str = "a parameter has the wrong shape: check the layer sizes against the contract",
    ignore: Collection[str] = (),
    unexpected_hints: Mapping[str, str] | None = None,
) -> None:
    """The student's module (a remote object) has exactly the reference's parameter names and
    shapes, which ``load_state_dict(strict=True)`` needs. ``names_hint`` says which submodules
    the contract names; ``unexpected_hints`` name what a specific extra parameter means.

    The names come from ``inspect()``, the student process's word: enough to fail a test and
    name the mistake, not to pass one. Follow it with :func:`expect_computes_with`."""
    inspection = module.inspect()
    got = {name: shape for name, shape in inspection["parameters"].items() if name not in ignore}
    want = {name: list(p.shape) for name, p in reference.named_parameters()}
    if got == want:
        return
    if not inspection["module"]:  # its parameters, if any, are out of torch's reach: say why, not which
        raise CheckFailed(f"{what} is not a torch.nn.Module, so it has none of the contract's parameters",
                          "subclass nn.Module and call super().__init__() first: its layers are then its parameters")
    missing, extra = want.keys() - got.keys(), got.keys() - want.keys()
    wrong = [f"{name}: got {got[name]}, expected {want[name]}" for name in sorted(want.keys() & got.keys())
             if got[name] != want[name]]
    names = names_mismatch(want, got)
    known = [hint for name, hint in (unexpected_hints or {}).items() if name in extra]
    hint = known[0] if known else f"{names}: {names_hint}" if missing or extra else shape_hint
    shapes = f"wrong shape: {_bounded(wrong, 3)}" if wrong else ""
    raise CheckFailed(f"{what} parameters: {'; '.join(filter(None, [names, shapes]))}", hint)


def names_mismatch(want: Collection[str], got: Collection[str]) -> str:
    """Where the student's parameter names leave the contract's, said once per kind of
    difference and bounded whatever the model's size: "ffn: the contract names linear1,
    linear2; you have net.0, net.2". A name is placed at its deepest module that both sides
    have (``encoder_layers.0.ffn``), and named from there down to its module (``net.0``);
    places with the same difference (every layer's ffn) are listed together. In time linear
    in the names' length: the student's process chooses them (a megabyte of deep names)."""
    missing, extra = set(want) - set(got), set(got) - set(want)
    missing_at, extra_at = _placed(missing, _module_tree(got)), _placed(extra, _module_tree(want))
    places: dict[tuple[tuple[str, ...], tuple[str, ...]], list[str]] = {}
    for place in sorted(missing_at.keys() | extra_at.keys()):
        difference = (_below(place, missing_at.get(place, [])), _below(place, extra_at.get(place, [])))
        places.setdefault(difference, []).append(place)
    lines = [_difference_line(where, contract, yours) for (contract, yours), where in places.items()]
    return _bounded(lines, 3, separator="; ")


def _module_tree(names: Collection[str]) -> dict:
    """The module paths that ``names`` pass through, as a tree of their components."""
    tree: dict = {}
    for name in names:
        node = tree
        for module in name.split(".")[:-1]:
            node = node.setdefault(module, {})
    return tree


def _placed(names: Collection[str], other: dict) -> dict[str, list[str]]:
    """``names`` by their place: the deepest module path above each that the names of the tree
    ``other`` also pass through ("" the top)."""
    placed: dict[str, list[str]] = {}
    for name in names:
        modules, node, depth = name.split(".")[:-1], other, 0
        while depth < len(modules) and modules[depth] in node:
            node, depth = node[modules[depth]], depth + 1
        placed.setdefault(".".join(modules[:depth]), []).append(name)
    return placed


def _below(place: str, names: Collection[str]) -> tuple[str, ...]:
    """``names``, placed at ``place``, each as the module under it that holds it (or the
    parameter, if ``place`` holds it): "net.0" for "ffn.net.0.weight" at "ffn"."""
    below = {name[len(place) + 1:] if place else name for name in names}
    return tuple(sorted({_first_module(name.rpartition(".")[0]) or name for name in below}))


def _first_module(path: str) -> str:
    """The sub-module a path starts with, with the indices that follow it: "sa" for
    "sa.heads.0.key" (the whole sub-tree differs from there), "net.0" for "net.0"."""
    parts = path.split(".")
    kept = parts[:1] + list(itertools.takewhile(str.isdigit, parts[1:]))
    return ".".join(kept) if path else ""


def _difference_line(places: list[str], contract: tuple[str, ...], yours: tuple[str, ...]) -> str:
    where = f"{_bounded([place or '(top level)' for place in places], 2)}: " if places != [""] else ""
    if not yours:
        return f"{where}missing {_bounded(contract, 6)}"
    if not contract:
        return f"{where}unexpected {_bounded(yours, 6)}"
    return f"{where}the contract names {_bounded(contract, 6)}; you have {_bounded(yours, 6)}"


def _bounded(items: Sequence[str], most: int, separator: str = ", ") -> str:
    """The first ``most`` of ``items``, then how many more."""
    shown = separator.join(items[:most])
    return f"{shown}{separator}and {len(items) - most} more" if len(items) > most else shown


def buffer_of(module: Remote, name: str) -> tuple[Any, Callable[[torch.Tensor], None]]:
    """``module``'s buffer ``name`` as its process sends it (None where it has none; check it
    before computing with it), and how to load another value into it: through the state dict
    where the buffer is in it (copied in place, as a checkpoint is loaded), else registered
    again with ``persistent=False``, which a contract's "registered buffer" allows and no state
    dict holds. nn.Module refuses that for a plain attribute of the name, whatever the module
    says its buffers are (``named_buffers`` is its process's word): then there is none."""
    state = module.method("state_dict")
    if isinstance(state, dict) and name in state:
        return state[name], lambda value: module.method("load_state_dict", {**state, name: value})
    try:
        value = module.attr(name)
        if isinstance(value, torch.Tensor):
            module.method("register_buffer", name, value, False)
            return value, lambda value: module.method("register_buffer", name, value, False)
    except StudentException:
        pass
    return None, lambda value: None


def expect_computes_with(what: str, module: Any, reference: torch.nn.Module, forward: Callable[[], Any], *,
                         pieces: Collection[str] = (), unused: Mapping[str, str] | None = None) -> None:
    """The student's module computes with the parameters it reports (names check, above):
    holding the reference's parameters by those names, then others, ``forward()`` changes;
    and so it does when only the parameters of one of its own submodules change (a ``W_q``
    the code never calls, its queries computed with ``W_v``), for each submodule not under
    ``pieces`` (paths of sub-parts graded as parts of their own, ``"heads"``, ``"blocks"``:
    they are checked there). ``unused``: what a submodule that changes nothing means, by its
    path, when it is a mistake the value tests name (``{"ln_f": NO_FINAL_NORM}``): then this
    check names it too, with its evidence. Whether the output is right is the value tests' to
    grade: a wrong forward costs points there, once. A forward that raises or returns no tensor
    is graded there too, and this check then rests on the names alone."""
    parameters = {name: p.detach() for name, p in reference.named_parameters()}
    generator = torch.Generator().manual_seed(0)
    others = {name: p + torch.randn(p.shape, generator=generator, dtype=p.dtype).to(p.device)
              for name, p in parameters.items()}
    try:
        with module.holding(parameters):
            before = forward()
        with module.holding(others):
            after = forward()
    except StudentException:
        return
    if not (isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor) and before.shape == after.shape):
        return
    if torch.equal(before.detach().cpu(), after.detach().cpu()):
        raise CheckFailed(f"{what}: the output stays the same when the module is given other values for the "
                          "parameters it reports", "the module must compute with the parameters it holds "
                          "(registered submodules, used in forward)")
    # Per submodule, not per parameter: a key projection's bias shifts every score of a row
    # alike, which the softmax undoes, so it changes nothing in a correct attention.
    own: dict[str, list[str]] = {}
    for name in parameters:
        path = name.rpartition(".")[0]
        if not any(path == piece or path.startswith(piece + ".") for piece in pieces):
            own.setdefault(path, []).append(name)
    for path, names in own.items():
        try:
            with module.holding({**parameters, **{name: others[name] for name in names}}):
                changed = forward()
        except StudentException:
            return
        if isinstance(changed, torch.Tensor) and changed.shape == before.shape \
                and torch.equal(before.detach().cpu(), changed.detach().cpu()):
            shown = path or ", ".join(names)
            named = (unused or {}).get(path)
            raise CheckFailed(f"{what}: the output stays the same when only {shown}'s parameters change",
                              named or hints.UNUSED_PARAMETERS.format(module=shown),
                              mistake=hints.contract_mistake(named))


def expect_derivative(
    what: str,
    claimed: float,
    loss_at: Callable[[float], float],
    *,
    step: float,
    rtol: float = 0.05,
    atol: float = 1e-3,
    hint: str | None = None,
) -> None:
    """``claimed`` is the derivative of ``loss_at`` at 0, as a central difference with
    ``step`` measures it. For a gradient the student's code reports (by its word), pass its
    norm, and a ``loss_at(t)`` that moves the point by ``t`` along it: a reported gradient
    that is not the derivative of the loss the same code computes fails. The tolerance
    allows for float32 rounding and curvature over ``step``."""
    measured = (loss_at(step) - loss_at(-step)) / (2 * step)
    if not abs(measured - claimed) <= atol + rtol * abs(claimed):
        raise CheckFailed(f"{what}: the gradient your code reports has norm {claimed:.6g}, but the loss it computes "
                          f"changes at a rate of {measured:.6g} along it", hint)


def expect_causal(
    what: str,
    output_with_change_at: Callable[[int | None], Any],
    length: int,
    *,
    atol: float,
    rtol: float = 0.0,
    hint: str,
    mistakes: Mistakes | None = None,
    shown: int = 3,
    shape: tuple[int, ...] | torch.Size | None = None,
) -> None:
    """Each position of the output depends on no later position of the input.
    ``output_with_change_at(j)`` is the output (positions along dim 1) for the same input
    changed at position ``j`` only; ``None``, unchanged. The message names the leaking pairs,
    "position 0 sees position 2"; so does the hint, before ``hint`` (how to mask), unless the
    unchanged output matches one of ``mistakes`` (as in :func:`expect_close`): then the hint
    is that mistake's, the one the value tests give, so one mistake is one hint. A call that
    returns no tensor of ``shape`` (the contract's; without it, one with ``length`` positions
    along dimension 1, the same for every input) fails: it shows no causality, and an output
    of another shape is never compared (the comparisons cost what the contract's output would)."""
    base = output_with_change_at(None)
    if shape is not None:
        expect_tensor(what, base, shape=shape)
    elif not (isinstance(base, torch.Tensor) and base.dim() >= 2 and base.shape[1] == length):
        raise CheckFailed(f"{what}: expected a tensor with the {length} positions along dimension 1, got "
                          f"{describe_value(base)}", _not_a_tensor_hint(base))
    leaks = []
    for later in range(1, length):
        changed = expect_tensor(what, output_with_change_at(later), shape=base.shape)
        leaks += [(earlier, later) for earlier in range(later)
                  if not is_close(changed[:, earlier], base[:, earlier], atol=atol)]
    if not leaks:
        return
    seen = ", ".join(f"position {earlier} sees position {later}" for earlier, later in sorted(leaks)[:shown])
    more = f" (and {len(leaks) - shown} more)" if len(leaks) > shown else ""
    named = _matching_mistake(base, mistakes or {}, atol, rtol)
    raise CheckFailed(f"{what}: the output at a position changes when only a later position of the input "
                      f"changes: {seen}{more}", named or f"future positions are visible: {seen}{more}; {hint}",
                      mistake=contract_mistake(named))


def describe_difference(got: torch.Tensor, want: torch.Tensor) -> str:
    got64, want64 = got.detach().double().cpu(), want.detach().double().cpu()
    bad_got, bad_want = ~torch.isfinite(got64), ~torch.isfinite(want64)
    if (bad_got & ~bad_want).any():
        index = _first(bad_got & ~bad_want)
        return (f"your values contain {_value(got64[index])} where the reference is finite "
                f"(first at index {index}: expected {_value(want64[index])})")
    error = (got64 - want64).abs().nan_to_num(nan=0.0, posinf=0.0)
    error = torch.where(bad_want & (got64 != want64), torch.full_like(error, float("inf")), error)
    index = tuple(int(i) for i in torch.unravel_index(error.argmax(), error.shape)) if error.dim() else ()
    return (f"values differ from the reference: max abs error {_value(error[index])} at index {list(index)} "
            f"(got {_value(got64[index])}, expected {_value(want64[index])})")


def is_close(got: Any, want: Any, *, atol: float, rtol: float = 0.0) -> bool:
    """Both are tensors of one shape whose values agree as :func:`expect_close` demands
    (dtype and device aside): for accepting either of two answers, or choosing a hint."""
    return (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)
            and tuple(got.shape) == tuple(want.shape) and _close(got, want, atol, rtol))


def _matching_mistake(got: torch.Tensor, mistakes: Mistakes, atol: float, rtol: float) -> str | None:
    """The first of ``mistakes`` (its key, a :class:`~grader.core.hints.Mistake` where the
    contract names it) whose value ``got`` matches."""
    for hint, candidate in mistakes.items():
        if _matches_mistake(got, candidate() if callable(candidate) else candidate, atol, rtol):
            return hint
    return None


def _matches_mistake(got: torch.Tensor, candidate: Any, atol: float, rtol: float) -> bool:
    """``got`` is ``candidate``, a mistake's value, within tolerance; where the mistake gives nan
    (a row whose every score it masks, filled with -inf), any value: the same mistake with
    masked scores filled with -1e9, or masked by torch.where, gives a finite row there. At
    least half of the candidate must be finite, so a mistake that is nan throughout names nothing."""
    if is_close(got, candidate, atol=atol, rtol=rtol):
        return True
    if not (isinstance(got, torch.Tensor) and isinstance(candidate, torch.Tensor)
            and tuple(got.shape) == tuple(candidate.shape) and candidate.is_floating_point()):
        return False
    finite = ~torch.isnan(candidate.detach().cpu())
    return (bool(finite.any()) and 2 * int(finite.sum()) >= finite.numel()
            and _close(got.detach().cpu()[finite], candidate.detach().cpu()[finite], atol, rtol))


def _representation_hint(got: torch.Tensor, want: torch.Tensor, mistakes: Mistakes, atol: float,
                         rtol: float) -> str | None:
    """A value in another representation than ``want``'s (dtype, extra or missing singleton
    dimensions, an additive float mask for a bool one) is read in ``want``'s, so the mistake
    behind it is named with the representation at once, not after the student fixes it. A
    mistake that produces ``got``'s own shape (transposed scores) is named alone."""
    if tuple(got.shape) != tuple(want.shape) and (mistake := _matching_mistake(got, mistakes, atol, rtol)):
        return mistake
    normalized, representation = _as_expected(got, want)
    if normalized is None:
        return None
    if _close(normalized, want, atol, rtol):
        return f"the values are right, but in the wrong representation: {representation}"
    mistake = _matching_mistake(normalized, mistakes, atol, rtol)
    return f"{representation} and {mistake}" if mistake else None


def _as_expected(got: torch.Tensor, want: torch.Tensor) -> tuple[torch.Tensor | None, str]:
    """``got`` in ``want``'s shape and value convention, and what differed, in words."""
    differences = []
    normalized = got.detach()
    if got.dtype != want.dtype:
        differences.append(f"wrong dtype ({_name(got.dtype)}, expected {_name(want.dtype)})")
        if want.dtype == torch.bool and got.is_floating_point() and _is_additive_mask(normalized):
            differences[-1] = (f"an additive {_name(got.dtype)} mask (0 = attend, -inf = blocked) where a bool mask "
                               "(True = may attend) is expected")
            normalized = normalized == 0
    if tuple(got.shape) != tuple(want.shape):
        differences.append(f"wrong shape ({tuple(got.shape)}, expected {tuple(want.shape)})")
        while normalized.dim() > want.dim() and normalized.size(0) == 1:
            normalized = normalized.squeeze(0)
        try:
            normalized = torch.broadcast_to(normalized, want.shape)
        except RuntimeError:
            return None, ""
    return normalized, " and ".join(differences)


def _is_additive_mask(x: torch.Tensor) -> bool:
    """Zeros where attending and very negative values (-inf, -1e9) where blocked."""
    return bool(((x == 0) | (x <= -1e4)).all() and (x <= -1e4).any())


def _close(got: torch.Tensor, want: torch.Tensor, atol: float, rtol: float) -> bool:
    got64, want64 = got.detach().double().cpu(), want.detach().double().cpu()
    return bool(torch.allclose(got64, want64, atol=atol, rtol=rtol, equal_nan=True))


def _first(mask: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(i) for i in mask.nonzero()[0])


def _value(x: torch.Tensor) -> str:
    return f"{float(x):.6g}"


def _name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _not_a_tensor_hint(got: Any) -> str | None:
    """What a value that is not the tensor the contract returns says about the code."""
    if got is None:
        return hints.RETURNS_NONE
    if isinstance(got, (tuple, list)) and any(isinstance(item, torch.Tensor) for item in got):
        return hints.RETURNS_SEVERAL
    return None


def _kind(value: Any) -> str:
    if isinstance(value, tuple):
        return f"a tuple of {len(value)}"
    if value is None:
        return "None (did you forget to return?)"
    return getattr(value, "type_name", type(value).__name__)
