"""The processes that student children fork from: a clean zygote server, a zygote per submission.

A child inherits its parent's memory, freed pages included. The trusted processes hold what
no student may see: the hidden suites, the reference, the grader's environment and, in a
batch, every classmate's submission. So no student child is ever forked from them.

The first time a process grades, it starts a :class:`ZygoteServer` with ``exec``: a fresh
interpreter with a nearly empty environment (:data:`SERVER_ENV`), which imports torch and
the child's code and then only forks. For each submission, the grader hands the server one
end of a new socket; the server forks a *submission zygote* there, which joins the
submission's cgroup and, at the suite process's request, forks one student child at a
time, passing back the child's socket and its output file (a memfd) with SCM_RIGHTS. The
submission's source goes from the suite process to each child over that socket: neither the
server nor a submission zygote ever holds a submission::

    grade (trusted) ──exec──▶ zygote server (clean; torch imported, no op run)
      │    └── socket ──────────▶ └─fork─▶ submission zygote ─fork─▶ student child
      └─fork─▶ suite process ◀── control socket ──┘                        │
                   └──────────────── source, calls ◀──────────────────────┘

So a student's process holds a fresh interpreter, torch, the grader's child code, its own
source and what the suite sends it, and nothing else.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from grader.sandbox import huge_pages, namespaces
from grader.sandbox.cgroups import SubmissionCgroup
from grader.sandbox.isolation import Isolation
from grader.sandbox.limits import (OOM_SCORE_FIRST, OOM_SCORE_NEVER, Limits, die_with_parent, fork_when_room,
                                  set_oom_score)
from grader.sandbox.warm_parent import starting

# All the zygote server's environment, which every student child starts from: nothing else
# of the grader's environment (a token on a CI runner, say) reaches it.
SERVER_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "LD_LIBRARY_PATH", "CUDA_VISIBLE_DEVICES", "GRADER_DEBUG")
# Modules torch imports lazily on paths every child takes, imported once in the server:
# backward() imports sympy through this one, 0.44 s in every child otherwise.
SERVER_PRELOAD = ("torch.fx.experimental.symbolic_shapes",)
CONTROL_TIMEOUT_S = 30.0  # for any reply of a submission zygote, which runs no student code
START_TIMEOUT_S = 120.0  # the server's first answer: starting Python and importing torch


class ZygoteGone(Exception):
    """The submission's zygote is dead: only the student's code kills it (without namespaces)."""


class ZygoteUnavailable(Exception):
    """The zygote server could not be started or did not answer: the grader's problem."""


# ---- the grader's side -------------------------------------------------------------------


