"""Hostile submissions against the engine: what a student's process can see and hold up.

Part of the adversarial suite (see test_adversarial.py for the shared invariants). Each
attack here went around the grader before the process model of the trust issue:

- *classmates in memory*: a student's process was forked from the grader, so its freed
  heap still held earlier students' sources;
- *taking the child's word*: a malformed reply raised in trusted code (a grader error for
  the student's earned points), and replies and notes had no size bound;
- *deadlines and cleanup*: a forged event left the load with no deadline, a slow
  submission turned into a grader error, and a killed suite process left its scratch
  and cgroup behind;
- *one zygote for everyone*: a student who kills the grader's zygote server costs the
  next student nothing;
- *the trusted side's own bounds*: a value that slips past a suite's checks could make the
  suite process take gigabytes and minutes; now it fails that test (or, stuck in one C call,
  that submission), and the machine is safe.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import pytest

from grader.core.assignment import Assignment
from grader.core.fingerprint import Fingerprint
from grader.core.outcome import SuiteResult
from grader.core.report import GradeReport, Status
from grader.engine.options import GradeOptions
from grader.engine.runner import SuiteBoundExceeded
from grader.sandbox.cgroups import SubmissionCgroup
from grader.sandbox.limits import Limits
from grader.sandbox.zygote import ZygoteServer
from reference import as_submission
from tests.conftest import (
    ASSIGNMENT_03,
    ASSIGNMENTS,
    ROOT,
    TEST_LIMITS,
    assert_valid,
    mutant,
    notebook_text,
    part,
    survivors,
)

pytestmark = pytest.mark.slow
REFERENCE = as_submission("multihead")
STUB = (ASSIGNMENT_03 / "mha.py").read_text()
SPLIT_BODY = "    batch, length, d_model = x.shape\n"  # the first line of split_heads


# ---- classmates in memory ---------------------------------------------------------------

# Reads every anonymous page of its own process (heap, arenas, stack) and prints what it
# finds that it could only have inherited: a classmate's student id, the grader's token,
# hidden test source. Its own patterns cannot match themselves.
MEMORY_SCAN = r'''
import re
def _scan(patterns):
    found = set()
    with open('/proc/self/maps') as maps:
        regions = [line.split() for line in maps]
    with open('/proc/self/mem', 'rb', buffering=0) as mem:
        for fields in regions:
            start, end = (int(x, 16) for x in fields[0].split('-'))
            path = fields[5] if len(fields) > 5 else ''
            if not fields[1].startswith('r') or path.startswith('/') or path.startswith('[v'):
                continue
            for offset in range(start, end, 1 << 22):
                try:
                    mem.seek(offset)
                    chunk = mem.read(min(1 << 22, end - offset))
                except OSError:
                    break
                for pattern in patterns:
                    found.update(m.group(0).decode() for m in re.finditer(pattern, chunk))
    return sorted(found)
print('FOUND', _scan([rb'STUDENT-ID: [0-9a-f]{32}', rb'GRADER_TOKEN=[A-Za-z0-9-]{8,}',
                      rb'def test_[a-z_]+\(student', rb'reference_mha[a-z_]*\(']))
'''


def test_a_students_process_holds_no_classmate_no_hidden_test_and_no_grader_secret(tmp_path):
    folder = tmp_path / "class"
    ids = [f"{n:032x}" for n in range(101, 106)]
    for number, student_id in enumerate(ids):
        (folder / f"a{number}").mkdir(parents=True)
        source = f"# STUDENT-ID: {student_id}\n{REFERENCE}"
        if number % 2:  # a notebook leaves many copies of its text behind while it is parsed
            (folder / f"a{number}" / "mha.ipynb").write_text(notebook_text(source))
        else:
            (folder / f"a{number}" / "mha.py").write_text(source)
    (folder / "zz-scanner").mkdir()
    (folder / "zz-scanner" / "mha.py").write_text(STUB + MEMORY_SCAN)  # graded last
    out = tmp_path / "results"
    # The grader as instructors run it: its own process, a token in its environment.
    subprocess.run([sys.executable, "-m", "grader.cli", "batch", str(ASSIGNMENT_03), str(folder), "--out", str(out),
                    "--jobs", "2", "--device", "cpu", "--timeout", "30"],
                   env={**os.environ, "GRADER_TOKEN": "s3cret-token-5150"}, cwd=ROOT, capture_output=True,
                   timeout=300, check=True)
    scanner = next(GradeReport.from_dict(json.loads(path.read_text())) for path in (out / "reports").rglob("*.json")
                   if "zz-scanner" in path.name or "zz-scanner" in str(path.parent))
    assert scanner.status == Status.GRADED, scanner.error
    assert "FOUND []" in scanner.output, scanner.output[:2000]


# ---- taking the child's word ---------------------------------------------------------------

# The child's request handlers are grader code in the student's own process: replaced,
# they answer whatever the student likes.
MALFORMED_REPLIES = (
    "import sys\n"
    "_server = sys.modules['grader.sandbox._child']._Server\n"
    "_server._op_inspect = lambda self, header, tensors: {'module': True, 'parameters': 5, 'buffers': {}, "
    "'training': True}\n"
    "_server._op_backward = lambda self, header, tensors: {'output': None, 'input_grads': 7, 'param_grads': 3}\n"
)


def test_a_malformed_reply_fails_that_test_as_the_students_not_as_a_grader_error(grade_source):
    report = grade_source(MALFORMED_REPLIES + as_submission("layers"), assignment=ASSIGNMENTS / "05")
    assert_valid(report)
    assert report.status == Status.GRADED, report.error
    ffn = part(report, "FeedForward")
    malformed = [test for test in ffn.tests if "malformed reply" in test.message]
    assert malformed and all(test.outcome == "error" for test in malformed)
    assert 0 < ffn.score < ffn.max_score  # the value tests, which need neither, still earn their points


def _internal_errors(report: GradeReport) -> list[str]:
    return [test.message for p in report.parts for test in p.tests if "internal grader error" in test.message]


# Every reply below is well-formed JSON and safetensors that the suites took the shape of on
# trust: each made the trusted side raise its own error (TypeError, KeyError, AttributeError,
# OverflowError), and so the report a grader error, where the student's code is what failed.
EMPTY_TENSOR_OF_HUGE_SIZES = (
    "import json, struct, sys\n"
    "_protocol = sys.modules['grader.sandbox.protocol']\n"
    "_save = _protocol.save_tensors\n"
    "def _forged(tensors):\n"
    "    if not tensors:\n"
    "        return _save(tensors)\n"
    "    meta = json.dumps({key: {'dtype': 'F32', 'shape': [2**63, 0], 'data_offsets': [0, 0]} for key in tensors})\n"
    "    meta = meta.encode() + b' ' * (-len(meta) % 8)\n"
    "    return struct.pack('<Q', len(meta)) + meta\n"
    "_protocol.save_tensors = _forged\n"
)
DEFINE_ANSWERS_A_NUMBER = "import sys\nsys.modules['grader.sandbox._child']._Server._op_define = lambda *args: 0\n"
GETATTR_ANSWERS_A_NUMBER = "import sys\nsys.modules['grader.sandbox._child']._Server._op_getattr = lambda *args: 0\n"
# The output's offset, on every loading event of every child; the first child ends itself, so
# that a later one's offset is the one read.
HUGE_OUTPUT_OFFSET = (
    "import sys\n"
    "_protocol = sys.modules['grader.sandbox.protocol']\n"
    "_send = _protocol.send\n"
    "def _forged(sock, header, tensors=None, deadline=None):\n"
    "    if 'offset' in header:\n"
    "        header = dict(header, offset=2**64)\n"
    "    return _send(sock, header, tensors, deadline)\n"
    "_protocol.send = _forged\n"
)
NOT_A_MODULE = (
    "\n\n_Module = MultiHeadAttention\n\n\n"
    "class MultiHeadAttention:  # an nn.Module's behaviour, but no nn.Module: it inspects as {'module': False}\n"
    "    def __init__(self, *args, **kwargs):\n"
    "        self._inner = _Module(*args, **kwargs)\n\n"
    "    def to(self, *args, **kwargs):\n"
    "        self._inner.to(*args, **kwargs)\n"
    "        return self\n\n"
    "    def eval(self):\n"
    "        self._inner.eval()\n"
    "        return self\n\n"
    "    def train(self, mode=True):\n"
    "        self._inner.train(mode)\n"
    "        return self\n\n"
    "    def __call__(self, *args, **kwargs):\n"
    "        return self._inner(*args, **kwargs)\n"
)


def test_a_tensor_of_no_elements_and_huge_sizes_fails_each_test_it_answers(grade_source):
    report = grade_source(EMPTY_TENSOR_OF_HUGE_SIZES + REFERENCE)
    assert report.status == Status.GRADED, report.error
    assert _internal_errors(report) == []
    # Every test that reads a tensor back fails; those that read none (a device check sends and
    # gets back meta tensors, which are JSON) keep their points.
    passed = {test.name for p in report.parts for test in p.tests if test.outcome == "passed"}
    assert passed == {"test_split_heads_rejects_indivisible_dimension", "test_mha_rejects_indivisible_model_dimension",
                      "test_mha_follows_the_input_device"}
    assert any("invalid reply" in test.message for test in part(report, "split_heads").tests)


def test_helper_code_that_is_not_defined_fails_as_the_students(grade_source):
    report = grade_source(DEFINE_ANSWERS_A_NUMBER + REFERENCE)
    assert report.status == Status.GRADED, report.error
    assert _internal_errors(report) == []
    # Only the tests that seed the student's generator through a grader helper lose: dropout's.
    lost = {test.name for p in report.parts for test in p.tests if test.outcome != "passed"}
    assert lost and all("dropout" in name for name in lost), lost
    assert part(report, "split_heads").score == part(report, "split_heads").max_score


def test_a_number_where_a_05_layer_has_a_sub_module_fails_as_the_students(grade_source):
    report = grade_source(GETATTR_ANSWERS_A_NUMBER + as_submission("layers"), assignment=ASSIGNMENTS / "05")
    assert report.status == Status.GRADED, report.error
    assert _internal_errors(report) == []
    used = [test for p in report.parts for test in p.tests if "where the grader needs an object" in test.message]
    assert used and all(test.outcome == "failed" for test in used)


def test_an_output_offset_past_any_file_is_ignored(grade_source):
    ends_first_child = mutant(REFERENCE, SPLIT_BODY, SPLIT_BODY + "    if num_heads == 6:\n        import os; os._exit(3)\n")
    honest, forged = grade_source(ends_first_child), grade_source(HUGE_OUTPUT_OFFSET + ends_first_child)
    assert forged.status == Status.GRADED, forged.error
    assert [(p.id, p.score) for p in forged.parts] == [(p.id, p.score) for p in honest.parts]


def test_a_multi_head_attention_that_is_not_a_module_is_graded(grade_source):
    report = grade_source(REFERENCE + NOT_A_MODULE)
    assert report.status == Status.GRADED, report.error
    assert _internal_errors(report) == []
    assert [part(report, name).score == part(report, name).max_score for name in ("split_heads", "combine_heads")] == [
        True, True]
    # Its values are right; what a module has (parameters by the contract's names, a device to follow) is not.
    mha = part(report, "MultiHeadAttention")
    assert 0 < mha.score < mha.max_score
    assert mha.hint.startswith("subclass nn.Module"), mha.hint  # what is wrong, not which names are missing


def _bool_in_training_mode(module: str, condition: str = "self.dropout.p > 0") -> str:
    return (f"\n\n_forward = {module}.forward\n\n\n"
            "def _bool_in_training(self, *args):\n"
            "    out = _forward(self, *args)\n"
            f"    return out != 0 if self.training and {condition} else out\n\n\n"
            f"{module}.forward = _bool_in_training\n")


STOCK_MAKE_ANSWERS_A_NUMBER = (
    "import sys\n"
    "_server = sys.modules['grader.sandbox._child']._Server\n"
    "_call = _server._op_call\n"
    "def _forged(self, header, tensors):\n"
    "    value = _call(self, header, tensors)\n"
    "    target = header.get('target')\n"
    "    return 7 if isinstance(target, dict) and target.get('method') == 'make' else value\n"
    "_server._op_call = _forged\n"
)


@pytest.mark.parametrize("assignment, source, lost", [
    # Plain student code: a bool output (which units were kept) where dropout acts. The tests
    # checked its shape, then computed with it (train - x): a grader error. It fails the
    # dropout test, the one that reads it, as the student's.
    ("04", as_submission("positions") + _bool_in_training_mode("PositionalEncoding"), {"PositionalEncoding": 1}),
    ("05", as_submission("layers") + _bool_in_training_mode("FeedForward"), {"FeedForward": 1}),
    # A 05 Transformer with a number for its source embedding: its pieces' check called the number.
    ("05", "import sys\n_server = sys.modules['grader.sandbox._child']._Server\n_getattr = _server._op_getattr\n"
           "_server._op_getattr = lambda self, header, tensors: 5 if header.get('name') == 'src_embed' "
           "else _getattr(self, header, tensors)\n" + mutant(as_submission("layers"), "return self.generator(",
                                                              "return 1.5 * self.generator("),
     {"Transformer": 6}),
    # A state_dict with an object among its tensors, which the suite sends back with the
    # buffer it adds: the grader's own encoder refused the object. It goes back as itself, and
    # the student's load_state_dict fails on it: the tests that load it fail.
    ("04", "import sys, torch\n_server = sys.modules['grader.sandbox._child']._Server\n_call = _server._op_call\n"
           "def _forged(self, header, tensors):\n"
           "    value = _call(self, header, tensors)\n"
           "    target = header.get('target')\n"
           "    if isinstance(target, dict) and target.get('method') == 'state_dict':\n"
           "        value = dict(value, extra=torch.nn.Linear(1, 1))\n"
           "    return value\n"
           "_server._op_call = _forged\n" + as_submission("positions"), {"PositionalEncoding": 3}),
    # The grader's stock model and optimizer (06's make) answered as a number: every test that
    # trains or decodes with them fails, as the student's process broke them.
    ("06", STOCK_MAKE_ANSWERS_A_NUMBER + as_submission("training"), {"train_step": 10, "greedy_decode": 12,
                                                                     "end_to_end": 3}),
])
def test_a_value_of_the_wrong_kind_fails_the_tests_that_read_it(grade_source, assignment, source, lost):
    report = grade_source(source, assignment=ASSIGNMENTS / assignment)
    assert report.status == Status.GRADED, report.error
    assert _internal_errors(report) == []
    assert {p.id: p.max_score - p.score for p in report.parts if p.score < p.max_score} == lost


def _peak_suite_memory(source: str, tmp_path: Path) -> tuple[GradeReport, int]:
    """Grade in a process of its own; the largest resident size of its suite processes (bytes).
    Each call has its full limit: making a reply of hundreds of MiB takes the child more than
    the floor a call starts with, and what is tested here is the reply, not the time."""
    submission = tmp_path / "mha.py"
    submission.write_text(source)
    script = ("import json, resource, sys\nfrom grader.engine.api import grade\nfrom grader.sandbox.limits import Limits\n"
              "report = grade(sys.argv[1], sys.argv[2], device='cpu', limits=Limits(memory_bytes=6 * 2**30, "
              "call_floor_s=10.0))\n"
              "print(json.dumps({'report': report.to_dict(), "
              "'peak': resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024}))\n")
    result = subprocess.run([sys.executable, "-c", script, str(ASSIGNMENT_03), str(submission)], cwd=ROOT,
                            capture_output=True, text=True, timeout=300, check=True)
    data = json.loads(result.stdout.splitlines()[-1])
    return GradeReport.from_dict(data["report"]), data["peak"]


def test_a_huge_reply_is_refused_before_it_is_read(tmp_path):
    # 768 MiB back from split_heads: read in full, then copied twice, it took the trusted
    # suite process, which has no memory limit, past 2 GiB.
    huge = mutant(REFERENCE, SPLIT_BODY, SPLIT_BODY + "    return torch.zeros(3 * 2**28, dtype=torch.uint8)\n")
    report, peak = _peak_suite_memory(huge, tmp_path)
    assert report.status == Status.GRADED, report.error
    refused = [t for t in part(report, "split_heads").tests if "message too large" in t.message]
    assert refused and all(t.outcome == "error" for t in refused)
    assert peak < 2**30, f"a suite process reached {peak / 2**20:.0f} MiB"


def test_what_the_child_says_is_bounded_in_the_report(grade_source):
    long_name = "type('E' * 10**6, (Exception,), {})"  # the exception's type name: 1 MB
    cells = [f"raise {long_name}('m' * 10**6)\n"] * 80 + [
        mutant(REFERENCE, SPLIT_BODY, SPLIT_BODY + f"    raise {long_name}('why' * 10**6)\n")]
    report = grade_source(notebook_text(*cells), suffix=".ipynb")
    assert_valid(report)
    assert report.status == Status.GRADED, report.error
    assert len(report.notes) <= 51 and report.notes[-1].startswith("... and ")
    assert part(report, "split_heads").score == 0
    assert len(json.dumps(report.to_dict())) < 256 * 2**10  # 80 MB before


# ---- deadlines and cleanup ---------------------------------------------------------------

FORGED_CELL_DONE = (
    "import json, socket, struct, time\n"
    "grader = socket.socket(fileno=512)  # the child's connection to the grader\n"
    "event = json.dumps({'event': 'cell_done', 'index': 0}).encode()\n"
    "grader.sendall(struct.pack('>QQ', len(event), 0) + event)\n"
    "print('x' * 10**6)\n"
    "time.sleep(10**6)\n"
)


def test_a_forged_event_does_not_lift_the_deadline_of_the_load(grade_source):
    report = grade_source(notebook_text(FORGED_CELL_DONE, REFERENCE), suffix=".ipynb", total_timeout_s=30)
    assert_valid(report)
    assert report.status == Status.GRADED, report.error  # before: the load waited until the grader gave up
    assert report.score == 0 and any("could not be loaded" in note for note in report.notes), report.notes
    assert survivors() == []


def test_slow_code_uses_up_its_own_time_and_is_graded_not_a_grader_error(grade_source):
    combine_body = "    batch, num_heads, length, d_k = x.shape\n"  # the first line of combine_heads
    sleepy = mutant(REFERENCE, combine_body, combine_body + "    import time; time.sleep(60)\n")
    # Every call of combine_heads sleeps (its own tests', MultiHeadAttention's): far past the
    # grader's own limit of 30 s in call limits, unless the submission's total of 4 s stops them
    # (with a wide margin for a busy machine).
    limits = replace(TEST_LIMITS, call_timeout_s=3.0, student_time_s=4.0)
    report = grade_source(sleepy, limits=limits, total_timeout_s=30)
    assert_valid(report)
    assert report.status == Status.GRADED, report.error
    messages = [test.message for p in report.parts for test in p.tests if test.outcome == "timeout"]
    assert any("total time limit of 4 s" in message for message in messages), messages
    assert part(report, "split_heads").score == part(report, "split_heads").max_score  # runs before combine's


def _cgroups() -> set[str]:
    """This process's submission cgroups, in every controller: other graders on the machine make their own."""
    return {cgroup.name for cgroup in SubmissionCgroup.existing(f"submission-{os.getpid()}-*")}


