"""The trusted side's handle on a student's submission.

A :class:`StudentSession` owns at most one live child at a time. It loads the program
cell by cell under a wall-clock limit per cell; a cell that raises is noted, a cell that
hangs or kills the process is noted and skipped in every later child. After a call that
times out or crashes the child, the next call starts a fresh one.

Hidden tests use the session through the ``student`` fixture:
``student.call("split_heads", x, 4)`` or ``mha = student.new("MultiHeadAttention", 16, 4)``
then ``mha(q, k, v)``. Failures raise the :class:`StudentError` subclasses below.
"""

from __future__ import annotations

import os
import signal
import stat
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from grader.ingest import Program
from grader.sandbox import protocol
from grader.sandbox._child import OUTPUT_FILE
from grader.sandbox.limits import Limits, format_bytes
from grader.sandbox.protocol import Deadline, Handle, PeerClosed, ProtocolError, Status
from grader.sandbox.zygote import Child, Zygote, ZygoteGone


ZYGOTE_KILLED = ("your code killed the grader's process that starts it, so no further tests could run "
                 "(do not signal other processes)")


class StudentError(Exception):
    """Base of everything that goes wrong on the student's side of a call."""


class StudentException(StudentError):
    """The student's code raised an exception."""

    def __init__(self, target: str, type_name: str, message: str, traceback: str, memory: bool = False):
        self.target, self.type_name, self.message, self.traceback = target, type_name, message, traceback
        self.memory = memory
        super().__init__(f"{target} raised {type_name}: {message}" if message else f"{target} raised {type_name}")


class StudentNotFound(StudentError):
    def __init__(self, name: str):
        self.name = name
        super().__init__(f"not found: your submission does not define `{name}`")


class StudentTimeout(StudentError):
    pass


class StudentCrashed(StudentError):
    """The child ended during a call, or sent something that is not a valid reply."""


@dataclass(frozen=True)
class Backward:
    output: Any
    input_grads: tuple
    param_grads: dict[str, torch.Tensor]


