"""The student's process as the trusted side keeps it: one live child at a time.

A :class:`ChildProcess` sends a fresh child the program and follows it cell by cell under a
wall-clock limit per cell and for the whole load; a cell that raises is noted, a cell that
hangs or kills the process is noted and skipped in every later child. A request (a call) has
a limit in the CPU time the submission uses (:class:`_CallClock`), so that the time it waits
for a CPU on a busy machine never counts, and a wall-clock bound beside it. After a request
that times out or crashes the child, the next request starts a fresh one. Every wait on the
child has a deadline, whatever the child says, and all of a submission's waits together are
bounded by ``Limits.student_time_s``. What the children print, and notes on what happened
to them, are kept here within bounds.

What a request asks for, and what a suite may ask, is :mod:`grader.sandbox.session`'s.
"""

from __future__ import annotations

import math
import os
import re
import select
import signal
import time
from collections.abc import Callable
from typing import Any

import torch

from grader.core import cells, not_installed
from grader.core.ingest import Program
from grader.core.sanitize import clean
from grader.sandbox import protocol
from grader.sandbox.errors import StudentCrashed, StudentTimeout, reported_type_name
from grader.sandbox.limits import CallLimit, Limits, format_bytes
from grader.sandbox.protocol import Deadline, PeerClosed, ProtocolError, Status
from grader.sandbox.zygote import Child, Zygote, ZygoteGone

ZYGOTE_KILLED = ("your code killed the grader's process that starts it, so no further tests could run "
                 "(do not signal other processes)")
NOTE_CHARS, MAX_NOTES = 500, 50
# Wall-clock seconds a fresh child may take to confine itself (and, on CUDA, to make its
# context) before the program's own limits start: a busy GPU machine's, with room to spare.
STARTUP_TIMEOUT_S = 60.0
# How long past its limit a cell may run before its child is killed: the child stops the cell
# itself at the limit, at the next Python instruction (a torch operator finishes first).
CELL_STOP_GRACE_S = 2.0
MAX_STOPPED_STATEMENTS = 50  # in one cell (a module's top level): each took a cell's time limit
# A call's time limit is CPU time; how long the grader waits for its answer, whatever the CPU
# does (a sleep uses none), is this many seconds per second of the limit: room for a machine
# three times oversubscribed.
WALL_PER_CPU_SECOND = 3.0
# How often a waiting call's CPU time is looked at, at most and at least (a look costs a read of
# a cgroup or /proc file).
MAX_CLOCK_LOOK_S, MIN_CLOCK_LOOK_S = 1.0, 0.01


# An operator's schema name, and a bound far above the operators one recorded call runs (the
# suites record small calls: a softmax runs about ten).
_OPERATOR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}::[A-Za-z0-9_.]{1,128}")
MAX_OPERATOR_EVENTS = 100_000


