"""What a student reads about a report on a course platform, as plain text.

Both exports use it, so Gradescope and GitHub Classroom say the same thing. A report that
is not ``graded`` scores 0 there: its parts' scores, if any, do not stand.
"""

from __future__ import annotations

from collections.abc import Iterable

from grader.core.report import GradeReport, Outcome, PartResult, Rule, ScoredBy, Status


def counts(report: GradeReport) -> bool:
    """Whether the report's scores stand (ungradable and grader_error reports score 0)."""
    return report.status == Status.GRADED


def part_score(report: GradeReport, part: PartResult) -> float:
    return part.score if counts(report) else 0.0


def part_passed(report: GradeReport, part: PartResult) -> bool:
    return counts(report) and part.score >= part.max_score


def grader_failed(detail: str) -> str:
    return (f"The grader failed on this submission: {detail}\n"
            "This is not your fault: please tell the course staff, who can regrade it.")


def summary(report: GradeReport) -> str:
    """The score, or why there is none, whether the submission is late (when known), and what
    happened while loading it."""
    if report.status == Status.UNGRADABLE:
        lines = [f"Your submission could not be graded: {report.error}"]
    elif report.status == Status.GRADER_ERROR:
        lines = [grader_failed(report.error or "unknown error")]
    else:
        lines = [f"Score: {report.score:g} / {report.max_score:g}"]
    if report.late:
        lines.append("Late: this submission was handed in after the due date.")
    lines += [f"Note: {note}" for note in report.notes]
    return "\n".join(lines)


def part_feedback(report: GradeReport, part: PartResult) -> str:
    """The part's hint, then each failing check and its message; empty for a full score."""
    if not counts(report):
        return report.error or ""  # every check would only repeat it as "not run"
    if part_passed(report, part) and not part.scored_by.charged_to:
        return ""
    lines = [f"Probably wrong: {part.hint}"] if part.hint else []
    lines += [rule[0].upper() + rule[1:] for rule in [describe_scoring(part.scored_by)] if rule]
    lines += [f"- {test.name} ({test.outcome}, {test.score:g} / {test.max_score:g}): {test.message}"
              for test in part.tests if test.outcome != Outcome.PASSED]
    return "\n".join(lines)


def describe_scoring(scored_by: ScoredBy) -> str | None:
    """How a part was scored, where not by its tests alone: "scored by the rubric: scores not
    scaled, -3 (the tests alone: 3)"; "tests that fail only through split_heads are charged there
    (the tests alone: 5)"."""
    said = []
    if scored_by.rule == Rule.RUBRIC:
        taken = [f"{mistake}, -{points:g}" for mistake, points in scored_by.deductions.items()]
        if scored_by.unexplained:
            taken.append(f"other failing checks, -{scored_by.unexplained:g}")
        said.append(f"scored by the rubric: {'; '.join(taken)}")
    if scored_by.charged_to:
        said.append(f"tests that fail only through {', '.join(scored_by.charged_to)} are charged there")
    if not said:
        return None
    return f"{'; '.join(said)} (the tests alone: {scored_by.tests_score:g})"


def part_problem(part: PartResult) -> str:
    """What is probably wrong: the part's hints, the headline first, one a line (the second
    after "also: "), else its first failure; then the rule that scored it, if not its tests alone.
    A part that kept its points because its failing tests fail only through a part it uses says
    so too: its output was wrong all the same."""
    if part.score >= part.max_score and not part.scored_by.charged_to:  # else: its output was wrong all the same
        return ""
    shown = part.hints or [part.hint] * bool(part.hint)
    if part.score >= part.max_score:
        shown = shown[:1]  # where to look; what else its failing tests suggest was seen through that part
    failing = next((test for test in part.tests if test.outcome != "passed"), None)
    if shown:
        lines = [shown[0], *(f"also: {hint}" for hint in shown[1:])]
    else:
        lines = [failing.message.splitlines()[0]] if failing and failing.message else []
    rule = describe_scoring(part.scored_by)
    return "\n".join([*lines, *([rule] if rule else [])])


def headline(report: GradeReport) -> str:
    """The one line to say about a report: why it has no score, else the problem of the part
    that lost the most points (the first of those that lost as much), else nothing."""
    if not counts(report):
        return report.error or report.status
    losing = [part for part in report.parts if part.score < part.max_score]
    if not losing:
        return ""
    part = max(losing, key=lambda part: part.max_score - part.score)
    problem = part_problem(part).partition("\n")[0]
    return f"{part.id}: {problem}" if problem else f"{part.id}: {part.score:g} / {part.max_score:g}"


NOT_GRADED = "not graded"  # a file handed in beside the one graded for the student, without --all-files


def file_score(report: GradeReport | None) -> str:
    """What a file handed in scored (``6 / 6``), or why it has no score (``not graded``,
    ``ungradable``): the gradebook and the feedback page list each file a student handed in."""
    if report is None:
        return NOT_GRADED
    if report.status != Status.GRADED:
        return report.status.replace("_", " ")
    return f"{report.score:g} / {report.max_score:g}"


def overrides_line(parts: Iterable[PartResult]) -> str:
    """Each part an instructor's override decides: the autograder's score, the final one and the
    comment (``MultiHeadAttention 3 -> 5: the mask is right``; ``split_heads 2 (kept): read by
    hand`` where only a comment was added)."""
    return "; ".join(f"{part.id} " + (f"{part.autograder_score:g} -> {part.score:g}"
                                      if part.score != part.autograder_score else f"{part.score:g} (kept)")
                     + (f": {part.override.comment}" if part.override and part.override.comment else "")
                     for part in parts if part.override)
