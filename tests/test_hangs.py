"""Hangs cost seconds, not minutes: a call gets ``Limits.call_floor_s``, then, still running,
the limit the reference's time for the same call gives it (``call_slowdown`` times, at most
``call_timeout_s``; the full limit where the reference cannot time it). After a call times
out, calls that may run the hung code start from ``Limits.hung_call_timeout_s`` instead.

Which calls those are is read from the source (:class:`grader.sandbox.hung_calls.HungCalls`),
so these tests assert on the limit each call is given, never on wall time; the end-to-end
tests check that correct but slow code (Python loops over heads, over positions), alone or
next to a hang, keeps its marks.
"""

from __future__ import annotations

import resource
import time
from dataclasses import replace
from types import ModuleType

import pytest
import torch

import reference.multihead
import reference.positions
from grader.core.ingest import Cell, Program
from grader.sandbox.errors import StudentTimeout
from grader.sandbox.hung_calls import HungCalls
from grader.sandbox.reference_timing import reference_seconds
from reference import as_submission
from tests.conftest import ROOT, TEST_LIMITS, mutant, notebook_text, part
from tests.test_sandbox import session_for  # noqa: F401  (the fixture)

LIMITS = replace(TEST_LIMITS, call_timeout_s=2.0, call_floor_s=0.5, hung_call_timeout_s=0.25)

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


# Attention one query position at a time, the weights put together before dropout.
POSITIONS_BY_LOOP = mutant(HEADS_BY_LOOP, """        heads = []
        for h in range(self.h):
            scores = torch.einsum("bqd,bkd->bqk", q[:, h], k[:, h]) / math.sqrt(self.d_k)
            if mask is not None:
                scores = scores.masked_fill(mask.squeeze(1) == 0, -1e9)
            heads.append(self.dropout(scores.softmax(dim=-1)) @ v[:, h])
""", """        heads = []
        keep = None if mask is None else mask.squeeze(1) != 0  # (B or 1, Tq or 1, Tk)
        for h in range(self.h):
            rows = []
            for i in range(q.shape[2]):
                row = (k[:, h] @ q[:, h, i].unsqueeze(-1)).squeeze(-1) / math.sqrt(self.d_k)  # (B, Tk)
                if keep is not None:
                    row = row.masked_fill(~keep[:, min(i, keep.shape[1] - 1)], -1e9)
                rows.append(row.softmax(dim=-1))
            heads.append(self.dropout(torch.stack(rows, dim=1)) @ v[:, h])
""")

# The sinusoidal table element by element, as tutorials write it: 650 times the reference's
# time for the suite's longest table (5000 x 64).
TABLE_BY_LOOP = """\
import math
import torch


def sinusoidal_encoding(max_len, d_model):
    if d_model % 2:
        raise ValueError("d_model must be even")
    if max_len < 0:
        raise ValueError("max_len must be non-negative")
    pe = torch.zeros(max_len, d_model)
    for pos in range(max_len):
        for i in range(0, d_model, 2):
            angle = pos / (10000 ** (i / d_model))
            pe[pos, i] = math.sin(angle)
            pe[pos, i + 1] = math.cos(angle)
    return pe
"""


def hung_calls(source: str) -> HungCalls:
    return HungCalls(Program("notebook", (Cell(source, "cell 1"),)), LIMITS)


