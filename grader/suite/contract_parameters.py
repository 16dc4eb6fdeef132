"""Parameters beside the contract's: whose names a stock piece stands in for, and a bias the
contract's layer does not have.

A composite part whose piece has other parameter names than the contract's (an inline
``nn.Sequential`` where the contract's ``FeedForward`` belongs) is graded with a stock piece in
its place (:func:`grader.suite.with_stock`), and the names cost points where the piece's own
class is graded. That holds only when there is such a class to grade: when the student never
wrote it (the stub still raises, or there is none), nothing pays for the names, and the part
that holds the stand-in does (:func:`expect_replaced_pieces_written`).

A layer built with a bias the contract leaves out (``nn.Linear(d_model, vocab_size)`` for the
contract's ``bias=False``) keeps its own random bias when the reference's parameters are
loaded, so every value it gives would differ: one mistake, charged by every value test. It is
loaded as zero instead (:func:`without_unexpected_biases`), so the values show the wiring, and
the names check charges the bias, once, by its name.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from torch import nn

from grader.sandbox.errors import StudentError
from grader.suite.checks import CheckFailed, names_mismatch
from grader.suite.student_protocol import Remote, Student


def expect_replaced_pieces_written(what: str, student: Student, module: Remote, reference: nn.Module,
                                   classes: Mapping[str, tuple[Any, ...]], *, names_hint: str) -> None:
    """Each piece of ``module`` (the student's, fresh) that stands where ``reference`` has a
    sub-module of one of ``classes`` (class name -> the arguments that build the student's own
    class of it), with other parameter names than the reference's, stands for a class the
    student wrote: ``student.new(name, *args)`` builds. Else the names fail here. A piece with
    no parameters under the contract's name (a misnamed attribute) is the names check's."""
    found = module.inspect()
    if not found["module"]:
        return
    got = [*found["parameters"], *found["uninitialized"]]
    want = [name for name, _ in reference.named_parameters()]
    written: dict[str, bool] = {}
    for path, sub in reference.named_modules():
        name = type(sub).__name__
        if not path or name not in classes:
            continue
        have = {n for n in got if n.startswith(path + ".")}
        if not have or have == {n for n in want if n.startswith(path + ".")}:
            continue
        if name not in written:
            try:
                student.new(name, *classes[name])
                written[name] = True
            except StudentError:
                written[name] = False
        if not written[name]:
            names = names_mismatch(want, got)
            raise CheckFailed(f"{what} parameters: {names}",
                              f"{names}: {path} stands for your {name}, which is not written yet, so nothing else "
                              f"grades its names; {names_hint}")


def without_unexpected_biases(module: Remote, reference: nn.Module) -> Remote:
    """``module`` (the student's, holding ``reference``'s parameters) with every bias the
    reference's layer lacks (``lm_head.bias`` beside the contract's ``lm_head.weight``) set to
    zero: what the layer then computes is the contract's function of the other parameters."""
    parameters = dict(reference.named_parameters())
    found = module.inspect()
    extra = {name: shape for name, shape in found.get("parameters", {}).items() if name not in parameters
             and name.endswith(".bias") and name.removesuffix(".bias") + ".weight" in parameters}
    if extra:
        device = next(iter(parameters.values())).device
        zeros = {name: torch.zeros(shape, device=device) for name, shape in extra.items()
                 if len(shape) == 1 and shape[0] <= 2**16}  # shapes the student's process reports: bounded
        module.load_parameters({**parameters, **zeros})
    return module
