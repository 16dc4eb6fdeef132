"""A trusted function in a fork of the grader: its bytes, its failure, its deadline, its reaping."""

from __future__ import annotations

import os
import signal
import time

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