def test_a_call_gets_the_floor_then_what_the_reference_s_time_for_it_gives():
    calls = hung_calls(HEADS_BY_LOOP)
    slowdown = LIMITS.call_slowdown
    assert slowdown >= 2000  # Python loops element by element where the reference is vectorised
    assert calls.limit("split_heads").first_s == 0.5
    assert calls.limit("split_heads", lambda: 1.2 / slowdown).final() == (pytest.approx(1.2), (
        "a call may take 3000 times the reference's time for it, at least 0.5 s and 100 us per element of its "
        "tensor arguments"))  # a heavy call
    assert calls.limit("split_heads", lambda: 1e-5).final()[0] == 0.5  # the round trip dominates
    assert calls.limit("split_heads", lambda: 0.5).final() == (2.0, None)  # never above the per-call limit
    # A whole job measured against the same job done with the reference, as long as the
    # submission's time lasts (07's training of a GPT that computes attention one scalar at a
    # time takes minutes).
    assert calls.limit("train", lambda: 0.5, job=True).final() == (pytest.approx(1500), (
        "a job may take 3000 times the reference's time for the same job"))
    # No yardstick (an argument in the student's process, a helper of the student's own): the
    # full limit, as slow as honest code may be.
    assert calls.limit("my_helper", lambda: None).final() == (2.0, None)
    # A loop over every element of its input: 100 us each (5000 elements, 1e-5 s of reference).
    assert calls.limit("split_heads", lambda: 1e-5, elements=5000).final()[0] == pytest.approx(0.5)
    assert calls.limit("split_heads", lambda: 1e-5, elements=15_000).final()[0] == pytest.approx(1.5)


def test_calls_that_may_run_hung_code_start_from_the_shorter_floor_with_no_full_limit():
    program = Program("notebook", (
        Cell("def _project(x):\n    while True:\n        pass\n", "cell 1"),
        Cell("class Encoder:\n    def forward(self, x):\n        return _project(x)\n", "cell 2"),
        Cell("def encode(x):\n    return Encoder().forward(x)\n", "cell 3"),
        Cell("def unrelated(x):\n    return x\n", "cell 4"),
    ))
    calls = HungCalls(program, LIMITS)
    calls.timed_out("encode")
    assert calls.limit("Encoder.forward").first_s == calls.limit("_project").first_s == 0.25
    assert calls.limit("_project", lambda: None).final()[0] == 0.25  # no yardstick: the floor
    assert calls.limit("_project", lambda: 1e-5, elements=15_000).final()[0] == 0.25  # nor elements
    assert calls.limit("_project", lambda: 1.2 / LIMITS.hung_call_slowdown).final() == (pytest.approx(1.2), (
        "encode ran past its time limit in an earlier call, so calls that may run its code get 1.2 s"))
    # Near a hang, however heavy the call, never more than a call with no yardstick gets.
    assert calls.limit("_project", lambda: 1.0).final()[0] == LIMITS.call_timeout_s
    assert calls.limit("unrelated").first_s == 0.5


def test_a_call_handed_an_object_of_a_class_that_hung_is_near_the_hang():
    calls = hung_calls("class GPT:\n    def forward(self, x):\n        while True:\n            pass\n\n\n"
                       "def unrelated(x):\n    return x\n")
    # A grader helper's training loop, handed the student's GPT, ran out of time: the GPT hung,
    # not the helper (which the submission does not define).
    calls.timed_out("module.train", objects=["GPT"])
    assert calls.limit("GPT.forward").first_s == LIMITS.hung_call_timeout_s
    assert calls.limit("module.train", objects=["GPT"]).first_s == LIMITS.hung_call_timeout_s
    assert calls.limit("module.seed").first_s == LIMITS.call_floor_s
    assert calls.limit("unrelated").first_s == LIMITS.call_floor_s
    # A class the source does not define at the top (made in a function): its own calls still are.
    calls.timed_out("Made.forward")
    assert calls.limit("Made.forward").first_s == LIMITS.hung_call_timeout_s


def test_a_student_function_that_times_out_holding_a_model_is_what_hung_not_the_model():
    # generate may be slow in its own loop: the GPT it was handed keeps its full limits, and so
    # does the training of that GPT (a job of its own).
    calls = hung_calls("class GPT:\n    def forward(self, x):\n        return x\n\n\n"
                       "def generate(model, idx):\n    while True:\n        pass\n")
    calls.timed_out("generate", objects=["GPT"])
    assert calls.limit("generate", objects=["GPT"]).first_s == LIMITS.hung_call_timeout_s
    assert calls.limit("GPT.forward").first_s == LIMITS.call_floor_s
    assert calls.limit("module.train", objects=["GPT"]).first_s == LIMITS.call_floor_s


