"""A suite's values that depend on no submission: computed once per grader process, in a fork."""

from __future__ import annotations

import os
import time
from pathlib import Path

from grader.engine import collected
from grader.engine.collected import compute_suite_values
from grader.suite import computed_once, once_per_grader


def _as_in(package: str, function):
    """``function`` as a module of ``package`` defines it."""
    function.__module__ = f"{package}.conftest"
    return once_per_grader(function)


def test_a_value_is_computed_at_its_first_call_where_no_grader_computed_it():
    calls = []

    def value():
        calls.append(1)
        return len(calls)

    value = _as_in("reference.hidden.a_first_call", value)
    assert (value(), value()) == (1, 1) and calls == [1]
    assert computed_once.pending("reference.hidden.a_first_call") == []


def test_the_grader_computes_its_suite_s_values_in_a_fork_and_only_its_suite_s():
    ours = _as_in("reference.hidden.a_ours", lambda: os.getpid())
    theirs = _as_in("reference.hidden.a_theirs", lambda: os.getpid())
    compute_suite_values(Path("reference/hidden/a_ours"))
    assert computed_once.pending("reference.hidden.a_ours") == []
    assert ours() != os.getpid()  # computed in another process, which every later fork inherits here
    assert len(computed_once.pending("reference.hidden.a_theirs")) == 1
    assert theirs() == os.getpid()


def test_a_value_that_fails_in_the_fork_is_left_to_each_suite_process():
    here = os.getpid()

    def only_here():
        if os.getpid() != here:
            raise RuntimeError("fails in the grader's fork")
        return "computed here"

    value = _as_in("reference.hidden.a_fails", only_here)
    compute_suite_values(Path("reference/hidden/a_fails"))
    assert len(computed_once.pending("reference.hidden.a_fails")) == 1
    assert value() == "computed here"


def test_a_value_that_takes_too_long_in_the_fork_is_left_to_each_suite_process(monkeypatch):
    here = os.getpid()

    def hangs_in_a_fork():
        while os.getpid() != here:
            time.sleep(1)
        return "computed here"

    monkeypatch.setattr(collected, "SUITE_VALUE_TIMEOUT_S", 0.5)
    value = _as_in("reference.hidden.a_hangs", hangs_in_a_fork)
    compute_suite_values(Path("reference/hidden/a_hangs"))
    assert len(computed_once.pending("reference.hidden.a_hangs")) == 1
    assert value() == "computed here"
