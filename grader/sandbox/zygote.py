"""A fork server for student children.

The trusted suite process imports the reference and the hidden tests and runs torch ops,
so it must never fork a student child itself: the child would inherit those modules, and
GNU OpenMP deadlocks a child forked after a parallel op. Instead, before it loads
anything secret or runs any op, it starts a :class:`Zygote`: a clean fork (torch
imported, nothing run) that forks one child per request and hands back a connected
socket (SCM_RIGHTS), so a child killed mid-test can be replaced at any time.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from grader.ingest import Program
from grader.sandbox import _child
from grader.sandbox.cgroups import PidsCgroup
from grader.sandbox.isolation import Isolation
from grader.sandbox.limits import Limits, die_with_parent, fork_when_room



@dataclass
class Child:
    pid: int
    sock: socket.socket
    scratch: Path
    output_from: int = 0  # offset in its output file where output new to the report begins

    def kill(self) -> None:
        """Kill the child's whole process group (and the child, should it not lead one yet)."""
        for kill, target in ((os.killpg, self.pid), (os.kill, self.pid)):
            try:
                kill(target, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self.sock.close()


class ZygoteGone(Exception):
    """The zygote is dead: only the student's code (running as the same user) kills it."""


class Zygote:
    def __init__(self, pid: int, control: socket.socket, cgroup: PidsCgroup | None = None):
        self.pid = pid
        self._control = control
        self._cgroup = cgroup  # holds the zygote and so every child it forks

    @classmethod
    def start(
        cls,
        program: Program,
        limits: Limits,
        device: str,
        scratch_root: Path,
        hidden_paths: tuple[str, ...],
        isolation: Isolation,
    ) -> Zygote:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            _serve(theirs, program, limits, device, scratch_root, hidden_paths, isolation)
        theirs.close()
        zygote = cls(pid, ours)
        if isolation.pids_cgroup:  # before the first spawn request, so before any child exists
            try:
                zygote._cgroup = PidsCgroup.create(f"zygote-{pid}", limits.processes)
                zygote._cgroup.add(pid)
            except OSError:
                zygote.stop()
                raise
        return zygote

    def spawn(self, skip: frozenset[int]) -> Child:
        try:
            self._control.sendall(json.dumps({"op": "spawn", "skip": sorted(skip)}).encode())
            data, fds, _, _ = socket.recv_fds(self._control, 4096, 1)
        except OSError as exc:
            raise ZygoteGone(str(exc)) from None
        if not fds:
            raise ZygoteGone(f"no child came back ({data[:200]!r})")
        reply = json.loads(data)
        return Child(reply["pid"], socket.socket(fileno=fds[0]), Path(reply["scratch"]))

    def exit_status(self, pid: int) -> int | None:
        """The child's raw wait status, or None if it has not ended within a second."""
        try:
            self._control.sendall(json.dumps({"op": "status", "pid": pid}).encode())
            reply = self._control.recv(4096)
        except OSError as exc:
            raise ZygoteGone(str(exc)) from None
        if not reply:
            raise ZygoteGone("connection closed")
        return json.loads(reply)["status"]

    def stop(self) -> None:
        self._control.close()  # the zygote kills its children and exits on EOF
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass
        if self._cgroup is not None:
            self._cgroup.remove()


def _serve(
    control: socket.socket,
    program: Program,
    limits: Limits,
    device: str,
    scratch_root: Path,
    hidden_paths: tuple[str, ...],
    isolation: Isolation,
) -> None:
    """The zygote's loop. Never returns."""
    try:
        # Only the control socket may reach a child: any other inherited descriptor (the
        # pipe that carries results to the grader, say) would let student code forge them.
        os.closerange(3, control.fileno())
        os.closerange(control.fileno() + 1, os.sysconf("SC_OPEN_MAX"))
        # File objects that owned a closed descriptor would close its number again when
        # replaced; the standard streams are replaced in every child, so rebind them now
        # to objects that own nothing.
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        die_with_parent()
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the grader's to handle
        _Server(control, program, limits, device, scratch_root, hidden_paths, isolation).serve()
    finally:
        os._exit(0)


class _Server:
    def __init__(self, control, program, limits, device, scratch_root, hidden_paths, isolation):
        self._control = control
        self._run_args = (program, limits)
        self._device = device
        self._scratch_root = scratch_root
        self._hidden_paths = hidden_paths
        self._isolation = isolation
        self._children: set[int] = set()
        self._statuses: dict[int, int] = {}

    def serve(self) -> None:
        try:
            while True:
                self._reap()
                readable, _, _ = select.select([self._control], [], [], 0.1)
                if not readable:
                    continue
                data = self._control.recv(4096)
                if not data:
                    return
                request = json.loads(data)
                if request["op"] == "spawn":
                    self._spawn(frozenset(request["skip"]))
                elif request["op"] == "status":
                    self._control.sendall(json.dumps({"status": self._wait_for(request["pid"])}).encode())
        finally:
            for pid in self._children:
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass

    def _spawn(self, skip: frozenset[int]) -> None:
        scratch = Path(tempfile.mkdtemp(prefix="child-", dir=self._scratch_root))
        ours, theirs = socket.socketpair()
        pid = fork_when_room()
        if pid == 0:
            self._control.close()
            ours.close()
            program, limits = self._run_args
            _child.run(theirs, program, limits, scratch, skip, self._device, self._hidden_paths,
                       self._isolation)
        theirs.close()
        self._children.add(pid)
        socket.send_fds(self._control, [json.dumps({"pid": pid, "scratch": str(scratch)}).encode()], [ours.fileno()])
        ours.close()

    def _reap(self) -> None:
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._children.discard(pid)
            self._statuses[pid] = status

    def _wait_for(self, pid: int, wait_s: float = 1.0) -> int | None:
        deadline = time.monotonic() + wait_s
        while pid not in self._statuses and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.005)
        return self._statuses.get(pid)