class ChildProcess:
    """One submission's student process: at most one live child, loaded with the program."""

    def __init__(self, zygote: Zygote, program: Program, limits: Limits):
        self._zygote = zygote
        self.program = program
        self.limits = limits
        self._child: Child | None = None
        self._skip: set[int] = set()
        # Cell -> its top-level statements a child stopped at the time limit: the next child skips them.
        self._stopped: dict[int, list[int]] = {}
        self._notes: list[str] = []
        self._notes_dropped = 0
        for note in program.notes:
            self._note(note)
        self._time_left = limits.student_time_s  # shrinks with every wait on the child
        self._output = bytearray()
        self._output_truncated = False
        self._output_held_back = False  # what a child printed after it was sent answers (hold_back_output)
        self._load_failed: str | None = None
        self._printed_through = -1  # highest cell index whose output is already collected
        self._oom_kills = zygote.oom_kills()  # the submission's so far: one more means a child's was
        self.generation = 0  # counts children; objects are only valid in the one that made them
        self._preloading: _Loading | None = None  # a child started ahead of need, see preload()

    def start(self) -> None:
        """Have a live child: load the program into a fresh one when there is none (before
        the first request, and after one that timed out or crashed the child)."""
        self._live_child()

    def preload(self) -> None:
        """Start a fresh child now, without waiting for it: it confines itself (the sandbox, on
        a GPU its CUDA context: the grader's time) while the suite prepares its next request.
        The program reaches it with that request, so none of the student's code runs before
        the grader follows it, under the limits of any load."""
        if self._child is not None or self._preloading is not None or self._load_failed or self._time_left <= 0:
            return
        try:
            self._preloading = _Loading(self, self._zygote.spawn())
        except ZygoteGone:
            pass  # the next request's start says so

    def exchange(self, header: dict, tensors: dict[str, torch.Tensor], label: str,
                 limit: CallLimit | None = None) -> tuple[dict, Any]:
        """Send one request to the live child and wait for its reply, within the call's time
        limit (``limit``, by default ``limits.call_timeout_s``) and what is left of the
        submission's. Returns the reply, with ``operators``: those the child reported as they
        ran (a request that asks to ``record``), and, when its status is OK, its decoded value.
        A child that runs past the deadline, hangs up or sends no valid reply is retired:
        :class:`StudentTimeout` or :class:`StudentCrashed`. A request whose header says ``meta``
        sent meta tensors or the meta device, so the reply may hold some (see :func:`protocol.decode`)."""
        child = self._live_child()
        limit = limit or CallLimit(self.limits.call_timeout_s)
        timeout_s, final, reason = limit.first_s, limit.final, None
        started = time.monotonic()
        deadline, budget_bound = self._deadline(timeout_s * WALL_PER_CPU_SECOND, started)
        clock = _CallClock(lambda: self._zygote.cpu_seconds(child))
        try:
            protocol.send(child.sock, header, tensors, deadline)
            operators: dict[str, None] = {}
            events = 0
            while True:
                try:
                    message = self._next_message(child, clock, timeout_s, deadline)
                except Deadline:
                    if final is None or budget_bound:
                        raise
                    # Past its first limit (CPU, or the wall clock a call waiting on a GPU runs
                    # by): the limit the reference's time gives it, from the call's start.
                    (timeout_s, reason), final = final(), None
                    deadline, budget_bound = self._deadline(timeout_s * WALL_PER_CPU_SECOND, started)
                    continue
                if message[0].get("event") != "operator":
                    break
                operators.setdefault(_reported_operator(message[0], header.get("record") is True, events), None)
                events += 1
            reply, reply_tensors = message
            value = None
            if reply.get("status") == Status.OK:
                value = protocol.decode(reply.get("value"), reply_tensors, meta=header.get("meta") is True)
            return dict(reply, operators=list(operators)), value
        except Deadline as exc:
            self._retire()
            message = self._time_limit_message(label, budget_bound, timeout_s, exc)
            raise StudentTimeout(f"{message} ({reason})" if reason and not budget_bound else message) from None
        except (PeerClosed, BrokenPipeError, ConnectionResetError):
            why = self._retire(hung_up=True)
            raise StudentCrashed(f"{label}: your code ended the process ({why})") from None
        except ProtocolError as exc:
            self._retire()
            raise StudentCrashed(f"{label}: invalid reply from the student process ({exc})") from None
        except BaseException:  # the trusted side's own bound, say, part-way through a reply: no later
            self._retire()     # request may read the rest of it as its own
            raise
        finally:
            self._time_left -= time.monotonic() - started

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
        if self._output_held_back:
            text += ("\n[not shown: the output that followed the grader's stock parts or a model the reference "
                     "trained into your process (they are answers)]")
        return text

    def hold_back_output(self) -> None:
        """The live child is about to be sent answers: what it printed so far is read now, and
        nothing it prints from now on reaches the report (see :meth:`StudentSession._request`).
        Read now, not when it ends: its output is a file it can write anywhere in, so it could
        write the answers over what it printed before (a red team's ``os.pwrite``)."""
        child = self._child
        if child is None or child.output_until is not None:
            return
        child.output_until = 0
        try:
            child.output_until = os.fstat(child.output).st_size
            self._take_output(child, child.output_until)
        except OSError:
            pass  # nothing to add: the report says what the child printed before

    def renew(self) -> None:
        """End the live child and start its successor now (see :meth:`preload`)."""
        self.close()
        self.preload()

    def close(self) -> None:
        """End the live child (and one loading ahead), keeping what it printed. Nothing asks
        how it ended, so nothing waits for its end."""
        self._retire(describe=False)
        if self._preloading is not None:
            self._retire(self._preloading.child, describe=False)
            self._preloading = None

    # ---- deadlines and the time budget ---------------------------------------------------------

    def _deadline(self, timeout_s: float, since: float) -> tuple[float, bool]:
        """When a wait of at most ``timeout_s`` from ``since`` must end, and whether the
        submission's total time (``limits.student_time_s``) is what bounds it."""
        if self._time_left <= 0:
            raise StudentTimeout(f"{self._time_used_up()}, so this test was not run")
        return since + min(timeout_s, self._time_left), self._time_left < timeout_s

    def _time_used_up(self) -> str:
        return f"your submission used up its total time limit of {self.limits.student_time_s:g} s"

    def _time_limit_message(self, label: str, budget_bound: bool, timeout_s: float, late: Deadline) -> str:
        if isinstance(late, _LimitUsedUp):
            return f"{label}: time limit of {timeout_s:.3g} s exceeded"
        if budget_bound:
            return f"{label}: {self._time_used_up()}"
        return (f"{label}: time limit of {timeout_s:.3g} s exceeded: no answer after "
                f"{timeout_s * WALL_PER_CPU_SECOND:g} s of waiting (a sleep, or a wait for something that never comes?)")

    @staticmethod
    def _next_message(child: Child, clock: _CallClock, limit_s: float, deadline: float) -> tuple[dict, Any]:
        """The child's next message, once it has begun to arrive: within ``limit_s`` of the
        call's time as ``clock`` counts it, and by ``deadline`` (wall clock) whatever it counts.
        Between looks at the clock the wait is what is left of the limit: the submission's
        processes get one CPU (its cgroup's quota), so they cannot use it up sooner."""
        while True:
            left = limit_s - clock.used()
            if left <= 0:
                raise _LimitUsedUp()
            look_again = min(deadline, time.monotonic() + min(max(left, MIN_CLOCK_LOOK_S), MAX_CLOCK_LOOK_S))
            if select.select([child.sock], [], [], max(look_again - time.monotonic(), 0))[0]:
                return protocol.recv(child.sock, deadline)
            if time.monotonic() >= deadline:
                raise Deadline()

    # ---- loading the program into a fresh child ------------------------------------------------

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
            self._deadline(0, time.monotonic())  # raises once the submission's time is used up
            loading, self._preloading = self._preloading, None
            loading = loading or _Loading(self, self._zygote.spawn())
            loading.started = time.monotonic()  # a preloaded child's time before now is the grader's
            child = loading.child
            try:
                protocol.send(child.sock, {"program": self.program.to_dict(), "skip": sorted(self._skip),
                                           "stopped": {str(index): statements
                                                       for index, statements in self._stopped.items()}},
                              deadline=loading.started + STARTUP_TIMEOUT_S)
                loading.follow()
                self._printed_through = len(self.program.cells)
                return child
            except Deadline:
                self._retire(child)
                why = loading.why_late()
            except (PeerClosed, BrokenPipeError, ConnectionResetError):
                if loading.bound == "start":  # it ended before the program reached it: what it
                    child.output_from = 0  # printed is the grader's own (a sandbox that refused CUDA)
                why = f"ended the process ({self._retire(child, hung_up=True)})"
            except ProtocolError as exc:
                self._retire(child)
                why = f"sent an invalid message ({exc})"
            finally:
                self._time_left -= time.monotonic() - loading.started
            if loading.bound == "start":
                raise ChildStartFailed(f"the grader could not start the student's process: it {why}, "
                                       "before any of the submission's code ran")
            if loading.bound == "budget":
                self._note(f"loading your code stopped: it {why}")
                raise StudentTimeout(f"{self._time_used_up()} while loading")
            if loading.running is None:
                self._load_failed = f"your submission could not be loaded: the student process {why}"
                self._note(self._load_failed)
                raise StudentCrashed(self._load_failed)
            if loading.bound == "load":
                self._skip.update(range(loading.running, len(self.program.cells)))
                self._note(cells.not_run_after(self._where(loading.running), why))
            else:
                self._skip.add(loading.running)
                self._note(cells.skipped(self._where(loading.running), why))

    def _where(self, index: int) -> str:
        return cells.where(self.program.kind, self.program.cells[index].label)

    def _note(self, note: str) -> None:
        note = clean(note, NOTE_CHARS)
        if note in self._notes:
            return
        if len(self._notes) < MAX_NOTES:
            self._notes.append(note)
        else:
            self._notes_dropped += 1

    # ---- retiring a child ----------------------------------------------------------------------

    def _retire(self, child: Child | None = None, hung_up: bool = False, describe: bool = True) -> str:
        """Kill the child (default: the current one), keep its output; say how it ended.

        ``hung_up``: the child closed the connection, so it is ending on its own; its
        status is read before the kill, which would otherwise be all it reports.
        ``describe``: False when nobody asks how it ended, so nothing waits for its end.
        """
        child = child or self._child
        if child is None:
            return "no process"
        if child is self._child:
            self._child = None
        if child.sock.fileno() == -1:
            child.close_output()
            return "it had already ended"
        if not describe:
            child.kill()
            self._zygote.forget(child)
            self._collect_output(child)
            self._oom_kills = self._zygote.oom_kills()  # one of its processes' own, if any: not the next child's
            return "ended by the grader"
        try:
            status = self._zygote.exit_status(child.pid) if hung_up else None
            child.kill()  # the whole group, whatever the child left running
            if status is None:
                status = self._zygote.exit_status(child.pid)
            self._zygote.forget(child)
        except ZygoteGone:
            child.kill()
            self._collect_output(child)
            return "it killed the grader's process that starts it"
        self._collect_output(child)
        oom_kills, self._oom_kills = self._oom_kills, self._zygote.oom_kills()
        return describe_exit(status, self.limits, out_of_memory=self._oom_kills > oom_kills,
                             cpu_seconds=self._zygote.cpu_seconds(child))

    def _collect_output(self, child: Child) -> None:
        """What an ending child printed, into the report; of one sent answers, only whether it
        printed more after them (the rest was read then)."""
        try:
            if child.output_until is not None:
                self._output_held_back |= os.fstat(child.output).st_size > child.output_until
            else:
                self._take_output(child)
        except OSError:
            pass  # nothing to add: the report says what the child printed before
        finally:
            child.close_output()

    def _take_output(self, child: Child, until: int | None = None) -> None:
        """What ``child`` printed from ``output_from`` to ``until`` (None: its end), into the
        report as far as its bound leaves room."""
        if child.output_from < 0:
            return
        room = max(self.limits.output_bytes - len(self._output), 0)
        size = room + 1 if until is None else min(max(until - child.output_from, 0), room + 1)
        data = os.pread(child.output, size, child.output_from)
        self._output += data[:room]
        self._output_truncated |= len(data) > room


