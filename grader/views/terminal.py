"""Rich views of a :class:`~grader.core.report.GradeReport`.

Whatever in a report the student controls (file names, messages, hints that quote them,
notes, output) is shown with :func:`plain`: as text, never markup, and with no control
character, so that it cannot run escape sequences on the terminal.
"""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from grader.core.report import GradeReport, Status
from grader.core.report_words import part_problem
from grader.core.sanitize import for_terminal


def plain(text: object, style: str = "") -> Text:
    """``text`` as rich shows it literally: a "[/]" is no markup, an escape sequence is no
    command to the terminal (shown with ``?`` for each control character)."""
    return Text(for_terminal(str(text)), style=style)


def error_text(message: object) -> Text:
    """An error for the terminal. Messages hold paths, and paths are named by students: shown
    as text, never as markup (``hw[/].py``)."""
    return Text("error: ", style="red") + plain(message)


def report_table(report: GradeReport) -> Table:
    table = Table(title=plain(f"Assignment {report.assignment}: {report.submission}"), title_justify="left")
    table.add_column("part")
    table.add_column("score", justify="right")
    table.add_column("what is probably wrong", overflow="fold")
    for part in report.parts:
        style = "green" if part.score >= part.max_score > 0 else "red" if part.score == 0 else "yellow"
        table.add_row(plain(part.id), Text(f"{part.score:g} / {part.max_score:g}", style=style),
                      plain(part_problem(part)))
    table.add_section()
    table.add_row(Text("total", style="bold"), Text(f"{report.score:g} / {report.max_score:g}", style="bold"), "")
    return table


def render_report(report: GradeReport, verbose: bool = False) -> RenderableType:
    items: list[RenderableType] = []
    if report.status != Status.GRADED:
        label = "Not gradable" if report.status == Status.UNGRADABLE else "Grader error"
        items.append(plain(f"{label}: {report.error}", style="bold red"))
    items.append(report_table(report))
    for note in report.notes:
        items.append(plain(f"note: {note}", style="yellow"))
    if report.flags:
        more = report.flags[-1].kind == "more"
        count = f"{len(report.flags) - 1}+" if more else str(len(report.flags))
        items.append(Text(f"{count} flag(s) for the instructor: evasive-looking code (the JSON report lists them)",
                          style="yellow"))
    if verbose:
        items.extend(_failures(report))
        if report.output:
            items.append(plain("your code printed:\n" + report.output, style="dim"))
    items.append(Text(f"graded on {report.device} in {report.duration_s:.1f} s", style="dim"))
    return Group(*items)


def _failures(report: GradeReport) -> list[Text]:
    lines = []
    for part in report.parts:
        for test in part.tests:
            if test.outcome != "passed":
                lines.append(plain(f"{part.id} / {test.name}: {test.outcome}: {test.message}"))
    return lines
