"""What decides a grade, as the fingerprint each report carries. A stored report is reused only
while every part of it is unchanged (:func:`grader.results.folder.why_stale`):

- ``submission``: the bytes graded;
- ``suite``: the assignment's hidden suite, every file of its folder;
- ``reference``: every other file of the reference package: what the suite imports, however
  it imports it (relative imports, import_module), and what pytest loads beside it (a
  conftest.py in reference/hidden/). An edit anywhere there regrades: a report is never
  reused on a guess about what grading read;
- ``contract``: the assignment's ``assignment.toml``, and the course's ``course.toml`` beside its
  folder (whose ``[rubric]`` switch decides how parts are scored);
- ``grader``: the grader package's own source, and the versions of what computes and runs the
  tests with it (torch's numerics decide a close call; pytest runs the suite);
- ``options``: the device, the sandbox, the limits and the total time, as graded.

Each part is a SHA-256, of the files' names and bytes, or of the options as canonical JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

from grader.core.assignment import Assignment, reference_dir

GRADER_DIR = Path(__file__).resolve().parents[1]
GRADING_PACKAGES = ("torch", "numpy", "pytest", "safetensors", "einops")
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


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _versions() -> str:
    """The installed versions of the packages grading computes with, read without importing them."""
    found = []
    for package in GRADING_PACKAGES:
        try:
            found.append(f"{package}=={metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} absent")
    return ";".join(found)


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
        shared = [path for path in source_files(reference) if not path.is_relative_to(suite)]
        settings = json.dumps(asdict(options), sort_keys=True, default=str)  # type: ignore[call-overload]
        return cls(submission=submission_sha256,
                   suite=digest(source_files(suite), suite),
                   reference=digest(shared, reference),
                   contract=digest(contract_files(assignment), assignment.directory.parent),
                   grader=_sha256(digest(source_files(GRADER_DIR), GRADER_DIR) + _versions()),
                   options=_sha256(settings))

    def to_dict(self) -> dict[str, str]:
        return asdict(self)

    def changed(self, stored: dict[str, str]) -> list[str]:
        """Why a report with the ``stored`` fingerprint no longer holds: each part that differs."""
        return [why for part, why in CHANGED.items() if stored.get(part) != getattr(self, part)]
