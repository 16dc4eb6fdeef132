"""``grade report``: a class's results folder as one self-contained HTML page and a terminal view;
and the terminal view that ends ``grade batch``, which shares its table.

The page has no scripts and no external resources (it is mailed around and opened from
disk): the plots are inline SVG drawn here. Hints and part names come from reports that
student code can influence, so every piece of report text is escaped, and loses its control
characters, which no HTML or XML (the inline SVG) may hold: :func:`_escape` on the page,
:func:`grader.views.terminal.plain` on the terminal.
"""

from __future__ import annotations

import html
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
from grader.core.sanitize import for_terminal
from grader.results.class_stats import Bin, ClassStatistics, Scores, histogram
from grader.results.folder import MISSING, BatchResult, ClassResults, StudentGrade
from grader.views.feedback_pages import page_name
from grader.views.terminal import plain

PAGE = "report.html"  # its name in a results folder
HISTOGRAM_COLOUR = "#4c78a8"
MISTAKE_COLOUR = "#e45756"
MISTAKE_LABEL_CHARS = 120  # the SVG label does not wrap; the tooltip has the whole hint
SPARK = " ▁▂▃▄▅▆▇█"
STAT_COLUMNS = ("part", "graded", "mean", "median", "max", "out of")


HARDEST_TESTS = 30  # the page lists the tests with the lowest pass rates, at most this many


def _escape(text: str) -> str:
    return html.escape(for_terminal(text))


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


# ---- the HTML page -------------------------------------------------------------------

_CSS = f"""
body {{ font-family: system-ui, sans-serif; color: #222; max-width: 1040px; margin: 2em auto; padding: 0 1em; }}
h1 {{ margin-bottom: .2em; }}
h2 {{ border-bottom: 1px solid #ddd; padding-bottom: .2em; margin-top: 1.6em; }}
.grid {{ display: grid; grid-template-columns: repeat(auto-fill, minmax(460px, 1fr)); gap: 1em; }}
figure {{ margin: 0; }}
figcaption {{ font-weight: 600; }}
svg {{ max-width: 100%; height: auto; font-size: 12px; }}
svg text {{ fill: #333; }}
rect.histogram {{ fill: {HISTOGRAM_COLOUR}; }}
rect.mistake {{ fill: {MISTAKE_COLOUR}; }}
rect:hover {{ opacity: .75; }}
.note {{ color: #8a5a00; }}
table {{ border-collapse: collapse; margin-bottom: 1.5em; }}
th, td {{ padding: .3em .8em; border-bottom: 1px solid #eee; text-align: right; }}
th:first-child, td:first-child {{ text-align: left; }}
tfoot td {{ font-weight: 600; border-top: 2px solid #ccc; }}
table.list td, table.list th {{ text-align: left; vertical-align: top; }}
"""


def write_page(results: ClassResults, page: Path, feedback: Path | None = None) -> None:
    """The page at ``page``; with ``feedback``, the folder of the students' feedback pages, each
    student's row links to theirs."""
    link = Path(os.path.relpath(feedback.resolve(), page.resolve().parent)).as_posix() if feedback else None
    write_atomic(page, render_html(results, link))


