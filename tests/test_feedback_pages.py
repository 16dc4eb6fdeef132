"""Each student's feedback page (HTML and Markdown) and the class report's links to them.
Quick: a results folder written from made-up reports; one test renders the pages in Chromium."""

from __future__ import annotations

import html
import re
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import pytest

from grader.cli import main
from grader.core.assemble import in_cell_order
from grader.core.assignment import Assignment
from grader.core.report import Flag, Status
from grader.core.report import TestResult as Check
from grader.results.folder import BatchResult, read_results, report_path
from grader.results.outputs import write_outputs
from grader.results.students import FILE_RULE, Roster, handins
from grader.views.class_report import render_html
from grader.views import feedback_pages
from grader.views.feedback_pages import Heading, page_blocks, page_name, render_markdown, write_feedback
from tests.conftest import ASSIGNMENT_03
from tests.test_class_report import chromium
from tests.test_gradebook import DONE, STUB, report, write

HOSTILE = "<script>alert(1)</script> **bold** [link](http://x) ```"
GOT_EXPECTED = "output differs at [0, 1]:\n  got      tensor([1., 2.])\n  expected tensor([1., 4.])"


@pytest.fixture
def results(tmp_path) -> Path:
    assignment = Assignment.load(ASSIGNMENT_03)
    folder = tmp_path / "submissions"
    files = write(folder, {"lea/mha.ipynb": DONE, "lea/mha.py": STUB, "max/notes.txt": "sorry", "<b>/mha.py": DONE})
    lea = report("lea/mha.ipynb", assignment, {"MultiHeadAttention": 1.0}, hints={"MultiHeadAttention": HOSTILE})
    part = next(part for part in lea.parts if part.id == "MultiHeadAttention")
    part.tests = [Check("test_output_matches", "failed", GOT_EXPECTED, "scale by sqrt(d_k)", 0.0, 1.0),
                  Check("test_shape", "passed", "", None, 1.0, 1.0)]
    lea.notes = in_cell_order(["cell 9 raised ValueError: bad", "cell 3 is tagged 'skip'; not run",
                               "loading took long"])
    lea.output = "printed ```` four backticks\nand `one`"
    lea.flags = [Flag("torch-internals", "cell 4, line 2", "torch._C")]
    reports = {Path("lea/mha.ipynb"): lea, Path("lea/mha.py"): report("lea/mha.py", assignment),
               Path("max/notes.txt"): report("max/notes.txt", assignment, status=Status.UNGRADABLE),
               Path("<b>/mha.py"): report("<b>/mha.py", assignment)}
    roster = Roster.parse("student\nlea\nmax\nzoe\n<b>\n")
    out = tmp_path / "results"
    for relative, graded in reports.items():
        graded.write_json(out / "reports" / f"{page_name(relative.as_posix())}.json")
    result = BatchResult(assignment, reports, 4, 0, 1.0, handins(files, folder, assignment, roster))
    write_outputs(result, out)
    return out


