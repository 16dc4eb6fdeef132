"""Hangs cost seconds, not minutes: after a call times out, calls that may run the hung code
get a shorter limit, derived from the reference's time for the call (at least
``Limits.hung_call_timeout_s``); everything else keeps the full per-call limit.

Which calls those are is read from the source (:class:`grader.sandbox.hung_calls.HungCalls`),
so these tests assert on the limit each call is given, never on wall time; the end-to-end
test checks that correct but slow code next to a hang keeps its marks.
"""

from __future__ import annotations

from dataclasses import replace
from types import ModuleType

import pytest
import torch

import reference.multihead
from grader.core.ingest import Cell, Program
from grader.sandbox.hung_calls import HungCalls
from grader.sandbox.reference_timing import reference_seconds
from tests.conftest import TEST_LIMITS, mutant, notebook_text, part

LIMITS = replace(TEST_LIMITS, call_timeout_s=2.0, hung_call_timeout_s=0.25)

# Tutorial style: split with a loop over heads, attention per head with einsum.
HEADS_BY_LOOP = """\
import math
import torch
from torch import nn


def split_heads(x, num_heads):
    B, T, D = x.shape
    if D % num_heads:
        raise ValueError("D must be divisible by num_heads")
    size = D // num_heads
    return torch.stack([x[:, :, h * size:(h + 1) * size] for h in range(num_heads)], dim=1)


def combine_heads(x):
    heads, h = [], 0
    while h < x.shape[1]:
        heads.append(x[:, h])
        h += 1
    return torch.cat(heads, dim=-1)


class MultiHeadAttention(nn.Module):
    def __init__(self, d_model, num_heads, dropout=0.0, bias=True):
        super().__init__()
        if d_model % num_heads:
            raise ValueError("d_model must be divisible by num_heads")
        self.h, self.d_k = num_heads, d_model // num_heads
        self.W_q = nn.Linear(d_model, d_model, bias=bias)
        self.W_k = nn.Linear(d_model, d_model, bias=bias)
        self.W_v = nn.Linear(d_model, d_model, bias=bias)
        self.W_o = nn.Linear(d_model, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, query, key, value, mask=None):
        q, k, v = (split_heads(W(t), self.h) for W, t in ((self.W_q, query), (self.W_k, key), (self.W_v, value)))
        heads = []
        for h in range(self.h):
            scores = torch.einsum("bqd,bkd->bqk", q[:, h], k[:, h]) / math.sqrt(self.d_k)
            if mask is not None:
                scores = scores.masked_fill(mask.squeeze(1) == 0, -1e9)
            heads.append(self.dropout(scores.softmax(dim=-1)) @ v[:, h])
        return self.W_o(combine_heads(torch.stack(heads, dim=1)))
"""


def hung_calls(source: str) -> HungCalls:
    return HungCalls(Program("notebook", (Cell(source, "cell 1"),)), LIMITS)


def test_a_call_gets_the_full_limit_until_its_function_has_timed_out():
    calls = hung_calls(HEADS_BY_LOOP)
    assert calls.timeout_s("split_heads") == (2.0, None)
    calls.timed_out("split_heads")
    seconds, why = calls.timeout_s("split_heads")
    assert seconds == 0.25 and why.startswith("split_heads ran past the time limit of 2 s")


def test_a_hang_shortens_the_calls_that_may_run_its_code_and_no_other():
    calls = hung_calls(HEADS_BY_LOOP)
    calls.timed_out("split_heads")
    assert calls.timeout_s("MultiHeadAttention.forward")[0] == 0.25  # its forward calls split_heads
    assert calls.timeout_s("MultiHeadAttention")[0] == 0.25
    assert calls.timeout_s("combine_heads") == (2.0, None)  # neither calls the other


def test_a_hung_caller_shortens_what_it_calls_since_the_hang_may_be_there():
    calls = hung_calls(HEADS_BY_LOOP)
    calls.timed_out("MultiHeadAttention.forward")
    assert calls.timeout_s("split_heads")[0] == calls.timeout_s("combine_heads")[0] == 0.25


def test_reach_follows_helpers_and_notebook_cells():
    program = Program("notebook", (
        Cell("def _project(x):\n    while True:\n        pass\n", "cell 1"),
        Cell("class Encoder:\n    def forward(self, x):\n        return _project(x)\n", "cell 2"),
        Cell("def encode(x):\n    return Encoder().forward(x)\n", "cell 3"),
        Cell("def unrelated(x):\n    return x\n", "cell 4"),
    ))
    calls = HungCalls(program, LIMITS)
    calls.timed_out("encode")
    assert calls.timeout_s("Encoder.forward")[0] == calls.timeout_s("_project")[0] == 0.25
    assert calls.timeout_s("unrelated")[0] == 2.0


