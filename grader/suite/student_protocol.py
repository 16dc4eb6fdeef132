"""What a hidden suite may call on the student's submission, as typed protocols.

:class:`Student` is the ``student`` fixture; :class:`Remote` is an object that lives in the
student's process (what ``student.new`` returns). Both are served across the sandbox's
boundary by :mod:`grader.sandbox.session`; a suite sees only these members.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

import torch

from grader.core.ingest import Program
from grader.sandbox.session import Backward, Built


@runtime_checkable
class Remote(Protocol):
    """An object in the student's process, e.g. the student's ``MultiHeadAttention``.
    Calls cross the boundary: arguments and results are tensors, plain values or other
    remote objects, and every call may raise a :class:`grader.sandbox.errors.StudentError`.
    An object is gone once its process ends (after a timeout or crash). ``isinstance(value,
    Remote)`` tells one from a plain value the student's code returned in its place."""

    @property
    def type_name(self) -> str:
        """The class name, as the student's process reports it."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """``obj(*args, **kwargs)``: for a module, its forward."""

    def method(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """``obj.name(*args, **kwargs)``, e.g. ``model.method("eval")``."""

    def backward(self, *args: Any, grad_output: torch.Tensor, **kwargs: Any) -> Backward:
        """Call the object and backpropagate ``grad_output``; parameter gradients come back by name."""

    def attr(self, name: str) -> Any:
        """``obj.name``: a submodule comes back as another remote object."""

    def inspect(self) -> dict:
        """Whether it is a module (``module``) and, for a module: parameter and buffer names with
        shapes, the names of lazy ones not yet shaped (``uninitialized``: run a forward first, see
        ``materialized``), and the training flag (the student process's word: enough to fail a
        test, not to pass one). What is not a module has every key, empty."""

    def load_parameters(self, parameters: dict[str, torch.Tensor], *, answers: bool = False) -> None:
        """``load_state_dict(strict=True)`` of these parameters; the module keeps its buffers.
        Pass ``answers=True`` when they are what a part asks for (parameters the reference
        trained): the process then ends with the test, as ``define``'s answers do (or with the
        last of the tests next to it marked ``answers`` with the same name: they share it)."""

    def holding(self, parameters: dict[str, torch.Tensor]) -> AbstractContextManager[None]:
        """Within the block, the module holds ``parameters`` from its next call on: one request
        for the load and that call (a load that raises raises there). For a check that gives a
        module one set of parameters after another and calls it with each."""


class Student(Protocol):
    """The submission, as the ``student`` fixture gives it to a test."""

    @property
    def program(self) -> Program:
        """The submission as the grader read it (for checks of its source)."""

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """The student's ``name(*args, **kwargs)``: ``student.call("split_heads", x, 4)``."""

    def new(self, class_name: str, *args: Any, **kwargs: Any) -> Remote:
        """An instance of the student's class: ``student.new("MultiHeadAttention", 16, 4)``."""

    def new_like(self, reference: torch.nn.Module, class_name: str, *args: Any, **kwargs: Any) -> Remote:
        """The student's ``class_name(*args, **kwargs)`` on the reference's device, holding the
        reference's parameters (strict names; the student's own buffers are kept)."""

    def build(self, class_name: str, args: tuple = (), kwargs: dict | None = None, *, device: torch.device,
              parameters: dict[str, torch.Tensor] | None = None) -> Built:
        """``new(class_name, *args, **kwargs)``, then its ``.to(device)`` and ``inspect()``, as
        one request: ``Built(module, inspection, loaded)``. It holds ``parameters`` already
        (``loaded``) where its own have exactly their names and shapes; else loading them is the
        caller's (``module.load_parameters``), after what it decides from the inspection."""

    def define(self, name: str, source: str, *, answers: bool = False) -> Remote:
        """Run grader-provided helper code (not secret, e.g. a stock model) in the student's
        process; returns its module, whose functions and classes build objects there. Pass
        ``answers=True`` when the code computes what a part asks for (a stock piece): the
        process then ends with the test, so no later test's student code can find it."""

    def watching(self, ops: set[str]) -> AbstractContextManager[list[str]]:
        """Within the block, record which of these operators (schema names, ``aten::_softmax``)
        run in the student's calls, however reached; yields the list. An operator is reported
        the moment it runs, so a listed one did run: evidence for a deduction. An empty list is
        the absence of evidence (the code may have switched the recording off; the grader
        flags what suggests so)."""

    def timed_like(self, work: Callable[[], Any]) -> AbstractContextManager[None]:
        """Within the block, a call that the reference cannot time by itself (it takes the
        student's model, or it is a grader helper's) is given ``work``'s time as its yardstick:
        the same job done in the suite's process with the reference (07's training loop on the
        reference's GPT): such a job may take 3000 times as long, past the per-call limit, within
        the submission's time. ``work`` runs at most once, only if such a call runs past its first
        second; wrap only the job's call."""

    def backward(self, name: str, *args: Any, grad_output: torch.Tensor, **kwargs: Any) -> Backward:
        """Call ``name`` and backpropagate ``grad_output`` through it in the student's process."""


