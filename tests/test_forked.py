"""A trusted function in a fork of the grader: its bytes, its failure, its deadline, its reaping."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.engine.forked import Forked


def test_the_bytes_a_fork_returns_come_back_whole_and_it_is_reaped():
    payload = os.urandom(3 << 20)  # past a pipe's buffer and one read's chunk
    fork = Forked(lambda: payload, timeout_s=60)
    fork.wait()
    assert fork.take() == payload
    assert fork.exited_cleanly() and fork.ended[1].ru_utime >= 0


def test_a_fork_that_raises_sends_nothing_and_exits_with_a_failure():
    def fails() -> bytes:
        raise RuntimeError("the suite's own bug")

    fork = Forked(fails, timeout_s=60)
    fork.wait()
    assert fork.take() == b""
    assert not fork.exited_cleanly() and os.waitstatus_to_exitcode(fork.ended[0]) == 1


def test_a_fork_past_its_deadline_is_killed_and_reaped_and_sends_none():
    def hangs() -> bytes:
        time.sleep(3600)
        return b"never"

    fork = Forked(hangs, timeout_s=0.2)  # it never returns, so how busy the machine is does not matter
    fork.wait()
    assert fork.take() is None
    assert os.WIFSIGNALED(fork.ended[0]) and os.WTERMSIG(fork.ended[0]) == signal.SIGKILL
    fork.close()  # again: nothing left to do


def test_what_a_fork_prints_stays_out_of_the_grader_s_output(capfd, monkeypatch):
    monkeypatch.delenv("GRADER_DEBUG", raising=False)  # which would let it through
    def chatty() -> bytes:
        print("from the fork")
        os.write(2, b"raw stderr\n")
        return b"ok"

    fork = Forked(chatty, timeout_s=60)
    fork.wait()
    assert fork.take() == b"ok"
    out, err = capfd.readouterr()
    assert "from the fork" not in out and "raw stderr" not in err


def test_a_fork_that_cannot_start_raises_and_leaves_no_descriptor_open(monkeypatch):
    def no_room() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    before = set(os.listdir("/proc/self/fd"))
    monkeypatch.setattr(os, "fork", no_room)
    with pytest.raises(BlockingIOError):
        Forked(lambda: b"never", timeout_s=60)
    assert set(os.listdir("/proc/self/fd")) == before


WARM_PARENT = """
import gc, json
from grader.engine.forked import Forked
from grader.sandbox.warm_parent import pause_collector

def state():
    return [gc.isenabled(), gc.get_freeze_count() > 0]

{setup}
before = state()
fork = Forked(lambda: json.dumps(state()).encode(), timeout_s=60)
fork.wait()
print(json.dumps([before, json.loads(fork.take()), state()]))
"""


@pytest.mark.parametrize("setup, want", [
    # The grader process: no collection while it starts; from its first fork on, both collect,
    # and neither scans what it held then.
    ("pause_collector()", [[False, False], [True, True], [True, True]]),
    # A caller who turned the collector off keeps it off.
    ("gc.disable()\npause_collector()", [[False, False], [False, True], [False, True]]),
])
def test_a_warm_parent_collects_again_from_its_first_fork_and_never_scans_what_it_held(setup, want):
    script = WARM_PARENT.format(setup=setup)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == want
