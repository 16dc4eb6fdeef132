"""Hostile submissions: every threat of the hardening issue, graded end to end.

Each test grades assignment 03 with a submission that tries one attack, through the same
`grade()` the CLI calls, and the `hostile` fixture checks what must hold whatever the
attack: the report is valid and written by the grader (never a grader error), no
process is left behind, and the grader's files are unchanged. The test itself checks that
the attack gained nothing and that the report says what happened.

Where an attack is stopped by an isolation layer, a control grades the same submission
with ``sandbox="off"`` and shows that the attack is real.
"""

from __future__ import annotations

import ctypes
import json
import os
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

import reference
from grader.cli import main as grade_cli
from grader.core import hints
from grader.core.report import GradeReport, Status
from reference import as_submission
from reference.hidden.a03 import variants
from tests.conftest import ASSIGNMENT_03, TEST_LIMITS, assert_valid, grader_files, mutant, notebook_text, part

pytestmark = pytest.mark.slow
REFERENCE = as_submission("multihead")
STUB = (ASSIGNMENT_03 / "mha.py").read_text()
# A wrong split_heads (and so a wrong MultiHeadAttention): what a forger wants points for.
WRONG = mutant(REFERENCE, "x.view(batch, length, num_heads, d_k).transpose(1, 2)",
               "x.reshape(batch, num_heads, length, d_k)")
needs_namespaces = pytest.mark.needs_layer("namespaces")


def _scores(report: GradeReport) -> dict[str, float]:
    return {p.id: p.score for p in report.parts}


@pytest.fixture(scope="module")
def honest_wrong_scores(tmp_path_factory) -> dict[str, float]:
    """What WRONG earns without any forgery: the most a forged WRONG may earn."""
    from grader.engine.api import grade

    path = tmp_path_factory.mktemp("honest") / "mha.py"
    path.write_text(WRONG)
    report = grade(ASSIGNMENT_03, path, device="cpu", limits=TEST_LIMITS)
    assert report.score < report.max_score
    return _scores(report)


# ---- forging results ------------------------------------------------------------------

FORGERIES = {
    "patched comparisons": (
        "import torch, torch.testing\n"
        "torch.allclose = lambda *a, **k: True\n"
        "torch.equal = lambda *a, **k: True\n"
        "torch.testing.assert_close = lambda *a, **k: None\n"
        "torch.Tensor.__eq__ = lambda *a, **k: True\n"
        "torch.Tensor.allclose = lambda *a, **k: True\n"),
    "a TorchFunctionMode left on": (
        "import torch\n"
        "from torch.overrides import TorchFunctionMode\n"
        "class Agreeable(TorchFunctionMode):\n"
        "    def __torch_function__(self, func, types, args=(), kwargs=None):\n"
        "        if getattr(func, '__name__', '') in ('allclose', 'equal', 'isclose', 'eq', '__eq__'):\n"
        "            return True\n"
        "        return func(*args, **(kwargs or {}))\n"
        "Agreeable().__enter__()\n"),
    "patched pytest and its plugins": (
        "import sys, pytest, _pytest.runner, _pytest.outcomes\n"
        "pytest.fail = _pytest.outcomes.fail = lambda *a, **k: None\n"
        "pytest.approx = lambda *a, **k: type('Any', (), {'__eq__': lambda s, o: True})()\n"
        "_pytest.runner.pytest_runtest_makereport = lambda *a, **k: None\n"
        "try:\n    import pytest_jsonreport.plugin as p\n    p.JSONReport.pytest_sessionfinish = lambda *a, **k: None\n"
        "except ImportError:\n    pass\n"
        "sys.modules['grader'] = sys.modules['grader.engine.plugin'] = type(sys)('grader')\n"),
}


@pytest.mark.parametrize("forgery", FORGERIES)
def test_a_forgery_in_the_students_process_earns_nothing(hostile, honest_wrong_scores, forgery):
    report = hostile(FORGERIES[forgery] + WRONG)
    assert _scores(report) == honest_wrong_scores
    assert part(report, "split_heads").hint == variants.NO_TRANSPOSE_SPLIT  # the mistake is still named