def test_a_killed_suite_process_leaves_no_scratch_cgroup_or_process(grade_source, tmp_path, monkeypatch):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    cgroups_before = _cgroups()
    flood_then_stall = mutant(REFERENCE, SPLIT_BODY, SPLIT_BODY + "    import os, time\n"
                                                                  "    os.write(1, b'z' * 2**24)\n"
                                                                  "    time.sleep(3)\n")
    report = grade_source(flood_then_stall, total_timeout_s=6)  # the grader's own limit stops the suite
    assert report.status == Status.GRADER_ERROR and "longer than 6 s" in report.error
    assert list(scratch.iterdir()) == []
    assert _cgroups() <= cgroups_before
    assert survivors() == []


# ---- one zygote for everyone -------------------------------------------------------------

def test_killing_the_zygote_server_costs_the_next_student_nothing(grade_source):
    # Without namespaces a student can find the grader's zygote server: its grandparent.
    killer = ("import os, signal\n"
              "zygote = int(open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[1])\n"
              "os.kill(zygote, signal.SIGKILL)\n")
    server = ZygoteServer.shared().pid
    report = grade_source(notebook_text(killer, REFERENCE), suffix=".ipynb", sandbox="off")
    assert report.status == Status.GRADED, report.error
    assert ZygoteServer.shared().pid != server  # killed, and started again
    after = grade_source(REFERENCE)
    assert after.status == Status.GRADED and after.score == after.max_score