def render_html(data: ClassResults, feedback: str | None = None) -> str:
    """The page; ``feedback``: where the students' feedback pages are, relative to it (their
    rows link there), or None when there are none."""
    stats = data.statistics
    title = f"Assignment {data.assignment}: class report, {stats.submissions} submissions"
    counts = (", ".join(f"{count} {status.replace('_', ' ')}" for status, count in stats.counts.items())
              + _also_handed_in(stats))
    skipped = ""
    if data.skipped:
        names = ", ".join(path.as_posix() for path in data.skipped)
        skipped = (f'<p class="note">Skipped {_counted(len(data.skipped), "file")} that are not grade reports: '
                   f"{_escape(names)}</p>")
    parts = "\n".join(f"<figure><figcaption>{_escape(part_id)}</figcaption>{_histogram_svg(part_id, scores)}"
                      "</figure>" for part_id, scores in stats.parts.items())
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{_escape(title)}</title>
<style>{_CSS}</style>
</head>
<body>
<h1>{_escape(title)}</h1>
<p>{counts}. Scores are those of the graded submissions.</p>
{skipped}
<h2>Total score</h2>
{_histogram_svg("total", stats.total)}
<h2>Most frequent mistakes</h2>
{_mistakes_svg(stats.hints) if stats.hints else "<p>No graded submission lost points with a hint.</p>"}
<h2>Parts</h2>
{_stats_table(stats)}
<div class="grid">
{parts}
</div>
{_hardest_tests(stats)}
{_not_graded(stats)}
{_flagged(stats)}
{_students(data.students, feedback)}
</body>
</html>
"""


@dataclass(frozen=True)
class Markup:
    """A table cell of HTML that this module wrote (every other cell is text, escaped)."""
    html: str


def _table(header: list[str], rows: list[list[str | Markup]]) -> str:
    def cell(value: str | Markup) -> str:
        return value.html if isinstance(value, Markup) else _escape(value)

    head = "".join(f"<th>{_escape(column)}</th>" for column in header)
    body = "".join("<tr>" + "".join(f"<td>{cell(value)}</td>" for value in row) + "</tr>" for row in rows)
    return f'<table class="list"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _hardest_tests(stats: ClassStatistics) -> str:
    failed = [rate for rate in stats.tests if rate.passed < rate.run][:HARDEST_TESTS]
    if not failed:
        return ""
    rows = [[rate.part, rate.test, f"{rate.passed} / {rate.run}", f"{rate.rate:.0%}"] for rate in failed]
    return ("<h2>Hardest tests</h2><p>The tests the graded submissions failed most often, lowest pass rate first.</p>"
            + _table(["part", "test", "passed", "pass rate"], rows))


def _not_graded(stats: ClassStatistics) -> str:
    if not stats.not_graded:
        return ""
    rows = [[report.submission, report.status.replace("_", " "), report.error or ""] for report in stats.not_graded]
    return ("<h2>Not graded</h2><p>Ungradable submissions score 0; a grader error is the grader's fault, and "
            "<code>grade batch</code> regrades it.</p>" + _table(["submission", "status", "why"], rows))


def _flagged(stats: ClassStatistics) -> str:
    if not stats.flagged:
        return ""
    rows = [[report.submission, flag.kind, flag.where, flag.detail] for report in stats.flagged for flag in report.flags]
    return ("<h2>Flags</h2><p>Evasive-looking code, found by reading the source: for you to look at.</p>"
            + _table(["submission", "kind", "where", "what"], rows))


def _students(students: list[StudentGrade], feedback: str | None) -> str:
    if not students:
        return ""
    rows = []
    for entry in students:
        score = f"{entry.report.score:g}" if entry.report and entry.status == Status.GRADED else "0"
        hint = headline(entry.report) if entry.report else "no submission"
        link: str | Markup = ""
        if feedback is not None:
            href = html.escape(f"{feedback}/{quote(page_name(entry.student))}.html")
            link = Markup(f'<a href="{href}">feedback</a>')
        rows.append([entry.student, entry.name, entry.status.replace("_", " "), score, hint, link])
    return "<h2>Students</h2>" + _table(["student", "name", "status", "score", "what cost the most", "page"], rows)


def _svg(width: int, height: int, label: str, body: list[str]) -> str:
    # No xmlns: inline SVG in HTML needs none, and the page holds no URL at all.
    label = _escape(label)
    return (f'<svg width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" aria-label="{label}">'
            f"<title>{label}</title>{''.join(body)}</svg>")


def _rect(x: float, y: float, width: float, height: float, kind: str, tooltip: str) -> str:
    return (f'<rect class="{kind}" x="{x:.1f}" y="{y:.1f}" width="{width:.1f}" height="{height:.1f}">'
            f"<title>{_escape(tooltip)}</title></rect>")


def _text(x: float, y: float, text: str, anchor: str = "middle") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}">{_escape(text)}</text>'


def _histogram_svg(name: str, scores: Scores) -> str:
    width, height, left, top, bottom = 480, 220, 10, 20, 40
    bins = histogram(scores)
    label = (f"Histogram of {name} scores out of {scores.max_score:g}, "
             f"{len(scores.values)} graded submissions")
    slot = (width - 2 * left) / len(bins)
    tallest = max(b.count for b in bins) or 1
    body = []
    for i, b in enumerate(bins):
        x = left + i * slot
        bar = (height - top - bottom) * b.count / tallest
        if b.count:
            body.append(_rect(x + slot * .1, height - bottom - bar, slot * .8, bar, "histogram", _describe(b)))
            body.append(_text(x + slot / 2, height - bottom - bar - 4, str(b.count)))
        body.append(_text(x + slot / 2, height - bottom + 14, f"{b.low:g}"))
    body.append(f'<line x1="{left}" x2="{width - left}" y1="{height - bottom}" y2="{height - bottom}" stroke="#999"/>')
    body.append(_text(width / 2, height - 6, f"{name} score (last bar: full marks, {scores.max_score:g})"))
    if not scores.values:
        body.append(_text(width / 2, height / 2, "no graded submissions"))
    return _svg(width, height, label, body)


def _mistakes_svg(hints: list[tuple[str, int]]) -> str:
    width, row, bar_height, count_room = 1000, 44, 16, 40
    most = max(count for _, count in hints)
    body = []
    for i, (hint, count) in enumerate(hints):
        y = i * row
        shown = hint if len(hint) <= MISTAKE_LABEL_CHARS else hint[:MISTAKE_LABEL_CHARS - 1] + "…"
        bar = (width - count_room) * count / most
        body.append(_text(0, y + 14, shown, anchor="start"))
        body.append(_rect(0, y + 20, bar, bar_height, "mistake", f"{_counted(count, 'submission')}: {hint}"))
        body.append(_text(bar + 6, y + 20 + bar_height - 3, str(count), anchor="start"))
    label = f"Bar chart of the {len(hints)} most frequent mistakes, by number of submissions"
    return _svg(width, row * len(hints), label, body)


def _stats_table(stats: ClassStatistics) -> str:
    def row(name: str, scores: Scores) -> str:
        cells = [_escape(name), str(len(scores.values)), *_stat_cells(scores), f"{scores.max_score:g}"]
        return "<tr>" + "".join(f"<td>{cell}</td>" for cell in cells) + "</tr>"

    header = "".join(f"<th>{column}</th>" for column in STAT_COLUMNS)
    rows = "".join(row(part_id, scores) for part_id, scores in stats.parts.items())
    return (f"<table><thead><tr>{header}</tr></thead><tbody>{rows}</tbody>"
            f"<tfoot>{row('total', stats.total)}</tfoot></table>")


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


def batch_summary(result: BatchResult) -> Group:
    """The end-of-batch view: the class numbers, how long it took, the students, and what an
    instructor must look at: reports set aside, students a gradebook leaves out (the
    summary's ``left_out``, by gradebook file), the most frequent hints."""
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
    if changed := result.summary.get("changes"):
        lines.append(plain(f"{_counted(len(changed), 'student')} with a new score: see changes.csv", style="yellow"))
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
    if stats.hints:
        mistakes = Table(title="Most frequent mistakes", title_justify="left")
        mistakes.add_column("count", justify="right")
        mistakes.add_column("part: hint", overflow="fold")
        for hint, count in stats.hints:
            mistakes.add_row(str(count), plain(hint))
        items.append(mistakes)
    return Group(*items)
