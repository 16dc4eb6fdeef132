"""The trusted side's handle on a student's submission.

A :class:`StudentSession` owns at most one live child at a time. It sends the child the
program and watches it run cell by cell under a wall-clock limit per cell and for the whole
load; a cell that raises is noted, a cell that hangs or kills the process is noted and
skipped in every later child. After a call that times out or crashes the child, the next
call starts a fresh one. Every wait on the child has a deadline, whatever the child says,
and all of a submission's waits together are bounded by ``Limits.student_time_s``.

Nothing the child sends is taken as it comes: replies the suites rely on are checked for
shape here, and every string is bounded and made valid Unicode before it can reach a report.

Hidden tests use the session through the ``student`` fixture:
``student.call("split_heads", x, 4)`` or ``mha = student.new("MultiHeadAttention", 16, 4)``
then ``mha(q, k, v)``. Failures raise the :class:`StudentError` subclasses below.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from grader.ingest import Program
from grader.sandbox import protocol
from grader.sandbox.limits import Limits, format_bytes
from grader.sandbox.protocol import Deadline, Handle, PeerClosed, ProtocolError, Status
from grader.sandbox.zygote import Child, Zygote, ZygoteGone
from grader.sanitize import clean

ZYGOTE_KILLED = ("your code killed the grader's process that starts it, so no further tests could run "
                 "(do not signal other processes)")
# Bounds on what is copied from the child into a report.
TYPE_NAME_CHARS, MESSAGE_CHARS, TRACEBACK_CHARS, NOTE_CHARS = 100, 2000, 4000, 500
MAX_NOTES = 50


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
        self._notes: list[str] = []
        self._notes_dropped = 0
        for note in program.notes:
            self._note(note)
        self._time_left = limits.student_time_s  # shrinks with every wait on the child
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

    @property
    def notes(self) -> list[str]:
        """What happened while loading (bounded in number and length)."""
        more = [f"... and {self._notes_dropped} more notes"] if self._notes_dropped else []
        return self._notes + more

    def output(self) -> str:
        """What the student's code printed, bounded by ``limits.output_bytes``."""
        text = clean(self._output.decode("utf-8", "replace"))
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
        grads = value.get("input_grads") if isinstance(value, dict) else None
        params = value.get("param_grads") if isinstance(value, dict) else None
        if not (isinstance(grads, (tuple, list)) and all(g is None or isinstance(g, torch.Tensor) for g in grads)
                and isinstance(params, dict) and all(isinstance(g, torch.Tensor) for g in params.values())):
            raise StudentCrashed(f"{label}: malformed reply to a backward request")
        return Backward(value.get("output"), tuple(grads), params)

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
        deadline, budget_bound = self._deadline(self.limits.call_timeout_s)
        started = time.monotonic()
        try:
            protocol.send(child.sock, header, encoder.tensors, deadline)
            reply, tensors = protocol.recv(child.sock, deadline)
            status = reply.get("status")
            if self._watch and isinstance(reply.get("ops"), list):
                watched, seen = self._watch
                seen.extend(op for op in reply["ops"] if op in watched and op not in seen)
            if status == Status.OK:
                return self._wrap(protocol.decode(reply.get("value"), tensors))
        except Deadline:
            self._retire()
            raise StudentTimeout(self._time_limit_message(label, budget_bound)) from None
        except (PeerClosed, BrokenPipeError, ConnectionResetError):
            why = self._retire(hung_up=True)
            raise StudentCrashed(f"{label}: your code ended the process ({why})") from None
        except ProtocolError as exc:
            self._retire()
            raise StudentCrashed(f"{label}: invalid reply from the student process ({exc})") from None
        finally:
            self._time_left -= time.monotonic() - started
        if status == Status.NOT_FOUND:
            raise StudentNotFound(clean(str(reply.get("name", label)), TYPE_NAME_CHARS))
        if status == Status.EXCEPTION:
            memory = reply.get("memory") is True
            message = clean(str(reply.get("message", "")), MESSAGE_CHARS)
            raise StudentException(label, _type_name(reply.get("type")),
                                   f"{self.limits.describe_memory()} ({message})" if memory else message,
                                   clean(str(reply.get("traceback", "")), TRACEBACK_CHARS), memory)
        raise StudentCrashed(f"{label}: the student process could not serve the request: "
                             f"{clean(str(reply.get('message', status)), MESSAGE_CHARS)}")

    def _deadline(self, timeout_s: float) -> tuple[float, bool]:
        """When a wait of at most ``timeout_s`` must end, and whether the submission's total
        time (``limits.student_time_s``) is what bounds it."""
        if self._time_left <= 0:
            raise StudentTimeout(f"{self._time_used_up()}, so this test was not run")
        return time.monotonic() + min(timeout_s, self._time_left), self._time_left < timeout_s

    def _time_used_up(self) -> str:
        return f"your submission used up its total time limit of {self.limits.student_time_s:g} s"

    def _time_limit_message(self, label: str, budget_bound: bool) -> str:
        if budget_bound:
            return f"{label}: {self._time_used_up()}"
        return f"{label}: time limit of {self.limits.call_timeout_s:g} s exceeded"

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
            self._deadline(0)  # raises once the submission's time is used up
            child = self._zygote.spawn()
            child.output_from = -1
            loading = _Loading(self, child)
            try:
                protocol.send(child.sock, {"program": self._program.to_dict(), "skip": sorted(self._skip)},
                              deadline=loading.started + self.limits.cell_timeout_s)
                loading.follow()
                self._printed_through = len(self._program.cells)
                return child
            except Deadline:
                self._retire(child)
                why = loading.why_late()
            except (PeerClosed, BrokenPipeError, ConnectionResetError):
                why = f"ended the process ({self._retire(child, hung_up=True)})"
            except ProtocolError as exc:
                self._retire(child)
                why = f"sent an invalid message ({exc})"
            finally:
                self._time_left -= time.monotonic() - loading.started
            if loading.bound == "budget":
                self._note(f"loading your code stopped: it {why}")
                raise StudentTimeout(f"{self._time_used_up()} while loading")
            if loading.running is None:
                self._load_failed = f"your submission could not be loaded: the student process {why}"
                self._note(self._load_failed)
                raise StudentCrashed(self._load_failed)
            if loading.bound == "load":
                self._skip.update(range(loading.running, len(self._program.cells)))
                self._note(f"{self._where(loading.running)} and the cells after it were not run: {why}")
            else:
                self._skip.add(loading.running)
                self._note(f"{self._where(loading.running)} {why}; it was skipped")

    def _where(self, index: int) -> str:
        label = self._program.cells[index].label
        return label if self._program.kind == "notebook" else f"your module ({label})"

    def _note(self, note: str) -> None:
        note = clean(note, NOTE_CHARS)
        if note in self._notes:
            return
        if len(self._notes) < MAX_NOTES:
            self._notes.append(note)
        else:
            self._notes_dropped += 1

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
            child.close_output()
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
        room = max(self.limits.output_bytes - len(self._output), 0)
        try:
            if child.output_from >= 0:
                data = os.pread(child.output, room + 1, child.output_from)
                self._output += data[:room]
                self._output_truncated |= len(data) > room
        except OSError:
            pass  # nothing to add: the report says what the child printed before
        finally:
            child.close_output()