# ---- the trusted side's own bounds ------------------------------------------------------------

# A hidden suite's checks that a hostile value slipped past: what each makes the trusted side do.
SLIPPED_PAST = """
import pytest, torch

pytestmark = pytest.mark.part("p")

def test_a_histogram_sized_by_a_huge_token_id():
    torch.bincount(torch.tensor([150_000_000, 3]))  # 1.2 GB of counts, and more

def test_a_broadcast_that_never_ends():
    while True:
        pass

def test_an_ordinary_check_after_them():
    assert torch.equal(torch.ones(3) * 2, torch.full((3,), 2.0))

def test_a_bug_in_the_suite_itself():
    raise ValueError("a bug in the hidden suite")
"""


def _run_suite_file(tmp_path: Path, source: str, limits: Limits) -> SuiteResult:
    """``source`` as a hidden suite, run as the grader runs one: collected here, run in a forked
    suite process under its trusted bounds, with no submission."""
    from grader.engine.collected import CollectedSuite
    from tests.test_collected import run_forked, write_suite

    return run_forked(CollectedSuite(write_suite(tmp_path, test_slipped=source)), limits)


def test_a_value_that_slips_past_the_checks_fails_its_test_at_the_suites_bounds(tmp_path):
    limits = replace(TEST_LIMITS, suite_memory_bytes=256 * 2**20, suite_test_cpu_s=1)
    verdicts = {test.name: test.verdict for test in _run_suite_file(tmp_path, SLIPPED_PAST, limits).tests}
    huge, endless = verdicts["test_a_histogram_sized_by_a_huge_token_id"], verdicts["test_a_broadcast_that_never_ends"]
    # The student's failure, in the test that met the value; never a grader error they could choose.
    assert (huge.outcome, huge.internal) == ("failed", False) and "memory bound of 256 MiB" in huge.message
    assert (endless.outcome, endless.internal) == ("failed", False) and "CPU-time bound of 1 s per test" in endless.message
    assert verdicts["test_an_ordinary_check_after_them"].outcome == "passed"  # each test gets its own budget
    assert verdicts["test_a_bug_in_the_suite_itself"].internal  # the grader's own bugs stay the grader's


