"""`grade release`: the student handout holds no reference and no hidden test, and its grader
runs the public tests from the unpacked zip where the reference cannot be imported."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from importlib.metadata import distribution
from pathlib import Path

import nbformat
import pytest
import torch
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from safetensors.torch import load_file, save_file

from grader.cli import EXIT_GRADER_ERROR, EXIT_OK, main
from grader.core.assignment import Assignment
from grader.core.torch_wheel import TORCH_CPU_INDEX, TORCH_VERSION
from grader.course.notebook import render_notebook
from grader.course.release import ReleaseError, release, student_modules
from grader.student import grade as public
from grader.student.grade import OTHER_PART, grade_public, part_of
from reference import as_submission
from tests.conftest import ASSIGNMENT_03, ASSIGNMENTS, ROOT, mutant, notebook_text
from tests.test_public_data import computations

HANDOUT = "assignments/03"
HIDDEN_NOTE = "the hidden tests run on submission"


@pytest.fixture(scope="module")
def bundle(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    assert main(["release", str(ASSIGNMENT_03), "--out", str(out)]) == EXIT_OK
    return out / "03"


@pytest.fixture(scope="module")
def unpacked(bundle, tmp_path_factory) -> Path:
    """The zip as a student unpacks it; tests that change it work on a copy."""
    into = tmp_path_factory.mktemp("student")
    with zipfile.ZipFile(bundle.with_suffix(".zip")) as archive:
        archive.extractall(into)
    return into / "03"


def files(folder: Path) -> dict[str, bytes]:
    return {path.relative_to(folder).as_posix(): path.read_bytes()
            for path in sorted(folder.rglob("*")) if path.is_file()}


def text_lines(path: Path) -> set[str]:
    """The stripped lines a file holds; a notebook's are its cells' (its JSON quotes them); a data
    file's, the names of what it holds (its tensors are numbers, no text)."""
    if path.suffix == ".safetensors":
        return set(load_file(path))
    if path.suffix == ".ipynb":
        text = "\n".join(cell.source for cell in nbformat.read(path, as_version=4).cells)
    else:
        text = path.read_text(encoding="utf-8")
    return {line.strip() for line in text.splitlines()}


def leaked_lines(folder: Path) -> set[str]:
    """Lines of the reference solution or of the hidden suite of 03 found in ``folder``:
    those that say something (not imports, comments, short lines) and that the public
    handout does not hold too (the stub shares signatures and docstrings with the reference)."""
    public = set().union(*(text_lines(path) for path in ASSIGNMENT_03.iterdir() if path.is_file()))
    secret_sources = [as_submission("multihead"),
                      *(path.read_text(encoding="utf-8") for path in (ROOT / "reference/hidden/a03").glob("*.py"))]
    secret = {line.strip() for source in secret_sources for line in source.splitlines()
              if len(line.strip()) >= 20 and not line.strip().startswith(("import ", "from ", "#", '"""'))} - public
    return set().union(*(text_lines(path) & secret for path in folder.rglob("*") if path.is_file()))


# ---- what the handout holds -----------------------------------------------------------------


def test_zip_holds_the_folder_under_the_assignment_id(bundle):
    with zipfile.ZipFile(bundle.with_suffix(".zip")) as archive:
        zipped = {info.filename.removeprefix("03/"): archive.read(info) for info in archive.infolist()}
        assert all(info.filename.startswith("03/") for info in archive.infolist())
    assert zipped == files(bundle)


def test_bundle_holds_the_handout_and_an_installable_student_grader(bundle):
    held = files(bundle)
    for name in ("README.md", "assignment.toml", "mha.py", "mha.ipynb", "test_mha.py", "test_mha.safetensors"):
        assert held[f"{HANDOUT}/{name}"] == (ASSIGNMENT_03 / name).read_bytes()
    project = tomllib.loads(held["pyproject.toml"].decode())["project"]
    module, _, function = project["scripts"]["grade"].partition(":")
    assert f"def {function}(" in held[module.replace(".", "/") + ".py"].decode()
    requirements = {re.split(r"[<>=\[]", requirement)[0] for requirement in project["dependencies"]}
    # safetensors reads the data the public tests compare with; nothing of the grader's engine is needed.
    assert {"torch", "pytest", "pytest-json-report", "safetensors"} <= requirements and "jsonschema" not in requirements
    # What torch wants: without numpy every run says "Failed to initialize NumPy".
    assert "numpy" in requirements
    # What opens and runs the notebook: a kernel in the handout's environment, and a front end.
    notebook_extra = {re.split(r"[<>=\[]", requirement)[0] for requirement in project["optional-dependencies"]["notebook"]}
    assert notebook_extra == {"ipykernel", "jupyterlab"}
    readme = " ".join(held["README.md"].decode().split())
    assert "pip install -e ." in readme and f"grade {HANDOUT}" in readme and HIDDEN_NOTE in readme
    # The CPU wheel the course is tested with, pinned, before the grader: an unpinned torch resolves a GPU build.
    assert readme.index(f"torch=={TORCH_VERSION} --index-url {TORCH_CPU_INDEX}") < readme.index("pip install -e .")
    assert 'from grader import check check("MultiHeadAttention")' in readme
    assert ".venv/bin/pip install -e '.[notebook]'" in readme and f"jupyter lab {HANDOUT}/mha.ipynb" in readme
    assert "def __getattr__" in held["grader/__init__.py"].decode() and "grader/student/notebook.py" in held