class ZygoteServer:
    """The clean process that submission zygotes fork from; one per grading process."""

    _shared: ZygoteServer | None = None
    _lock = threading.Lock()

    def __init__(self, process: subprocess.Popen, control: socket.socket):
        self._process = process
        self._control = control
        self._owner = os.getpid()  # a forked copy of this object is not a server of the fork's

    @classmethod
    def shared(cls, preload: tuple[str, ...] = ()) -> ZygoteServer:
        """This process's server, started (again) if it is not running; a new one imports
        ``preload`` as it starts (see :meth:`connect`)."""
        with cls._lock:
            if cls._shared is None or cls._shared._owner != os.getpid() or not cls._shared.alive():
                if cls._shared is not None and cls._shared._owner == os.getpid():
                    cls._shared.stop()
                cls._shared = cls.start(preload)
                atexit.register(cls._shared.stop)
            return cls._shared

    @classmethod
    def start(cls, preload: tuple[str, ...] = ()) -> ZygoteServer:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {key: os.environ[key] for key in SERVER_ENV if key in os.environ}
        # Asking whether CUDA is available would otherwise initialise it, and a process with
        # CUDA initialised cannot hand CUDA to forked children.
        env["PYTORCH_NVML_BASED_CUDA_CHECK"] = "1"
        env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])  # this grader, however it was found
        quiet = None if os.environ.get("GRADER_DEBUG") else subprocess.DEVNULL
        boot = ("import sys; from grader.sandbox.zygote import serve_forever; "
                "serve_forever(int(sys.argv[1]), int(sys.argv[2]), tuple(sys.argv[3:]))")
        process = subprocess.Popen([sys.executable, "-c", boot, str(theirs.fileno()), str(os.getpid()), *preload],
                                   pass_fds=[theirs.fileno()], env=env, stdin=subprocess.DEVNULL,
                                   stdout=quiet, stderr=quiet, cwd="/")
        theirs.close()
        return cls(process, ours)

    @property
    def pid(self) -> int:
        return self._process.pid

    def alive(self) -> bool:
        return self._process.poll() is None

    def connect(self, preload: tuple[str, ...] = ()) -> socket.socket:
        """A socket to a new submission zygote (forked once the server is ready), which first
        imports ``preload`` (modules a hidden suite declares; see ``Assignment.preload``)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self._control, [json.dumps({"preload": list(preload)}).encode()], [theirs.fileno()])
        except OSError as exc:
            ours.close()
            raise ZygoteUnavailable(f"the zygote server is gone ({exc})") from None
        finally:
            theirs.close()
        return ours

    def stop(self) -> None:
        self._control.close()  # the server exits on EOF; a submission zygote ends with its suite process
        try:
            self._process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()


def kill_by_pid(pid: int) -> None:
    """SIGKILL the process group ``pid`` leads, and ``pid`` (should it lead none yet). Only
    while ``pid`` is surely still that process's: not reaped."""
    for kill in (os.killpg, os.kill):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            kill(pid, signal.SIGKILL)


@dataclass
class Child:
    pid: int
    sock: socket.socket
    output: int  # the child's stdout and stderr: a memfd, read by the grader with pread
    output_from: int = 0  # offset in its output where output new to the report begins
    output_until: int | None = None  # and where it ends, when the child was sent answers (None: at its end)
    pidfd: int = -1  # the child's pidfd, from its zygote (-1 where the kernel has none)
    killed: bool = False

    def kill(self) -> None:
        """Kill the child's whole process group and the child; only once.

        Only while its pid is its own: its zygote reaps it only once told to forget it (after
        this), and its pidfd says whether something else reaped it (its zygote's death does
        that). A pid reaped can be any process's next, and a student can drive the machine's
        pids round to it; the grader's signals must never reach that process."""
        if self.killed:
            return
        self.killed = True
        self.sock.close()
        if self.pidfd < 0:  # a kernel without pidfds (before Linux 5.3): by pid, as the only way
            kill_by_pid(self.pid)
            return
        try:
            signal.pidfd_send_signal(self.pidfd, 0)
        except ProcessLookupError:
            pass  # reaped: its pid is no longer its own
        else:  # not reaped, maybe ended: its pid, and the process group it leads, are still its own
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        finally:
            os.close(self.pidfd)
            self.pidfd = -1

    def close_output(self) -> None:
        if self.output >= 0:
            os.close(self.output)
            self.output = -1


@dataclass(frozen=True)
class ZygoteConfig:
    """What a submission zygote needs to fork confined children: no part of the submission."""

    limits: Limits
    device: str
    scratch_root: str
    hidden_paths: tuple[str, ...]
    isolation: Isolation
    cgroup: tuple[str, ...]  # the submission's cgroup (a directory per hierarchy), which the zygote joins

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> ZygoteConfig:
        data = json.loads(text)
        return cls(Limits(**data["limits"]), data["device"], data["scratch_root"], tuple(data["hidden_paths"]),
                   Isolation(**data["isolation"]), tuple(data["cgroup"]))


