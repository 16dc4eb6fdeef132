"""The similarity report as a page (``similarity.html``), beside its data (``similarity.json``).

The page lists the pairs, most similar first; each opens (``<details>``, no script) onto the two
files side by side, the regions they share highlighted and numbered alike on both sides. Every
line shown is a student's, so the page is a template rendered with autoescape
(``templates/similarity.html.j2``, :mod:`grader.views.html_templates`): the students' code is
text on it, never markup, and no script of theirs, or of the page's own, runs. It says, before
any pair, that a similarity is evidence for a person to read, never a verdict.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rich.console import Group
from rich.table import Table
from rich.text import Text

from grader.core.report import write_atomic
from grader.similarity.compare import Pair
from grader.similarity.report import NOTE, SimilarityReport, write_json
from grader.similarity.sources import Source
from grader.views.html_templates import render
from grader.views.terminal import plain

PAGE = "similarity.html"  # its name in a results folder, beside similarity.json
COLOURS = 6  # matches cycle through this many highlight colours (the template's CSS classes)
TERMINAL_PAIRS = 20  # the terminal shows the most similar pairs; the page and the JSON have them all


@dataclass(frozen=True)
class Line:
    number: int
    text: str
    match: int | None  # the number of the first match (from 1) that holds the line, else None


@dataclass(frozen=True)
class Side:
    name: str
    file: str
    known: bool
    lines: list[Line]


@dataclass(frozen=True)
class PairView:
    rank: int
    similarity: str
    a: Side
    b: Side
    matches: list[tuple[int, str, str, int, int]]  # (number, where in a, where in b, first line in a, in b)


def write_report(report: SimilarityReport, out: Path) -> Path:
    """Write ``similarity.json`` and ``similarity.html`` into ``out``; returns the page's path."""
    write_json(report, out)
    page = out / PAGE
    write_atomic(page, render_html(report))
    return page


def written(folder: Path) -> Path | None:
    """The similarity page in a results folder, if a run wrote one there."""
    page = folder / PAGE
    return page if page.is_file() else None


def render_html(report: SimilarityReport) -> str:
    return render(
        "similarity.html.j2",
        title=f"Assignment {report.assignment}: shared code, {len(report.pairs)} pairs",
        note=NOTE,
        threshold=f"{report.threshold:g}",
        students=len(report.students),
        known=[source.name for source in report.known],
        unreadable=[list(entry) for entry in report.unreadable],
        pairs=[_view(rank, pair) for rank, pair in enumerate(report.pairs, start=1)],
        colours=COLOURS,
    )


def _view(rank: int, pair: Pair) -> PairView:
    a_ranges = [match.a_lines for match in pair.matches]
    b_ranges = [match.b_lines for match in pair.matches]
    matches = [(number, pair.a.where(*match.a_lines), pair.b.where(*match.b_lines), match.a_lines[0], match.b_lines[0])
               for number, match in enumerate(pair.matches, start=1)]
    return PairView(rank, f"{pair.similarity:.0%}", _side(pair.a, a_ranges), _side(pair.b, b_ranges), matches)


def _side(source: Source, ranges: list[tuple[int, int]]) -> Side:
    lines = []
    for number, text in enumerate(source.text.split("\n"), start=1):
        match = next((index for index, (first, last) in enumerate(ranges, start=1) if first <= number <= last), None)
        lines.append(Line(number, text, match))
    return Side(source.name, source.file, source.known, lines)


def terminal_view(report: SimilarityReport) -> Group:
    """The command's view: the most similar pairs, each with its largest shared region, and the note."""
    table = Table(title=f"Assignment {report.assignment}: shared code (similarity {report.threshold:g} or more)",
                  title_justify="left")
    for column in ("rank", "similarity", "student", "shares code with", "largest region"):
        table.add_column(column, justify="right" if column in ("rank", "similarity") else "left", overflow="fold")
    for rank, pair in enumerate(report.pairs[:TERMINAL_PAIRS], start=1):
        largest = max(pair.matches, key=lambda match: match.a_lines[1] - match.a_lines[0], default=None)
        region = f"{pair.a.where(*largest.a_lines)} ~ {pair.b.where(*largest.b_lines)}" if largest else ""
        table.add_row(str(rank), f"{pair.similarity:.0%}", plain(pair.a.name),
                      plain(pair.b.name + (" (known)" if pair.b.known else "")), plain(region))
    lines = [table] if report.pairs else [Text("No pair reaches the threshold.")]
    if len(report.pairs) > TERMINAL_PAIRS:
        lines.append(Text(f"... and {len(report.pairs) - TERMINAL_PAIRS} more pairs (see the page)", style="dim"))
    if report.unreadable:
        lines.append(plain(f"not compared: {', '.join(file for file, _ in report.unreadable)} (the page says why)",
                           style="yellow"))
    lines.append(Text(NOTE, style="dim"))
    return Group(*lines)