def test_bundle_holds_no_reference_and_no_hidden_test(bundle):
    with zipfile.ZipFile(bundle.with_suffix(".zip")) as archive:
        names = archive.namelist()
    for name in names + list(files(bundle)):
        assert not {"reference", "hidden"} & set(re.split(r"[/._]", name)), name
    assert leaked_lines(bundle) == set()
    for path in bundle.rglob("*"):
        if path.is_file():
            lines = text_lines(path)
            assert not [line for line in lines if re.match(r"(from|import)\s+reference\b", line)], path
            assert not [line for line in lines if re.search(r"reference[/.]hidden|hidden/a\d", line)], path


def test_leak_check_finds_the_reference_solution_in_a_handout(bundle, tmp_path):
    tampered = shutil.copytree(bundle, tmp_path / "03")
    (tampered / HANDOUT / "mha.py").write_text(as_submission("multihead"), encoding="utf-8")
    assert leaked_lines(tampered)


def test_no_grader_module_that_locates_the_reference_is_shipped(bundle):
    needs_reference = {path.relative_to(ROOT).as_posix() for path in (ROOT / "grader").rglob("*.py")
                       if re.search(r"^\s*(from|import) reference\b|\breference_dir\b|\.hidden_suite\b",
                                    path.read_text(encoding="utf-8"), re.MULTILINE)}
    assert "grader/engine/api.py" in needs_reference  # the pattern finds what it is for
    # grader/core/assignment.py locates the reference only when asked (see test_bundle_grader_imports_without_the_reference).
    assert not (needs_reference - {"grader/core/assignment.py"}) & set(files(bundle))


# What the trusted side looks for in a submission's source, and how: never the student's to read.
DETECTION = {"grader/source/evasion.py", "grader/source/parsed.py", "grader/source/flags.py", "grader/sandbox/hung_calls.py"}


def test_bundle_holds_nothing_of_the_trusted_sides_detection(bundle):
    held = files(bundle)
    assert {path.relative_to(ROOT).as_posix() for path in (ROOT / "grader").rglob("*.py")} >= DETECTION
    assert not DETECTION & set(held)
    # Nor what they know: the list of what they look for.
    shipped = b"\n".join(content for name, content in held.items() if name.startswith("grader/"))
    assert b"gc.get_referrers" not in shipped and b"inspect.getinnerframes" not in shipped


def test_released_public_tests_compare_with_data_not_the_references_code(bundle):
    tests = sorted((bundle / HANDOUT).glob("test_*.py"))
    assert tests and all(computations(path) == [] for path in tests)
    assert (bundle / HANDOUT / "test_mha.safetensors").is_file()


def test_bundle_notebook_is_the_generated_one(bundle):
    generated = render_notebook(Assignment.load(ASSIGNMENT_03))
    assert (bundle / HANDOUT / "mha.ipynb").read_text(encoding="utf-8") == generated


def test_release_replaces_an_earlier_one(bundle, tmp_path):
    (tmp_path / "03").mkdir()
    (tmp_path / "03" / "solution.py").write_text("stale")
    folder, archive = release(ASSIGNMENT_03, tmp_path)
    assert files(folder) == files(bundle) and archive.read_bytes() == bundle.with_suffix(".zip").read_bytes()


def test_stale_public_data_stops_the_release(tmp_path):
    assignment = shutil.copytree(ASSIGNMENT_03, tmp_path / "03")
    tensors = load_file(assignment / "test_mha.safetensors")
    save_file({**tensors, "multi_head_attention/expected": torch.zeros(2, 5, 16)}, assignment / "test_mha.safetensors")
    assert main(["release", str(assignment), "--out", str(tmp_path / "dist")]) == EXIT_GRADER_ERROR
    assert not (tmp_path / "dist").exists()