class Zygote:
    """The suite process's handle on its submission zygote."""

    def __init__(self, control: socket.socket, pid: int, cgroup: SubmissionCgroup | None = None):
        self._control = control
        self.pid = pid
        self._cgroup = cgroup

    @staticmethod
    def configure(control: socket.socket, config: ZygoteConfig) -> None:
        """Send its configuration to the submission zygote at the other end of ``control`` (from
        :meth:`ZygoteServer.connect`), without waiting: it forks and joins its cgroup while the
        grader goes on, and :meth:`open` takes its answer."""
        try:
            control.sendall(config.to_json().encode())
        except OSError as exc:
            raise ZygoteUnavailable(f"the zygote server is gone ({type(exc).__name__}: {exc})") from None

    @classmethod
    def open(cls, control: socket.socket, config: ZygoteConfig) -> Zygote:
        """The submission zygote :meth:`configure` set up, once it answers; waits while the
        server starts."""
        try:
            control.settimeout(START_TIMEOUT_S)
            reply = json.loads(control.recv(4096) or b"{}")
        except (OSError, ValueError) as exc:
            raise ZygoteUnavailable(f"the zygote server did not answer ({type(exc).__name__}: {exc})") from None
        if "pid" not in reply:
            raise ZygoteUnavailable(f"the submission zygote could not start: {reply.get('error', 'no answer')}")
        control.settimeout(CONTROL_TIMEOUT_S)
        return cls(control, reply["pid"], SubmissionCgroup(map(Path, config.cgroup)) if config.cgroup else None)

    def spawn(self) -> Child:
        try:
            self._control.sendall(b'{"op": "spawn"}')
            data, fds, _, _ = socket.recv_fds(self._control, 4096, 3)
        except OSError as exc:
            raise ZygoteGone(str(exc)) from None
        if len(fds) not in (2, 3):
            for fd in fds:
                os.close(fd)
            raise ZygoteGone(f"no child came back ({data[:200]!r})")
        pidfd = fds[2] if len(fds) == 3 else -1  # none where the kernel has no pidfds
        return Child(json.loads(data)["pid"], socket.socket(fileno=fds[0]), fds[1], pidfd=pidfd)

    def forget(self, child: Child) -> None:
        """Let the zygote reap ``child``, which the grader has killed and asks nothing more of."""
        with contextlib.suppress(OSError):  # a zygote gone has no child left to reap
            self._control.sendall(json.dumps({"op": "forget", "pid": child.pid}).encode())

    def exit_status(self, pid: int) -> int | None:
        """The child's raw wait status, or None if it has not ended within a second. The child
        stays unreaped (see :meth:`forget`)."""
        try:
            self._control.sendall(json.dumps({"op": "status", "pid": pid}).encode())
            reply = self._control.recv(4096)
        except OSError as exc:
            raise ZygoteGone(str(exc)) from None
        if not reply:
            raise ZygoteGone("connection closed")
        return json.loads(reply)["status"]

    def oom_kills(self) -> int:
        """How many of the submission's processes the kernel has killed so far for exceeding
        its memory limit together (0 without a memory cgroup)."""
        return self._cgroup.oom_kills() if self._cgroup else 0

    def cpu_seconds(self, child: Child) -> float | None:
        """CPU time the submission has used so far: all its processes together where its cgroup
        accounts it, else that of ``child``'s process tree (the student's process and whatever it
        started); None where neither can be read."""
        if self._cgroup is not None and (seconds := self._cgroup.cpu_seconds()) is not None:
            return seconds
        return process_tree_cpu_seconds(child.pid)

    def stop(self) -> None:
        self._control.close()  # the zygote kills its children and exits on EOF


def process_tree_cpu_seconds(root: int) -> float | None:
    """CPU time of ``root`` and its descendants now alive, each with the children it has waited
    for (the processes that ended and were reaped); None
    where ``root`` is gone or the kernel does not list children (/proc/PID/task/TID/children)."""
    if not os.path.exists(f"/proc/{root}/task/{root}/children"):
        return None
    ticks, pending, seen = 0, [root], set()
    while pending:
        pid = pending.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:  # the fields after the command, which may hold spaces and parentheses
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            threads = os.listdir(f"/proc/{pid}/task")
        except (OSError, IndexError):
            if pid == root:
                return None
            continue  # it ended since its parent listed it: its parent's waited-for time has it
        ticks += sum(int(field) for field in fields[11:15])  # utime, stime, cutime, cstime
        for tid in threads:
            with contextlib.suppress(OSError):  # a thread that ended since
                pending.extend(int(child) for child in Path(f"/proc/{pid}/task/{tid}/children").read_text().split())
    return ticks / os.sysconf("SC_CLK_TCK")


