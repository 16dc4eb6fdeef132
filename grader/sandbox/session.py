"""What hidden suites call on the student's submission: the ``student`` fixture's API.

A :class:`StudentSession` turns a suite's request (``student.call("split_heads", x, 4)``,
``mha = student.new("MultiHeadAttention", 16, 4)`` then ``mha(q, k, v)``) into one message
to the student's process, and its reply into a value, a :class:`RemoteObject` or one of the
:mod:`grader.sandbox.errors`. It implements the ``Student`` protocol of :mod:`grader.suite`;
the child that serves it, its deadlines and time budget are :mod:`grader.sandbox.child_process`'s.

Nothing the child sends is taken as it comes: replies the suites rely on are checked for
shape here, and every string is bounded and made valid Unicode before it can reach a report.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import torch

from grader.core.ingest import Program
from grader.core.report import Flag
from grader.core.sanitize import clean
from grader.sandbox import protocol
from grader.sandbox.child_process import ChildProcess
from grader.sandbox.errors import (
    MESSAGE_CHARS,
    TRACEBACK_CHARS,
    TYPE_NAME_CHARS,
    StudentCrashed,
    StudentException,
    StudentNotFound,
    StudentTimeout,
    function_owner,
    reported_type_name,
    with_source_lines,
)
from grader.sandbox.hung_calls import HungCalls
from grader.sandbox.limits import Limits
from grader.sandbox.protocol import Handle, Status, is_shape
from grader.sandbox.reference_timing import Construction, device_of, reference_seconds, seconds_of
from grader.sandbox.zygote import Zygote
from grader.source.parsed import ParsedSource

# A call whose operators may have run without the recording (the report's flag kind).
UNRECORDED_OPERATORS = "unrecorded-operators"
UNRECORDED_PER_CALL = 8
MAX_SESSION_FLAGS = 20


@dataclass(frozen=True)
class Built:
    """What :meth:`StudentSession.build` made: the module, its inspection (``RemoteObject.inspect``)
    and whether it holds the parameters it was sent."""

    module: RemoteObject
    inspection: dict
    loaded: bool


@dataclass(frozen=True)
class Backward:
    output: Any
    input_grads: tuple
    param_grads: dict[str, torch.Tensor]


class StudentSession:
    def __init__(self, zygote: Zygote, program: Program, limits: Limits, reference: ModuleType | None = None):
        """``reference``: the reference solution's module, whose own time for a call sets the
        limit of a call that runs long (hung_calls.py); None: the fixed limits."""
        self._process = ChildProcess(zygote, program, limits)
        self._hung = HungCalls(program, limits)
        self._reference = reference
        self._reference_s: dict[str, float | None] = {}  # by call label, measured once
        self._like: Callable[[torch.device], float | None] | None = None  # see timed_like()
        self._watch: tuple[set[str], list[str]] | None = None  # see watching()
        self._flags: dict[Flag, None] = {}
        self._answers_in: int | None = None  # the child generation that received answers, see define()
        self._stand_ins: tuple[str, tuple[str, ...]] | None = None  # see standing_in()
        self._stood_in: int | None = None  # the child generation that has them

    # ---- the API hidden tests use --------------------------------------------------------

    @property
    def program(self) -> Program:
        """The submission as the grader read it, for checks of its source: parsed here,
        never sent back by the student's process."""
        return self._process.program

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._request({"op": "call", "target": name}, name, args, kwargs)

    def new(self, class_name: str, *args: Any, **kwargs: Any) -> RemoteObject:
        obj = self.call(class_name, *args, **kwargs)
        if not isinstance(obj, RemoteObject):
            raise StudentCrashed(f"{class_name}(...) did not return an object")
        obj.built = (class_name, args, kwargs)
        return obj

    def new_like(self, reference: torch.nn.Module, class_name: str, *args: Any, **kwargs: Any) -> RemoteObject:
        """The student's ``class_name(*args, **kwargs)`` on the reference's device, holding the
        reference's parameters (strict names; the student's own buffers are kept)."""
        parameters = dict(reference.named_parameters())
        if not parameters:
            return self.new(class_name, *args, **kwargs)
        built = self.build(class_name, args, kwargs, device=next(iter(parameters.values())).device,
                           parameters=parameters)
        if not built.loaded:
            built.module.load_parameters(parameters)
        return built.module

    def build(self, class_name: str, args: tuple = (), kwargs: dict | None = None, *, device: torch.device,
              parameters: dict[str, torch.Tensor] | None = None) -> Built:
        """``new(class_name, *args, **kwargs)``, then its ``.to(device)`` and ``inspect()``: one
        request. It holds ``parameters`` already (``loaded``) where its own parameters have
        exactly their names and shapes; else loading them is the caller's, after what it
        decides from the inspection. A step that raises raises as that step's call would."""
        kwargs = kwargs or {}
        if device.type == "meta" or any(isinstance(p, torch.Tensor) and p.is_meta for p in (parameters or {}).values()):
            # The meta device's checks apply to the steps that move the module, not to its
            # constructor: those steps go as requests of their own (see _request's meta).
            module = self.new(class_name, *args, **kwargs)
            module.method("to", device)
            return Built(module, module.inspect(), False)
        steps = {"to": f"{class_name}.to", "inspect": class_name, "load": f"{class_name}.load_state_dict"}
        value = self._request({"op": "build", "target": class_name}, class_name, args, kwargs,
                              extra={"device": device, **({"parameters": parameters} if parameters else {})},
                              steps=steps)
        if not (isinstance(value, dict) and isinstance(value.get("object"), RemoteObject)
                and _is_inspection(value.get("inspection")) and isinstance(value.get("loaded"), bool)):
            raise StudentCrashed(f"{class_name}(...): malformed reply to a request to build it")
        module = value["object"]
        module.built = (class_name, args, kwargs)
        return Built(module, value["inspection"], value["loaded"] and bool(parameters))

    def define(self, name: str, source: str, *, answers: bool = False) -> RemoteObject:
        """Run grader-provided helper code (not secret: e.g. a stock model) in the child;
        returns its module, whose functions and classes build objects there. ``answers``: the
        code computes what a part asks for (a stock piece), so the child that received it ends
        with the test (:meth:`end_test`): no later test finds it there to pass off as its own."""
        try:
            return self._define(name, source, answers=answers)
        finally:  # whatever the child answers: it may have kept the source and said it failed
            if answers:
                self._hold_answers()

    def _define(self, name: str, source: str, *, answers: bool) -> RemoteObject:
        module = self._request({"op": "define", "name": name, "source": source}, f"grader helper {name}", (), {},
                               answers=answers)
        if not isinstance(module, RemoteObject):
            raise StudentCrashed(f"grader helper {name}: the student process answered with a "
                                 f"{clean(type(module).__name__, TYPE_NAME_CHARS)}, not the helper's module")
        return module

    @contextmanager
    def standing_in(self, source: str, names: Sequence[str]) -> Iterator[None]:
        """Within the block, the submission's ``names`` are the definitions of that name in
        ``source`` (grader-owned stock parts, answers): in a fresh child, before its first
        request, so every object the block builds calls them. That child serves the whole block,
        whose tests all hold the same stock parts (a test that is given other answers still ends
        its child, and the next one gets the stock parts again), and ends with the block."""
        previous, self._stand_ins = self._stand_ins, (source, tuple(names))
        self._process.renew()
        try:
            yield
        finally:
            self._stand_ins = previous
            self._process.close()  # the next request starts a child without them

    def _hold_answers(self) -> None:
        """The live child has been sent answers: it ends with the test (:meth:`end_test`)."""
        self._answers_in = self._process.generation

    def end_test(self, *, answers_carry_on: bool = False) -> None:
        """A test is over: end the child if it holds answers (see :meth:`define`), unless
        ``answers_carry_on``: the next test sends the same answers (the suite says so), and the
        child serves it too, holding them still."""
        if answers_carry_on:
            return
        if self._answers_in == self._process.generation:
            self._process.renew()
        self._answers_in = None

    def preload(self) -> None:
        """Have the student's next process start now (its sandbox), while the suite gets ready:
        the first request then skips that wait. No student code runs before that request."""
        self._process.preload()

    @contextmanager
    def watching(self, ops: set[str]) -> Iterator[list[str]]:
        """Within the block, record which of these operators (by their schema name, e.g.
        ``aten::_softmax``, ``aten::_log_softmax``) run during the student's calls, whatever
        Python route reached them; yields the list, filled as the child reports each one,
        the moment it runs. What suggests the code switched the recording off is kept as a
        flag for the instructor (:attr:`flags`), never a verdict."""
        seen: list[str] = []
        previous, self._watch = self._watch, (set(ops), seen)
        try:
            yield seen
        finally:
            self._watch = previous

    @contextmanager
    def timed_like(self, work: Callable[[], Any]) -> Iterator[None]:
        """Within the block, a call the reference cannot time by itself (one that takes the
        student's model, a grader helper's) is measured against ``work()``: the same job done
        here with the reference (07's training loop on the reference's GPT), run once, only
        if such a call runs past its first limit, on the device of the call's tensors. A job
        is not held to the per-call limit (hung_calls.py): wrap only the job's call."""
        previous, self._like = self._like, functools.cache(lambda device: seconds_of(lambda: work, device))
        try:
            yield
        finally:
            self._like = previous

    def backward(self, name: str, *args: Any, grad_output: torch.Tensor, **kwargs: Any) -> Backward:
        """Call ``name`` and backpropagate ``grad_output`` through it in the child."""
        return self._backward(name, name, args, kwargs, grad_output)

    # ---- for the grader: what happened, and the end ----------------------------------------

    @property
    def notes(self) -> list[str]:
        """What happened while loading (bounded in number and length)."""
        return self._process.notes

    def output(self) -> str:
        """What the student's code printed, bounded by ``limits.output_bytes``."""
        return self._process.output()

    @property
    def flags(self) -> list[Flag]:
        """What the grader saw while the suite ran, for the instructor: calls whose operators
        may have run unrecorded (see :meth:`watching`)."""
        return list(self._flags)

    def close(self) -> None:
        self._process.close()

    # ---- internals -------------------------------------------------------------------------

    def _definition_of(self, name: str) -> str | None:
        """Where the program's source defines ``name`` at its top level ("cell 4, line 2"), for
        a name its process does not hold; None where it defines it nowhere."""
        parsed = self._parsed
        for statement in parsed.statements:
            if name in statement.binds:
                return parsed.where(statement.cell, statement.node.lineno)
        return None

    @functools.cached_property
    def _parsed(self) -> ParsedSource:
        return ParsedSource(self._process.program)

    def _backward(self, target: str | dict, label: str, args, kwargs, grad_output,
                  owner: RemoteObject | None = None) -> Backward:
        header = {"op": "backward", "target": target}
        value = self._request(header, label, args, kwargs, extra={"grad_output": grad_output}, owner=owner)
        grads = value.get("input_grads") if isinstance(value, dict) else None
        params = value.get("param_grads") if isinstance(value, dict) else None
        if not (isinstance(grads, (tuple, list)) and all(g is None or isinstance(g, torch.Tensor) for g in grads)
                and isinstance(params, dict) and all(isinstance(g, torch.Tensor) for g in params.values())):
            raise StudentCrashed(f"{label}: malformed reply to a backward request")
        return Backward(value.get("output"), tuple(grads), params)

    def _stand_in(self, source: str, names: tuple[str, ...]) -> None:
        """Put the stock parts in place in the live child (see :meth:`standing_in`)."""
        self._stood_in = self._process.generation
        stock = self._define("stock parts", source, answers=True)  # the block's own: its child ends with it
        self._request({"op": "stand_in", "handle": stock.handle.id, "names": list(names)}, "grader stock parts",
                      (), {})

    def _note_unrecorded(self, label: str, evidence: Any) -> None:
        """The child's own account of why its recording may be incomplete: bounded, cleaned,
        kept as flags (the child can leave things out, so an empty account proves nothing)."""
        for item in (evidence if isinstance(evidence, list) else [])[:UNRECORDED_PER_CALL]:
            if len(self._flags) < MAX_SESSION_FLAGS:
                detail = clean(str(item), MESSAGE_CHARS)
                self._flags.setdefault(Flag(UNRECORDED_OPERATORS, f"a call of {clean(label, TYPE_NAME_CHARS)}",
                                            detail), None)

    def _request(self, header: dict, label: str, args, kwargs, extra: dict | None = None,
                 owner: RemoteObject | None = None, steps: dict[str, str] | None = None, answers: bool = False) -> Any:
        """``steps``: for a request of several steps, each step's label, for its exception.
        ``answers``: the request sends answers, so what the child prints from then on stays out
        of the report, where the student would read them back (the stock parts' code, a model's
        weights) for the next submission."""
        self._process.start()  # first: a fresh child makes the objects of the last one stale
        if self._stand_ins is not None and self._stood_in != self._process.generation:
            self._stand_in(*self._stand_ins)
        for obj in (owner, *args, *kwargs.values()):
            if isinstance(obj, RemoteObject) and obj.generation != self._process.generation:
                raise StudentCrashed(f"{label}: {obj.type_name} was created in a student process that has "
                                     "since ended (after a timeout or crash), so it is gone")
        encoder = protocol.Encoder()
        header = dict(header, args=encoder.encode(tuple(_unwrap(a) for a in args)),
                      kwargs=encoder.encode({k: _unwrap(v) for k, v in kwargs.items()}))
        for key, value in (extra or {}).items():
            header[key] = encoder.encode(_unwrap(value))
        held = owner.take_held() if owner is not None and header["op"] in ("call", "backward") else None
        if held is not None:
            if encoder.meta or self._watch:  # the load would run under the meta checks or be recorded
                owner.load_parameters(held)
            else:  # the child loads them into the owner first (RemoteObject.holding)
                header["parameters"] = encoder.encode(_unwrap(held))
                steps = {**(steps or {}), "load": f"{owner.type_name}.load_state_dict"}
        if encoder.meta:  # the grader's stand-in for a GPU: the call runs where a GPU's checks hold
            header["meta"] = True
        if self._watch:
            header["record"] = True
        # The classes the grader built the objects it hands over as (not what the child says they are).
        objects = [obj.built[0] for obj in (*args, *kwargs.values()) if isinstance(obj, RemoteObject) and obj.built]
        limit = self._hung.limit(label, lambda: self._reference_time(label, header.get("target"), args, kwargs, owner),
                                 elements=sum(t.numel() for t in encoder.tensors.values()), objects=objects,
                                 job=self._like is not None)
        if answers:
            self._process.hold_back_output()
        try:
            reply, value = self._process.exchange(header, encoder.tensors, label, limit)
        except StudentTimeout:
            self._hung.timed_out(label, objects)
            raise
        status = reply.get("status")
        if self._watch:
            watched, seen = self._watch
            seen.extend(op for op in reply["operators"] if op in watched and op not in seen)
            self._note_unrecorded(label, reply.get("unrecorded"))
        if status == Status.OK:
            return self._wrap(value)
        if status == Status.NOT_FOUND:
            name = clean(str(reply.get("name", label)), TYPE_NAME_CHARS)
            raise StudentNotFound(name, self._definition_of(name))
        if status == Status.EXCEPTION:
            step = reply.get("step")
            label = steps[step] if isinstance(step, str) and steps and step in steps else label
            memory = reply.get("memory") is True
            message = clean(str(reply.get("message", "")), MESSAGE_CHARS)
            raise StudentException(label, reported_type_name(reply.get("type")),
                                   f"{self._process.limits.describe_memory()} ({message})" if memory else message,
                                   with_source_lines(clean(str(reply.get("traceback", "")), TRACEBACK_CHARS),
                                                     self.program), memory, isinstance(reply.get("raised_in"), str),
                                   function_owner(reply.get("raised_in")))
        raise StudentCrashed(f"{label}: the student process could not serve the request: "
                             f"{clean(str(reply.get('message', status)), MESSAGE_CHARS)}")

    def _reference_time(self, label: str, target: Any, args: tuple, kwargs: dict,
                        owner: RemoteObject | None) -> float | None:
        """The reference's time for this call (a function, or a method of an object built with
        ``new``), measured the first time such a call runs long; else the yardstick the suite
        gave (:meth:`timed_like`); None when it has none."""
        if label not in self._reference_s:
            built = owner.built if owner is not None else None
            local = not any(isinstance(value, RemoteObject) for value in (
                *args, *kwargs.values(), *(built[1] if built else ()), *(built[2].values() if built else ())))
            seconds = None
            if self._reference is not None and local:
                if isinstance(target, str):
                    seconds = reference_seconds(self._reference, target, None, None, args, kwargs)
                elif built is not None and isinstance(target, dict):
                    seconds = reference_seconds(self._reference, built[0], target["method"], built, args, kwargs)
            self._reference_s[label] = seconds
        if self._reference_s[label] is None and self._like is not None:
            return self._like(device_of((*args, *kwargs.values())))
        return self._reference_s[label]

    def _wrap(self, value: Any) -> Any:
        if isinstance(value, Handle):
            return RemoteObject(self, value)
        if isinstance(value, tuple):
            return tuple(self._wrap(item) for item in value)
        if isinstance(value, list):
            return [self._wrap(item) for item in value]
        if isinstance(value, dict):
            return {key: self._wrap(item) for key, item in value.items()}
        return value