class _LimitUsedUp(Deadline):
    """The call used up its time limit (as :class:`_CallClock` counts it)."""


class _CallClock:
    """A call's time as the submission used it: CPU seconds where the machine accounts them (see
    :meth:`Zygote.cpu_seconds`), so that a busy machine never times out correct code; else wall
    seconds, as before."""

    def __init__(self, cpu_seconds: Callable[[], float | None]):
        self._cpu_seconds = cpu_seconds
        self._cpu_start = cpu_seconds()
        self._wall_start = time.monotonic()

    def used(self) -> float:
        if self._cpu_start is not None and (now := self._cpu_seconds()) is not None:
            return now - self._cpu_start
        return time.monotonic() - self._wall_start


class ChildStartFailed(RuntimeError):
    """The student's process ended, or did not answer, while it confined itself: before it read
    the program, so before any of the submission's code ran. The grader's failure or the
    machine's (CUDA refused in the sandbox, the machine out of open files), never the student's:
    the test it happens in is an internal error, and the report a grader error, regraded by the
    next run."""


class _Loading:
    """Following one child through the program's cells, with a deadline on every event."""

    def __init__(self, process: ChildProcess, child: Child):
        self.process, self.child = process, child
        child.output_from = -1
        self.started = time.monotonic()  # then, once the child has started, that time
        self.running: int | None = None  # the cell that has started and not yet ended
        # Which limit the current wait ends at: "start", "cell", "load" or "budget".
        self.bound = "start"
        self._last_started = -1
        self._cell_ends = 0.0  # when the running cell is past its limit and the child's own stop
        self._said_stand_ins = False  # whether the running cell has said which packages it stood in for
        self._said_error = False  # whether the running module has said what its first error was

    def follow(self) -> None:
        """Wait for the child to start, then read its events until it is ready; raises Deadline,
        PeerClosed or ProtocolError. The start (the sandbox, a CUDA context) is the grader's
        time: the program's limits, and the submission's time, count from its end."""
        event, _ = protocol.recv(self.child.sock, self.started + STARTUP_TIMEOUT_S)
        if event.get("event") != "started":
            raise ProtocolError(f"unexpected event {clean(str(event), 80)}")
        self.started = time.monotonic()
        limits = self.process.limits
        ends = {"load": self.started + limits.load_timeout_s, "budget": self.started + self.process._time_left}
        while True:
            # A cell's limit counts from its start: the child stops a cell at the limit itself
            # (cells.run_cell), and is killed here only when the cell ignores that, a grace later.
            cell_ends = self._cell_ends if self.running is not None else time.monotonic() + limits.cell_timeout_s
            bounds = {"cell": cell_ends, **ends}
            self.bound = min(bounds, key=bounds.__getitem__)  # on a tie, the cell's own limit
            event, _ = protocol.recv(self.child.sock, bounds[self.bound])
            if self._record(event):
                return

    def _record(self, event: dict) -> bool:
        """Take one event in; True once the child is ready."""
        process = self.process
        kind, index, offset = event.get("event"), event.get("index"), event.get("offset")
        if self.child.output_from < 0 and type(offset) is int and 0 <= offset <= process.limits.file_bytes:
            # Output of cells an earlier child already ran is in the report.
            if kind == "ready" or (type(index) is int and index > process._printed_through):
                self.child.output_from = offset
        if kind == "ready" and self.running is None:
            return True
        if type(index) is not int or not 0 <= index < len(process.program.cells):
            raise ProtocolError(f"unexpected event {clean(str(event), 80)}")
        if kind == "cell_start" and self.running is None and index > self._last_started and index not in process._skip:
            self.running = self._last_started = index
            # A module's top-level statements each have the cell's limit, which the child keeps:
            # the load's limit bounds them all here.
            self._cell_ends = (time.monotonic() + process.limits.cell_timeout_s + CELL_STOP_GRACE_S
                               if process.program.kind == "notebook" else math.inf)
            self._said_stand_ins = self._said_error = False
            process._printed_through = max(process._printed_through, index)
        elif kind == "cell_error" and index == self.running and not self._said_error:
            message = clean(str(event.get("message")), cells.MESSAGE_CHARS)
            if event.get("memory") is True:
                message = f"{process.limits.describe_memory()} ({message})"
            # A module whose statements after its first error ran (cells.run_cell): its end comes next.
            went_on = event.get("went_on")
            if went_on is not None and not (process.program.kind == "module" and type(went_on) is int
                                            and 0 <= went_on <= len(process.program.cells[index].source)):
                raise ProtocolError(f"unexpected event {clean(str(event), 80)}")
            process._note(cells.raised(process._where(index), reported_type_name(event.get("type")), message,
                                       went_on=went_on))
            self._said_error = went_on is not None
            if went_on is None:
                self.running = None
        elif (kind == "cell_stand_ins" and index == self.running and not self._said_stand_ins
              and _package_names(event.get("packages"))):
            self._said_stand_ins = True
            process._note(cells.let_through(process._where(index), event["packages"]))
        elif kind == "cell_stopped" and index == self.running and _statement_numbers(event.get("statements"), process,
                                                                                    index):
            process._note(cells.stopped(process._where(index), process.limits.cell_timeout_s))
            process._stopped.setdefault(index, sorted(set(event["statements"])))
            self.running = None
        elif kind == "cell_done" and index == self.running:
            self.running = None
        else:
            raise ProtocolError(f"unexpected event {clean(str(event), 80)}")
        return False

    def why_late(self) -> str:
        limits = self.process.limits
        return {
            "start": f"did not start within {STARTUP_TIMEOUT_S:g} s (the grader's machine may be overloaded)",
            "cell": cells.would_not_stop(limits.cell_timeout_s),  # cells.run_cell stops the others
            "load": cells.took_too_long(limits.load_timeout_s),
            "budget": f"ran past the total time limit of {limits.student_time_s:g} s for your submission",
        }[self.bound]