def test_the_shorter_limit_never_exceeds_the_per_call_limit():
    calls = HungCalls(Program("module", (Cell("def f():\n    pass\n", "mha.py"),)),
                      replace(LIMITS, call_timeout_s=0.1))
    calls.timed_out("f")
    assert calls.timeout_s("f")[0] == 0.1


def test_the_shorter_limit_is_the_references_time_times_the_slowdown_above_the_floor():
    calls = hung_calls(HEADS_BY_LOOP)
    calls.timed_out("split_heads")
    slowdown = LIMITS.hung_call_slowdown
    assert slowdown >= 200  # a loop 100 times slower than the reference keeps its marks
    assert calls.timeout_s("split_heads", lambda: 1.2 / slowdown)[0] == pytest.approx(1.2)  # a heavy call
    assert calls.timeout_s("split_heads", lambda: 1e-5)[0] == 0.25  # the round trip dominates
    assert calls.timeout_s("split_heads", lambda: None)[0] == 0.25  # no yardstick
    assert calls.timeout_s("split_heads", lambda: 0.5)[0] == 2.0  # never above the per-call limit


def test_the_reference_is_timed_only_for_a_shortened_call():
    def not_asked() -> float:
        raise AssertionError("timed a call that keeps the full limit")

    calls = hung_calls(HEADS_BY_LOOP)
    assert calls.timeout_s("split_heads", not_asked) == (2.0, None)
    calls.timed_out("split_heads")
    assert calls.timeout_s("combine_heads", not_asked) == (2.0, None)


def test_the_reference_times_its_own_function_and_its_own_class_on_the_calls_arguments():
    x = torch.randn(2, 5, 8)
    assert reference_seconds(reference.multihead, "split_heads", None, None, (x, 2), {}) > 0
    built = ("MultiHeadAttention", (8, 2), {"dropout": 0.1})
    state = torch.random.get_rng_state()
    assert reference_seconds(reference.multihead, "MultiHeadAttention", "__call__", built, (x, x, x), {}) > 0
    # Building the reference's module draws no random numbers that the hidden tests would see.
    assert torch.equal(torch.random.get_rng_state(), state)


def test_no_yardstick_where_the_reference_cannot_make_the_call():
    x = torch.randn(2, 5, 8)
    assert reference_seconds(reference.multihead, "my_helper", None, None, (x,), {}) is None  # not the reference's
    assert reference_seconds(reference.multihead, "split_heads", None, None, (x, 3), {}) is None  # it refuses
    slow = ModuleType("slow")
    slow.f = lambda: sum(range(10**5))
    assert reference_seconds(slow, "f", None, None, (), {}) > 0


@pytest.mark.slow
def test_correct_slow_code_beside_a_hang_keeps_its_marks(grade_source):
    # The index stops advancing for sequences of length one: only combine_heads' last test
    # hangs, and its other tests, and every test of the MultiHeadAttention that calls it,
    # run under the shorter limit (the suite runs combine_heads' tests first).
    stalls_on_length_one = mutant(HEADS_BY_LOOP, "        h += 1\n", "        h += 1 if x.shape[2] > 1 else 0\n")
    report = grade_source(notebook_text(stalls_on_length_one), suffix=".ipynb", limits=LIMITS)
    failing = [(t.name, t.outcome) for p in report.parts for t in p.tests if t.outcome != "passed"]
    assert failing == [("test_combine_heads_batch_and_length_of_one", "timeout")]


@pytest.mark.slow
def test_a_function_that_always_hangs_costs_one_full_limit_per_part_it_reaches(grade_source):
    always_hangs = mutant(HEADS_BY_LOOP, "    B, T, D = x.shape\n", "    while True:\n        pass\n")
    report = grade_source(always_hangs, limits=LIMITS)
    timeouts = [t.message for p in report.parts for t in p.tests if t.outcome == "timeout"]
    full = [message for message in timeouts if "time limit of 2 s exceeded" in message]
    assert len(full) == 1 and len(timeouts) > 10  # the first hang only; the rest get 0.25 s
    assert part(report, "combine_heads").score == part(report, "combine_heads").max_score