def test_a_tensor_subclass_that_lies_earns_nothing(hostile, honest_wrong_scores):
    liar = (
        "import torch\n"
        "class Liar(torch.Tensor):\n"
        "    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        if getattr(func, '__name__', '') in ('allclose', 'equal', '__eq__', 'eq', 'isclose'):\n"
        "            return True\n"
        "        return super().__torch_function__(func, types, args, kwargs)\n"
    )
    source = liar + mutant(WRONG, "return x.reshape(batch, num_heads, length, d_k)",
                           "return x.reshape(batch, num_heads, length, d_k).as_subclass(Liar)")
    report = hostile(source)
    assert _scores(report) == honest_wrong_scores  # the grader received a plain tensor


def test_an_object_pretending_to_be_a_tensor_earns_nothing(hostile):
    impostor = (
        "import torch\n"
        "class Impostor:\n"
        "    shape = torch.Size([2, 3, 5, 4])\n"
        "    dtype = torch.float32\n"
        "    device = torch.device('cpu')\n"
        "    def __eq__(self, other):\n        return True\n"
        "    def __getattr__(self, name):\n        return lambda *a, **k: self\n"
        "    def __bool__(self):\n        return True\n"
    )
    source = impostor + mutant(REFERENCE, "return x.view(batch, length, num_heads, d_k).transpose(1, 2)",
                               "return Impostor()")
    report = hostile(source)
    split = part(report, "split_heads")
    # Only the check that never looks at the return value (a ValueError is raised first) passes.
    assert [t.name for t in split.tests if t.outcome == "passed"] == ["test_split_heads_rejects_indivisible_dimension"]
    assert any("Impostor" in test.message for test in split.tests), [t.message for t in split.tests]


def test_a_fake_report_file_is_replaced_by_the_real_one(tmp_path):
    target = tmp_path / "report.json"
    fake = '{"schema_version": 1, "score": 15, "max_score": 15, "status": "graded"}'
    submission = tmp_path / "mha.py"
    submission.write_text(
        "import os\n"
        f"for path in ({str(target)!r}, 'report.json', os.path.expanduser('~/report.json')):\n"
        "    try:\n"
        f"        open(path, 'w').write({fake!r})\n"
        "    except OSError:\n        pass\n" + STUB)
    code = grade_cli([str(ASSIGNMENT_03), "--submission", str(submission), "--json", str(target),
                      "--device", "cpu", "--timeout", "5", "-q"])
    assert code == 0
    written = GradeReport.from_dict(json.loads(target.read_text()))
    assert written.status == Status.GRADED and written.score == 0 and written.max_score > 0


def test_printed_results_are_output_not_scores(hostile):
    bragging = (
        "import os, sys, json\n"
        "print('test_split_heads_values PASSED\\n15 passed in 0.1s')\n"
        "print(json.dumps({'summary': {'passed': 15, 'failed': 0}, 'score': 15}))\n"
        "os.write(1, b'{\"score\": 15, \"max_score\": 15}\\n')\n"
        "sys.__stdout__.write('TOTAL 15 / 15\\n')\n"
    )
    report = hostile(bragging + STUB)
    assert report.score == 0
    assert "15 passed" in report.output and '"score": 15' in report.output  # shown, never parsed


# ---- reading secrets ------------------------------------------------------------------

