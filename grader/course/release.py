"""``grade release``: one assignment's student handout, as a folder and a zip.

    OUT/03/                  (OUT/03.zip holds the same tree under 03/)
      README.md              the two commands: install, grade
      pyproject.toml         transformer-grader-student, with the `grade` command
      grader/                the student's grader: grader.student.grade and the modules it imports
      assignments/03/        instructions, stub module, notebook, public tests and their data, assignment.toml

The student's grader runs the public tests only. Which grader modules it ships is computed
from the imports of grader.student.grade and of the public tests, and a module among them that
imports the reference (or what locates it), or that is the trusted side's detection, stops
the release: a hidden suite, the reference, or what the grader looks for in a submission's
source never reaches students. The public tests compare with data (grader.core.public_cases),
never with the reference's code, and stale data stops the release as a stale notebook does.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path

from grader.core.archive import REGULAR, write_zip
from grader.core.assignment import REFERENCE_LOCATORS, Assignment
from grader.core.imports import imported_names, module_files
from grader.core.public_cases import DATA_SUFFIX
from grader.core.torch_wheel import TORCH_CPU_INDEX, TORCH_VERSION
from grader.course.notebook import notebook_is_current
from grader.sandbox.limits import Limits

GRADER_DIR = Path(__file__).resolve().parents[1]
STUDENT_ENTRY = "grader.student.grade"  # the student's `grade`: its main()
STUDENT_API = (STUDENT_ENTRY, "grader.student.notebook")  # and `from grader import check` in a notebook
STUDENT_DISTRIBUTION = "transformer-grader-student"
# The full grader's requirements that the student's needs: torch for their code and the
# tests, pytest and its JSON report to run them, rich for the table, nbformat for notebooks,
# safetensors for the data the public tests compare with, numpy for torch and safetensors
# (torch warns "Failed to initialize NumPy" in every run without it), einops because the grader
# has it (a student may split heads with it).
STUDENT_REQUIREMENTS = ("torch", "pytest", "pytest-json-report", "rich", "nbformat", "safetensors", "numpy", "einops")
# `pip install -e '.[notebook]'`: what opens and runs the handout notebook. The kernel, in the
# handout's environment, so that the notebook's `from grader import check` and torch are found
# (a Jupyter installed elsewhere would start a kernel without them; an editor with its own
# notebook front end needs only this); and JupyterLab to open the .ipynb (the classic Notebook 7
# is built on JupyterLab and would install it too).
STUDENT_NOTEBOOK_EXTRA = ("ipykernel>=6", "jupyterlab>=4")
# The trusted side's detection: how the grader reads a submission's source for what looks
# evasive, and for the calls a hang connects. Whoever reads it learns what goes unseen, so
# the handout holds none of it, nor a module that imports it.
TRUSTED_DETECTION = ("source", "sandbox.hung_calls")  # in grader: a package, or a module
# Replaces grader/__init__.py, which imports the full grader (grader.engine.api and the reference).
STUDENT_INIT = '''"""The course grader, student edition (made by `grade release`).