def _statement_numbers(statements: object, process: ChildProcess, index: int) -> bool:
    """Whether ``statements`` is what the child may say it stopped in cell ``index``: a few
    indices of its top-level statements (each at least a character of its source)."""
    size = len(process.program.cells[index].source)
    return (type(statements) is list and 0 < len(statements) <= MAX_STOPPED_STATEMENTS
            and all(type(number) is int and 0 <= number < size for number in statements))


def _package_names(packages: object) -> bool:
    """Whether ``packages`` is what the child's cell may say it stood in for (not_installed.py)."""
    return (type(packages) is list and 0 < len(packages) <= not_installed.MAX_PER_CELL
            and all(not_installed.valid_package_name(name) for name in packages))


def describe_exit(status: int | None, limits: Limits, out_of_memory: bool = False,
                  cpu_seconds: float | None = None) -> str:
    """Words for a child's wait status, as the student should read them; ``out_of_memory``:
    the kernel killed one of the submission's processes for its memory limit meanwhile;
    ``cpu_seconds``: the CPU time of the submission's processes so far, where it is known. A
    signal is the process's word (the code may send it to itself): a limit is named only where
    the grader's own figures allow it."""
    if status is None:
        return "it stopped responding"
    if os.WIFEXITED(status):
        return f"exit code {os.WEXITSTATUS(status)}: sys.exit or os._exit"
    signum = os.WTERMSIG(status)
    if signum == signal.SIGKILL and out_of_memory:
        return f"{limits.describe_memory()} by all of your code's processes together"
    if signum == signal.SIGXCPU and cpu_seconds is not None and cpu_seconds < limits.cpu_seconds:
        return (f"killed by SIGXCPU, though your code's processes had used {cpu_seconds:.1f} s of CPU, "
                f"under the limit of {limits.cpu_seconds} s: the code sent it")
    reasons = {
        signal.SIGKILL: "killed",
        signal.SIGXCPU: f"CPU time limit of {limits.cpu_seconds} s exceeded",
        signal.SIGXFSZ: f"file size limit of {format_bytes(limits.file_bytes)} exceeded",
        signal.SIGSEGV: "segmentation fault, often memory exhausted",
        signal.SIGABRT: "aborted, often memory exhausted",
    }
    if signum in reasons:
        return reasons[signum]
    try:
        return f"killed by {signal.Signals(signum).name}"
    except ValueError:  # a real-time signal between SIGRTMIN and SIGRTMAX has no name of its own
        return f"killed by signal {signum}"


def _reported_operator(event: dict, recording: bool, reported: int) -> str:
    """The operator an ``operator`` event names: in a recorded request, a schema name
    (``aten::_softmax``), and no more events than a call can need."""
    name = event.get("name")
    if not (recording and isinstance(name, str) and _OPERATOR_NAME.fullmatch(name)
            and reported < MAX_OPERATOR_EVENTS):
        raise ProtocolError("an operator event the request did not ask for")
    return name