def _thief(secret_name: str) -> str:
    """A stub submission that hunts for the reference and the grader's environment, prints
    what it finds, and fills its stubs with the reference's code if it can load it."""
    package = Path(reference.__file__).parent
    hidden_file = str(package / "hidden" / "a03" / "test_split_heads.py")
    return STUB + f"""
import os, sys
sys.meta_path[:] = [finder for finder in sys.meta_path if 'Refuse' not in type(finder).__name__]
for root in ({str(package.parent)!r}, *(f'/proc/{{p}}/cwd' for p in os.listdir('/proc') if p.isdigit())):
    sys.path.insert(0, root)
    try:
        from reference.multihead import split_heads, combine_heads, MultiHeadAttention
        print('stole the reference from', root)
        break
    except Exception as exc:
        sys.path.remove(root)
try:
    print('hidden tests:', open({hidden_file!r}).read()[:20])
except OSError as exc:
    print('hidden denied:', type(exc).__name__)
import posix
print('env:', os.environ.get({secret_name!r}), posix.environ.get({secret_name!r}.encode()))
for pid in (p for p in os.listdir('/proc') if p.isdigit()):
    try:
        environ = open(f'/proc/{{pid}}/environ', 'rb').read().decode(errors='replace')
    except OSError:
        continue
    print('environ', pid, [v for v in environ.split('\\0') if v.startswith({secret_name!r})])
"""


@pytest.mark.parametrize("sandbox", ["basic", "off"])
def test_the_reference_hidden_tests_and_the_graders_environment_are_out_of_reach(tmp_path, sandbox):
    # The grader runs as its own process, started with a secret in its environment, as on a CI runner.
    submission, report_file = tmp_path / "mha.py", tmp_path / "report.json"
    submission.write_text(_thief("GRADER_TOKEN"))
    before = grader_files()
    subprocess.run([sys.executable, "-m", "grader.cli", str(ASSIGNMENT_03), "--submission", str(submission),
                    "--json", str(report_file), "--device", "cpu", "--sandbox", sandbox, "-q"],
                   env={**os.environ, "GRADER_TOKEN": "s3cret-token-4242"}, check=True, timeout=120)
    report = GradeReport.from_dict(json.loads(report_file.read_text()))
    assert_valid(report)
    assert grader_files() == before
    stolen = report.score == report.max_score and "stole the reference" in report.output
    leaked = "s3cret-token-4242" in report.output
    read_hidden = "hidden tests: import" in report.output
    if sandbox == "off":  # the control: each attack is real
        assert stolen and leaked and read_hidden, report.output[:2000]
    else:
        assert not stolen and report.score == 0
        assert not leaked and not read_hidden and "hidden denied:" in report.output


# ---- escaping the grade ---------------------------------------------------------------

def test_sys_exit_at_import_earns_nothing_and_is_explained(hostile):
    report = hostile("import sys\nsys.exit(0)\n" + REFERENCE)
    assert report.score == 0
    assert any("sys.exit(0)" in note for note in report.notes)
    assert all(p.hint == hints.NOT_DEFINED_WHEN_LOADED for p in report.parts)  # defined after the exit


# Only test_split_heads_edge_sizes asks for 6 heads, so only that test meets the fault.
SIX_HEADS_FAULT = "    batch, length, d_model = x.shape\n"


def _only_failure(report: GradeReport):
    failing = [t for p in report.parts for t in p.tests if t.outcome != "passed"]
    assert [t.name for t in failing] == ["test_split_heads_edge_sizes[shape2-6]"], [t.name for t in failing]
    return failing[0]


def test_os_exit_inside_a_call_ends_that_test_and_the_next_get_a_new_process(hostile):
    report = hostile(mutant(REFERENCE, SIX_HEADS_FAULT, SIX_HEADS_FAULT + "    if num_heads == 6:\n"
                                                                          "        import os; os._exit(7)\n"))
    failure = _only_failure(report)
    assert failure.outcome == "error" and "exit code 7" in failure.message


def test_an_endless_loop_or_sleep_in_a_call_times_out_that_test_only(hostile):
    for hang in ("while True:\n            pass", "import time; time.sleep(10**6)"):
        report = hostile(mutant(REFERENCE, SIX_HEADS_FAULT, SIX_HEADS_FAULT + f"    if num_heads == 6:\n        {hang}\n"),
                         limits=replace(TEST_LIMITS, call_timeout_s=1.0))
        failure = _only_failure(report)
        assert failure.outcome == "timeout" and "time limit of 1 s exceeded" in failure.message