`grade assignments/NN` runs the assignment's public tests on your working copy; in a
notebook, `from grader import check; check("PartName")` runs one part's. The hidden tests,
and your grade, run on submission.
"""

__all__ = ["check"]


def __getattr__(name: str):
    if name == "check":
        from grader.core.cells import check_while_graded, loading

        if loading():  # a grader is running the notebook: check() does nothing
            return check_while_graded
        from grader.student.notebook import check

        return check
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
'''


class ReleaseError(Exception):
    """The handout cannot be built: the message says what to fix."""


def release(assignment: Assignment | str | Path, out: Path) -> tuple[Path, Path]:
    """Write ``out/<id>/`` and ``out/<id>.zip``; returns both paths. Replaces an earlier release."""
    if not isinstance(assignment, Assignment):
        assignment = Assignment.load(assignment)
    if not notebook_is_current(assignment):
        raise ReleaseError(f"{assignment.notebook_path} is out of date; run: grade notebook {assignment.directory}")
    _check_public_data(assignment)
    folder, archive = out / assignment.id, out / f"{assignment.id}.zip"
    # Everything is computed (and checked) before the earlier release is removed.
    files: dict[str, Path | str] = {**_handout_files(assignment),
                                    **_grader_files(sorted(assignment.directory.glob("test_*.py"))),
                                    "README.md": student_readme(assignment), "pyproject.toml": student_pyproject()}
    if folder.exists():
        shutil.rmtree(folder)
    for relative, source in files.items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(source, Path):
            shutil.copyfile(source, target)
        else:
            target.write_text(source, encoding="utf-8")
    _write_zip(folder, archive)
    return folder, archive


def _check_public_data(assignment: Assignment) -> None:
    from grader.engine.public_data import PublicDataError, stale_files  # runs the reference: torch, only here

    try:
        stale = stale_files(assignment)
    except PublicDataError as exc:
        raise ReleaseError(f"the public tests' data cannot be made: {exc}") from None
    if stale:
        raise ReleaseError(f"{', '.join(map(str, stale))} out of date; run: grade public-data {assignment.directory}")


def _handout_files(assignment: Assignment) -> dict[str, Path]:
    """What the student gets of the assignment folder, by name: never anything else there."""
    public_tests = sorted(path.name for path in assignment.directory.glob("test_*.py"))
    if not public_tests:
        raise ReleaseError(f"{assignment.directory} has no public tests (test_*.py) for the student's grader to run")
    public_data = sorted(path.name for path in assignment.directory.glob(f"test_*{DATA_SUFFIX}"))
    names = ["README.md", "assignment.toml", assignment.module, assignment.notebook, *public_tests, *public_data]
    missing = [name for name in names if not (assignment.directory / name).is_file()]
    if missing:
        raise ReleaseError(f"{assignment.directory} has no {', '.join(missing)}")
    return {f"assignments/{assignment.id}/{name}": assignment.directory / name for name in names}


def _grader_files(public_tests: Sequence[Path]) -> dict[str, Path | str]:
    return {"grader/__init__.py": STUDENT_INIT,
            **{f"grader/{path.relative_to(GRADER_DIR).as_posix()}": path
               for path in student_modules(public_tests=public_tests)}}


def student_modules(package_dir: Path = GRADER_DIR, public_tests: Sequence[Path] = ()) -> list[Path]:
    """The files of the grader package at ``package_dir`` that the student's grader needs:
    the modules of :data:`STUDENT_API`, those the ``public_tests`` import, and every grader
    module they import, transitively (imports inside functions too; absolute ones, as the grader
    writes them). The package's own ``__init__.py`` is not among them (see STUDENT_INIT).

    Raises :class:`ReleaseError` if one of them imports the reference or what locates it, or
    if one of :data:`TRUSTED_DETECTION` is among them.
    """
    package = package_dir.name
    detection = [(package_dir / module.replace(".", "/"), f"{package}.{module}") for module in TRUSTED_DETECTION]
    found: set[Path] = set()
    # (module, what imports it), so that a refusal names the import to remove.
    pending: list[tuple[str, str]] = [(name, "the student's grader") for name in STUDENT_API]
    pending += [(name, str(test)) for test in public_tests for name in imported_names(test)
                if name.split(".")[0] == package]
    while pending:
        name, importer = pending.pop()
        for path in module_files(package_dir, name):
            if path in found:
                continue
            detected = next((dotted for where, dotted in detection
                             if path == where.with_suffix(".py") or path.is_relative_to(where)), None)
            if detected:
                raise ReleaseError(f"{importer} imports {name}, the trusted side's detection ({detected}): "
                                   "the handout must not hold it; move what the student's grader needs out of it")
            found.add(path)
            imported = imported_names(path)
            leaks = sorted(other for other in imported if _locates_reference(other, package))
            if leaks:
                raise ReleaseError(f"{path} imports {', '.join(leaks)}: the student's grader must not hold the "
                                   f"reference; keep that import out of what {', '.join(STUDENT_API)} import")
            pending += [(other, str(path)) for other in imported if other.split(".")[0] == package]
    return sorted(found)


def _locates_reference(name: str, package: str) -> bool:
    return (name == "reference" or name.startswith("reference.")
            or name in {f"{package}.core.assignment.{locator}" for locator in REFERENCE_LOCATORS})


def student_readme(assignment: Assignment) -> str:
    folder = f"assignments/{assignment.id}"
    torch_floor = next((requirement for requirement in _grader_requirements() if _requirement_name(requirement) == "torch"),
                       "torch")
    return f"""# Assignment {assignment.id}: {assignment.title}

