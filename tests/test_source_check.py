"""The source check of a "do not call X" rule (grader.source_check) and the report's flags
(grader.flags): what they find, and what they must not (a student's own helper named like
a built-in, a comment or docstring, a comparison cell in a notebook)."""

from __future__ import annotations

import ast

import pytest

from grader.flags import MAX_FLAGS, bounded, program_flags
from grader.ingest import Cell, Program
from grader.report import Flag
from grader.source_check import FORBIDDEN_BUILTIN, UNDEFINED_NAME, check_function
from reference import as_submission
from reference.hidden.a01.variants import FORBIDDEN_SOFTMAX_OPS

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


def check(program: Program):
    return check_function(program, "softmax", FORBIDDEN_SOFTMAX_OPS)


def with_body(body: str, before: str = "", after: str = "") -> Program:
    return module(f"import torch\n{before}\ndef softmax(x, dim=-1):\n{body}\n{after}")


# ---- what must pass ---------------------------------------------------------------------

CLEAN = {
    "the reference": as_submission("attention"),
    "an honest softmax": HONEST,
    "a helper of the student's own named soft_max": HONEST.replace("    row_max = x.amax", "    return soft_max(x, dim)\n"
                                                                   "    row_max = x.amax") + (
        "\n\ndef soft_max(x, dim):\n    e = torch.exp(x - x.max(dim, keepdim=True).values)\n"
        "    return e / e.sum(dim, keepdim=True)\n"),
    "comments and docstrings that mention softmax": HONEST.replace(
        "    row_max", "    # like torch.softmax(x, dim), but by hand\n    '''softmax'''\n    row_max"),
    "torch settings and a model's eval()": "import re\n" + HONEST.replace(
        "    row_max", "    torch.backends.cudnn.deterministic = True\n    re.compile('x')\n    row_max") + (
        "\n\nclass Net(torch.nn.Module):\n    def check(self):\n        self.eval()\n"),
    "a star import from math": "from math import *\n" + HONEST,
    "annotations never evaluated": "from __future__ import annotations\n" + HONEST.replace(
        "def softmax(x, dim=-1):", "def softmax(x: Tensor, dim: int = -1) -> Tensor:"),
    "a local variable named like a forbidden alias": HONEST.replace(
        "    row_max", "    softmin = 1.0\n    row_max") + "\n\nsoftmin = torch.nn.functional.softmin\n",
}


@pytest.mark.parametrize("name", CLEAN)
def test_honest_code_passes(name):
    result = check(module(CLEAN[name]))
    assert result.forbidden == () and result.unverifiable == (), result


def test_a_notebook_cell_that_compares_with_the_built_in_is_not_reached():
    result = check(notebook(HONEST, "x = torch.randn(2, 3)\nprint(softmax(x), torch.softmax(x, -1))\n"
                                    "assert torch.allclose(softmax(x), torch.nn.functional.softmax(x, -1))"))
    assert result.forbidden == () and result.unverifiable == ()


def test_other_parts_may_use_what_softmax_may_not():
    source = HONEST + "\n\nclass Attention(torch.nn.Module):\n    def forward(self, x):\n" \
                      "        return getattr(self, 'W_' + 'q')(x).softmax(-1)\n"
    result = check(module(source))
    assert result.forbidden == () and result.unverifiable == ()


# ---- what must be found -------------------------------------------------------------------

FORBIDDEN = {
    "torch.softmax": (with_body("    return torch.softmax(x, dim)"), "softmax", "attention.py line 4"),
    "a method": (with_body("    return x.softmax(dim)"), "softmax", "attention.py line 4"),
    "nn.Softmax": (with_body("    return nn.Softmax(dim)(x)", before="from torch import nn"), "Softmax",
                   "attention.py line 4"),
    "softmin of -x": (with_body("    return torch.nn.functional.softmin(-x, dim)"), "softmin", "attention.py line 4"),
    "the softmax inside attention": (
        with_body("    return F.scaled_dot_product_attention(x, x, x)", before="import torch.nn.functional as F"),
        "scaled_dot_product_attention", "attention.py line 4"),
    "an alias": (with_body("    return sm(x, dim)", before="sm = torch.softmax"), "softmax", "attention.py line 2"),
    "an import under another name": (
        with_body("    return normalise(x, dim)", before="from torch.nn.functional import softmax as normalise"),
        "softmax", "attention.py line 2"),
    "getattr with a constant name": (with_body("    return getattr(torch, 'softmax')(x, dim)"), "softmax",
                                     "attention.py line 4"),
    "a helper": (with_body("    return helper(x, dim)", after="def helper(x, dim):\n    return x.log_softmax(dim).exp()"),
                 "log_softmax", "attention.py line 6"),
    "a default argument": (module("import torch\ndef softmax(x, dim=-1, f=torch.special.softmax):\n    return f(x, dim)"),
                           "softmax", "attention.py line 2"),
    "a decorator": (module("import torch\ndef swap(f):\n    return torch.softmax\n@swap\ndef softmax(x, dim=-1):\n"
                           "    return x"), "softmax", "attention.py line 3"),
    "an attribute set on a class from a function": (
        with_body("    return Tools.normalise(x, dim)",
                  before="class Tools:\n    pass\ndef setup():\n    Tools.normalise = torch.softmax\nsetup()"),
        "softmax", "attention.py line 5"),
    "a list filled by a method call": (
        with_body("    return OPS[0](x, dim)", before="OPS = []\ndef setup():\n    OPS.append(torch.softmax)"),
        "softmax", "attention.py line 4"),
    "a global set in a function": (
        with_body("    return helper(x, dim)", before="def setup():\n    global helper\n    helper = torch.softmax"),
        "softmax", "attention.py line 4"),
    "a star import from torch": (with_body("    return torch.exp(x)", before="from torch.nn.functional import *"),
                                 "softmax", "attention.py line 2"),
}