class _Loading:
    """Following one child through the program's cells, with a deadline on every event."""

    def __init__(self, session: StudentSession, child: Child):
        self.session, self.child = session, child
        self.started = time.monotonic()
        self.running: int | None = None  # the cell that has started and not yet ended
        self.bound = "cell"  # which limit the current wait ends at: "cell", "load" or "budget"
        self._last_started = -1

    def follow(self) -> None:
        """Read the child's events until it is ready; raises Deadline, PeerClosed or ProtocolError."""
        limits = self.session.limits
        ends = {"load": self.started + limits.load_timeout_s, "budget": self.started + self.session._time_left}
        while True:
            bounds = {"cell": time.monotonic() + limits.cell_timeout_s, **ends}
            self.bound = min(bounds, key=bounds.__getitem__)  # on a tie, the cell's own limit
            event, _ = protocol.recv(self.child.sock, bounds[self.bound])
            if self._record(event):
                return

    def _record(self, event: dict) -> bool:
        """Take one event in; True once the child is ready."""
        session = self.session
        kind, index, offset = event.get("event"), event.get("index"), event.get("offset")
        if self.child.output_from < 0 and type(offset) is int and offset >= 0:
            # Output of cells an earlier child already ran is in the report.
            if kind == "ready" or (type(index) is int and index > session._printed_through):
                self.child.output_from = offset
        if kind == "ready" and self.running is None:
            return True
        if type(index) is not int or not 0 <= index < len(session._program.cells):
            raise ProtocolError(f"unexpected event {clean(str(event), 80)}")
        if kind == "cell_start" and self.running is None and index > self._last_started and index not in session._skip:
            self.running = self._last_started = index
            session._printed_through = max(session._printed_through, index)
        elif kind == "cell_error" and index == self.running:
            message = clean(str(event.get("message")), 300)
            if event.get("memory") is True:
                message = f"{session.limits.describe_memory()} ({message})"
            session._note(f"{session._where(index)} raised {_type_name(event.get('type'))}: {message}")
            self.running = None
        elif kind == "cell_done" and index == self.running:
            self.running = None
        else:
            raise ProtocolError(f"unexpected event {clean(str(event), 80)}")
        return False

    def why_late(self) -> str:
        limits = self.session.limits
        return {
            "cell": f"ran past the time limit of {limits.cell_timeout_s:g} s",
            "load": f"loading your code took longer than {limits.load_timeout_s:g} s in total",
            "budget": f"ran past the total time limit of {limits.student_time_s:g} s for your submission",
        }[self.bound]


def _type_name(value: Any) -> str:
    """An exception's type name as the child reports it: a bounded string, nothing else."""
    return clean(value, TYPE_NAME_CHARS) if isinstance(value, str) and value else "Exception"


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
        reply = self._session._request({"op": "inspect", "handle": self.handle.id}, self.type_name, (), {}, owner=self)
        if not _is_inspection(reply):
            raise StudentCrashed(f"{self.type_name}: malformed reply to an inspection of the module")
        return reply

    def load_parameters(self, parameters: dict[str, torch.Tensor]) -> None:
        """``load_state_dict(strict=True)`` of these parameters; the module keeps its buffers."""
        self._session._request({"op": "load_parameters", "handle": self.handle.id},
                               f"{self.type_name}.load_state_dict", (), {}, extra={"parameters": parameters}, owner=self)


def _is_inspection(reply: Any) -> bool:
    if not (isinstance(reply, dict) and isinstance(reply.get("module"), bool)):
        return False
    if not reply["module"]:
        return True

    def shapes(value: Any) -> bool:
        return isinstance(value, dict) and all(
            isinstance(shape, list) and all(type(n) is int and n >= 0 for n in shape) for shape in value.values())

    return shapes(reply.get("parameters")) and shapes(reply.get("buffers")) and isinstance(reply.get("training"), bool)


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
