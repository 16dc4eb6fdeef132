"""``grade report``: a class's results folder as one self-contained HTML page and a terminal view;
and the terminal view that ends ``grade batch``, which shares its table.

The page has no scripts and no external resources (it is mailed around and opened from
disk): the plots are inline SVG, their geometry computed here (:class:`Plot`). Hints and part
names come from reports that student code can influence, so every piece of report text is
escaped, and loses its control characters, which no HTML or XML (the inline SVG) may hold: on
the page by the template's rendering (``templates/class_report.html.j2``,
:mod:`grader.views.html_templates`), on the terminal by :func:`grader.views.terminal.plain`.
"""

from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from grader.core.report import Status, write_atomic
from grader.core.report_words import headline
from grader.results.changes import FILE as CHANGES_FILE
from grader.results.changes import Change
from grader.results.class_stats import Bin, ClassStatistics, Scores, histogram
from grader.results.folder import MISSING, BatchResult, ClassResults, StudentGrade
from grader.views.feedback_pages import page_name
from grader.views.html_templates import render
from grader.views.terminal import plain

PAGE = "report.html"  # its name in a results folder
HISTOGRAM_COLOUR = "#4c78a8"
MISTAKE_COLOUR = "#e45756"
MISTAKE_LABEL_CHARS = 120  # the SVG label does not wrap; the tooltip has the whole hint
SPARK = " ▁▂▃▄▅▆▇█"
STAT_COLUMNS = ("part", "graded", "mean", "median", "max", "out of")


HARDEST_TESTS = 30  # the page lists the tests with the lowest pass rates, at most this many