class StudentSession:
    def __init__(self, zygote: Zygote, program: Program, limits: Limits):
        self._zygote = zygote
        self._program = program
        self.limits = limits
        self._child: Child | None = None
        self._skip: set[int] = set()
        self.notes: list[str] = list(program.notes)
        self._output = bytearray()
        self._output_truncated = False
        self._load_failed: str | None = None
        self._printed_through = -1  # highest cell index whose output is already collected
        self._watch: tuple[set[str], list[str]] | None = None  # see watching()
        self.generation = 0  # counts children; objects are only valid in the one that made them

    # ---- the API hidden tests use --------------------------------------------------------

    @property
    def program(self) -> Program:
        """The submission as the grader read it, for checks of its source: parsed here,
        never sent back by the student's process."""
        return self._program

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self._request({"op": "call", "target": name}, name, args, kwargs)

    def new(self, class_name: str, *args: Any, **kwargs: Any) -> RemoteObject:
        obj = self.call(class_name, *args, **kwargs)
        if not isinstance(obj, RemoteObject):
            raise StudentCrashed(f"{class_name}(...) did not return an object")
        return obj

    def new_like(self, reference: torch.nn.Module, class_name: str, *args: Any, **kwargs: Any) -> RemoteObject:
        """The student's ``class_name(*args, **kwargs)`` on the reference's device, holding the
        reference's parameters (strict names; the student's own buffers are kept)."""
        module = self.new(class_name, *args, **kwargs)
        parameters = dict(reference.named_parameters())
        if parameters:
            module.method("to", next(iter(parameters.values())).device)
            module.load_parameters(parameters)
        return module

    def define(self, name: str, source: str) -> RemoteObject:
        """Run grader-provided helper code (not secret: e.g. a stock model) in the child;
        returns its module, whose functions and classes build objects there."""
        return self._request({"op": "define", "name": name, "source": source}, f"grader helper {name}", (), {})

    @contextmanager
    def watching(self, ops: set[str]) -> Iterator[list[str]]:
        """Within the block, record which of these torch functions (by ``__name__``, e.g.
        ``softmax``, ``_softmax``, ``special_softmax``) the student's code runs; yields the
        list, filled as calls return."""
        seen: list[str] = []
        previous, self._watch = self._watch, (set(ops), seen)
        try:
            yield seen
        finally:
            self._watch = previous

    def backward(self, name: str, *args: Any, grad_output: torch.Tensor, **kwargs: Any) -> Backward:
        """Call ``name`` and backpropagate ``grad_output`` through it in the child."""
        return self._backward(name, name, args, kwargs, grad_output)

    # ---- output and lifecycle ----------------------------------------------------------

    def output(self) -> str:
        """What the student's code printed, bounded by ``limits.output_bytes``."""
        text = self._output.decode("utf-8", "replace")
        if self._output_truncated:
            text += f"\n[output truncated after {format_bytes(self.limits.output_bytes)}]"
        return text

    def close(self) -> None:
        self._retire()

    # ---- internals -------------------------------------------------------------------------

    def _backward(self, target: str | dict, label: str, args, kwargs, grad_output,
                  owner: RemoteObject | None = None) -> Backward:
        header = {"op": "backward", "target": target}
        value = self._request(header, label, args, kwargs, extra={"grad_output": grad_output}, owner=owner)
        if not (isinstance(value, dict) and {"output", "input_grads", "param_grads"} <= value.keys()):
            raise StudentCrashed(f"{label}: malformed reply to a backward request")
        return Backward(value["output"], tuple(value["input_grads"]), dict(value["param_grads"]))

    def _request(self, header: dict, label: str, args, kwargs, extra: dict | None = None,
                 owner: RemoteObject | None = None) -> Any:
        child = self._live_child()
        for obj in (owner, *args, *kwargs.values()):
            if isinstance(obj, RemoteObject) and obj.generation != self.generation:
                raise StudentCrashed(f"{label}: {obj.type_name} was created in a student process that has "
                                     "since ended (after a timeout or crash), so it is gone")
        encoder = protocol.Encoder()
        header = dict(header, args=encoder.encode(tuple(_unwrap(a) for a in args)),
                      kwargs=encoder.encode({k: _unwrap(v) for k, v in kwargs.items()}))
        for key, value in (extra or {}).items():
            header[key] = encoder.encode(value)
        if self._watch:
            header["watch"] = sorted(self._watch[0])
        deadline = time.monotonic() + self.limits.call_timeout_s
        try:
            protocol.send(child.sock, header, encoder.tensors)
            reply, tensors = protocol.recv(child.sock, deadline)
            status = reply.get("status")
            if self._watch and isinstance(reply.get("ops"), list):
                watched, seen = self._watch
                seen.extend(op for op in reply["ops"] if op in watched and op not in seen)
            if status == Status.OK:
                return self._wrap(protocol.decode(reply.get("value"), tensors))
        except Deadline:
            self._retire()
            raise StudentTimeout(f"{label}: time limit of {self.limits.call_timeout_s:g} s exceeded") from None
        except (PeerClosed, BrokenPipeError, ConnectionResetError):
            why = self._retire(hung_up=True)
            raise StudentCrashed(f"{label}: your code ended the process ({why})") from None
        except ProtocolError as exc:
            self._retire()
            raise StudentCrashed(f"{label}: invalid reply from the student process ({exc})") from None
        if status == Status.NOT_FOUND:
            raise StudentNotFound(str(reply.get("name", label)))
        if status == Status.EXCEPTION:
            memory = reply.get("memory") is True
            message = str(reply.get("message", ""))
            raise StudentException(label, str(reply.get("type", "Exception")),
                                   f"{self.limits.describe_memory()} ({message})" if memory else message,
                                   str(reply.get("traceback", "")), memory)
        raise StudentCrashed(f"{label}: the student process could not serve the request: {reply.get('message', status)}")

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

    def _live_child(self) -> Child:
        if self._load_failed:
            raise StudentCrashed(self._load_failed)
        if self._child is None:
            try:
                self._child = self._load()
            except ZygoteGone:
                self._load_failed = ZYGOTE_KILLED
                self._note(ZYGOTE_KILLED)
                raise StudentCrashed(ZYGOTE_KILLED) from None
            self.generation += 1
        return self._child

    def _load(self) -> Child:
        """Start a child and run the program; skip cells that hung or killed an earlier child."""
        while True:
            child = self._zygote.spawn(frozenset(self._skip))
            running: int | None = None
            deadline = None
            child.output_from = -1
            try:
                while True:
                    event, _ = protocol.recv(child.sock, deadline)
                    kind = event.get("event")
                    offset = event.get("offset")
                    if child.output_from < 0 and isinstance(offset, int) and offset >= 0:
                        # Output of cells an earlier child already ran is in the report.
                        if kind == "ready" or event.get("index", -1) > self._printed_through:
                            child.output_from = offset
                    if kind == "ready":
                        self._printed_through = len(self._program.cells)
                        return child
                    index = event.get("index")
                    if not isinstance(index, int) or not 0 <= index < len(self._program.cells):
                        raise ProtocolError(f"unexpected event {str(event)[:80]}")
                    if kind == "cell_start":
                        running, deadline = index, time.monotonic() + self.limits.cell_timeout_s
                        self._printed_through = max(self._printed_through, index)
                    elif kind == "cell_error":
                        message = str(event.get("message"))[:300]
                        if event.get("memory") is True:
                            message = f"{self.limits.describe_memory()} ({message})"
                        self._note(f"{self._where(index)} raised {event.get('type')}: {message}")
                        running, deadline = None, None
                    elif kind == "cell_done":
                        running, deadline = None, None
            except Deadline:
                self._retire(child)
                why = f"ran past the time limit of {self.limits.cell_timeout_s:g} s"
            except PeerClosed:
                why = f"ended the process ({self._retire(child, hung_up=True)})"
            except ProtocolError as exc:
                self._retire(child)
                why = f"sent an invalid message ({exc})"
            if running is None:
                self._load_failed = f"your submission could not be loaded: the student process {why}"
                self._note(self._load_failed)
                raise StudentCrashed(self._load_failed)
            self._skip.add(running)
            self._note(f"{self._where(running)} {why}; it was skipped")

    def _where(self, index: int) -> str:
        label = self._program.cells[index].label
        return label if self._program.kind == "notebook" else f"your module ({label})"

    def _note(self, note: str) -> None:
        if note not in self.notes:
            self.notes.append(note)

    def _retire(self, child: Child | None = None, hung_up: bool = False) -> str:
        """Kill the child (default: the current one), keep its output; say how it ended.

        ``hung_up``: the child closed the connection, so it is ending on its own; its
        status is read before the kill, which would otherwise be all it reports.
        """
        child = child or self._child
        if child is None:
            return "no process"
        if child is self._child:
            self._child = None
        if child.sock.fileno() == -1:
            return "it had already ended"
        try:
            status = self._zygote.exit_status(child.pid) if hung_up else None
            child.kill()  # the whole group, whatever the child left running
            if status is None:
                status = self._zygote.exit_status(child.pid)
        except ZygoteGone:
            child.kill()
            self._collect_output(child)
            return "it killed the grader's process that starts it"
        self._collect_output(child)
        return describe_exit(status, self.limits)

    def _collect_output(self, child: Child) -> None:
        room = self.limits.output_bytes - len(self._output)
        if child.output_from < 0:
            return
        try:
            fd = os.open(child.scratch / OUTPUT_FILE, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                return
            data = os.pread(fd, max(room, 0) + 1, child.output_from)
        finally:
            os.close(fd)
        self._output += data[: max(room, 0)]
        self._output_truncated |= len(data) > room


class RemoteObject:
    """An object that lives in the child, such as the student's ``MultiHeadAttention``."""

    def __init__(self, session: StudentSession, handle: Handle):
        self._session = session
        self.handle = handle
        self.generation = session.generation  # the child it lives in

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
        """For a module: parameter and buffer names with shapes, and the training flag."""
        return self._session._request({"op": "inspect", "handle": self.handle.id}, self.type_name, (), {}, owner=self)

    def load_parameters(self, parameters: dict[str, torch.Tensor]) -> None:
        """``load_state_dict(strict=True)`` of these parameters; the module keeps its buffers."""
        self._session._request({"op": "load_parameters", "handle": self.handle.id},
                               f"{self.type_name}.load_state_dict", (), {}, extra={"parameters": parameters}, owner=self)


def _unwrap(value: Any) -> Any:
    return value.handle if isinstance(value, RemoteObject) else value


def describe_exit(status: int | None, limits: Limits) -> str:
    """Words for a child's wait status, as the student should read them."""
    if status is None:
        return "it stopped responding"
    if os.WIFEXITED(status):
        return f"exit code {os.WEXITSTATUS(status)}: sys.exit or os._exit"
    signum = os.WTERMSIG(status)
    reasons = {
        signal.SIGKILL: "killed",
        signal.SIGXCPU: f"CPU time limit of {limits.cpu_seconds} s exceeded",
        signal.SIGXFSZ: f"file size limit of {format_bytes(limits.file_bytes)} exceeded",
        signal.SIGSEGV: "segmentation fault, often memory exhausted",
        signal.SIGABRT: "aborted, often memory exhausted",
    }
    return reasons.get(signum, f"killed by {signal.Signals(signum).name}")