# ---- the zygote server (exec'd) ------------------------------------------------------------


def serve_forever(control_fd: int, parent_pid: int, preload: tuple[str, ...] = ()) -> None:
    """The zygote server's main loop: fork a submission zygote for each socket received."""
    die_with_parent()
    if os.getppid() != parent_pid:  # the grader died before the line above took effect
        os._exit(0)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the grader's to handle
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # zygotes are reaped by the kernel
    with starting():
        import torch  # noqa: F401  (no op is ever run here: GNU OpenMP is not fork-safe)

        from grader.sandbox import _child  # noqa: F401

        for module in (*SERVER_PRELOAD, *preload):
            importlib.import_module(module)
    control = socket.socket(fileno=control_fd)
    # The heap goes onto huge pages (huge_pages.py) one block at a time while no request waits:
    # about a second in all, which saves some 20 ms of each child's start and end, and which no
    # submission's zygote should wait for. It starts now, while the grader itself starts.
    collapsed_with = -1  # how many modules the heap held when its blocks were listed
    blocks: list[int] = []  # those not moved yet, the last first
    while True:
        if len(sys.modules) != collapsed_with:
            blocks, collapsed_with = huge_pages.heap_blocks()[::-1], len(sys.modules)
        move_heap_while_idle(control, blocks)
        data, fds, _, _ = socket.recv_fds(control, 1 << 16, 1)
        if not data:
            os._exit(0)
        for module in json.loads(data).get("preload", ()):
            importlib.import_module(module)  # named by a hidden suite's suite.toml: trusted
        gc.freeze()  # a child's collections then leave these objects' pages shared
        for fd in fds:
            if os.fork() == 0:
                control.close()
                _serve_submission(fd)
            os.close(fd)


def move_heap_while_idle(control: socket.socket, blocks: list[int]) -> None:
    """Move ``blocks`` (of :func:`huge_pages.heap_blocks`) onto huge pages, the last first,
    until none is left or a request waits on ``control``: a request waits one block at most."""
    while blocks and not select.select([control], [], [], 0)[0]:
        huge_pages.collapse_block(blocks.pop())