def test_a_limit_never_exceeds_the_per_call_limit():
    calls = HungCalls(Program("module", (Cell("def f():\n    pass\n", "mha.py"),)),
                      replace(LIMITS, call_timeout_s=0.1))
    assert calls.limit("f").first_s == 0.1 and calls.limit("f").final is None
    calls.timed_out("f")
    assert calls.limit("f").first_s == 0.1


def test_the_reference_is_timed_only_for_a_call_that_runs_past_its_first_limit():
    def not_asked() -> float:
        raise AssertionError("timed a call that had not run long")

    calls = hung_calls(HEADS_BY_LOOP)
    calls.limit("split_heads", not_asked)
    calls.timed_out("split_heads")
    calls.limit("combine_heads", not_asked)


def test_the_reference_times_its_own_function_and_its_own_class_on_the_calls_arguments():
    x = torch.randn(2, 5, 8)
    assert reference_seconds(reference.multihead, "split_heads", None, None, (x, 2), {}) > 0
    built = ("MultiHeadAttention", (8, 2), {"dropout": 0.1})
    state = torch.random.get_rng_state()
    assert reference_seconds(reference.multihead, "MultiHeadAttention", "__call__", built, (x, x, x), {}) > 0
    # Building the reference's module draws no random numbers that the hidden tests would see.
    assert torch.equal(torch.random.get_rng_state(), state)


def test_the_reference_is_timed_precisely_while_the_suite_s_cpu_bound_is_armed():
    # The suite process arms RLIMIT_CPU for each test; the process's CPU clock then advances
    # only at the scheduler's ticks, and a 2 ms call read 0 s: 3000 times 0 is the floor.
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    resource.setrlimit(resource.RLIMIT_CPU, (int(time.process_time()) + 3600, hard))
    try:
        assert min(reference_seconds(reference.positions, "sinusoidal_encoding", None, None, (5000, 64), {})
                   for _ in range(5)) > 1e-4
    finally:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, hard))


# A "training" call that takes the student's model: the reference cannot make it itself.
TRAINS = """
import time
class Model:
    pass
def train(model, seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass
    return 1
"""


def test_a_call_the_reference_cannot_make_is_measured_against_the_suite_s_yardstick(session_for):  # noqa: F811
    session = session_for(TRAINS, limits=replace(LIMITS, call_floor_s=0.25, call_timeout_s=0.5))
    model = session.new("Model")
    timed = []

    def reference_training() -> None:  # 3000 times 1 ms: 3 s for the student's training
        timed.append(1)
        start = time.thread_time()
        while time.thread_time() - start < 1e-3:
            pass

    with session.timed_like(reference_training):
        assert session.call("train", model, 0.01) == 1
        assert timed == []  # a call within its first limit times nothing
        assert session.call("train", model, 1.0) == 1  # twice the limit of a call with no yardstick
        assert session.call("train", model, 0.6) == 1
        assert timed == [1]  # measured once
    with pytest.raises(StudentTimeout, match="time limit of 0.5 s exceeded"):
        session.call("train", session.new("Model"), 1.0)  # the yardstick held for the block only


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
    # run under the shorter limit (the suite runs a part's tests before those of the parts that use it).
    stalls_on_length_one = mutant(HEADS_BY_LOOP, "        h += 1\n", "        h += 1 if x.shape[2] > 1 else 0\n")
    report = grade_source(notebook_text(stalls_on_length_one), suffix=".ipynb", limits=LIMITS)
    failing = [(t.name, t.outcome) for p in report.parts for t in p.tests if t.outcome != "passed"]
    assert failing == [("test_combine_heads_batch_and_length_of_one", "timeout")]


