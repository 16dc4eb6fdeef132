"""A call's time limit counts the CPU time the submission used, not the wall clock: a busy
machine (the time a call waits for a CPU, or sleeps) never times out correct code, and code
that computes past its limit still stops there. Waiting is bounded too: a call that gives no
answer is stopped after ``WALL_PER_CPU_SECOND`` wall seconds per second of its limit."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import replace

import pytest

from grader.core.ingest import Cell, Program
from grader.sandbox import namespaces, protocol
from grader.sandbox.cgroups import SubmissionCgroup
from grader.sandbox.child_process import WALL_PER_CPU_SECOND, ChildProcess, _Loading
from grader.sandbox.errors import StudentTimeout
from grader.sandbox.isolation import Isolation
from grader.sandbox.zygote import Child, Zygote
from tests.conftest import descendants
from tests.test_sandbox import LIMITS, session_for  # noqa: F401  (the fixture)

ONE_SECOND = replace(LIMITS, call_timeout_s=1.0)

# Seconds of CPU a call computes for, measured in the child itself.
BURN = '''
import time
def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return 1
'''


@pytest.mark.slow
@pytest.mark.parametrize("clock", ["cgroup", "process tree"])
def test_a_call_that_waits_for_a_cpu_is_not_timed_out(session_for, clock):  # noqa: F811
    # The student's processes are stopped for 4 s in the middle of 0.5 s of computing, as a
    # busy machine's scheduler would leave them waiting: past the 3 s limit as a wall clock
    # counts, well within it as CPU time. Without a cgroup (a GPU machine's container, say),
    # the CPU time of the student's process and the processes it started counts.
    limits = replace(LIMITS, call_timeout_s=3.0)
    layers = None if clock == "cgroup" else Isolation(landlock=False, namespaces=namespaces.namespaces_available())
    session = session_for(BURN, limits=limits, layers=layers)
    session.call("burn", 0.01)
    child = session._process._child.pid
    processes = [child, *descendants(child)]  # the student's process and any it started

    def hold() -> None:
        time.sleep(0.1)
        for pid in processes:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(4)
        for pid in processes:
            os.kill(pid, signal.SIGCONT)

    holder = threading.Thread(target=hold)
    holder.start()
    started = time.monotonic()
    try:
        assert session.call("burn", 0.5) == 1
        waited = time.monotonic() - started
    finally:
        holder.join()
    assert waited > limits.call_timeout_s  # a wall-clock limit would have stopped it


def test_time_asleep_is_not_computing_and_does_not_count(session_for):  # noqa: F811
    session = session_for("import time\ndef nap():\n    time.sleep(1.5)\n    return 2\n", limits=ONE_SECOND)
    assert session.call("nap") == 2


def test_computing_past_the_limit_stops_the_call_at_its_limit(session_for):  # noqa: F811
    session = session_for(BURN, limits=ONE_SECOND)
    with pytest.raises(StudentTimeout, match=r"^burn: time limit of 1 s exceeded$"):
        session.call("burn", 30)
    assert session.call("burn", 0.01) == 1  # a fresh child serves the next call


def test_a_call_that_never_answers_is_stopped_by_the_wall_clock(session_for):  # noqa: F811
    session = session_for("import time\ndef forever():\n    time.sleep(10**6)\n", limits=ONE_SECOND)
    started = time.monotonic()
    with pytest.raises(StudentTimeout, match=f"no answer after {WALL_PER_CPU_SECOND:g} s of waiting"):
        session.call("forever")
    assert time.monotonic() - started < 30


@pytest.mark.parametrize("files, seconds", [
    ({"cpu.stat": "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\n"}, 2.5),  # v2
    ({"cpuacct.usage": "1250000000\n"}, 1.25),  # v1, nanoseconds
    ({"cpu.max": "100000 100000\n"}, None),  # nothing accounts it
])
def test_a_cgroup_s_cpu_time_is_read_in_either_version(tmp_path, files, seconds):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    assert SubmissionCgroup([tmp_path]).cpu_seconds() == seconds


def test_without_a_cgroup_the_child_s_own_cpu_time_is_read_from_proc():
    spinner = subprocess.Popen([sys.executable, "-c", "import time\nt = time.process_time()\n"
                                "while time.process_time() - t < 0.3:\n    pass\ntime.sleep(60)\n"])
    try:
        zygote = Zygote(control=None, pid=0)  # no cgroup, and the child runs the code itself
        child = Child(spinner.pid, sock=None, output=-1)
        deadline = time.monotonic() + 30
        while (used := zygote.cpu_seconds(child)) < 0.3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 0.3 <= used < 5
    finally:
        spinner.kill()
        spinner.wait()
    assert zygote.cpu_seconds(child) is None  # gone: no clock, and the wall clock counts instead


def test_without_a_cgroup_the_cpu_time_of_the_processes_a_child_started_counts():
    # The child only waits here; the code it started computes.
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess, sys\nsubprocess.run([sys.executable, '-c', "
                              "'import time\\nt = time.process_time()\\nwhile time.process_time() - t < 0.4:\\n"
                              "    pass\\ntime.sleep(60)\\n'])\n"])
    try:
        zygote, child = Zygote(control=None, pid=0), Child(parent.pid, sock=None, output=-1)
        deadline = time.monotonic() + 30
        while (used := zygote.cpu_seconds(child)) < 0.4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert 0.4 <= used < 5
    finally:
        for pid in descendants(parent.pid):
            os.kill(pid, signal.SIGKILL)
        parent.kill()
        parent.wait()


class _QuietZygote:
    """Just what a ChildProcess asks of its zygote before any child has started."""

    def oom_kills(self) -> int:
        return 0


def test_a_child_s_start_is_the_grader_s_time_not_the_first_cell_s():
    # A fresh child confines itself and, on a GPU, makes its CUDA context before it runs the
    # program: seconds on a busy GPU machine. Counted in the first cell's limit, they failed
    # whole submissions to load; they count in no limit of the student's, nor in their time.
    limits = replace(LIMITS, cell_timeout_s=0.5)
    process = ChildProcess(_QuietZygote(), Program("module", (Cell("x = 1\n", "m.py"),)), limits)
    ours, theirs = socket.socketpair()

    def child() -> None:
        time.sleep(1.5)  # the sandbox and a CUDA context
        for event in ({"event": "started"}, {"event": "cell_start", "index": 0, "offset": 0},
                      {"event": "cell_done", "index": 0}, {"event": "ready", "offset": 0}):
            protocol.send(theirs, event)

    starting = threading.Thread(target=child)
    starting.start()
    try:
        loading = _Loading(process, Child(os.getpid(), ours, -1))
        loading.follow()  # no Deadline: the cell's 0.5 s started once the child had
        assert time.monotonic() - loading.started < 1.0
    finally:
        starting.join()
        ours.close()
        theirs.close()