@pytest.mark.parametrize("name", FORBIDDEN)
def test_a_reachable_forbidden_built_in_is_found_where_it_is(name):
    program, forbidden_name, where = FORBIDDEN[name]
    result = check(program)
    assert forbidden_name in result.names, result
    assert all(flag.kind == FORBIDDEN_BUILTIN for flag in result.forbidden)
    assert where in {flag.where for flag in result.forbidden}, result.forbidden


def test_every_definition_of_a_helper_counts_not_only_the_one_before_softmax():
    helper = "def normalise(e, dim):\n    return e / e.sum(dim, keepdim=True)\n"
    sneaky = "def normalise(e, dim):\n    return torch.nn.functional.softmin(-e.log(), dim)\n"
    softmax = "def softmax(x, dim=-1):\n    return normalise(torch.exp(x), dim)\n"
    result = check(notebook("import torch\n" + helper, softmax, "print(softmax(torch.ones(3)))", sneaky))
    assert result.names == ("softmin",)
    assert [flag.where for flag in result.forbidden] == ["cell 5, line 2"]


def test_a_name_that_is_local_in_a_function_is_not_the_modules():
    # `helper` inside `inner` is local; the comprehension's `helper` is the module's.
    source = with_body("    def inner():\n        helper = 1\n        return helper\n    return [helper(v) for v in x]",
                       after="def helper(v):\n    return v.softmax(0)")
    assert check(source).names == ("softmax",)
    shadowed = with_body("    helper = torch.exp\n    return helper(x)", after="def helper(v):\n    return v.softmax(0)")
    assert check(shadowed).forbidden == ()


UNVERIFIABLE = {
    "getattr with a computed name": (with_body("    return getattr(torch, 'soft' + 'max')(x, dim)"),
                                     "computed-attribute"),
    "getattr passed around": (with_body("    g = getattr\n    return g(torch, name)(x)", before="name = 'x'"),
                              "computed-attribute"),
    "globals()": (with_body("    return globals()['sm'](x, dim)"), "namespace-lookup"),
    "a module's __dict__": (with_body("    return torch.__dict__['soft' 'max'](x, dim)"), "namespace-lookup"),
    "eval": (with_body("    return eval('torch.' + 'softmax')(x, dim)"), "dynamic-code"),
    "a name defined where the grader cannot see": (
        with_body("    return helper(x, dim)", before="import builtins"), UNDEFINED_NAME),
    "torch patched": (with_body("    return torch.exp(x)", before="torch.exp = lambda x: x"), "monkeypatch"),
    # Tampering counts wherever it is: these never appear in softmax's own code.
    "DisableTorchFunction at module level": (
        module(HONEST + "\ntorch._C.DisableTorchFunction().__enter__()\n"), "torch-internals"),
    "a TorchFunctionMode in an unrelated class": (
        module(HONEST + "\nfrom torch.overrides import TorchFunctionMode\n\n\nclass Swap(TorchFunctionMode):\n    pass\n"),
        "torch-internals"),
    "the grader's modules": (module(HONEST + "\nimport grader.sandbox._child\n"), "grader-internals"),
    "sys.modules": (module(HONEST + "\nimport sys\nchild = sys.modules['grader.sandbox._child']\n"), "module-table"),
    "the object graph": (module(HONEST + "\nimport gc\nobjects = gc.get_objects()\n"), "object-graph"),
    "__subclasses__": (module(HONEST + "\nclasses = object.__subclasses__()\n"), "object-graph"),
    "frames": (module(HONEST + "\nimport sys\ndef peek():\n    return sys._getframe(1).f_back.f_globals\n"),
               "frame-inspection"),
    "__import__": (module(HONEST + "\nmod = __import__('gra' + 'der')\n"), "dynamic-import"),
    "ctypes": (module(HONEST + "\nimport ctypes\n"), "native-code"),
}


@pytest.mark.parametrize("name", UNVERIFIABLE)
def test_code_that_hides_what_it_calls_cannot_be_checked(name):
    program, kind = UNVERIFIABLE[name]
    result = check(program)
    assert kind in {flag.kind for flag in result.unverifiable}, result


def test_hiding_code_that_softmax_cannot_reach_is_only_flagged():
    program = module(HONEST + "\n\ndef describe(model, name):\n    return getattr(model, name), globals()\n")
    assert check(program).unverifiable == ()
    assert {flag.kind for flag in program_flags(program)} == {"computed-attribute", "namespace-lookup"}


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
    "the grader's package": "import grader\ngrader.check('split_heads')\n",
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
    assert check(program).unverifiable == (Flag("unreadable", "cell 3, line 1",
                                                 "the code is nested too deeply for the grader to read"),)
    assert [flag.kind for flag in program_flags(program)] == ["unreadable"]