def _counted(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _stat_cells(scores: Scores) -> list[str]:
    """Mean, median and max, as the class views show them ("–" when nothing was graded)."""
    numbers = scores.stats()
    return ["–" if numbers[key] is None else f"{numbers[key]:.3g}" for key in ("mean", "median", "max")]


def _describe(b: Bin) -> str:
    who = _counted(b.count, "submission")
    if b.high is None:
        return f"{who}: full marks ({b.low:g})"
    return f"{who}: {b.low:g} ≤ score < {b.high:g}"


# ---- the HTML page: templates/class_report.html.j2 -----------------------------------


def write_page(results: ClassResults, page: Path, feedback: Path | None = None, similarity: Path | None = None) -> None:
    """The page at ``page``; with ``feedback``, the folder of the students' feedback pages, each
    student's row links to theirs; with ``similarity``, the similarity report, which it links."""
    write_atomic(page, render_html(results, _relative(feedback, page), _relative(similarity, page)))


def _relative(target: Path | None, page: Path) -> str | None:
    return Path(os.path.relpath(target.resolve(), page.resolve().parent)).as_posix() if target else None


def render_html(data: ClassResults, feedback: str | None = None, similarity: str | None = None) -> str:
    """The page; ``feedback``: where the students' feedback pages are, relative to it (their
    rows link there), or None when there are none; ``similarity``: the similarity report,
    relative to it, or None."""
    stats = data.statistics
    return render(
        "class_report.html.j2",
        similarity=similarity,
        title=f"Assignment {data.assignment}: class report, {stats.submissions} submissions",
        counts=(", ".join(f"{count} {status.replace('_', ' ')}" for status, count in stats.counts.items())
                + _also_handed_in(stats)),
        skipped=[path.as_posix() for path in data.skipped], skipped_files=_counted(len(data.skipped), "file"),
        total=_histogram_plot("total", stats.total),
        mistakes=_mistakes_plot(stats.hints) if stats.hints else None,
        stat_columns=STAT_COLUMNS, part_rows=[_stat_row(part_id, scores) for part_id, scores in stats.parts.items()],
        total_row=_stat_row("total", stats.total),
        parts={part_id: _histogram_plot(part_id, scores) for part_id, scores in stats.parts.items()},
        hardest=[[rate.part, rate.test, f"{rate.passed} / {rate.run}", f"{rate.rate:.0%}"]
                 for rate in stats.tests if rate.passed < rate.run][:HARDEST_TESTS],
        not_graded=[[report.submission, report.status.replace("_", " "), report.error or ""]
                    for report in stats.not_graded],
        flags=[[report.submission, flag.kind, flag.where, flag.detail]
               for report in stats.flagged for flag in report.flags],
        students=_students(data.students, feedback),
        changes=[[change.student, f"{change.old_score:g}", f"{change.new_score:g}", change.parts, change.why]
                 for change in data.changes],
        changes_file=CHANGES_FILE,
        colours={"histogram": HISTOGRAM_COLOUR, "mistake": MISTAKE_COLOUR},
    )


def _stat_row(name: str, scores: Scores) -> list[str]:
    return [name, str(len(scores.values)), *_stat_cells(scores), f"{scores.max_score:g}"]


@dataclass(frozen=True)
class StudentRow:
    student: str
    name: str
    status: str
    score: str
    hint: str
    page: str | None  # the link to their feedback page


def _students(students: list[StudentGrade], feedback: str | None) -> list[StudentRow]:
    rows = []
    for entry in students:
        score = f"{entry.report.score:g}" if entry.report and entry.status == Status.GRADED else "0"
        hint = headline(entry.report) if entry.report else "no submission"
        page = None if feedback is None else f"{feedback}/{quote(page_name(entry.student))}.html"
        rows.append(StudentRow(entry.student, entry.name, entry.status.replace("_", " "), score, hint, page))
    return rows


# A plot as data, which templates/plots.html.j2 draws as inline SVG.


@dataclass(frozen=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    kind: str  # its CSS class, which gives its colour
    tooltip: str


@dataclass(frozen=True)
class Label:
    x: float
    y: float
    text: str
    anchor: str = "middle"
    kind: str = "label"  # its CSS class: "tick", a bin's range under the axis, is smaller


@dataclass(frozen=True)
class Axis:
    x1: int
    x2: int
    y: int


@dataclass(frozen=True)
class Plot:
    width: int
    height: int
    label: str  # what the plot shows, for a screen reader and as its title
    bars: list[Bar]
    labels: list[Label]
    axis: Axis | None = None


def _histogram_plot(name: str, scores: Scores) -> Plot:
    width, height, left, top, bottom = 480, 220, 10, 20, 40
    bins = histogram(scores)
    slot = (width - 2 * left) / len(bins)
    tallest = max(b.count for b in bins) or 1
    bars, labels = [], []
    for i, b in enumerate(bins):
        x = left + i * slot
        bar = (height - top - bottom) * b.count / tallest
        if b.count:
            bars.append(Bar(x + slot * .1, height - bottom - bar, slot * .8, bar, "histogram", _describe(b)))
            labels.append(Label(x + slot / 2, height - bottom - bar - 4, str(b.count)))
        labels.append(Label(x + slot / 2, height - bottom + 14, b.label, kind="tick"))
    labels.append(Label(width / 2, height - 6, f"{name} score (last bar: full marks, {scores.max_score:g})"))
    if not scores.values:
        labels.append(Label(width / 2, height / 2, "no graded submissions"))
    label = f"Histogram of {name} scores out of {scores.max_score:g}, {len(scores.values)} graded submissions"
    return Plot(width, height, label, bars, labels, Axis(left, width - left, height - bottom))


def _mistakes_plot(hints: list[tuple[str, int]]) -> Plot:
    width, row, bar_height, count_room = 1000, 44, 16, 40
    most = max(count for _, count in hints)
    bars, labels = [], []
    for i, (hint, count) in enumerate(hints):
        y = i * row
        shown = hint if len(hint) <= MISTAKE_LABEL_CHARS else hint[:MISTAKE_LABEL_CHARS - 1] + "…"
        bar = (width - count_room) * count / most
        labels.append(Label(0, y + 14, shown, anchor="start"))
        bars.append(Bar(0, y + 20, bar, bar_height, "mistake", f"{_counted(count, 'submission')}: {hint}"))
        labels.append(Label(bar + 6, y + 20 + bar_height - 3, str(count), anchor="start"))
    label = f"Bar chart of the {len(hints)} most frequent mistakes, by number of submissions"
    return Plot(width, row * len(hints), label, bars, labels)


# ---- the terminal view ---------------------------------------------------------------


def sparkline(scores: Scores) -> str:
    """The histogram in block characters; an empty bin is a space, any other shows."""
    counts = [b.count for b in histogram(scores)]
    tallest = max(counts) or 1
    return "".join(SPARK[math.ceil(count / tallest * (len(SPARK) - 1))] for count in counts)


def _numbers_table(assignment: str, stats: ClassStatistics) -> Table:
    """The per-part class numbers, then the total's: the batch's summary and ``grade report`` show it."""
    table = Table(title=plain(f"Assignment {assignment}: {stats.submissions} submissions"), title_justify="left")
    for column in (*STAT_COLUMNS, "0 … full marks"):
        table.add_column(column, justify="right" if column in STAT_COLUMNS[1:] else "left", no_wrap=True)

    def row(name: str, scores: Scores) -> None:
        table.add_row(plain(name), str(len(scores.values)), *_stat_cells(scores), f"{scores.max_score:g}",
                      Text(sparkline(scores), style="blue"))

    for part_id, scores in stats.parts.items():
        row(part_id, scores)
    table.add_section()
    row("total", stats.total)
    return table


def _counts_line(stats: ClassStatistics) -> str:
    return ", ".join(f"{count} {status}" for status, count in stats.counts.items()) + _also_handed_in(stats)


def _also_handed_in(stats: ClassStatistics) -> str:
    if not stats.also_handed_in:
        return ""
    return f" ({_counted(stats.also_handed_in, 'more file')} handed in beside the one graded for a student, not counted)"


CHANGES_NAMED = 10  # the terminal views name this many students (changed, overridden), then count the rest


def _named(students: list[str]) -> str:
    """The first CHANGES_NAMED students, and how many more."""
    more = len(students) - CHANGES_NAMED
    return ", ".join(students[:CHANGES_NAMED]) + (f" and {more} more" if more > 0 else "")


def changes_line(changes: list[Change], folder: Path | None = None) -> str:
    """The last run's changes in a line: how many students, who, and where changes.csv has the rest."""
    where = (folder / CHANGES_FILE).as_posix() if folder else CHANGES_FILE
    if not changes:
        return f"no student's grade changed in the last run ({where})"
    return (f"{_counted(len(changes), 'student')} whose grade changed in the last run: "
            f"{_named([change.student for change in changes])} (see {where})")


def batch_summary(result: BatchResult, folder: Path | None = None) -> Group:
    """The end-of-batch view: the class numbers, how long it took, the students, and what an
    instructor must look at: reports set aside, students a gradebook leaves out (the
    summary's ``left_out``, by gradebook file), the overrides, the students whose grade the run
    changed (``folder``: the results folder, to point at its changes.csv), the most frequent hints."""
    stats, students = result.class_results.statistics, result.class_results.students
    per = result.duration_s / result.graded if result.graded else None
    missing = [grade.student for grade in students if grade.status == MISSING]
    lines: list[RenderableType] = [
        _numbers_table(result.assignment.id, stats),
        Text(f"{_counts_line(stats)}; {result.graded} graded now, {result.skipped} already up to date"
             + (f"; {per:.2f} s per submission" if per else "")),
        plain(f"{_counted(len(students), 'student')}"
              + (f", gradebook mean {statistics.fmean(grade.score for grade in students):.3g} (0 for no score)"
                 if students else "")
              + (f"; no submission from {', '.join(missing)}" if missing else ""))]
    ambiguous = [grade.student for grade in students if grade.handin.ambiguous]
    if ambiguous:
        lines.append(plain(f"Canvas file names that split more than one way, read as the students {', '.join(ambiguous)}: "
                           "check them in grades.csv, or give a --roster", style="yellow"))
    for why, count in result.regrade.reasons().items():
        lines.append(plain(f"{why}: {count} regraded", style="yellow"))
    if overridden := [grade for grade in students if grade.overridden]:
        lines.append(plain(f"overrides: {_counted(sum(len(grade.overridden) for grade in overridden), 'part')} of "
                           f"{_named([grade.student for grade in overridden])} (grades.csv's overrides column)"))
    if result.class_results.changes or result.regrade.reasons():  # a regrade that changed no grade says so too
        lines.append(plain(changes_line(result.class_results.changes, folder), style="yellow"))
    if result.removed:
        lines.append(plain(f"moved {_counted(len(result.removed), 'report')} of files no longer handed in "
                           f"to {result.removed[0].parent}", style="yellow"))
    for name, students_left_out in result.summary.get("left_out", {}).items():
        if students_left_out:
            who = "every student" if len(students_left_out) == len(students) else ", ".join(students_left_out)
            lines.append(plain(f"{name} leaves out {who}: no id it matches on (give them in --roster)", style="dim"))
    if stats.hints:
        lines.append(Text("most frequent hints:", style="bold"))
        lines += [plain(f"  {count:>4}  {hint}") for hint, count in stats.hints]
    return Group(*lines)


def class_table(data: ClassResults) -> Group:
    stats = data.statistics
    items: list[RenderableType] = [
        _numbers_table(data.assignment, stats),
        Text(_counts_line(stats))]
    if data.skipped:
        items.append(plain(f"skipped {_counted(len(data.skipped), 'file')} that are not grade reports: "
                           + ", ".join(path.as_posix() for path in data.skipped), style="yellow"))
    if data.changes:
        items.append(plain(changes_line(data.changes), style="yellow"))
    if stats.hints:
        mistakes = Table(title="Most frequent mistakes", title_justify="left")
        mistakes.add_column("count", justify="right")
        mistakes.add_column("part: hint", overflow="fold")
        for hint, count in stats.hints:
            mistakes.add_row(str(count), plain(hint))
        items.append(mistakes)
    return Group(*items)
