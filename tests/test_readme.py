"""The README is the front door: its course table lists every assignment, its quick start's
test command is CI's, and what it and the docs point at exists."""

from __future__ import annotations

import re

import pytest

from grader.course.pages import Course
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def course_rows(readme: str) -> dict[str, str]:
    """The course table's rows, by assignment id."""
    section = readme.split("\n## The course\n", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| (\d\d) (.*)$", section, re.MULTILINE))


@pytest.mark.parametrize("assignment", Course.load(ROOT).assignments, ids=lambda assignment: f"a{assignment.id}")
def test_the_course_table_lists_every_assignment_and_its_parts(assignment):
    row = course_rows(README).get(assignment.id)
    assert row is not None, f"README's course table has no row for assignment {assignment.id}"
    stubbed = [part for part in assignment.parts if part not in assignment.parts_without_stub]
    assert [part for part in stubbed if f"`{part}`" not in row] == [], row


def test_the_quick_starts_test_command_is_what_ci_runs():
    quick_start = README.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    block = quick_start.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 2, commands  # set up and grade the example; set up and run the tests
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert commands[1] in ci, f"the README's test command is not .ci/run's: {commands[1]}"
    assert "--submission examples/03/submission.py" in commands[0] and (ROOT / "examples/03/submission.py").is_file()


def test_the_tour_names_every_folder_of_the_grader():
    tour = README.split("\n## A tour of the tree\n", 1)[1].split("\n## ", 1)[0]
    folders = {path.parent.name for path in (ROOT / "grader").glob("*/*.py")}
    assert {folder for folder in folders if f"`grader/{folder}/`" not in tour} == set()


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_what_a_page_links_and_names_exists(page):
    text = page.read_text(encoding="utf-8")
    links = [target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", text)
             if not target.startswith(("http://", "https://", "#"))]
    assert [link for link in links if not (page.parent / link).exists()] == [], page
    # A module path the page names (grader/core/ingest.py): a move must update the page.
    named = set(re.findall(r"\bgrader/[\w/]+\.(?:py|json)\b", text))
    assert [path for path in sorted(named) if not (ROOT / path).exists()] == [], page