def test_a_suite_process_stuck_past_its_cpu_bound_in_all_ends_that_submission_only(tmp_path):
    # Stuck in C++ (or in a test with a budget as large as the whole), no exception reaches
    # Python: the kernel kills the suite process at its bound, and the grader says why.
    limits = replace(TEST_LIMITS, suite_cpu_s=2, suite_test_cpu_s=2)
    with pytest.raises(SuiteBoundExceeded, match="CPU-time bound of 2 s in all"):
        _run_suite_file(tmp_path, SLIPPED_PAST.replace("def test_a_histogram", "def _not_a_test"), limits)


def test_a_submission_stopped_at_the_suites_cpu_bound_is_reported_ungradable_not_a_grader_error(monkeypatch, tmp_path):
    from grader.engine import api

    class Stopped:
        def result(self):
            raise SuiteBoundExceeded("grading stopped: ... CPU-time bound of 120 s in all ...")

    assignment = Assignment.load(ASSIGNMENT_03)
    pending = api.PendingGrade(assignment, "mha.py", "", Status.GRADED, None, "cpu", [], 0.0, Stopped(),
                               Fingerprint.of(assignment, GradeOptions(device="cpu")))
    report = pending.finish()
    assert report.status == Status.UNGRADABLE and "CPU-time bound of 120 s" in report.error