def test_an_endless_loop_at_import_is_skipped_and_the_rest_graded(hostile):
    report = hostile(notebook_text("while True:\n    pass\n", REFERENCE), suffix=".ipynb")
    assert report.score == report.max_score
    assert any("cell 2" in note and "time limit" in note for note in report.notes)


@needs_namespaces
def test_signals_to_the_grader_reach_nothing(hostile):
    killer = ("import os, signal\n"
              "def _kill_everyone():\n"
              "    for target in (os.getppid(), 1, -1):\n"
              "        try:\n            os.kill(target, signal.SIGKILL)\n        except OSError:\n            pass\n"
              "_kill_everyone()\n")
    report = hostile(killer + mutant(REFERENCE, "    batch, num_heads, length, d_k = x.shape\n",
                                     "    batch, num_heads, length, d_k = x.shape\n    _kill_everyone()\n"))
    assert report.score == report.max_score and report.notes == []


def test_killing_the_graders_process_without_namespaces_is_the_students_doing(hostile):
    source = mutant(REFERENCE, "    batch, num_heads, length, d_k = x.shape\n",
                    "    batch, num_heads, length, d_k = x.shape\n"
                    "    import os, signal; os.kill(os.getppid(), signal.SIGKILL)\n")
    report = hostile(source, sandbox="off")  # the zygote is then the child's parent, in reach
    # Answers the child gave before it died count (how many is a race); nothing runs after.
    assert report.score < report.max_score
    assert any("killed the grader's process" in note for note in report.notes)
    assert all("internal grader error" not in t.message for p in report.parts for t in p.tests)


def test_processes_started_to_outlive_grading_do_not(hostile):
    daemons = (
        "import os, subprocess, time\n"
        "subprocess.Popen(['sleep', '313'], start_new_session=True)\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n        os.execvp('sleep', ['sleep', '314'])\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n"
    )
    report = hostile(daemons + REFERENCE)  # the fixture finds no descendant left; nor may any be elsewhere
    assert report.score == report.max_score
    leftovers = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if cmdline.read_bytes() in (b"sleep\x00313\x00", b"sleep\x00314\x00"):
                leftovers.append(cmdline.parent.name)
        except OSError:
            pass
    assert leftovers == []


# ---- exhausting resources -------------------------------------------------------------

def test_memory_exhaustion_is_stopped_at_the_limit_and_said(hostile):
    hog = "import torch\nchunks = []\nwhile True:\n    chunks.append(torch.empty(10**8, dtype=torch.uint8))\n"
    report = hostile(notebook_text(hog, REFERENCE), suffix=".ipynb")
    assert report.score == report.max_score
    assert any("cell 2" in note and "memory limit of 2 GiB exceeded" in note for note in report.notes), report.notes


def test_a_flood_of_output_is_truncated_and_said(hostile):
    flood_fd = "import os\nfor _ in range(2048):\n    os.write(1, b'x' * 2**20)\n"  # 2 GiB at the descriptor
    flood_print = "for _ in range(2000):\n    print('y' * 10**5)\n"  # 200 MB through print
    report = hostile(notebook_text(flood_fd, flood_print, REFERENCE), suffix=".ipynb")
    assert report.score == report.max_score
    assert len(report.output) < TEST_LIMITS.output_bytes + 200
    assert report.output.endswith("]") and "output truncated" in report.output


@needs_namespaces
def test_filling_the_disk_stops_at_the_scratch_cap(hostile, tmp_path):
    outside = tmp_path / "outside.bin"
    filler = ("import os\n"
              "try:\n"
              "    for i in range(10**6):\n"
              "        with open(f'fill{i}', 'wb') as f:\n            f.write(b'z' * 2**20)\n"
              "except OSError as exc:\n    print('disk:', os.strerror(exc.errno))\n"
              "try:\n"
              f"    open({str(outside)!r}, 'wb').write(b'z')\n"
              "except OSError as exc:\n    print('outside:', type(exc).__name__)\n")
    report = hostile(notebook_text(filler, REFERENCE), suffix=".ipynb",
                     limits=replace(TEST_LIMITS, scratch_bytes=32 * 2**20))
    assert report.score == report.max_score
    assert "disk: No space left on device" in report.output
    assert "outside:" in report.output and not outside.exists()


