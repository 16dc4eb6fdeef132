"""Shared helpers: write a submission, grade it with short limits, build notebooks,
make mutants of a reference, validate reports against the schema."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path

import jsonschema
import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.core.report import GradeReport, Status, load_schema
from grader.engine.api import grade
from grader.sandbox import cgroups, landlock, namespaces, seccomp
from grader.sandbox.limits import Limits
from grader.sandbox.zygote import Zygote, ZygoteServer
from reference import as_submission

ROOT = Path(__file__).resolve().parent.parent
ASSIGNMENTS = ROOT / "assignments"
ASSIGNMENT_03 = ASSIGNMENTS / "03"
# Short enough to keep the suite quick, long enough for a correct submission on a busy CI box.
TEST_LIMITS = Limits(call_timeout_s=5.0, cell_timeout_s=2.0, memory_bytes=2 * 2**30)
# Where grade_source grades: GRADER_TEST_DEVICE=cuda runs the tests that use it (the mistake
# tables among them) on a GPU, as an instructor's GPU machine grades (docs/performance.md).
TEST_DEVICE = os.environ.get("GRADER_TEST_DEVICE", "cpu")


# The sandbox's layers, as the machine offers them (its kernel's features, root): a test marked
# @pytest.mark.needs_layer(NAME, ...) skips where one is missing, and fails instead when
# REQUIRE_SANDBOX=1 (CI, where every layer must be tested).
LAYERS = {
    "namespaces": namespaces.namespaces_available,
    "landlock": lambda: landlock.abi_version() >= 1,
    "landlock-signals": lambda: landlock.abi_version() >= 6,
    "seccomp": seccomp.available,
    **{f"{controller}-cgroup": (lambda controller=controller: cgroups.available(controller))
       for controller in cgroups.CONTROLLERS},
}


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"needs_layer(*names): skip without these sandbox layers, one of "
                                       f"{sorted(LAYERS)}; fail instead with REQUIRE_SANDBOX=1")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): one worker per CPU this process may run on. xdist's own
    count is the machine's physical cores where psutil is installed (Ray brings it), which in a
    container can be many more than it is given."""
    affinity = getattr(os, "sched_getaffinity", None)  # Linux; elsewhere, every CPU
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def pytest_runtest_setup(item: pytest.Item) -> None:
    for marker in item.iter_markers("needs_layer"):
        missing = [name for name in marker.args if not LAYERS[name]()]
        if missing:
            message = f"this machine lacks the sandbox layers {', '.join(missing)}"
            if os.environ.get("REQUIRE_SANDBOX") == "1":
                pytest.fail(f"REQUIRE_SANDBOX=1, but {message}", pytrace=False)
            pytest.skip(message)


def notebook_text(*cells: str, markdown_first: bool = True) -> str:
    nb_cells = [new_markdown_cell("# My solution")] if markdown_first else []
    nb_cells += [new_code_cell(source) for source in cells]
    return nbformat.writes(new_notebook(cells=nb_cells))


@pytest.fixture
def student_processes(monkeypatch, tmp_path) -> Callable[[], int]:
    """How many student processes the gradings started from now on. Counted in a file: they
    are started from the suite's process, a fork of this one."""
    started = tmp_path / "student-processes"
    started.touch()
    spawn = Zygote.spawn

    def counted(zygote: Zygote):
        with started.open("a") as file:
            file.write(".")
        return spawn(zygote)

    monkeypatch.setattr(Zygote, "spawn", counted)
    return lambda: len(started.read_text())


@pytest.fixture
def grade_source(tmp_path):
    """grade_source(text, suffix=".py") -> GradeReport for assignment 03."""
    def run(text: str | bytes, suffix: str = ".py", assignment: Path = ASSIGNMENT_03, **kwargs) -> GradeReport:
        path = tmp_path / f"submission{suffix}"
        path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
        return grade(assignment, path, device=TEST_DEVICE, limits=kwargs.pop("limits", TEST_LIMITS), **kwargs)
    return run