def test_a_stale_notebook_stops_the_release(tmp_path):
    assignment = shutil.copytree(ASSIGNMENT_03, tmp_path / "03")
    with open(assignment / "mha.py", "a", encoding="utf-8") as module:
        module.write("\n\ndef helper():\n    pass\n")
    assert main(["release", str(assignment), "--out", str(tmp_path / "dist")]) == EXIT_GRADER_ERROR
    assert not (tmp_path / "dist").exists()


# ---- which grader modules ship --------------------------------------------------------------


def fake_grader(tmp_path: Path, modules: dict[str, str]) -> Path:
    package = tmp_path / "grader"
    for name, source in {"__init__.py": "from grader.engine.api import grade\n", "core/__init__.py": "",
                         "core/assignment.py": "", "student/__init__.py": "", **modules}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(source)
    return package


def test_shipped_modules_are_what_the_entry_imports_transitively(tmp_path):
    package = fake_grader(tmp_path, {
        "student/grade.py": "from grader.views import terminal\n",
        "views/__init__.py": "", "views/terminal.py": "def table():\n    from grader.sandbox.limits import Limits\n",
        "sandbox/__init__.py": "", "sandbox/limits.py": "import torch\n",  # imported inside a function too
        "engine/__init__.py": "", "engine/api.py": "from reference import x\n",
    })
    shipped = {path.relative_to(package).as_posix() for path in student_modules(package)}
    assert shipped == {"student/__init__.py", "student/grade.py", "views/__init__.py", "views/terminal.py",
                       "sandbox/__init__.py", "sandbox/limits.py"}


def test_what_the_public_tests_import_of_the_grader_ships_too(tmp_path):
    package = fake_grader(tmp_path, {"student/grade.py": "", "core/public_cases.py": "from grader.core import sanitize\n",
                                     "core/sanitize.py": "", "views/terminal.py": ""})
    public_test = tmp_path / "test_mha.py"
    public_test.write_text("import torch\nfrom grader.core.public_cases import Cases\nfrom mha import split_heads\n")
    shipped = {path.relative_to(package).as_posix() for path in student_modules(package, [public_test])}
    assert shipped == {"student/__init__.py", "student/grade.py", "core/__init__.py", "core/public_cases.py",
                       "core/sanitize.py"}


@pytest.mark.parametrize("importer, source", [
    ("student/grade.py", "from grader.source.flags import bounded\n"),  # as assemble once did, for one small helper
    ("core/helper.py", "def later():\n    import grader.source.evasion\n"),
    ("core/helper.py", "from grader.sandbox import hung_calls\n"),
    ("core/helper.py", "from grader.source.parsed import ParsedSource\n"),
    ("core/helper.py", "from grader.source import parsed\n"),
])
def test_a_module_that_needs_the_trusted_sides_detection_stops_the_release(tmp_path, importer, source):
    package = fake_grader(tmp_path, {
        "student/grade.py": "from grader.core import helper\n", importer: source,
        "source/__init__.py": "", "source/flags.py": "from grader.source.evasion import constructs\n",
        "source/evasion.py": "", "source/parsed.py": "", "sandbox/__init__.py": "", "sandbox/hung_calls.py": "",
    })
    with pytest.raises(ReleaseError, match=rf"{re.escape(str(package / importer))} imports grader\.\w+.*detection"):
        student_modules(package)


def test_a_public_test_that_imports_the_trusted_sides_detection_stops_the_release(tmp_path):
    package = fake_grader(tmp_path, {"student/grade.py": "", "source/__init__.py": "", "source/evasion.py": ""})
    public_test = tmp_path / "test_mha.py"
    public_test.write_text("from grader.source.evasion import constructs\n")
    with pytest.raises(ReleaseError, match="test_mha.py imports grader.source.evasion"):
        student_modules(package, [public_test])


@pytest.mark.parametrize("leak", [
    "from reference import as_submission",
    "import reference.hidden.a03.conftest",
    "from grader.core.assignment import Assignment, reference_dir",
    "from grader.engine.api import grade",  # grader.engine.api locates the reference
])
def test_a_module_that_needs_the_reference_stops_the_release(tmp_path, leak):
    package = fake_grader(tmp_path, {
        "student/grade.py": "from grader.core import helper\n",
        "core/helper.py": f"def later():\n    {leak}\n",
        "engine/__init__.py": "", "engine/api.py": "from grader.core.assignment import reference_dir\n",
    })
    with pytest.raises(ReleaseError, match=r"helper\.py|api\.py"):
        student_modules(package)


