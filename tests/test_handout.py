"""The handout is one source of truth: notebook, public tests and hidden suite agree with it."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.core.assignment import Assignment
from grader.core.ingest import load_submission
from grader.course.notebook import notebook_is_current, render_notebook
from reference import as_submission, module_for

ASSIGNMENTS = sorted(p.parent for p in (Path(__file__).resolve().parent.parent / "assignments").glob("*/assignment.toml"))


@pytest.fixture(params=ASSIGNMENTS, ids=lambda p: p.name)
def assignment(request) -> Assignment:
    return Assignment.load(request.param)


def test_notebook_is_generated_from_the_stub_module(assignment):
    assert notebook_is_current(assignment), f"run: grade notebook {assignment.directory}"


def test_notebook_generation_is_reproducible(assignment):
    assert render_notebook(assignment) == render_notebook(assignment)


def test_notebook_holds_the_same_code_as_the_module(assignment):
    module_defs = {n.name for n in ast.parse(assignment.module_path.read_text()).body if hasattr(n, "name")}
    notebook_code = "\n".join(cell.source for cell in load_submission(assignment.notebook_path).cells)
    notebook_defs = {n.name for n in ast.parse(notebook_code).body if hasattr(n, "name")}
    assert notebook_defs == module_defs


def test_stub_defines_every_part_and_each_raises_not_implemented(assignment):
    tree = ast.parse(assignment.module_path.read_text())
    defined = {node.name: node for node in tree.body if hasattr(node, "name")}
    stubbed = [part for part in assignment.parts if part not in assignment.parts_without_stub]
    assert set(stubbed) <= defined.keys()
    assert not set(assignment.parts_without_stub) & defined.keys()
    for name in stubbed:
        raises = [n for n in ast.walk(defined[name]) if isinstance(n, ast.Raise)]
        assert any("NotImplementedError" in ast.unparse(r) for r in raises), name


def test_hidden_suite_grades_exactly_the_contract_parts(assignment):
    marked = set()
    for path in assignment.hidden_suite.glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("mark.part"):
                marked.add(ast.literal_eval(node.args[0]))
    assert marked == set(assignment.parts)


def test_notebook_checks_each_part_right_after_its_stub(assignment):
    """A student runs check("Part") below the cell they just wrote, and check() for all at the end."""
    code = [cell.source for cell in load_submission(assignment.notebook_path).cells]
    defines = {node.name: index for index, source in enumerate(code)
               for node in ast.parse(source).body if hasattr(node, "name")}
    stubbed = [part for part in assignment.parts if part not in assignment.parts_without_stub]
    assert {part: code[defines[part] + 1] for part in stubbed} == {part: f'check("{part}")' for part in stubbed}
    first_check = min(index for index, source in enumerate(code) if source.startswith("check("))
    assert any(source.startswith("from grader import check") for source in code[:first_check])
    assert code[-1] == "check()"


def _run_public_tests(assignment: Assignment, module_source: str, tmp_path: Path) -> subprocess.CompletedProcess:
    for path in assignment.directory.glob("test_*"):  # the public tests and the data they compare with
        shutil.copy(path, tmp_path)
    (tmp_path / assignment.module).write_text(module_source)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)


@pytest.mark.slow
def test_public_tests_pass_on_the_reference(assignment, tmp_path):
    result = _run_public_tests(assignment, as_submission(module_for(assignment.id)), tmp_path)
    assert result.returncode == 0, result.stdout[-2000:]


@pytest.mark.slow
def test_public_tests_fail_on_the_untouched_stub(assignment, tmp_path):
    result = _run_public_tests(assignment, assignment.module_path.read_text(), tmp_path)
    assert result.returncode == 1 and "NotImplementedError" in result.stdout


def test_the_mistake_table_is_generated_from_the_suites():
    from reference.hidden import mistake_table

    assert mistake_table.DOC.read_text(encoding="utf-8") == mistake_table.render(), \
        "run: python -m reference.hidden.mistake_table"
