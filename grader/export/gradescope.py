"""Gradescope's side of the autograder: grade the submission, write ``results.json``.

The zip's ``run_autograder`` (:mod:`grader.export.gradescope_zip`) runs, in
``/autograder/source``::

    python -m grader.export.gradescope --root /autograder --assignment assignments/03 --visibility visible

which grades the file found in ``/autograder/submission`` and writes
``/autograder/results/results.json`` in Gradescope's format
(https://gradescope-autograders.readthedocs.io/en/latest/specs/): one test per part.
Whatever happens, a ``results.json`` is written: a missing submission or a crash of the
grader becomes a score of 0 with a message saying so. Who sees the tests and the script's
output, and from when, is the instructor's choice at export (:class:`Visibility`); whether
the submission is late, Gradescope's ``submission_metadata.json`` says
(:mod:`grader.export.gradescope_metadata`).
"""

from __future__ import annotations

import argparse
import math
import sys
import traceback
from dataclasses import dataclass, replace
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.report import GradeReport, write_json
from grader.core.report_words import grader_failed, part_feedback, part_passed, part_score, summary
from grader.core.sanitize import each_string, for_terminal
from grader.export.gradescope_metadata import is_late
from grader.results.submissions import discover

RESULTS = Path("results/results.json")  # under the autograder root
SUBMISSION_SUFFIXES = (".py", ".ipynb")
# Gradescope's settings for who sees something in results.json: nobody but the course staff,
# students once the due date has passed, once the grades are published, or at once.
VISIBILITIES = ("hidden", "after_due_date", "after_published", "visible")


@dataclass(frozen=True)
class Visibility:
    """What students see of ``results.json``, and from when (one of :data:`VISIBILITIES` each)."""

    tests: str = "visible"  # each part's test: its score, hint and failing checks
    # run_autograder's own output holds the grader's warnings and tracebacks: for instructors.
    stdout: str = "hidden"

    def __post_init__(self) -> None:
        for name, value in (("tests", self.tests), ("stdout", self.stdout)):
            if value not in VISIBILITIES:
                raise ValueError(f"{name} visibility {value!r} is not one of {', '.join(VISIBILITIES)}")


def to_gradescope(report: GradeReport, visibility: Visibility = Visibility()) -> dict:
    """``results.json`` for a report: one test per part, with its hint and failing checks."""
    tests = [{
        "name": part.id,
        "score": part_score(report, part),
        "max_score": part.max_score,
        "status": "passed" if part_passed(report, part) else "failed",
        "output": part_feedback(report, part),
        "visibility": visibility.tests,
    } for part in report.parts]
    return _results(sum(test["score"] for test in tests), summary(report), tests, report.duration_s, visibility)


def failure_results(message: str, visibility: Visibility = Visibility()) -> dict:
    """``results.json`` for a run that produced no report: no submission, or the grader crashed."""
    return _results(0.0, message, [], 0.0, visibility)


def _results(score: float, output: str, tests: list[dict], duration_s: float, visibility: Visibility) -> dict:
    # Student text (output, messages, file names) without control characters, as valid Unicode:
    # Gradescope shows it to the student and the course staff.
    return each_string({
        "score": score,
        "execution_time": math.ceil(duration_s),
        "output": output,
        # Plain text: messages quote the student's code and values, which must not render as markup.
        "output_format": "text",
        "test_output_format": "text",
        "visibility": visibility.tests,  # the default for tests that name none (each here names its own)
        "stdout_visibility": visibility.stdout,
        "tests": tests,
    }, for_terminal)


def find_submission(folder: Path, assignment: Assignment) -> Path | None:
    """The file to grade: the assignment's module or notebook (as ``grade`` picks a working
    copy when both are there), else the only ``.py`` or ``.ipynb`` handed in.

    Links are listed, never followed, and picked only when nothing else is: graded, a link
    gets a report telling the student to upload the file itself."""
    files = [folder / path for path in discover(folder) if path.suffix in SUBMISSION_SUFFIXES]
    named = sorted((path for path in files if path.name in (assignment.module, assignment.notebook)),
                   key=lambda path: (path.is_symlink(), len(path.parts), path))  # the shallowest, if zipped in a folder
    if named:
        return replace(assignment, directory=named[0].parent).working_copy()
    return files[0] if len(files) == 1 else None


def results_for(root: Path, assignment_dir: Path, visibility: Visibility = Visibility()) -> dict:
    assignment = Assignment.load(assignment_dir)
    folder = root / "submission"
    submission = find_submission(folder, assignment)
    if submission is None:
        handed_in = ", ".join(str(path) for path in discover(folder))
        return failure_results(f"No submission to grade: upload {assignment.module} or {assignment.notebook}"
                               f" (handed in: {handed_in or 'nothing'}).", visibility)
    from grader.engine.api import grade  # the engine: `grade export gradescope` builds the zip without it

    report = replace(grade(assignment, submission), late=is_late(root))
    return to_gradescope(report, visibility)


def run(root: Path, assignment_dir: Path, visibility: Visibility = Visibility()) -> None:
    """Grade and write ``results.json`` under ``root``, whatever fails on the way."""
    try:
        results = results_for(root, assignment_dir, visibility)
    except Exception as exc:  # noqa: BLE001 - Gradescope shows students nothing without results.json
        traceback.print_exc()  # to Gradescope's log of run_autograder, which instructors see
        results = failure_results(grader_failed(f"{type(exc).__name__}: {exc}"), visibility)
    write_json(root / RESULTS, results)


def add_visibility_options(parser: argparse.ArgumentParser) -> None:
    """``--visibility`` and ``--stdout-visibility``, for the export and for run_autograder."""
    parser.add_argument("--visibility", choices=VISIBILITIES, default=Visibility.tests,
                        help="who sees each part's test, and from when (default: %(default)s)")
    parser.add_argument("--stdout-visibility", choices=VISIBILITIES, default=Visibility.stdout,
                        help="who sees the autograder's own output: the grader's warnings and tracebacks "
                             "(default: %(default)s)")


def visibility_from(args: argparse.Namespace) -> Visibility:
    return Visibility(args.visibility, args.stdout_visibility)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.export.gradescope",
                                     description="Grade a Gradescope submission and write results.json.")
    parser.add_argument("--root", type=Path, default=Path("/autograder"), help="Gradescope's autograder folder")
    parser.add_argument("--assignment", type=Path, required=True, help="the assignment directory")
    add_visibility_options(parser)
    args = parser.parse_args(argv)
    run(args.root, args.assignment, visibility_from(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