def test_a_public_test_counts_for_the_part_its_name_starts_with():
    assert part_of("test_mha.py::test_combine_heads_inverts_split_heads",
                   ("split_heads", "combine_heads")) == "combine_heads"
    assert part_of("test_masks.py::test_causal_self_attention_shape",
                   ("causal_mask", "CausalSelfAttention")) == "CausalSelfAttention"
    assert part_of("test_masks.py::test_causal_maskless", ("causal_mask",)) == OTHER_PART


def test_every_public_test_of_the_course_counts_for_a_part():
    for toml in sorted(ASSIGNMENTS.glob("*/assignment.toml")):
        assignment = Assignment.load(toml.parent)
        names = [name for path in assignment.directory.glob("test_*.py")
                 for name in re.findall(r"^def (test_\w+)", path.read_text(encoding="utf-8"), re.MULTILINE)]
        assert names
        unclaimed = [name for name in names if part_of(f"test.py::{name}", assignment.parts) == OTHER_PART]
        assert unclaimed == [], assignment.id


# ---- the student's grader, from the unpacked zip, without the reference ---------------------


@pytest.fixture(scope="module")
def declared_site(unpacked, tmp_path_factory) -> Path:
    """A site-packages of what the handout's pyproject declares, and what that requires in turn,
    linked from this environment: what `pip install -e .` gives a student, and nothing else."""
    purelib = Path(sysconfig.get_paths()["purelib"])
    site = tmp_path_factory.mktemp("declared-site")
    project = tomllib.loads((unpacked / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pending, seen = [Requirement(text) for text in project["dependencies"]], set()
    while pending:
        requirement = pending.pop()
        name = canonicalize_name(requirement.name)
        if (name, frozenset(requirement.extras)) in seen:
            continue
        seen.add((name, frozenset(requirement.extras)))
        found = distribution(name)
        for text in found.requires or []:
            wanted = Requirement(text)
            if wanted.marker is None or any(wanted.marker.evaluate({"extra": extra})
                                            for extra in ("", *requirement.extras)):
                pending.append(wanted)
        for top in {Path(file).parts[0] for file in found.files or [] if not str(file).startswith("..")}:
            if (purelib / top).exists() and not (site / top).exists():
                (site / top).symlink_to(purelib / top)
    return site


def student_python(bundle: Path, site: Path, *args: str) -> subprocess.CompletedProcess:
    """Python as in a student's environment: -S skips site processing, so the editable
    install that makes `reference` importable here is not loaded; the bundle and what the
    handout's pyproject installs (``declared_site``) are on the path."""
    path = os.pathsep.join([str(bundle), str(site)])
    return subprocess.run([sys.executable, "-S", *args], capture_output=True, text=True, cwd=bundle, timeout=300,
                          env={"PYTHONPATH": path, "COLUMNS": "150", "PATH": os.environ.get("PATH", "/usr/bin:/bin")})


@pytest.fixture
def student_copy(unpacked, tmp_path) -> Path:
    return shutil.copytree(unpacked, tmp_path / "03")


@pytest.mark.slow
def test_bundle_grader_imports_without_the_reference(unpacked, declared_site):
    assert "No module named 'reference'" in student_python(unpacked, declared_site, "-c", "import reference").stderr
    modules = [".".join(path.relative_to(unpacked).with_suffix("").parts).removesuffix(".__init__")
               for path in (unpacked / "grader").rglob("*.py")]
    assert len(modules) > 5
    imported = student_python(unpacked, declared_site, "-c", f"import sys, {', '.join(modules)}; print(sorted(sys.modules))")
    assert imported.returncode == 0, imported.stderr
    assert "grader.student.grade" in imported.stdout and "reference" not in imported.stdout
    assert "'torch'" not in imported.stdout  # the student's code and torch run in pytest's process only


@pytest.mark.slow
def test_the_handout_installs_what_torch_wants(unpacked, declared_site):
    # Without numpy, every process that imports torch (the public tests', the notebook's kernel)
    # says "Failed to initialize NumPy", and safetensors cannot read the public tests' data.
    result = student_python(unpacked, declared_site, "-c", "import torch, safetensors.torch; print(torch.zeros(2).numpy())")
    assert result.returncode == 0 and result.stdout.strip() == "[0. 0.]", result.stderr
    assert "NumPy" not in result.stderr, result.stderr


@pytest.mark.slow
def test_student_grade_of_the_stub_fails_every_public_test(unpacked, declared_site):
    result = student_python(unpacked, declared_site, "-m", "grader.student.grade", HANDOUT)
    assert result.returncode == 0, result.stderr
    assert re.search(r"total\s*│\s*0 / 7", result.stdout), result.stdout
    assert "not implemented" in result.stdout and HIDDEN_NOTE in result.stdout


@pytest.mark.slow
def test_student_grade_of_the_reference_passes_every_public_test(student_copy, declared_site):
    (student_copy / HANDOUT / "mha.py").write_text(as_submission("multihead"), encoding="utf-8")
    result = student_python(student_copy, declared_site, "-m", "grader.student.grade", HANDOUT, "-v")
    assert result.returncode == 0, result.stderr
    for part, score in (("split_heads", "3 / 3"), ("combine_heads", "1 / 1"), ("MultiHeadAttention", "3 / 3"),
                        ("total", "7 / 7")):
        assert re.search(rf"{part}\s*│\s*{score}", result.stdout), result.stdout
    assert HIDDEN_NOTE in result.stdout


@pytest.mark.slow
def test_student_grade_tests_the_notebook_when_it_holds_the_work(student_copy, declared_site):
    # The stub mha.py stays in the folder the tests run from: the notebook must still be what they import.
    (student_copy / HANDOUT / "mha.ipynb").write_text(notebook_text(as_submission("multihead")), encoding="utf-8")
    result = student_python(student_copy, declared_site, "-m", "grader.student.grade", HANDOUT)
    assert result.returncode == 0, result.stderr
    assert "mha.ipynb" in result.stdout and re.search(r"total\s*│\s*7 / 7", result.stdout), result.stdout


@pytest.mark.slow
def test_public_report_tells_a_failed_check_from_an_error_and_hints_at_the_error(tmp_path):
    source = mutant(as_submission("multihead"), "x.view(batch, length, num_heads, d_k).transpose(1, 2)",
                    "x.view(batch, num_heads, length, d_k)")  # heads mixed, shape right
    source = mutant(source, ".transpose(1, 2).contiguous().view(", ".transpose(1, 2).view(")
    submission = tmp_path / "mha.py"
    submission.write_text(source, encoding="utf-8")
    report = grade_public(ASSIGNMENT_03, submission)
    parts = {part.id: part for part in report.parts}
    assert report.status == "graded" and (parts["split_heads"].score, parts["split_heads"].max_score) == (2, 3)
    failed = next(test for test in parts["split_heads"].tests if test.outcome != "passed")
    # The public test names the mistake in its assertion: the student's grader makes it the hint.
    assert failed.outcome == "failed" and "mistake: heads split with `view`" in failed.message
    assert failed.hint.startswith("heads split with `view` and no `transpose`")
    assert parts["combine_heads"].score == 0 and ".contiguous()" in parts["combine_heads"].hint
    assert parts["combine_heads"].tests[0].outcome == "error"


@pytest.mark.slow
def test_the_released_check_runs_inside_a_jupyter_kernel(student_copy):
    nbclient = pytest.importorskip("nbclient")
    from nbformat.v4 import new_code_cell, new_notebook

    notebook = new_notebook(cells=[
        new_code_cell(as_submission("multihead")),
        new_code_cell("import grader\nprint(grader.__file__)"),
        new_code_cell("from grader import check\ncheck('MultiHeadAttention')")])
    # The kernel imports the handout's grader, as in the student's environment: the bundle first on the path.
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(student_copy / HANDOUT)}}
                            ).execute(env={**os.environ, "PYTHONPATH": str(student_copy)})
    assert notebook.cells[1].outputs[0]["text"].strip() == str(student_copy / "grader" / "__init__.py")
    shown = "".join(output.get("data", {}).get("text/plain", "") for output in notebook.cells[2].outputs)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", shown)  # rich's colours, as Jupyter's plain text keeps them
    assert re.search(r"MultiHeadAttention\s*│\s*3 / 3", shown) and HIDDEN_NOTE in shown


def test_ctrl_c_ends_the_student_grader_with_a_line_not_a_traceback(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(public, "grade_public", interrupted)
    assert public.main([str(ASSIGNMENT_03)]) == public.EXIT_INTERRUPTED
    captured = capsys.readouterr()
    assert "interrupted" in captured.err and "Traceback" not in captured.out + captured.err


def test_a_module_that_raises_on_import_is_loaded_as_the_grader_loads_it(tmp_path):
    submission = tmp_path / "mha.py"
    submission.write_text("import torch\n\nscale = 1 / 0\n", encoding="utf-8")
    report = grade_public(ASSIGNMENT_03, submission)
    assert report.status == "graded" and report.score == 0
    assert report.notes == ["your module (mha.py) raised ZeroDivisionError: division by zero"]
    assert all(part.hint == "not found: the submission does not define it" for part in report.parts)
