"""GitHub Classroom's side: hand ``grade --json``'s report to the grading reporter.

In the workflow from :mod:`grader.export.classroom_workflow`::

    python -P -m grader.export.classroom report.json

appends ``result=<base64 JSON>`` to ``$GITHUB_OUTPUT``: the step output that
classroom-resources/autograding-grading-reporter reads from ``<RUNNER ID>_RESULTS``, in the
format of GitHub's own graders (``{version: 1, status, max_score, tests: [...]}``, the
score being the sum of the tests'). One test per part, with its partial score.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path

from grader.core.report import GradeReport, PartResult
from grader.core.report_words import counts, grader_failed, part_feedback, part_passed, part_score, summary

RESULT_VERSION = 1


def to_classroom(report: GradeReport) -> dict:
    tests = [_test(part.id, _part_status(report, part), part_score(report, part), part_feedback(report, part))
             for part in report.parts]
    if not counts(report):
        status = "error"
    else:
        status = "pass" if all(test["status"] == "pass" for test in tests) else "fail"
    return {"version": RESULT_VERSION, "status": status, "max_score": report.max_score, "tests": tests}


def no_report_result(detail: str) -> dict:
    """The result when ``grade`` wrote no report (it crashed before): an error, no points."""
    return {"version": RESULT_VERSION, "status": "error", "max_score": 0,
            "tests": [_test("grader", "error", 0.0, grader_failed(detail))]}


def _part_status(report: GradeReport, part: PartResult) -> str:
    if not counts(report):
        return "error"
    return "pass" if part_passed(report, part) else "fail"


def _test(name: str, status: str, score: float, message: str) -> dict:
    # test_code, filename and line_no as GitHub's command grader sets them for a command:
    # the reporter prints a line number unless it is 0.
    return {"name": name, "status": status, "score": score, "message": message,
            "test_code": "", "filename": "", "line_no": 0, "duration": 0}


def encode(result: dict) -> str:
    return base64.b64encode(json.dumps(result).encode("utf-8")).decode("ascii")


def result_for(report_path: Path) -> dict:
    try:
        report = GradeReport.from_dict(json.loads(report_path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return no_report_result(f"no usable report at {report_path} ({exc}); see the grading step's log")
    print(summary(report))  # into the step's log: the reporter shows only the parts
    return to_classroom(report)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.export.classroom",
                                     description="Write a grade report as the GitHub Classroom reporter's input.")
    parser.add_argument("report", type=Path, help="the JSON report of `grade --json`")
    args = parser.parse_args(argv)
    line = f"result={encode(result_for(args.report))}\n"
    output = os.environ.get("GITHUB_OUTPUT")
    if output:
        with open(output, "a", encoding="utf-8") as handle:
            handle.write(line)
    else:  # outside GitHub Actions: show it
        sys.stdout.write(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
