"""An import of a package the grading machine lacks ends no cell: it gets a stand-in, and only
its use fails, in the part that uses it (grader.core.not_installed)."""

from __future__ import annotations

import importlib.abc
import itertools
import sys

import pytest

from grader.core import cells
from grader.core.ingest import Cell, Program
from grader.core.not_installed import _FINDER, MAX_PER_CELL, run_standing_in
from reference import as_submission, module_for
from tests.conftest import assert_mistake_named, mutant, notebook_text, part

_names = (f"grader_test_absent_{n}" for n in itertools.count())


@pytest.fixture
def absent():
    """Names of packages no finder has; their stand-ins are gone after the test."""
    taken: list[str] = []

    def new() -> str:
        taken.append(next(_names))
        return taken[-1]

    yield new
    for name in taken:
        _FINDER.packages.discard(name)
        for module in [module for module in sys.modules if module.split(".")[0] == name]:
            del sys.modules[module]


def run(source: str, namespace: dict) -> tuple[list[str], BaseException | None]:
    return run_standing_in(lambda: exec(compile(source, "cell", "exec"), namespace))


def test_a_missing_package_is_stood_in_and_the_rest_of_the_cell_runs(absent):
    plots, progress = absent(), absent()
    namespace: dict = {}
    stood_in, exc = run(f"import math\nimport {plots}.pyplot as plt\nfrom {progress}.auto import tqdm\n"
                        f"from {plots} import colors, cm as colormaps\nanswer = math.sqrt(4)", namespace)
    assert (stood_in, exc) == ([plots, progress], None)
    assert namespace["answer"] == 2
    for package, used in ((plots, "plt.plot([1, 2])"), (progress, "[x for x in tqdm(range(3))]"),
                          (plots, "colormaps.viridis(0.5)"), (plots, "colors + 1"), (plots, "len(plt.cm)")):
        with pytest.raises(ModuleNotFoundError, match="where your code is graded") as raised:
            exec(used, namespace)
        assert raised.value.name == package, used


def test_code_that_catches_the_import_error_still_finds_the_package_missing(absent):
    colab = absent()
    namespace: dict = {}
    assert run(f"try:\n    import {colab}.drive\n    IN_COLAB = True\nexcept ImportError:\n    IN_COLAB = False",
               namespace) == ([], None)
    assert namespace["IN_COLAB"] is False
    assert colab not in _FINDER.packages


def test_an_installed_package_missing_a_submodule_and_other_errors_end_the_cell_as_before():
    for source, error in (("import torch.not_a_submodule", ModuleNotFoundError), ("1 / 0", ZeroDivisionError),
                          ("raise ModuleNotFoundError('mine')", ModuleNotFoundError)):
        stood_in, exc = run(source, {})
        assert stood_in == [] and type(exc) is error, source


def test_a_missing_portion_of_a_namespace_package_is_stood_in_for(absent, tmp_path, monkeypatch):
    # google.colab beside protobuf's google: a namespace package that other distributions share.
    shared = absent()
    (tmp_path / shared / "installed").mkdir(parents=True)
    monkeypatch.syspath_prepend(str(tmp_path))
    namespace: dict = {}
    stood_in, exc = run(f"from {shared}.colab import drive\nafter = 1", namespace)
    assert (stood_in, exc, namespace["after"]) == ([f"{shared}.colab"], None, 1)
    with pytest.raises(ModuleNotFoundError, match=f"No module named '{shared}.colab'"):
        namespace["drive"].mount("/content/drive")
    _FINDER.packages.discard(f"{shared}.colab")


def test_a_name_the_grader_refuses_is_not_stood_in_for(absent):
    hidden = absent()

    class Refuse(importlib.abc.MetaPathFinder):  # as the student's process refuses the reference's imports
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] == hidden:
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    sys.meta_path.insert(0, refuse := Refuse())
    try:
        stood_in, exc = run(f"import {hidden}", {})
    finally:
        sys.meta_path.remove(refuse)
    assert stood_in == [] and isinstance(exc, ModuleNotFoundError) and hidden not in _FINDER.packages


def test_the_student_grader_loads_a_notebook_alike_and_says_so(absent, tmp_path):
    plots = absent()
    program = Program("notebook", (Cell(f"import {plots}.pyplot as plt\nimport math", "cell 2"),
                                   Cell("def root(x):\n    return math.sqrt(x)", "cell 3")))
    cells.write_loader(program, tmp_path, "loaded.py", ("root",), cell_timeout_s=10, load_timeout_s=20)
    namespace: dict = {"__name__": "loaded"}
    cells.run_cells(namespace, str(tmp_path / "loaded.py"))
    notes, _ = cells.loading_result(tmp_path)
    assert namespace["root"](9) == 3
    assert notes == [cells.let_through("cell 2", [plots])]


# ---- graded end to end ------------------------------------------------------------------------

REFERENCE_03 = as_submission(module_for("03"))
PLOTS = "grader_test_plotting_lib"  # installed nowhere


@pytest.mark.slow
def test_a_correct_module_and_notebook_that_import_a_missing_package_keep_every_point(grade_source):
    module = f"import {PLOTS}.pyplot as plt\n" + REFERENCE_03
    report = grade_source(module)
    assert report.score == report.max_score, [(p.id, p.hint) for p in report.parts]
    assert report.notes == [cells.let_through("your module (submission.py)", [PLOTS])]
    # A notebook's first cell imports it beside torch: the cell's other imports still run.
    first, rest = f"%matplotlib inline\nimport {PLOTS}.pyplot as plt\nimport torch", REFERENCE_03
    report = grade_source(notebook_text(first, rest), suffix=".ipynb")
    assert report.score == report.max_score, [(p.id, p.hint) for p in report.parts]


@pytest.mark.slow
def test_a_module_with_more_missing_packages_than_a_cell_may_stand_in_for_is_still_graded(grade_source):
    imports = "".join(f"import {PLOTS}_{n}\n" for n in range(MAX_PER_CELL + 1))
    report = grade_source(imports + REFERENCE_03)
    assert report.score == report.max_score, [(p.id, p.hint) for p in report.parts]
    let_through, raised = report.notes
    assert let_through.startswith("your module (submission.py) imports") and f"{PLOTS}_{MAX_PER_CELL - 1}," in let_through
    assert raised.startswith(f"your module (submission.py) raised ModuleNotFoundError: No module named '{PLOTS}_8'")


@pytest.mark.slow
def test_a_part_that_uses_the_missing_package_loses_its_own_points_only(grade_source):
    source = f"import {PLOTS}.pyplot as plt\n" + mutant(
        REFERENCE_03, "    d_k = d_model // num_heads\n",
        "    d_k = d_model // num_heads\n    plt.hist(x.flatten())\n")
    report = grade_source(source)
    # An instructor takes split_heads' points for what raises where it is graded (all of its
    # tests but the one whose ValueError comes first), and nothing else: MultiHeadAttention,
    # which calls it, passes with the stock split_heads.
    assert_mistake_named(report, {"split_heads": (6, None)})
    failed = [test for test in part(report, "split_heads").tests if test.outcome != "passed"]
    assert all(f"No module named '{PLOTS}' where your code is graded" in test.message for test in failed)
