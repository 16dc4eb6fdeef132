"""The student's grader behaves like the real one: it loads a notebook by the same rules (a
raising cell noted, a hanging one skipped, undefined names failing only their parts), says so
in the same words, never hangs, and `check()` runs inside Jupyter."""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import replace
from pathlib import Path

import pytest

from grader.core import cells
from grader.core.assignment import AssignmentError
from grader.core.ingest import load_submission
from grader.engine.api import grade
from grader.sandbox.limits import Limits
from grader.student.grade import grade_public
from grader.student.notebook import check_namespace, find_assignment
from reference import as_submission
from tests.conftest import ASSIGNMENT_03, TEST_LIMITS, descendants, mutant, notebook_text

REFERENCE = as_submission("multihead")
QUICK = replace(Limits(), cell_timeout_s=0.5, load_timeout_s=30.0)


def load(tmp_path: Path, *sources: str, names: tuple[str, ...] = (), limits: Limits = QUICK) -> tuple[dict, list[str]]:
    """Run a notebook of ``sources`` as the student grader's loader does; its namespace and notes."""
    notebook = tmp_path / "nb.ipynb"
    notebook.write_text(notebook_text(*sources))
    cells.write_loader(load_submission(notebook), tmp_path, "mod.py", names, limits.cell_timeout_s,
                       limits.load_timeout_s)
    namespace = {"__name__": "mod"}
    cells.run_cells(namespace, str(tmp_path / "mod.py"))
    notes, _ = cells.loading_result(tmp_path)
    return namespace, notes


def test_a_raising_cell_is_noted_and_the_next_cells_run(tmp_path):
    namespace, notes = load(tmp_path, "a = 1", "raise ValueError('bad input')", "b = a + 1")
    assert namespace["b"] == 2 and notes == ["cell 3 raised ValueError: bad input"]


def test_a_cell_past_its_time_limit_is_stopped_even_when_it_catches_the_alarm(tmp_path):
    started = time.monotonic()
    namespace, notes = load(tmp_path, "a = 1", "while True:\n    pass",
                            "while True:\n    try:\n        time.sleep(1)\n    except BaseException:\n        pass",
                            "import time\nb = a + 1")
    assert namespace["b"] == 2
    assert notes == [cells.stopped(f"cell {number}", 0.5) for number in (3, 4)]
    assert time.monotonic() - started < 10


def test_a_modules_statements_each_run_and_a_notebook_cell_ends_at_its_first_error():
    source = ("from __future__ import annotations\nimport sys\nfirst = missing_name\n"
              "def f(x: NotDefinedAnywhere) -> int:\n    return 1\nraise ValueError('second')\nlast = f(0)\n")
    module: dict = {}
    run = cells.run_cell(module, "m.py", source, 5.0, module=True)
    assert module["last"] == 1  # the annotation is not evaluated: the __future__ import holds
    assert [type(error) for error in run.errors] == [NameError, ValueError] and run.later_errors == 1
    cell: dict = {}
    run = cells.run_cell(cell, "cell 2", source, 5.0)
    assert "f" not in cell and [type(error) for error in run.errors] == [NameError] and run.later_errors is None
    exiting: dict = {}
    run = cells.run_cell(exiting, "m.py", "a = 1\nimport sys\nsys.exit(3)\nb = 2\n", 5.0, module=True)
    assert "b" not in exiting and run.later_errors is None  # sys.exit ends a module, as in Python


def test_a_later_process_skips_the_statements_an_earlier_one_was_stopped_in():
    source = "a = 1\nwhile True:\n    pass\nb = 2\n"
    first: dict = {}
    run = cells.run_cell(first, "m.py", source, 0.3, module=True)
    assert run.stopped == [1] and first["b"] == 2  # a module goes on after a stopped statement
    again: dict = {}
    assert cells.run_cell(again, "m.py", source, 0.3, module=True, skip=run.stopped).stopped == []
    assert again == {**again, "a": 1, "b": 2}
    cell: dict = {}
    run = cells.run_cell(cell, "cell 3", source, 0.3)
    assert run.stopped == [1] and cell["a"] == 1 and "b" not in cell  # a notebook's cell ends where it was stopped
    cell = {}
    assert cells.run_cell(cell, "cell 3", source, 0.3, skip=run.stopped).stopped == []
    assert cell["a"] == 1 and "b" not in cell  # and a later process runs only what came before the stop


def test_loading_stops_at_its_total_time_limit(tmp_path):
    limits = replace(QUICK, cell_timeout_s=5.0, load_timeout_s=0.5)
    namespace, notes = load(tmp_path, "import time\ntime.sleep(0.3)", "time.sleep(0.3)", "late = True", limits=limits)
    assert "late" not in namespace
    assert notes == ["cell 3 and the cells after it were not run: loading your code took longer than 0.5 s in total"]


def test_a_notebook_runs_as_main_and_undefined_names_say_so_when_called(tmp_path):
    namespace, _ = load(tmp_path, "if __name__ == '__main__':\n    ran = True", names=("split_heads",))
    assert namespace["ran"] and namespace["__name__"] == "mod"
    with pytest.raises(cells.NotDefined, match="does not define `split_heads`"):
        namespace["split_heads"](1, 2)


def test_the_words_are_the_real_graders():
    # The sandbox's notes are composed from the same functions (grader.sandbox.child_process).
    source = Path(cells.__file__).parents[1].joinpath("sandbox", "child_process.py").read_text()
    for function in ("cells.where", "cells.raised", "cells.took_too_long", "cells.skipped",
                     "cells.not_run_after", "cells.stopped", "cells.let_through", "cells.would_not_stop"):
        assert function in source