class Text(HTMLParser):
    """The text a reader sees, and the elements that could run or fetch something."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.text, self.active = [], []
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        if tag in ("script", "img", "iframe", "a", "link") or any(name.startswith("on") for name, _ in attrs):
            self.active.append(tag)

    def handle_data(self, data):
        self.text.append(data)


def test_the_page_says_the_score_each_part_each_failing_check_the_notes_in_order_and_the_output(results):
    pages = write_feedback(read_results(results), results)
    assert sorted(path.name for path in pages) == sorted(f"{page_name(s)}.html" for s in ("lea", "max", "zoe", "<b>"))
    page = (results / "feedback" / "lea.html").read_text()
    seen = Text(page)
    text = "".join(seen.text)
    assert seen.active == []  # the hint's <script> and link are text
    assert f"Score: {2.0 * 3 - 1:g} / 6" in text
    # Said once, and the rule that chose the file in its own words; her other file not graded.
    assert "Graded: lea/mha.ipynb\n" in text and text.count("lea/mha.ipynb") == 1
    assert f"You handed in several files; the one graded is, {FILE_RULE}." in text
    assert "lea/mha.py" in text and "not graded" in text
    assert HOSTILE in text and GOT_EXPECTED in text and "test_shape" not in text  # failing checks only
    notes = [text.index(note) for note in ("cell 3 is tagged", "cell 9 raised", "loading took long")]
    assert notes == sorted(notes)  # as the notebook shows its cells
    assert "printed ```` four backticks" in text
    assert "torch._C" not in text  # flags are for the instructor


def test_markdown_says_the_same_and_nothing_in_it_is_markup(results):
    write_feedback(read_results(results), results)
    markdown = (results / "feedback" / "lea.md").read_text()
    assert "<script>" not in markdown and r"\<script\>" in markdown and r"\*\*bold\*\*" in markdown
    fence = re.search(r"^(`{5,})text\nprinted ```` four backticks\nand `one`\n\1$", markdown, re.M)
    assert fence, "the output's fence must be longer than any run of backticks in it"
    assert "| MultiHeadAttention | 1 / 2 |" in markdown


def test_the_title_is_the_first_heading_as_text():
    # A <title> holds text only: a line break in a student's folder name written there as <br>
    # shows as "<br>" in the browser's tab.
    heading = "Assignment 03: feedback for <i>lea</i>\nsecond line"
    page = feedback_pages.render_html([Heading(1, heading), Heading(2, "Parts")])
    title = re.search(r"<title>(.*)</title>", page, re.S).group(1)
    assert "<" not in title and html.unescape(title) == heading


def test_students_without_a_graded_file_get_a_page_that_says_why(results):
    entries = read_results(results).students
    by_student = {entry.student: entry for entry in entries}
    zoe = render_markdown(page_blocks("03", by_student["zoe"]))
    assert "No submission was received" in zoe
    max_page = render_markdown(page_blocks("03", by_student["max"]))
    assert "could not be graded" in max_page and "not a submission" in max_page
    unreadable = render_markdown(page_blocks("03", replace(by_student["lea"], report=None)))
    assert "not your fault" in unreadable


def test_pages_of_students_gone_from_the_gradebook_are_removed(results):
    stale = results / "feedback" / "gone.html"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_text("old")
    write_feedback(read_results(results), results)
    assert not stale.exists() and (results / "feedback" / "lea.md").is_file()


def test_class_report_links_each_student_and_lists_what_needs_a_look(results, tmp_path):
    write_feedback(read_results(results), results)
    assert main(["report", str(results)]) == 0
    page = (results / "report.html").read_text()
    links = re.findall(r'href="([^"]*)"', page)
    assert sorted(links) == sorted(f"feedback/{page_name(s).replace('%', '%25')}.html"
                                   for s in ("lea", "max", "zoe", "<b>"))
    assert all((results / link.replace("%25", "%")).is_file() for link in links)
    assert "&lt;b&gt;" in page and "<b>" not in page  # the student named <b> is text
    assert "Hardest tests" in page and "test_output_matches" in page and "0 / 1" in page
    assert "Not graded" in page and "not a submission" in page
    assert "Flags" in page and "torch._C" in page
    elsewhere = tmp_path / "pages" / "class.html"
    assert main(["report", str(results), "--html", str(elsewhere)]) == 0
    assert 'href="../results/feedback/lea.html"' in elsewhere.read_text()
    assert "href" not in render_html(read_results(results))  # no pages given: no links


def test_cli_feedback_needs_a_batch_results_folder(tmp_path, capsys):
    assert main(["feedback", str(tmp_path)]) == 2
    assert "has no reports/ folder" in " ".join(capsys.readouterr().err.split())
    assignment = Assignment.load(ASSIGNMENT_03)
    report("ada/mha.py", assignment).write_json(report_path(tmp_path, Path("ada/mha.py")))
    (tmp_path / "summary.json").write_text("{}")  # no gradebook in it
    assert main(["feedback", str(tmp_path)]) == 2
    assert "has no gradebook" in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "feedback").exists()


@pytest.mark.slow
def test_a_browser_renders_the_feedback_page(results, tmp_path):
    write_feedback(read_results(results), results)
    page = results / "feedback" / "lea.html"
    dom = chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    seen = Text(dom)
    text = "".join(seen.text)
    assert seen.active == [] and HOSTILE in text and "expected tensor([1., 4.])" in text
    screenshot = tmp_path / "lea.png"
    chromium(tmp_path, f"--screenshot={screenshot}", "--window-size=900,1400", page.as_uri())
    assert screenshot.stat().st_size > 10_000  # text and a table, not a blank page
