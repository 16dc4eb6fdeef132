"""A hidden suite is collected once per grader process and run in a fork per submission
(:mod:`grader.engine.collected`): each run starts from the suite as collected, whatever the
runs before it did, and collecting leaves the grader process as it was."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.core.assignment import Assignment
from grader.core.outcome import SuiteResult
from grader.engine.collected import CollectedSuite, SuiteError, collected_suite
from grader.engine.runner import ForkedRun
from grader.sandbox import trusted_bounds
from grader.sandbox.limits import Limits
from tests.conftest import ASSIGNMENT_03, ROOT, TEST_LIMITS

# Each run appends to a module-level list and to a session fixture's: a run that started from
# another run's state would see two entries.
SUITE = '''
import pytest

from grader.suite import CheckFailed

RUNS = []


@pytest.fixture(scope="session")
def seen():
    return []


@pytest.mark.part("one")
def test_starts_from_the_collected_state(seen):
    RUNS.append(1)
    seen.append(1)
    assert RUNS == [1] and seen == [1]


@pytest.mark.part("two", points=2)
def test_fails():
    raise CheckFailed("wrong")
'''


def write_suite(tmp_path: Path, **files: str) -> Path:
    suite = tmp_path / f"suite_{tmp_path.name}"  # its modules' names, unique in this process
    suite.mkdir()
    for name, source in files.items():
        (suite / f"{name}.py").write_text(source)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    return suite


def run_forked(collected: CollectedSuite, limits: Limits = TEST_LIMITS) -> SuiteResult:
    """``collected`` run as the grader runs a suite: in a forked suite process under its trusted
    bounds, here with no submission."""
    def run() -> SuiteResult:
        return SuiteResult(tuple(collected.run(None, "cpu", None, trusted_bounds.apply(limits, "cpu"))))

    forked = ForkedRun(run, 60, limits)
    forked.wait()
    return forked.result()


def test_each_run_starts_from_the_suite_as_collected(tmp_path):
    collected = CollectedSuite(write_suite(tmp_path, test_state=SUITE))
    assert collected.error is None
    assert [(t.name, t.part, t.points, t.verdict) for t in collected.tests] == [
        ("test_starts_from_the_collected_state", "one", 1.0, None), ("test_fails", "two", 2.0, None)]
    for _ in range(3):
        verdicts = {t.name: t.verdict.outcome for t in run_forked(collected).tests}
        assert verdicts == {"test_starts_from_the_collected_state": "passed", "test_fails": "failed"}
    assert all(t.verdict is None for t in collected.tests)  # the runs happened in forks only


# Run in a fresh interpreter: this test process is pytest's, which has made those changes itself.
COLLECT_AND_COMPARE = """
import faulthandler, os, pdb, sys
from pathlib import Path
from grader.engine.collected import CollectedSuite
before = (sys.stdout, sys.stderr, pdb.set_trace, faulthandler.is_enabled(), os.readlink("/proc/self/fd/1"))
collected = CollectedSuite(Path(sys.argv[1]))
after = (sys.stdout, sys.stderr, pdb.set_trace, faulthandler.is_enabled(), os.readlink("/proc/self/fd/1"))
print(collected.error is not None, before == after)
"""


def test_collecting_leaves_the_grader_process_as_it_was(tmp_path):
    suite = write_suite(tmp_path, test_state=SUITE, test_broken="def test_x(:\n")
    done = subprocess.run([sys.executable, "-c", COLLECT_AND_COMPARE, str(suite)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    # Its output, its fault handler and pdb are the grader's own, and pytest says not a word.
    assert (done.stdout, done.stderr) == ("True True\n", "")


def test_a_suite_collected_while_stdout_was_another_stream_runs_after_that_stream_is_closed(tmp_path):
    # The grader used from Python (a notebook, a test harness) may collect under a stdout that
    # is gone later. Before: every later run wrote pytest's progress to it and failed with
    # "I/O operation on closed file", an internal grader error in every report.
    stream = io.StringIO()
    with contextlib.redirect_stdout(stream):
        collected = CollectedSuite(write_suite(tmp_path, test_state=SUITE))
    stream.close()
    verdicts = {t.name: t.verdict.outcome for t in run_forked(collected).tests}
    assert verdicts == {"test_starts_from_the_collected_state": "passed", "test_fails": "failed"}


def test_the_tests_run_in_the_contract_s_order_of_parts(tmp_path):
    # A part after the parts it uses: pieces first, 07's training last, whatever the files' names.
    whole = ("import pytest\n\n@pytest.mark.part('whole')\ndef test_w1():\n    pass\n\n"
             "@pytest.mark.part('piece')\ndef test_p1():\n    pass\n\n"
             "@pytest.mark.part('whole')\ndef test_w2():\n    pass\n")
    piece = "import pytest\n\n@pytest.mark.part('piece')\ndef test_p2():\n    pass\n"
    collected = CollectedSuite(write_suite(tmp_path, test_a_whole=whole, test_b_piece=piece), parts=("piece", "whole"))
    assert [t.name for t in collected.tests] == ["test_p1", "test_p2", "test_w1", "test_w2"]
    assert [t.name for t in run_forked(collected).tests] == ["test_p1", "test_p2", "test_w1", "test_w2"]


# Tests that name the answers they send: each test's end tells the student's session whether
# the next test sends the same answers (then its process carries on), as the last test checks.
ANSWERS_SUITE = """
import pytest

