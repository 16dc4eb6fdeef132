"""``grade export gradescope``: the autograder zip Gradescope builds its grading image from.

At the zip's root: ``setup.sh`` (run once, as root, when the image is built),
``run_autograder`` (run for every submission; it starts :mod:`grader.export.gradescope`) and
the source needed to grade: the ``grader`` package; of the ``reference`` package, what grading
this assignment needs (:func:`reference_files`: its hidden suite and the reference modules
it imports; the zip is for instructors only); the assignment's folder under
``assignments/``, with the course's ``assignments/course.toml`` (whether the rubric is on); and
``pyproject.toml`` and ``README.md``, which installing the source reads.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from grader.core.archive import EXECUTABLE, REGULAR, write_zip
from grader.core.assignment import Assignment, reference_dir
from grader.core.fingerprint import GRADER_DIR, source_files
from grader.core.imports import imported_names, module_files
from grader.core.report_words import grader_failed
from grader.core.torch_wheel import TORCH_CPU_INDEX, TORCH_VERSION
from grader.export import ExportError
from grader.export.gradescope import RESULTS, Visibility, failure_results

PROJECT_FILES = ("pyproject.toml", "README.md")


def setup_script() -> str:
    return f"""#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image.
set -euo pipefail
source_dir="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
venv="${{AUTOGRADER_ROOT:-/autograder}}/venv"

# The grader needs Python 3.11 or newer; Gradescope's default image (Ubuntu 22.04) has 3.10.
# Debian's Pythons can make a venv only with their -venv package (ensurepip), hence the check.
python=""
for candidate in python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null && "$candidate" -c "import ensurepip" 2>/dev/null; then
        python="$candidate"
        break
    fi
done
if [ -z "$python" ]; then
    # The image's package lists may be stale or absent: without them the install finds nothing.
    export DEBIAN_FRONTEND=noninteractive
    apt-get update
    apt-get install -y python3.11 python3.11-venv
    python=python3.11
fi

"$python" -m venv "$venv"
"$venv/bin/pip" install --upgrade pip
"$venv/bin/pip" install "torch=={TORCH_VERSION}" --index-url {TORCH_CPU_INDEX}
# Editable: installed into site-packages, the reference and hidden suites would be readable by
# the student's code (docs/security.md, Landlock).
"$venv/bin/pip" install -e "$source_dir"
"""


def run_autograder_script(assignment: str, visibility: Visibility = Visibility()) -> str:
    """The per-submission script; the grading itself is :func:`grader.export.gradescope.run`.
    The visibility chosen at export travels in it, as arguments."""
    cannot_start = json.dumps(failure_results(grader_failed("it did not start (see the autograder's output)"),
                                              visibility))
    arguments = shlex.join(["--assignment", assignment, "--visibility", visibility.tests,
                            "--stdout-visibility", visibility.stdout])
    return f"""#!/usr/bin/env bash
# Gradescope runs this for every submission. AUTOGRADER_ROOT and GRADER_PYTHON let the
# project's tests run it outside Gradescope.
root="${{AUTOGRADER_ROOT:-/autograder}}"
python="${{GRADER_PYTHON:-$root/venv/bin/python}}"
(cd "$root/source" && "$python" -m grader.export.gradescope --root "$root" {arguments})
# If Python itself could not run, students would see no explanation at all.
if [ ! -s "$root/{RESULTS}" ]; then
    mkdir -p "$(dirname "$root/{RESULTS}")"
    cat > "$root/{RESULTS}" <<'EOF'
{cannot_start}
EOF
fi
"""


def reference_files(assignment: Assignment) -> list[Path]:
    """The files of the reference package that grading ``assignment`` needs: the shared ones,
    its hidden suite, and the reference modules that the suite names (suite.toml) or imports,
    with those they import in turn (read from their import statements)."""
    reference = reference_dir()
    # The packages' faces, and what pytest itself loads for every suite (grader.engine.collected).
    shared = [reference / name for name in ("__init__.py", "hidden/__init__.py", "hidden/pytest.ini",
                                             "hidden/conftest.py")]
    files = {path for path in shared if path.is_file()} | set(source_files(assignment.hidden_suite))
    pending = [assignment.reference_module] if assignment.reference_module else []
    pending += [name for path in files if path.suffix == ".py" for name in imported_names(path)]
    while pending:
        name = pending.pop()
        if name.split(".")[0] != reference.name:
            continue
        for path in module_files(reference, name):
            if path not in files:
                files.add(path)
                pending += imported_names(path)
    return sorted(files)


def build_autograder(assignment_dir: str | Path, out: Path, visibility: Visibility = Visibility()) -> None:
    """Write the autograder zip for the assignment to ``out``; its results.json shows students
    what ``visibility`` says."""
    assignment = Assignment.load(assignment_dir)
    assignment.hidden_suite  # raises AssignmentError if there is none: the zip could grade nothing
    reference = reference_dir()
    project = reference.parent
    if GRADER_DIR.parent != project or not all((project / name).is_file() for name in PROJECT_FILES):
        raise ExportError("the Gradescope autograder bundles the grader's source: run this from a source "
                          "checkout installed with `pip install -e .`")
    bundled = f"assignments/{assignment.directory.resolve().name}"
    entries = {"setup.sh": (setup_script().encode(), EXECUTABLE),
               "run_autograder": (run_autograder_script(bundled, visibility).encode(), EXECUTABLE)}
    for name in PROJECT_FILES:
        entries[name] = ((project / name).read_bytes(), REGULAR)
    for path in [*source_files(GRADER_DIR), *reference_files(assignment)]:
        entries[path.relative_to(project).as_posix()] = (path.read_bytes(), REGULAR)
    for path in source_files(assignment.directory):
        entries[f"{bundled}/{path.relative_to(assignment.directory).as_posix()}"] = (path.read_bytes(), REGULAR)
    course = assignment.directory / ".." / "course.toml"  # the course's [rubric], which the assignment reads
    if course.is_file():
        entries["assignments/course.toml"] = (course.read_bytes(), REGULAR)
    write_zip(out, entries)