class RemoteObject:
    """An object that lives in the child, such as the student's ``MultiHeadAttention``;
    implements the ``Remote`` protocol of :mod:`grader.suite`."""

    def __init__(self, session: StudentSession, handle: Handle):
        self._session = session
        self.handle = handle
        self.generation = session._process.generation  # the child it lives in
        self.built: Construction | None = None  # how StudentSession.new built it
        self._held: dict[str, torch.Tensor] | None = None  # parameters its next call loads first, see holding()

    @property
    def type_name(self) -> str:
        return self.handle.type

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.method("__call__", *args, **kwargs)

    def method(self, name: str, *args: Any, **kwargs: Any) -> Any:
        label = f"{self.type_name}.{'forward' if name == '__call__' else name}"
        return self._session._request({"op": "call", "target": {"handle": self.handle.id, "method": name}},
                                      label, args, kwargs, owner=self)

    def backward(self, *args: Any, grad_output: torch.Tensor, **kwargs: Any) -> Backward:
        """Call the object and backpropagate; parameter gradients come back by name."""
        target = {"handle": self.handle.id, "method": "__call__"}
        return self._session._backward(target, f"{self.type_name}.forward", args, kwargs, grad_output, owner=self)

    def attr(self, name: str) -> Any:
        return self._session._request({"op": "getattr", "handle": self.handle.id, "name": name},
                                      f"{self.type_name}.{name}", (), {}, owner=self)

    def inspect(self) -> dict:
        """For a module: parameter and buffer names with shapes, the names of those a lazy
        module has not materialized yet (``uninitialized``), and the training flag."""
        reply = self._session._request({"op": "inspect", "handle": self.handle.id}, self.type_name, (), {}, owner=self)
        if not _is_inspection(reply):
            raise StudentCrashed(f"{self.type_name}: malformed reply to an inspection of the module")
        # Not a module: every key a module's inspection has, empty, whatever else the reply said.
        return reply if reply["module"] else {"module": False, "parameters": {}, "buffers": {}, "uninitialized": [],
                                              "training": False}

    @contextmanager
    def holding(self, parameters: dict[str, torch.Tensor]) -> Iterator[None]:
        """Within the block, the module holds ``parameters`` (as :meth:`load_parameters` loads
        them) from its next call on: they go with that call, one request for both, and a load
        that raises raises there, as ``load_state_dict``'s. Loaded at the end of a block that
        made no call of the module."""
        self._held = parameters
        try:
            yield
        finally:
            held = self.take_held()
        if held is not None:
            self.load_parameters(held)

    def take_held(self) -> dict[str, torch.Tensor] | None:
        """The parameters :meth:`holding` left for the next call, now taken by it."""
        held, self._held = self._held, None
        return held

    def load_parameters(self, parameters: dict[str, torch.Tensor], *, answers: bool = False) -> None:
        """``load_state_dict(strict=True)`` of these parameters; the module keeps its buffers.
        ``answers``: they are what a part asks for (a model trained by the reference), and the
        student process that received them ends with the test, as :meth:`StudentSession.define`'s."""
        try:
            self._session._request({"op": "load_parameters", "handle": self.handle.id},
                                   f"{self.type_name}.load_state_dict", (), {}, extra={"parameters": parameters},
                                   owner=self, answers=answers)
        finally:  # sent, whatever the child answers
            if answers:
                self._session._hold_answers()


def _is_inspection(reply: Any) -> bool:
    if not (isinstance(reply, dict) and isinstance(reply.get("module"), bool)):
        return False
    if not reply["module"]:
        return True

    def shapes(value: Any) -> bool:
        return isinstance(value, dict) and all(is_shape(shape) for shape in value.values())

    lazy = reply.get("uninitialized")  # names of a lazy module's tensors, which have no shape yet
    return (shapes(reply.get("parameters")) and shapes(reply.get("buffers")) and isinstance(reply.get("training"), bool)
            and isinstance(lazy, list) and all(isinstance(name, str) for name in lazy))


def _unwrap(value: Any) -> Any:
    """``value`` as it is sent: each object of the student's process, wherever it is (a dict
    the child sent back, with an object among its tensors), as its handle."""
    if isinstance(value, RemoteObject):
        return value.handle
    if isinstance(value, list):
        return [_unwrap(item) for item in value]
    if isinstance(value, tuple):
        return tuple(_unwrap(item) for item in value)
    if isinstance(value, dict):
        return {key: _unwrap(item) for key, item in value.items()}
    return value
