"""The grader's layers, by folder: what each folder may import, that no import runs in a
circle, and that the folders that serve the instructor and the student never import torch
(reports, the class report, exports and the student's grader load in a fraction of a second;
the engine, the sandbox and the suites' face are imported only where a submission is graded)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.core.imports import imported_names
from grader.core.report import GradeReport, PartResult, Status
from grader.results.folder import report_path
from tests.conftest import ASSIGNMENT_03, ROOT

PACKAGE = ROOT / "grader"
# What each folder may import besides itself: the answer to "what may I touch here?".
MAY_IMPORT = {
    "core": set(),
    "source": {"core"},
    "results": {"core"},
    "similarity": {"core", "results"},
    "views": {"core", "results", "similarity"},
    "sandbox": {"core", "source"},
    "suite": {"core", "source", "sandbox"},
    "engine": {"core", "source", "results", "similarity", "views", "sandbox", "suite"},
    "export": {"core", "results", "views", "engine"},
    "student": {"core", "views", "sandbox"},  # sandbox: only its default limits, no process
    "course": {"core", "sandbox", "suite", "student", "engine"},
}
TORCH_ALLOWED = {"sandbox", "suite", "engine"}  # they grade, or serve what grades


def _folder(module: str) -> str:
    """``grader.core.report`` -> ``core``; a top-level module (``grader.cli``) is its own folder."""
    return module.partition(".")[2].partition(".")[0]


def _graph() -> dict[str, set[str]]:
    """Each grader module, with the grader modules its import statements name (inside
    functions too): ``from grader.core import hints`` names ``grader.core.hints``."""
    modules = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(ROOT).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for module, path in modules.items():
        named = {name for name in imported_names(path) if name.split(".")[0] == "grader"}
        # ``from a import b`` names a.b, which is a module or a name in a: the longest module it names.
        graph[module] = {max((m for m in modules if name == m or name.startswith(m + ".")), key=len)
                         for name in named} - {module, "grader"}
    return graph


def test_every_folder_imports_only_the_folders_below_it():
    graph = _graph()
    assert {path.parent.name for path in PACKAGE.glob("*/__init__.py")} == set(MAY_IMPORT)
    against = sorted(f"{module} imports {other}" for module, others in graph.items() for other in others
                     if _folder(module) in MAY_IMPORT and _folder(other) != _folder(module)
                     and _folder(other) not in MAY_IMPORT[_folder(module)])
    assert not against, against


def test_no_import_runs_in_a_circle():
    graph = _graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    circles = []

    def visit(module: str, path: list[str]) -> None:
        state[module] = 1
        for other in sorted(graph[module]):
            if state.get(other) == 1:
                circles.append(path[path.index(other):] + [other])
            elif other not in state:
                visit(other, path + [other])
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    # A package's face importing its own modules is no circle: Python runs the face first.
    circles = [c for c in circles if not any(a == b.rpartition(".")[0] for a, b in zip(c, c[1:]))]
    assert not circles, circles


def _torch_free_modules() -> list[str]:
    return sorted(module for module in _graph()
                  if module != "grader" and _folder(module) not in TORCH_ALLOWED and not module.endswith("__main__"))


def test_every_torch_free_module_imports_without_torch():
    modules = _torch_free_modules()
    assert {"grader.core.report", "grader.views.class_report", "grader.export.classroom", "grader.student.grade",
            "grader.results.folder"} <= set(modules)
    result = _python("".join(f"import {module}\n" for module in modules))
    assert result.returncode == 0, result.stderr[-2000:]


def _python(code: str) -> subprocess.CompletedProcess:
    # torch set to None in sys.modules: any `import torch` raises, so a path that needs it fails.
    guarded = "import sys; sys.modules['torch'] = None\n" + code
    return subprocess.run([sys.executable, "-c", guarded], capture_output=True, text=True, cwd=ROOT, timeout=120)


def _results(folder: Path) -> Path:
    part = PartResult("split_heads", 2.0, 3.0, "transpose after view", [])
    report = GradeReport(assignment="03", submission="ada/mha.py", status=Status.GRADED, error=None, score=2.0,
                         max_score=3.0, device="cpu", duration_s=1.0, grader_version="test", parts=[part])
    report.write_json(report_path(folder, Path("ada/mha.py")))
    return folder


@pytest.mark.parametrize("command", [
    lambda tmp: ["report", str(_results(tmp / "results"))],
    lambda tmp: ["export", "classroom", "assignments/03", "--out", str(tmp / "classroom.yml")],
    lambda tmp: ["export", "gradescope", str(ASSIGNMENT_03), "--out", str(tmp / "autograder.zip")],
], ids=["report", "export classroom", "export gradescope"])
def test_commands_that_grade_nothing_never_import_torch(tmp_path, command):
    argv = command(tmp_path)
    result = _python(f"from grader.cli import main\nsys.exit(main({argv!r}))")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "wrote" in result.stdout + result.stderr


def test_the_classroom_result_module_never_imports_torch(tmp_path):
    report = tmp_path / "report.json"
    _results(tmp_path / "results")
    report.write_bytes(next((tmp_path / "results" / "reports").glob("*.json")).read_bytes())
    output = tmp_path / "github_output"
    result = _python(f"import os; os.environ['GITHUB_OUTPUT'] = {str(output)!r}\n"
                     f"sys.argv = ['classroom', {str(report)!r}]\n"
                     "import runpy; runpy.run_module('grader.export.classroom', run_name='__main__')")
    assert result.returncode == 0, result.stderr[-2000:]
    assert output.read_text().startswith("result=")
    json.loads(report.read_text())  # the report is left as it was
