"""The core never imports torch: reports, the class report, exports and the student's grader
load in a fraction of a second, and the engine (api, runner, plugin, checks, sandbox, the
suites' face) is imported only where a submission is graded."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grader.report import GradeReport, PartResult, Status
from grader.gradebook import report_path
from tests.conftest import ASSIGNMENT_03, ROOT

# Modules that grade, or serve what grades: the only ones that may import torch.
ENGINE = {"api", "batch", "runner", "plugin", "checks", "suite", "suite_fixtures", "part_isolation",
          "student_protocol", "ray_executor", "warm", "public_data"}


def _modules() -> list[str]:
    package = ROOT / "grader"
    names = [path.relative_to(package).with_suffix("").as_posix().replace("/", ".")
             for path in package.rglob("*.py") if path.name != "__init__.py"]
    return sorted(name for name in names if name not in ENGINE and not name.startswith("sandbox."))


def _python(code: str) -> subprocess.CompletedProcess:
    # torch set to None in sys.modules: any `import torch` raises, so a path that needs it fails.
    guarded = "import sys; sys.modules['torch'] = None\n" + code
    return subprocess.run([sys.executable, "-c", guarded], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_every_core_module_imports_without_torch():
    modules = _modules()
    assert {"report", "class_report", "export.classroom", "public", "gradebook"} <= set(modules)
    result = _python("".join(f"import grader.{module}\n" for module in modules))
    assert result.returncode == 0, result.stderr[-2000:]


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