def part(report: GradeReport, part_id: str):
    return next(p for p in report.parts if p.id == part_id)


def mutant(source: str, old: str, new: str) -> str:
    """``source`` with one edit: a buggy submission that differs from it in one known way."""
    assert source.count(old) == 1, f"mutation target must be unique: {old!r}"
    return source.replace(old, new)


def assert_mistake_named(report: GradeReport, expected: dict[str, tuple[float, str | None]], name: str = "") -> None:
    """Each part in ``expected`` loses exactly the points written beside it, what an instructor
    would take for the mistake, with a headline hint containing that text (None: any hint);
    every other part keeps full marks."""
    assert report.status == "graded", report.error
    for result in report.parts:
        if result.id in expected:
            points, want = expected[result.id]
            assert result.max_score - result.score == points, \
                f"{name}: {result.id} lost {result.max_score - result.score:g} points, not {points:g}: {result.hints}"
            assert want is None or (result.hint and want in result.hint), (name, result.id, result.hint)
        else:
            assert result.score == result.max_score, f"{name}: {result.id} lost points: {result.hint}"


def assert_valid(report: GradeReport) -> None:
    jsonschema.validate(json.loads(json.dumps(report.to_dict())), load_schema())


@pytest.fixture
def class_folder(tmp_path) -> Path:
    """What an LMS export looks like: a folder per student, the same file names."""
    folder = tmp_path / "submissions"
    files = {
        "alice/mha.py": as_submission("multihead"),
        "bob/mha.py": (ROOT / "examples/03/submission.py").read_text(),
        "carol/mha.ipynb": notebook_text(as_submission("multihead")),
        "dave/mha.py": "\x00\x01\x02",
        "erin/notes.txt": "I could not finish",
        "carol/.ipynb_checkpoints/mha-checkpoint.ipynb": notebook_text((ASSIGNMENT_03 / "mha.py").read_text()),
    }
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def grader_files() -> dict[str, tuple[int, int]]:
    """Size and modification time of every file of the grader, the reference and the handouts."""
    found = {}
    for top in ("grader", "reference", "assignments"):
        for path in (ROOT / top).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                info = path.stat()
                found[str(path)] = (info.st_size, info.st_mtime_ns)
    return found


def survivors(wait_s: float = 3.0) -> list[int]:
    """Processes below this one still alive after grading, but for the zygote server, which
    is meant to serve the next submission."""
    server = ZygoteServer.shared().pid
    deadline = time.monotonic() + wait_s
    while (left := [pid for pid in descendants(os.getpid()) if alive(pid) and pid != server]) \
            and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


@pytest.fixture
def hostile(grade_source):
    """hostile(source, suffix=".py", **grade_kwargs) -> the report, after checking the invariants."""
    def run(source: str, suffix: str = ".py", **kwargs) -> GradeReport:
        before = grader_files()
        report = grade_source(source, suffix=suffix, **kwargs)
        assert_valid(report)
        assert report.status == Status.GRADED, report.error
        assert survivors() == [], "a process outlived grading"
        assert grader_files() == before, "the submission changed the grader's files"
        return report
    return run


def descendants(pid: int, depth: int | None = None) -> list[int]:
    """Host pids of every process below ``pid`` (down to ``depth`` generations), from /proc."""
    children = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, queue = [], [(pid, 0)]
    while queue:
        parent, generation = queue.pop()
        if depth is not None and generation >= depth:
            continue
        for child in children.get(parent, []):
            found.append(child)
            queue.append((child, generation + 1))
    return found


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def bytes_read() -> int:
    """Bytes this process has read so far through read(2) and its kind (not pages of mapped files),
    children it has reaped included: /proc/self/io's rchar. Tells whether a file was read without
    depending on how it was read or on how busy the machine is."""
    for line in Path("/proc/self/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("/proc/self/io has no rchar")