@pytest.mark.needs_layer("pids-cgroup", "namespaces")
def test_a_fork_bomb_is_contained(hostile):
    bomb = ("import os\n"
            "while True:\n"
            "    try:\n        os.fork()\n"
            "    except OSError:\n        pass\n")
    report = hostile(notebook_text(bomb, REFERENCE), suffix=".ipynb")
    assert report.score == report.max_score
    assert any("cell 2" in note and "time limit" in note for note in report.notes), report.notes


# ---- limits per submission, not per process --------------------------------------------

SHM_KEY = 0x67726164  # a System V shared memory segment's key, as two students could agree on one
SHM = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
segment = libc.shmget({key}, 512 * 2**20, 0o1666 if {leave} else 0)  # IPC_CREAT: 512 MiB, never removed
if {leave}:
    ctypes.memmove(libc.shmat(segment, None, 0), b'the answers', 11)
print('shared memory:', ctypes.string_at(libc.shmat(segment, None, 0), 11) if segment != -1
      else os.strerror(ctypes.get_errno()))
"""


@needs_namespaces
def test_shared_memory_left_by_one_submission_is_gone_and_never_reaches_the_next(hostile):
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        first = hostile(notebook_text(SHM.format(key=SHM_KEY, leave=True), REFERENCE), suffix=".ipynb")
        assert "shared memory: b'the answers'" in first.output  # it had its segment while it ran
        assert libc.shmget(SHM_KEY, 0, 0) == -1  # and nothing is left on the machine
        second = hostile(notebook_text(SHM.format(key=SHM_KEY, leave=False), REFERENCE), suffix=".ipynb")
        assert "shared memory: No such file or directory" in second.output
        assert first.score == second.score == first.max_score
    finally:  # what a grader without IPC namespaces leaves behind
        segment = libc.shmget(SHM_KEY, 0, 0)
        if segment != -1:
            libc.shmctl(segment, 0, None)  # IPC_RMID


HELPERS = """
import os, time
read_end, write_end = os.pipe()
helpers = []
for index in range(6):
    pid = os.fork()
    if pid == 0:
        try:
            held = b'x' * (600 * 2**20)  # every page written: resident
            os.write(write_end, bytes([index]))  # which helper holds its 600 MiB now
            time.sleep(60)
        finally:
            os._exit(0)
    helpers.append(pid)
os.close(write_end)
os.set_blocking(read_end, False)
holding, dead, deadline = set(), set(), time.monotonic() + 10
while len(holding | dead) < len(helpers) and time.monotonic() < deadline:
    time.sleep(0.1)
    dead |= {index for index, pid in enumerate(helpers) if index not in dead and os.waitpid(pid, os.WNOHANG)[0]}
    try:
        holding |= set(os.read(read_end, 64))
    except BlockingIOError:
        pass