# ---- the same notebooks, both graders --------------------------------------------------------


PARITY = {
    "a cell raises": ("raise RuntimeError('plotting failed')",),
    "a training cell never ends": ("while True:\n    pass",),
    "a part deleted": ("del combine_heads",),
    # A plotting cell as on Colab: a package neither grader has, and an exported magic.
    "a missing package and a magic": ("get_ipython().run_line_magic('matplotlib', 'inline')\n"
                                      "import grader_test_absent_plots.pyplot as plt\ndel combine_heads\n"
                                      "plt.plot([1, 2])",),
    # As the handout says to: graded, it does nothing (and is no grader internals).
    "a check() cell": ('from grader import check\ncheck("split_heads")',),
    "a part broken": (mutant(REFERENCE, "x.view(batch, length, num_heads, d_k).transpose(1, 2)",
                             "x.view(batch, num_heads, length, d_k)"),),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", PARITY)
def test_both_graders_load_a_notebook_alike_and_pass_the_same_parts(tmp_path, case):
    sources = PARITY[case] if case == "a part broken" else (REFERENCE, *PARITY[case], "print('after')")
    notebook = tmp_path / "mha.ipynb"
    notebook.write_text(notebook_text(*sources))
    limits = replace(TEST_LIMITS, cell_timeout_s=1.0)
    real = grade(ASSIGNMENT_03, notebook, device="cpu", limits=limits)
    before = set(descendants(os.getpid()))
    public = grade_public(ASSIGNMENT_03, notebook, limits=limits)
    assert public.status == real.status == "graded"
    assert public.notes == real.notes
    assert real.flags == []
    failed = [{part.id for part in report.parts if any(test.outcome != "passed" for test in part.tests)}
              for report in (real, public)]
    # The public tests are a subset: what fails them fails the real tests too (where the real
    # grader charges a part's failure to the part it uses, the part's tests still fail); a
    # loading problem fails the same parts in both.
    assert failed[1] <= failed[0]
    if case != "a part broken":
        assert failed[1] == failed[0]
    assert set(descendants(os.getpid())) <= before  # nothing of the public tests' run is left behind


# ---- check() in a notebook ------------------------------------------------------------------


def namespace_of(source: str) -> dict:
    namespace: dict = {"__name__": "__main__"}
    exec(compile(source, "notebook", "exec"), namespace)
    return namespace


def test_check_runs_one_parts_public_tests_on_the_current_definitions(monkeypatch):
    monkeypatch.chdir(ASSIGNMENT_03)
    namespace = namespace_of(REFERENCE)
    report = check_namespace(namespace, "split_heads")
    assert [(part.id, part.score, part.max_score) for part in report.parts] == [("split_heads", 3, 3)]
    namespace["split_heads"] = lambda x, num_heads: x.view(x.shape[0], num_heads, x.shape[1], -1)  # redefined
    report = check_namespace(namespace, "split_heads")
    assert report.parts[0].score < report.parts[0].max_score
    # The mistake in the test's own words, without pytest's "assert ... where" tensor dump.
    named = [test.message for test in report.parts[0].tests if "mistake:" in (test.message or "")]
    assert named == ["AssertionError: mistake: heads split with `view` and no `transpose` "
                     "(features of different heads mixed)"]
    assert {part.id for part in check_namespace(namespace).parts} == {"split_heads", "combine_heads",
                                                                      "MultiHeadAttention"}


def test_check_of_a_part_not_defined_yet_says_so(monkeypatch):
    monkeypatch.chdir(ASSIGNMENT_03)
    report = check_namespace({"__name__": "__main__"}, "combine_heads")
    assert report.parts[0].score == 0 and report.parts[0].hint == "not found: the submission does not define it"


def test_check_names_the_parts_when_given_an_unknown_one_and_finds_its_assignment(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="its parts: split_heads, combine_heads, MultiHeadAttention"):
        check_namespace({}, "multihead", ASSIGNMENT_03)
    nested = tmp_path / "03" / "scratch"
    shutil.copytree(ASSIGNMENT_03, tmp_path / "03")
    nested.mkdir()
    assert find_assignment(nested).id == "03"
    with pytest.raises(AssignmentError, match="in no assignment's folder"):
        find_assignment(tmp_path)


@pytest.mark.slow
def test_check_runs_inside_a_jupyter_kernel(tmp_path):
    nbclient = pytest.importorskip("nbclient")
    from nbformat.v4 import new_code_cell, new_notebook

    folder = shutil.copytree(ASSIGNMENT_03, tmp_path / "03")
    notebook = new_notebook(cells=[new_code_cell(REFERENCE),
                                   new_code_cell("from grader import check\ncheck('split_heads')"),
                                   new_code_cell("del combine_heads\ncheck('combine_heads')")])
    nbclient.NotebookClient(notebook, timeout=120, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}}).execute()
    shown = ["".join(output.get("data", {}).get("text/plain", "") for output in cell.outputs)
             for cell in notebook.cells[1:]]
    assert "split_heads" in shown[0] and "3 / 3" in shown[0]
    assert "not found" in shown[1] and "0 / 1" in shown[1]
    assert json.dumps([cell.outputs for cell in notebook.cells]).count('"output_type": "error"') == 0