def _serve_submission(fd: int) -> None:
    """A submission zygote. Never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # its children's statuses are asked for
        # Only the control socket may reach a child.
        os.closerange(3, fd)
        os.closerange(fd + 1, os.sysconf("SC_OPEN_MAX"))
        # File objects that owned a closed descriptor would close its number again when
        # replaced; the standard streams are replaced in every child, so rebind them now
        # to objects that own nothing.
        sys.stdin = open(0, closefd=False)
        sys.stdout = open(1, "w", closefd=False)
        sys.stderr = open(2, "w", closefd=False)
        # No death signal from the server: a student who kills it (reachable without
        # namespaces) must not take the other submissions being graded along. This zygote
        # ends when its suite process does, which closes the control socket.
        control = socket.socket(fileno=fd)
        data = control.recv(1 << 16)
        if not data:
            return
        config = ZygoteConfig.from_json(data)
        try:
            # Before any child exists: they all count against its limits.
            SubmissionCgroup(map(Path, config.cgroup)).add(os.getpid())
        except OSError as exc:
            control.sendall(json.dumps({"error": f"cannot join the submission's cgroup: {exc}"}).encode())
            return
        # Past the memory limit, the kernel kills one of the submission's processes: never this
        # one, which serves the next child (needs root; its children undo it).
        set_oom_score(OOM_SCORE_NEVER)
        control.sendall(json.dumps({"pid": os.getpid()}).encode())
        _SubmissionZygote(control, config).serve()
    finally:
        os._exit(0)


class _SubmissionZygote:
    """Forks the submission's children and says how they ended. A child is reaped only once the
    suite process has killed it and forgets it: until then its pid, and its process group's,
    are its own, so the suite process's signals by pid reach it and nothing else."""

    def __init__(self, control: socket.socket, config: ZygoteConfig):
        self._control = control
        self._config = config
        self._children: set[int] = set()  # each child not forgotten
        self._statuses: dict[int, int] = {}  # how those of them that ended ended
        self._forgotten: set[int] = set()  # not reaped yet

    def serve(self) -> None:
        try:
            while True:
                self._reap_forgotten()
                readable, _, _ = select.select([self._control], [], [], 0.1 if self._forgotten else None)
                if not readable:
                    continue
                data = self._control.recv(4096)
                if not data:
                    return
                request = json.loads(data)
                if request["op"] == "spawn":
                    self._spawn()
                elif request["op"] == "status":
                    self._control.sendall(json.dumps({"status": self._wait_for(request["pid"])}).encode())
                elif request["op"] == "forget":
                    self._forget(request["pid"])
        finally:
            for pid in self._children:  # none reaped: each pid is still its child's
                kill_by_pid(pid)

    def _spawn(self) -> None:
        from grader.sandbox import _child

        config = self._config
        scratch = Path(tempfile.mkdtemp(prefix="child-", dir=config.scratch_root))
        ours, theirs = socket.socketpair()
        # Output goes to memory, not to a file in the grader's directories: the child's
        # RLIMIT_FSIZE caps it, and it is gone when the grader closes its end.
        output = os.memfd_create("student-output")
        pid = namespaces.fork_init() if config.isolation.namespaces else fork_when_room()
        if pid == 0:
            self._control.close()
            ours.close()
            set_oom_score(OOM_SCORE_FIRST)  # the first the kernel kills, of the submission's and of the machine's
            _child.run(theirs, output, config.limits, scratch, config.device, config.hidden_paths, config.isolation)
        theirs.close()
        self._children.add(pid)
        try:  # the suite process's handle on this very process, whatever takes its pid later
            pidfd = [os.pidfd_open(pid)]
        except OSError:  # a kernel without pidfds (before Linux 5.3)
            pidfd = []
        socket.send_fds(self._control, [json.dumps({"pid": pid}).encode()], [ours.fileno(), output, *pidfd])
        ours.close()
        os.close(output)
        for fd in pidfd:
            os.close(fd)

    def _forget(self, pid: int) -> None:
        if pid not in self._children:
            return
        self._children.discard(pid)
        self._statuses.pop(pid, None)
        self._forgotten.add(pid)

    def _reap_forgotten(self) -> None:
        for pid in list(self._forgotten):
            try:
                reaped, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                reaped = pid
            if reaped:
                self._forgotten.discard(pid)

    def _wait_for(self, pid: int, wait_s: float = 1.0) -> int | None:
        """How the child ``pid`` ended, waiting ``wait_s`` at most; None if it has not (or is
        forgotten). The child is not reaped."""
        if pid in self._statuses or pid not in self._children:
            return self._statuses.get(pid)
        deadline = time.monotonic() + wait_s
        with contextlib.suppress(OSError):  # readable when it ends (Linux 5.3); else polled below
            pidfd = os.pidfd_open(pid)
            try:
                select.select([pidfd], [], [], wait_s)
            finally:
                os.close(pidfd)
        while (ended := os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)) is None:
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)
        self._statuses[pid] = _wait_status(ended)
        return self._statuses[pid]


def _wait_status(ended: os.waitid_result) -> int:
    """``waitid``'s account of an ended process as the wait status ``waitpid`` gives."""
    if ended.si_code == os.CLD_EXITED:
        return (ended.si_status & 0xFF) << 8
    return ended.si_status | (0x80 if ended.si_code == os.CLD_DUMPED else 0)
