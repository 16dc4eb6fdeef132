"""Each student's feedback, ready to mail or upload: a self-contained HTML page, and the same as Markdown.

    results/feedback/<student>.html   (and .md)

Written by ``grade batch``, or by ``grade feedback RESULTS`` over a results folder: one pair
per student of the gradebook, linked from the class report. A page says
the score, or why there is none; the file graded, and where there were several, how it was
chosen and what the others scored; each part with what is probably wrong, and what the
instructor changed and why (``grade batch --overrides``); each failing check with its message
(what the code returned and what was expected); the notes on the notebook's cells, in the
notebook's order; and what the code printed.

The page is built once as a list of blocks and then written twice, so the two never say
different things. Everything on it but the grader's own words comes from the report, which
the student's code can influence: HTML is escaped (the page is a template,
``templates/feedback.html.j2``, rendered with autoescape: :mod:`grader.views.html_templates`),
Markdown backslash-escaped or fenced, and both lose their control characters
(:func:`grader.core.sanitize.for_terminal`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from grader.core.report import GradeReport, Outcome, PartResult, Status, write_atomic
from grader.core.report_words import file_score, grader_failed, part_problem
from grader.core.sanitize import for_terminal
from grader.results.folder import MISSING, ClassResults, StudentGrade, report_name
from grader.results.students import FILE_RULE
from grader.views.html_templates import render

FOLDER = "feedback"


# ---- the blocks a page is made of ------------------------------------------------------


@dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclass(frozen=True)
class Paragraph:
    text: str


@dataclass(frozen=True)
class Items:
    items: list[str]


@dataclass(frozen=True)
class Grid:
    header: list[str]
    rows: list[list[str]]


@dataclass(frozen=True)
class Preformatted:
    text: str


Block = Heading | Paragraph | Items | Grid | Preformatted


def page_blocks(assignment: str, entry: StudentGrade) -> list[Block]:
    blocks: list[Block] = [Heading(1, f"Assignment {assignment}: feedback for {entry.name or entry.student}")]
    report = entry.report
    if entry.status == MISSING:
        return [*blocks, Paragraph("No submission was received, so the score is 0.")]
    if report is None:  # a grader_error whose report could not be written, or one removed since
        return [*blocks, Paragraph(grader_failed(f"the report of {entry.submission} cannot be read"))]
    if report.status == Status.UNGRADABLE:
        blocks.append(Paragraph(f"Your submission could not be graded, so the score is 0: {report.error}"))
    elif report.status == Status.GRADER_ERROR:
        blocks.append(Paragraph(grader_failed(report.error or "unknown error")))
    elif report.score != report.autograder_score:
        blocks.append(Paragraph(f"Score: {report.score:g} / {report.max_score:g}, with your instructor's changes "
                                f"below (the autograder gave {report.autograder_score:g})"))
    else:
        blocks.append(Paragraph(f"Score: {report.score:g} / {report.max_score:g}"))
    blocks.append(Paragraph(f"Graded: {entry.submission}" + (" (submitted late)" if entry.late else "")))
    blocks += _files(entry)
    if report.status != Status.GRADED:
        return blocks + _notes(report)
    blocks += [Heading(2, "Parts"), _parts(report)]
    for part in report.parts:
        failing = [test for test in part.tests if test.outcome != Outcome.PASSED]
        if part.score >= part.max_score or not failing:
            continue
        blocks.append(Heading(2, f"{part.id}: the checks that failed"))
        for test in failing:
            blocks.append(Heading(3, f"{test.name}: {test.outcome}, {test.score:g} / {test.max_score:g}"))
            if test.hint:
                blocks.append(Paragraph(f"Probably: {test.hint}"))
            if test.message:
                blocks.append(Preformatted(test.message))
    blocks += _notes(report)
    if report.output:
        blocks += [Heading(2, "What your code printed"), Preformatted(report.output)]
    return blocks


def _files(entry: StudentGrade) -> list[Block]:
    """How the file graded was chosen among several, and the others, each with its score."""
    if not entry.others:
        return []
    why = ("Your instructor chose this file for your grade" + (f": {entry.handin.pinned}" if entry.handin.pinned else ".")
           if entry.handin.pinned is not None else f"You handed in several files; the one graded is, {FILE_RULE}.")
    rows = [[path.as_posix(), file_score(report)] for path, report in entry.others.items()]
    return [Heading(2, "Your files"), Paragraph(why), Grid(["also handed in", "score"], rows)]


def _parts(report: GradeReport) -> Grid:
    """Each part's score and what is probably wrong; where an instructor changed a part, what
    they changed and why."""
    header = ["part", "score", "what is probably wrong"]
    rows = [[part.id, f"{part.score:g} / {part.max_score:g}", part_problem(part)] for part in report.parts]
    if any(part.override for part in report.parts):
        header.append("your instructor's change")
        for row, part in zip(rows, report.parts):
            row.append(_change(part))
    return Grid(header, rows)


def _change(part: PartResult) -> str:
    if part.override is None:
        return ""
    moved = (f"{part.autograder_score:g} -> {part.score:g}" if part.score != part.autograder_score
             else "the autograder's score kept")
    return moved + (f": {part.override.comment}" if part.override.comment else "")


def _notes(report: GradeReport) -> list[Block]:
    if not report.notes:
        return []
    counted = [Paragraph("Cells are counted from the top of your notebook, text cells included.")
               ] if report.submission.endswith(".ipynb") else []
    return [Heading(2, "Notes on loading your code"), *counted, Items(report.notes)]


# ---- HTML ----------------------------------------------------------------------------


def render_html(blocks: list[Block]) -> str:
    title = next((block.text for block in blocks if isinstance(block, Heading)), "Feedback")
    return render("feedback.html.j2", title=title, blocks=[(type(block).__name__, block) for block in blocks])


# ---- Markdown ------------------------------------------------------------------------

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+\-!|~&])")


def _md(text: str) -> str:
    """Inline text that Markdown shows as it is: its punctuation escaped (CommonMark lets any
    be), so a hint quoting ``x[:, 0]`` or ``<script>`` is neither markup nor HTML."""
    text = _MARKDOWN_SPECIAL.sub(r"\\\1", for_terminal(text))
    text = re.sub(r"(?m)^(\s*\d+)\.", r"\1\\.", text)  # "1." starting a line would be a list
    return text.replace("\n", _LINE_BREAK)


_LINE_BREAK = "  \n"  # two spaces, then the newline: a line break inside a paragraph


def render_markdown(blocks: list[Block]) -> str:
    def one_line(text: str, joiner: str) -> str:
        return _md(text).replace(_LINE_BREAK, joiner)

    def row(cells: list[str]) -> str:
        return "| " + " | ".join(one_line(cell, "; ") for cell in cells) + " |"

    out = []
    for block in blocks:
        if isinstance(block, Heading):
            out.append("#" * block.level + " " + one_line(block.text, " "))
        elif isinstance(block, Paragraph):
            out.append(_md(block.text))
        elif isinstance(block, Items):
            out.append("\n".join("- " + one_line(item, _LINE_BREAK + "  ") for item in block.items))
        elif isinstance(block, Grid):
            out.append("\n".join([row(block.header), "|" + "---|" * len(block.header), *map(row, block.rows)]))
        else:
            text = for_terminal(block.text)
            longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
            fence = "`" * max(3, longest + 1)  # no run of backticks inside can close it
            out.append(f"{fence}text\n{text}\n{fence}")
    return "\n\n".join(out) + "\n"


# ---- a results folder ----------------------------------------------------------------


def page_name(student: str) -> str:
    """The student's pages, without the suffix: their id, percent-encoded as report names are."""
    return report_name(Path(student))


def write_feedback(results: ClassResults, out: Path) -> list[Path]:
    """Every student's pages under ``out/feedback/``, and no other (the pages of students no
    longer in the gradebook are removed); returns the HTML pages."""
    folder = out / FOLDER
    pages = {}
    for entry in results.students:
        blocks = page_blocks(results.assignment, entry)
        name = page_name(entry.student)
        pages[folder / f"{name}.html"] = render_html(blocks)
        pages[folder / f"{name}.md"] = render_markdown(blocks)
    for path, text in pages.items():
        write_atomic(path, text)
    for stale in [*folder.glob("*.html"), *folder.glob("*.md")]:
        if stale not in pages:
            stale.unlink()
    return [path for path in pages if path.suffix == ".html"]