@pytest.mark.slow
def test_a_function_that_always_hangs_costs_the_floor_once_then_the_shorter_floor(grade_source):
    always_hangs = mutant(HEADS_BY_LOOP, "    B, T, D = x.shape\n", "    while True:\n        pass\n")
    report = grade_source(always_hangs, limits=LIMITS)
    timeouts = [t.message for p in report.parts for t in p.tests if t.outcome == "timeout"]
    # The first hang: the floor, or what the reference's time for that call gives, if more;
    # every later call of the hung code: the shorter limit.
    shorter = [message for message in timeouts if "ran past its time limit in an earlier call" in message]
    assert len(timeouts) - len(shorter) == 1 and len(shorter) > 10
    assert part(report, "combine_heads").score == part(report, "combine_heads").max_score


# Dropout one element at a time, a torch.rand for each: 3800 times the reference's time on
# the suite's largest input (200 x 250), 26 us per element.
DROPOUT_BY_ELEMENT = mutant(as_submission("masks"), """\
    keep = torch.rand(x.shape, generator=generator, device=x.device, dtype=dtype) >= p
    return x * keep / (1.0 - p)
""", """\
    flat, kept = x.flatten(), []
    for i in range(flat.shape[0]):
        keep = (torch.rand((), generator=generator, device=x.device, dtype=dtype) >= p).to(flat.dtype)
        kept.append(flat[i] * keep / (1.0 - p))
    return torch.stack(kept).reshape(x.shape)
""")


@pytest.mark.slow
@pytest.mark.parametrize("source, assignment, parts", [
    (HEADS_BY_LOOP, "03", ("split_heads", "combine_heads", "MultiHeadAttention")),
    (POSITIONS_BY_LOOP, "03", ("split_heads", "combine_heads", "MultiHeadAttention")),
    (TABLE_BY_LOOP, "04", ("sinusoidal_encoding",)),
    (DROPOUT_BY_ELEMENT, "02", ("dropout",)),
], ids=["heads by loop", "positions by loop", "table by loop", "dropout by element"])
def test_correct_code_however_slow_keeps_its_marks(grade_source, source, assignment, parts):
    # The default floor and slowdowns, under the tests' per-call limit.
    report = grade_source(source, assignment=ROOT / "assignments" / assignment)
    assert not [(t.name, t.message) for p in report.parts if p.id in parts for t in p.tests if t.outcome != "passed"]


# 07's Head, attention one sequence of the batch at a time: its 100 training steps take 6 times
# the reference's (about 2 s against 0.33 s of CPU).
GPT_BY_SEQUENCE = mutant(as_submission("gpt"), """\
        scores = q @ k.transpose(-2, -1) * k.size(-1) ** -0.5  # (B, T, T)
        scores = scores.masked_fill(~self.tril[:length, :length], float("-inf"))
        weights = self.dropout(F.softmax(scores, dim=-1))  # (B, T, T)
        return weights @ v  # (B, T, hs)
""", """\
        outputs = []
        for b in range(x.shape[0]):
            scores = (q[b] @ k[b].T) * k.size(-1) ** -0.5
            scores = scores.masked_fill(~self.tril[:length, :length], float("-inf"))
            outputs.append(self.dropout(F.softmax(scores, dim=-1)) @ v[b])
        return torch.stack(outputs)
""")


@pytest.mark.slow
def test_training_a_slow_correct_gpt_is_measured_against_the_reference_s_training(grade_source):
    # end_to_end's training call takes the student's model: the reference cannot make it, and
    # the suite gives the same training of the reference's GPT as its yardstick. Without it,
    # the call would get the limit of a call with no yardstick (here 0.6 s) and lose 5 points.
    limits = replace(TEST_LIMITS, call_floor_s=0.3, call_timeout_s=0.6)
    report = grade_source(GPT_BY_SEQUENCE, assignment=ROOT / "assignments" / "07", limits=limits)
    assert not [(p.id, t.name, t.message) for p in report.parts for t in p.tests if t.outcome != "passed"]
