"""`grade new-assignment`: a new assignment's skeleton passes the course-wide tests as it stands.

The command runs in a copy of the repository's layout with no assignment in it (the grader
stays the installed one; the copy's reference package comes first on the path), so the
course-wide tests there see the new assignment alone.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course.scaffold import ScaffoldError, new_assignment
from tests.conftest import ROOT

# What the course-wide tests need of the repository, less the assignments.
LAYOUT = ("pyproject.toml", "assignments/course.toml", "reference/__init__.py", "reference/hidden/__init__.py",
          "reference/hidden/pytest.ini", "reference/hidden/mistake_table.py", "tests/__init__.py", "tests/conftest.py")
COURSE_WIDE_TESTS = ("tests/test_course.py", "tests/test_handout.py", "tests/test_contract.py", "tests/test_mistakes.py")


@pytest.fixture
def empty_course(tmp_path) -> Path:
    for relative in LAYOUT + COURSE_WIDE_TESTS:
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / relative, tmp_path / relative)
    return tmp_path


def run_in(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_a_new_assignment_passes_the_course_wide_tests_as_it_stands(empty_course):
    made = run_in(empty_course, "-m", "grader.cli", "new-assignment", "07", "--module", "gpt", "--title", "A GPT")
    assert made.returncode == 0, made.stderr
    assert (empty_course / "reference" / "gpt.py").is_file() and (empty_course / "assignments/07/gpt.ipynb").is_file()
    # The copy's mistakes page starts as that of a course with no assignment; a new one adds nothing to it.
    assert run_in(empty_course, "-m", "reference.hidden.mistake_table").returncode == 0
    tests = run_in(empty_course, "-m", "pytest", "-n", "0", "-v", "-p", "no:cacheprovider", *COURSE_WIDE_TESTS)
    assert tests.returncode == 0, tests.stdout[-3000:]
    # Graded there: its untouched stub scores 0, "not implemented"; its reference full marks.
    for test in ("test_untouched_handout_scores_zero_and_says_not_implemented[a07-module]",
                 "test_untouched_handout_scores_zero_and_says_not_implemented[a07-notebook]",
                 "test_reference_scores_full_marks[a07-.py]", "test_public_tests_fail_on_the_untouched_stub[07]",
                 "test_each_part_has_the_contract_signature[a07-reference]"):
        assert f"::{test} PASSED" in tests.stdout, test


def test_a_new_assignment_overwrites_nothing(empty_course):
    new_assignment(empty_course, "07", "gpt")
    before = {path: path.read_bytes() for path in empty_course.rglob("*") if path.is_file()}
    with pytest.raises(ScaffoldError, match="already exists"):
        new_assignment(empty_course, "07", "gpt")
    with pytest.raises(ScaffoldError, match="already exists"):
        new_assignment(empty_course, "08", "gpt")  # the reference module gpt is taken
    assert {path: path.read_bytes() for path in empty_course.rglob("*") if path.is_file()} == before


@pytest.mark.parametrize("assignment_id, module", [("7", "gpt"), ("07", "GPT"), ("07", "gpt.py"), ("07", "class")])
def test_a_new_assignment_needs_a_two_digit_id_and_a_module_name(empty_course, assignment_id, module):
    with pytest.raises(ScaffoldError):
        new_assignment(empty_course, assignment_id, module)
    assert not (empty_course / "assignments" / assignment_id).exists()


def test_the_skeleton_names_its_module_once_and_derives_the_rest(empty_course):
    written = new_assignment(empty_course, "07", "gpt", title='A "GPT"')
    assert {path.relative_to(empty_course).as_posix() for path in written} >= {
        "assignments/07/assignment.toml", "assignments/07/README.md", "assignments/07/gpt.py",
        "assignments/07/gpt.ipynb", "assignments/07/test_gpt.py", "reference/gpt.py",
        "reference/hidden/a07/suite.toml", "reference/hidden/a07/conftest.py", "reference/hidden/a07/mutants.py",
        "reference/hidden/a07/test_first_part.py", "docs/course.md"}
    toml = (empty_course / "assignments/07/assignment.toml").read_text()
    assert 'module = "gpt.py"' in toml and "ipynb\"" not in toml and 'title = "A \\"GPT\\""' in toml
    assert 'reference = "gpt"' in (empty_course / "reference/hidden/a07/suite.toml").read_text()


def test_a_new_assignment_needs_the_course_repository(tmp_path):
    with pytest.raises(ScaffoldError, match="not the course repository"):
        new_assignment(tmp_path, "07", "gpt")
    assert list(tmp_path.iterdir()) == []