The instructions are in [`{folder}/README.md`]({folder}/README.md). You edit
`{folder}/{assignment.module}`, or the same stubs in `{folder}/{assignment.notebook}`.

## Check your work

From this folder, with Python 3.11 or newer:

```bash
python3 -m venv .venv && .venv/bin/pip install torch=={TORCH_VERSION} --index-url {TORCH_CPU_INDEX} \\
    && .venv/bin/pip install -e .               # the CPU build of torch, then pytest and the `grade` command
.venv/bin/grade {folder}                        # run the public tests on your work
```

The first command installs the CPU build of the torch the course is tested with (about 200 MB;
the default index would fetch a GPU build with about twenty CUDA packages). Already have
PyTorch, a GPU build say, in an environment of yours? Run only `pip install -e .` there:
it keeps any `{torch_floor}`.

`grade` tests your working copy (the module or the notebook, whichever has fewer stubs
left) and shows a score per part; `-v` also shows each failure and what your code printed.
It loads a notebook as the grader does: cells in order, a cell that raises is noted and the
next ones run, a cell that runs past {Limits().cell_timeout_s:g} s (`--timeout`) is skipped.

## Working in the notebook

```bash
.venv/bin/pip install -e '.[notebook]'          # JupyterLab, and a kernel in this environment
.venv/bin/jupyter lab {folder}/{assignment.notebook}
```

(An editor with its own notebook view, VS Code say, needs only the kernel: `.venv/bin/pip
install ipykernel`, then pick this folder's `.venv` as the notebook's Python.) Below each part's
cell, the notebook checks it:

```python
from grader import check
check("{assignment.parts[-1]}")   # one part's public tests on your current definitions; check() for all
```

Leave those cells in when you hand the notebook in: when it is graded, `check()` does nothing.

The public tests check shapes, sanity and a few common mistakes only, so that score is not
your grade: the hidden tests run on submission.
"""


def _grader_requirements() -> list[str]:
    return metadata.requires("transformer-grader") or []


def student_pyproject() -> str:
    requirements = [requirement for requirement in _grader_requirements()
                    if _requirement_name(requirement) in STUDENT_REQUIREMENTS and ";" not in requirement]
    missing = set(STUDENT_REQUIREMENTS) - {_requirement_name(requirement) for requirement in requirements}
    if missing:
        raise ReleaseError(f"the grader's own requirements do not list {sorted(missing)}")
    dependencies = "".join(f"    {json.dumps(requirement)},\n" for requirement in requirements)
    return f"""[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "{STUDENT_DISTRIBUTION}"
version = "{metadata.version("transformer-grader")}"
description = "Runs a Transformer course assignment's public tests on your work."
requires-python = ">=3.11"
dependencies = [
{dependencies}]

[project.optional-dependencies]
notebook = {json.dumps(list(STUDENT_NOTEBOOK_EXTRA))}

[project.scripts]
grade = "{STUDENT_ENTRY}:main"

[tool.setuptools.packages.find]
include = ["grader*"]
"""


def _requirement_name(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0].lower()


def _write_zip(folder: Path, archive: Path) -> None:
    files = sorted(path for path in folder.rglob("*") if path.is_file())
    write_zip(archive, {f"{folder.name}/{path.relative_to(folder).as_posix()}": (path.read_bytes(), REGULAR)
                        for path in files})
