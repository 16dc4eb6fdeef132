"""Values a suite computes from the reference alone: once per grader process, not per submission.

Some of a suite's values do not depend on the submission at all: 06's greedy_decode tests load
a stock model that the reference trains for 60 steps, some 0.2 s of every suite process. Decorate
the function that computes such a value with :func:`once_per_grader`: it takes no arguments and
returns the value (CPU tensors, or anything pickle carries). The grader process that collects the
suite computes each one once, in a fork of its own, since the grader itself runs no torch op: its
forks would inherit the threads and the device state that ops start
(:func:`grader.engine.collected.compute_suite_values`). Every suite process, a fork of the grader,
then starts with the value. Where no grader computed it (the project's tests import the suite
directly), the first call computes it, once per process.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

_FUNCTIONS: dict[str, Callable[[], Any]] = {}  # every decorated function, by module and name
_VALUES: dict[str, Any] = {}  # those computed, by the same key


def once_per_grader(function: Callable[[], T]) -> Callable[[], T]:
    """``function()``'s value, computed once: by the grader before it forks the suite
    processes, else at the first call."""
    key = f"{function.__module__}:{function.__qualname__}"
    _FUNCTIONS[key] = function

    @functools.wraps(function)
    def value() -> T:
        if key not in _VALUES:
            _VALUES[key] = function()
        return _VALUES[key]

    return value


def pending(package: str) -> list[tuple[str, Callable[[], Any]]]:
    """The decorated functions of ``package``'s modules whose value is not computed yet."""
    return [(key, function) for key, function in _FUNCTIONS.items()
            if key not in _VALUES and key.startswith((f"{package}.", f"{package}:"))]


def provide(key: str, value: Any) -> None:
    """The value of the function at ``key`` (from :func:`pending`), computed elsewhere."""
    _VALUES[key] = value
