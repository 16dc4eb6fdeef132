"""The report's flags (grader.source.flags): what reading the source finds for the instructor, and
what it must not flag (a student's own helper named like a built-in, a comment or docstring,
the handout's check() however it is imported). A flag never costs points: 01's "no built-in
softmax" rule is decided from what runs (tests/test_forbidden_builtin.py)."""

from __future__ import annotations

import ast

import pytest

from grader.core.ingest import Cell, Program
from grader.core.report import MAX_FLAGS, Flag, bounded
from grader.source.flags import program_flags
from reference import as_submission

HONEST = '''import torch


def softmax(x, dim=-1):
    """A stable softmax, written without torch.softmax."""
    row_max = x.amax(dim=dim, keepdim=True)
    exp = torch.exp(x - row_max)
    return exp / exp.sum(dim=dim, keepdim=True)
'''


def module(source: str) -> Program:
    return Program("module", (Cell(source, "attention.py"),))


def notebook(*cells: str) -> Program:
    return Program("notebook", tuple(Cell(source, f"cell {number}") for number, source in enumerate(cells, start=2)))


# ---- the report's flags -------------------------------------------------------------------

def test_flags_say_where_as_the_student_numbers_it():
    flags = program_flags(notebook("import torch", "x = 1\ntorch._C.DisableTorchFunction().__enter__()"))
    assert flags == [Flag("torch-internals", "cell 3, line 2", "torch._C.DisableTorchFunction")]
    flags = program_flags(module("import os\n\nos.kill(1, 9)\nopen('/proc/1/mem')\n"))
    assert [(flag.kind, flag.where) for flag in flags] == [("signal", "attention.py line 3"),
                                                            ("proc-path", "attention.py line 4")]


FLAGGED = {
    "torch._C": "import torch\nwith torch._C.DisableTorchFunction():\n    pass\n",
    "torch.ops": "import torch\nop = torch.ops.aten._softmax\n",
    "an import from torch._C": "from torch._C import DisableTorchFunction as Off\nOff()\n",
    "the grader": "from grader.sandbox import _child\n",
    "the grader's engine, beside check": "from grader import check, grade\n",
    "the grader's package, beyond check": "import grader\ngrader.cells.run_cells([])\n",
    "computed getattr": "def get(obj, name):\n    return getattr(obj, name)\n",
    "setattr on torch": "import torch\nsetattr(torch, 'exp', print)\n",
    "a patched Tensor method": "import torch\ntorch.Tensor.__eq__ = lambda a, b: True\n",
    "importlib": "import importlib\nimportlib.import_module('os')\n",
    "exec": "exec('x = 1')\n",
    "vars": "print(vars())\n",
    "frame globals": "def f(frame):\n    return frame.f_globals\n",
    "subprocess": "import subprocess\nsubprocess.run(['ls'])\n",
    "signals": "import signal\nsignal.alarm(1)\n",
    "a path under /proc": "text = open('/proc/self/environ').read()\n",
}


@pytest.mark.parametrize("name", FLAGGED)
def test_evasive_constructs_are_flagged_anywhere(name):
    assert program_flags(module(FLAGGED[name])), name


NOT_FLAGGED = {
    "the reference": as_submission("attention"),
    "a model's eval() and re.compile": "import re\nmodel.eval()\npattern = re.compile('a')\n",
    "getattr with a constant name": "value = getattr(model, 'weight', None)\n",
    "a setting of torch": "import torch\ntorch.backends.cudnn.benchmark = False\n",
    "the student's own eval": "def eval(x):\n    return x\neval(1)\n",
    "torch.__version__": "import torch\nprint(torch.__version__)\n",
    "a docstring about /proc": '"""Nothing in /proc/ is read."""\n',
    "pytest in a notebook": "import pytest\nwith pytest.raises(ValueError):\n    int('x')\n",
    "a look in sys.modules": "import sys\nIN_COLAB = 'google.colab' in sys.modules\n",
    # The handout tells students to: a graded notebook's check() does nothing.
    "check() in a notebook": "from grader import check\ncheck('MultiHeadAttention')\n",
    "check() through the package": "import grader\ngrader.check('MultiHeadAttention')\n",
    "check() through an alias of the package": "import grader as g\ng.check('softmax')\n",
    "the word softmax as a profiler label": "import torch\nwith torch.profiler.record_function('softmax'):\n    pass\n",
}


@pytest.mark.parametrize("name", NOT_FLAGGED)
def test_ordinary_code_is_not_flagged(name):
    assert program_flags(module(NOT_FLAGGED[name])) == []


def test_flags_are_bounded_in_count_and_length():
    flags = [Flag("dynamic-code", f"cell {n}, line 1", "x" * 1000) for n in range(50)]
    kept = bounded(flags + flags)
    assert len(kept) == MAX_FLAGS + 1 and kept[-1] == Flag("more", "", f"{50 - MAX_FLAGS} more not listed")
    assert all(len(flag.detail) <= 200 for flag in kept)


def test_deep_nesting_is_read_without_recursion():
    # Deeper than Python's recursion limit, and still parseable (so gradable).
    deep = "x = " + "(" * 90 + "1" + ")" * 90 + "\n" + "y = 1" + " + 1" * 2000 + "\n"
    assert program_flags(module(deep + "exec('')\n")) == [Flag("dynamic-code", "attention.py line 3", "exec")]


def test_a_cell_too_deep_to_parse_here_cannot_be_checked(monkeypatch):
    # ast.parse's depth limit counts the caller's frames: ingest, higher up the stack, may
    # have parsed what a hidden suite's fixture cannot.
    real_parse = ast.parse

    def parse(source, *args, **kwargs):
        if "deep" in source:
            raise RecursionError("maximum recursion depth exceeded during ast construction")
        return real_parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", parse)
    program = notebook(HONEST, "deep = 1")
    assert program_flags(program) == [Flag("unreadable", "cell 3, line 1",
                                           "the code is nested too deeply for the grader to read")]