time.sleep(0.5)
dead |= {index for index, pid in enumerate(helpers) if index not in dead and os.waitpid(pid, os.WNOHANG)[0]}
# Alive and past their allocation: one still allocating (the kernel about to end one) holds less.
print('holding 600 MiB at once:', len(holding - dead))
"""


@pytest.mark.needs_layer("memory-cgroup", "namespaces")
def test_forked_helpers_hold_no_more_than_the_submissions_memory_limit_together(hostile):
    # TEST_LIMITS' 2 GiB is each process's address space too: each helper alone fits in it.
    report = hostile(notebook_text(HELPERS, REFERENCE), suffix=".ipynb", limits=replace(TEST_LIMITS, cell_timeout_s=15))
    assert report.score == report.max_score  # the kernel ended helpers (or the cell), not the grading
    holding = [line for line in report.output.splitlines() if line.startswith("holding")]
    if holding:
        assert int(holding[0].split()[-1]) * 600 * 2**20 < TEST_LIMITS.memory_bytes, holding
    else:  # the kernel ended the student's process itself: the cell is skipped, and said why
        assert any("cell 2" in note and "memory limit of 2 GiB exceeded by all of your code's processes" in note
                   for note in report.notes), report.notes


HOG = """
import os, time
started = time.monotonic()
for _ in range(16):
    if os.fork() == 0:
        while time.monotonic() < started + 1.5:
            pass
        os._exit(0)
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
times = os.times()
cpu, wall = times.children_user + times.children_system, time.monotonic() - started
print(f'busy processes: {cpu:.2f} s of CPU in {wall:.2f} s')
cgroups = open('/proc/self/cgroup').read().splitlines()
print('in', *(line for line in cgroups if ':cpu:' in line or ':cpu,' in line or line.startswith('0::')))
"""


@pytest.mark.needs_layer("cpu-cgroup")
def test_a_cpu_hog_gets_one_submissions_share_however_many_processes_it_starts(hostile):
    # Load-independent: the quota caps what its processes get together (what a classmate graded
    # beside it keeps); a busy machine only gives them less.
    report = hostile(notebook_text(HOG, REFERENCE), suffix=".ipynb", limits=replace(TEST_LIMITS, cell_timeout_s=15))
    assert report.score == report.max_score
    lines = report.output.splitlines()
    line = next(line for line in lines if line.startswith("busy processes"))
    cpu_s, wall_s = float(line.split()[2]), float(line.split()[-2])
    assert cpu_s <= wall_s * TEST_LIMITS.threads + 0.3, line  # one CPU, one CFS period of slack
    cgroup = next(line for line in lines if line.startswith("in "))
    assert f"/transformer-grader/submission-{os.getpid()}-" in cgroup, cgroup  # the submission's, with its quota


@needs_namespaces
def test_sockets_reach_nothing(hostile):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0)
    abstract = socket.socket(socket.AF_UNIX)
    abstract_name = f"\0grader-adversarial-{os.getpid()}"
    abstract.bind(abstract_name)
    abstract.listen()
    abstract.settimeout(0)
    client = ("import socket\n"
              "for family, address in ((socket.AF_INET, ('127.0.0.1', {port})), (socket.AF_UNIX, {name!r})):\n"
              "    try:\n"
              "        s = socket.socket(family)\n        s.settimeout(1)\n        s.connect(address)\n"
              "        s.sendall(b'stolen')\n        print('connected', address)\n"
              "    except OSError as exc:\n        print('refused:', type(exc).__name__)\n"
              ).format(port=listener.getsockname()[1], name=abstract_name)
    try:
        report = hostile(client + REFERENCE)
        for server in (listener, abstract):
            with pytest.raises(BlockingIOError):
                server.accept()
    finally:
        listener.close()
        abstract.close()
    assert report.score == report.max_score
    assert "connected" not in report.output and report.output.count("refused:") == 2


# ---- showing the report ---------------------------------------------------------------

def test_rich_markup_in_student_messages_is_shown_as_text(tmp_path, capsys):
    submission = tmp_path / "mha.py"
    submission.write_text(mutant(REFERENCE, SIX_HEADS_FAULT, SIX_HEADS_FAULT + "    raise ValueError('[/] [bold red]')\n"))
    code = grade_cli([str(ASSIGNMENT_03), "--submission", str(submission), "--device", "cpu", "-v"])
    assert code == 0
    assert "[/] [bold red]" in capsys.readouterr().out


@pytest.mark.parametrize("kind", ["fifo", "endless device"])
def test_a_submission_that_is_not_a_regular_file_is_ungradable_not_a_hang(tmp_path, kind):
    from grader.engine.api import grade

    path = tmp_path / "mha.py"
    if kind == "fifo":
        os.mkfifo(path)  # reading it would block for ever
    else:
        path.symlink_to("/dev/zero")  # reading it would never end
    report = grade(ASSIGNMENT_03, path, device="cpu", limits=TEST_LIMITS)
    assert_valid(report)
    assert report.status == Status.UNGRADABLE and "not a regular file" in report.error
