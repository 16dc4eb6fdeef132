"""What decides a grade, as the fingerprint each report carries. A stored report is reused only
while every part of it is unchanged (:func:`grader.results.folder.why_stale`):

- ``submission``: the bytes graded;
- ``suite``: the assignment's hidden suite, every file of its folder;
- ``reference``: the reference modules grading needs: the shared files, and those the suite
  names or imports, with what they import in turn;
- ``contract``: the assignment's ``assignment.toml``, and the course's ``course.toml`` beside its
  folder (whose ``[rubric]`` switch decides how parts are scored);
- ``grader``: the grader package's own source;
- ``options``: the device, the sandbox, the limits and the total time, as graded.

Each part is a SHA-256, of the files' names and bytes, or of the options as canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from grader.core.assignment import Assignment, reference_dir
from grader.core.imports import imported_names, module_files

GRADER_DIR = Path(__file__).resolve().parents[1]
# The reference package's files every hidden suite runs with: the packages' own, and the
# pytest configuration the grader runs suites under (grader.engine.runner).
REFERENCE_SHARED = ("__init__.py", "hidden/__init__.py", "hidden/pytest.ini")
# Why a report is graded again, by the part of the fingerprint that changed; in this order.
CHANGED = {"submission": "file changed", "suite": "suite changed", "reference": "reference changed",
           "contract": "contract changed", "grader": "grader changed", "options": "options changed"}


def source_files(directory: Path) -> Iterator[Path]:
    """Every file under ``directory`` but bytecode caches and hidden files."""
    for path in sorted(directory.rglob("*")):
        parts = path.relative_to(directory).parts
        if path.is_file() and path.suffix != ".pyc" and not any(
                part == "__pycache__" or part.startswith(".") for part in parts):
            yield path


def reference_files(assignment: Assignment) -> list[Path]:
    """The files of the reference package that grading ``assignment`` needs: the shared ones,
    its hidden suite, and the reference modules that the suite names (suite.toml) or imports,
    with those they import in turn (read from their import statements)."""
    reference = reference_dir()
    files = {reference / name for name in REFERENCE_SHARED} | set(source_files(assignment.hidden_suite))
    pending = [assignment.reference_module] if assignment.reference_module else []
    pending += [name for path in files if path.suffix == ".py" for name in imported_names(path)]
    while pending:
        name = pending.pop()
        if name.split(".")[0] != reference.name:
            continue
        for path in module_files(reference, name):
            if path not in files:
                files.add(path)
                pending += imported_names(path)
    return sorted(files)


def contract_files(assignment: Assignment) -> list[Path]:
    """The contract's files: the assignment's, and the course's where there is one."""
    course = assignment.directory.parent / "course.toml"
    return [assignment.directory / "assignment.toml", *([course] if course.is_file() else [])]


def digest(paths: Iterable[Path], root: Path) -> str:
    """The SHA-256 of the files' names (relative to ``root``) and contents, in name order."""
    sha = hashlib.sha256()
    for path in sorted(paths, key=lambda path: path.relative_to(root).as_posix()):
        name = path.relative_to(root).as_posix().encode()
        sha.update(b"%d:%s" % (len(name), name) + hashlib.sha256(path.read_bytes()).digest())
    return sha.hexdigest()


@dataclass(frozen=True)
class Fingerprint:
    submission: str
    suite: str
    reference: str
    contract: str
    grader: str
    options: str

    @classmethod
    def of(cls, assignment: Assignment, options: object, submission_sha256: str = "") -> Fingerprint:
        """``options``: a dataclass of the grading options that decide a grade. Without
        ``submission_sha256``, what a batch's files share (tens of milliseconds: once per batch)."""
        suite = assignment.hidden_suite
        reference = reference_dir()
        shared = [path for path in reference_files(assignment) if not path.is_relative_to(suite)]
        settings = json.dumps(asdict(options), sort_keys=True, default=str)  # type: ignore[call-overload]
        return cls(submission=submission_sha256,
                   suite=digest(source_files(suite), suite),
                   reference=digest(shared, reference),
                   contract=digest(contract_files(assignment), assignment.directory.parent),
                   grader=digest(source_files(GRADER_DIR), GRADER_DIR),
                   options=hashlib.sha256(settings.encode()).hexdigest())

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def changed(self, stored: dict[str, str]) -> list[str]:
        """Why a report with the ``stored`` fingerprint no longer holds: each part that differs."""
        return [why for part, why in CHANGED.items() if stored.get(part) != getattr(self, part)]