@pytest.mark.part("p")
@pytest.mark.answers("trained model")
def test_a(student):
    pass

@pytest.mark.part("p")
@pytest.mark.answers("trained model")
def test_b(student):
    pass

@pytest.mark.part("p")
@pytest.mark.answers("other answers")
def test_c(student):
    pass

@pytest.mark.part("p")
def test_d(student):
    pass

@pytest.mark.part("p")
@pytest.mark.answers("trained model")
def test_e(student):
    assert student.ends == [True, False, False, False]
"""


class EndsOfTests:
    """The student's session as the plugin sees it at each test's end."""

    def __init__(self) -> None:
        self.ends: list[bool] = []

    def end_test(self, *, answers_carry_on: bool = False) -> None:
        self.ends.append(answers_carry_on)


def test_a_process_holding_answers_serves_the_next_test_only_where_it_names_the_same_answers(tmp_path):
    collected = CollectedSuite(write_suite(tmp_path, test_answers=ANSWERS_SUITE))

    def run() -> SuiteResult:
        budget = trusted_bounds.apply(TEST_LIMITS, "cpu")
        return SuiteResult(tuple(collected.run(EndsOfTests(), "cpu", None, budget)))

    forked = ForkedRun(run, 60, TEST_LIMITS)
    forked.wait()
    assert [(t.name, t.verdict.outcome) for t in forked.result().tests] == [
        ("test_a", "passed"), ("test_b", "passed"), ("test_c", "passed"), ("test_d", "passed"), ("test_e", "passed")]


@pytest.mark.parametrize("source, why", [
    ("def test_x(:\n", "1 error(s)"),  # a test file that does not import
    ("def test_unmarked():\n    pass\n", "has no @pytest.mark.part"),
    ("", "0 test(s)"),
])
def test_a_suite_that_cannot_be_collected_says_why_in_every_run(tmp_path, source, why):
    collected = CollectedSuite(write_suite(tmp_path, test_bad=source))
    assert why in collected.error
    with pytest.raises(SuiteError, match="failed to collect"):
        run_forked(collected)


def test_a_suite_is_collected_once_per_process():
    assignment = Assignment.load(ASSIGNMENT_03)
    suite, parts = assignment.hidden_suite, assignment.parts
    assert collected_suite(suite, parts) is collected_suite(Path(str(suite)), tuple(parts))


# What a suite process imports that the grader process did not, as it grades the reference;
# run in a fresh interpreter, as the `grade` command starts.
NEW_IMPORTS = """
import json, os, sys
import grader.engine.api as api
from grader.engine.options import GradeOptions
from reference import as_submission, module_for

number, out = sys.argv[1], sys.argv[2]
path = os.path.join(os.path.dirname(out), "submission.py")
with open(path, "w") as file:
    file.write(as_submission(module_for(number)))
grade_in_fork = api.run_suite

def run_suite(*args, **kwargs):
    before = set(sys.modules)
    try:
        return grade_in_fork(*args, **kwargs)
    finally:
        with open(out, "w") as file:
            json.dump(sorted(set(sys.modules) - before), file)

api.run_suite = run_suite
pending = api.start_grading(f"assignments/{number}", path, GradeOptions(device="cpu"))
pending.wait()
assert pending.finish().status == "graded"
print(json.dumps("torch._dynamo" in sys.modules))
"""


@pytest.mark.slow
@pytest.mark.parametrize("number", ["03", "06", "07"])
def test_a_suite_process_finds_what_its_tests_import_already_imported(tmp_path, number):
    """torch._dynamo (with sympy: 0.6 s, 37 MiB) is imported once per grader process where a
    suite's own side needs it (06 builds optimizers: its suite.toml's suite_preload), and only
    there: every suite process is a fork of the grader, whose memory each fork copies."""
    out = tmp_path / "imported.json"
    grader_has_dynamo = json.loads(subprocess.run(
        [sys.executable, "-c", NEW_IMPORTS, number, str(out)], cwd=ROOT, check=True, capture_output=True,
        text=True).stdout)
    heavy = [name for name in json.loads(out.read_text()) if name.startswith(("torch._dynamo", "sympy"))]
    assert heavy == []
    assert grader_has_dynamo == (number == "06")
