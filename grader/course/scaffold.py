"""``grade new-assignment NN --module NAME``: the skeleton of a new assignment, every file in its home.

    assignments/NN/            assignment.toml (one placeholder part), README.md, NAME.py (the
                               stubs), NAME.ipynb (generated), test_NAME.py (public tests)
    reference/NAME.py          the reference solution
    reference/hidden/aNN/      __init__.py, suite.toml (names the reference module), conftest.py,
                               variants.py, mutants.py (the project's tests' data), a test per part

The skeleton passes the course-wide tests as it stands: its stub scores 0, "not implemented",
and its reference full marks. docs/writing-an-assignment.md walks through filling it in.
Nothing is ever overwritten.
"""

from __future__ import annotations

import json
import keyword
import re
from pathlib import Path
from string import Template

from grader.core.assignment import Assignment
from grader.course.notebook import write_notebook
from grader.course.pages import README_BEGIN, README_END, Course, write_pages

# The one part a new assignment starts with; its author replaces it with the contract's parts.
PLACEHOLDER = "first_part"

ASSIGNMENT_TOML = '''\
# The contract of assignment $id, its single definition: the stub module, the notebook, this
# folder's README table, the reference and the hidden suite are generated from it or checked
# against it, and docs/course.md renders it (python -m grader.course).
id = "$id"
title = $title_toml
module = "$module.py"  # the notebook, $module.ipynb, is generated from it
# What the grader must recognise and name when a part's output matches it.
mistakes = []

[[parts]]
signature = "$part(x)"
contract = "a placeholder, to replace with the first part of the contract: returns `2 * x`, of the same shape"
'''

README = f'''\
# Assignment $id: $title

Implement the parts below in `$module.py` (or in `$module.ipynb`, the same stubs as a notebook).

## What to implement

{README_BEGIN}
{README_END}

Conventions:
- Tensors are float32 on whatever device the input is on: never hard-code a device.
- Bad arguments raise `ValueError` with a message, never a bare `assert`.

## Checking your work

```bash
pytest assignments/$id     # public tests: shapes and a few sanity checks
grade assignments/$id      # the graded result, with a hint per failing part
grade assignments/$id -v   # every failing check, and what your code printed
```
'''

STUB = '''\
"""# Assignment $id: $title

Implement the parts below, following the contract in `README.md` of this folder.
Conventions: tensors are float32 on whatever device the input is on (never hard-code
`"cuda"` or `"cpu"`); bad arguments raise `ValueError` with a message (never a bare `assert`).

Check your work with `pytest assignments/$id` (public tests) and
`grade assignments/$id` (the grader, with hints).
"""

import torch


def $part(x: torch.Tensor) -> torch.Tensor:
    """A placeholder: twice x, of the same shape."""
    raise NotImplementedError("$part: see assignments/$id/README.md")
'''

PUBLIC_TESTS = '''\
"""Public tests for assignment $id: shapes and sanity checks you can run yourself.

    pytest assignments/$id

They are a subset in spirit of what the grader checks; passing them does not mean full
marks. Run `grade assignments/$id` for the graded result and hints.
"""

import torch

from $module import $part


def test_${part}_shape():
    assert $part(torch.randn(2, 3)).shape == (2, 3)
'''

REFERENCE = '''\
"""Assignment $id: $title. The reference solution (the contract: docs/course.md)."""

import torch


def $part(x: torch.Tensor) -> torch.Tensor:
    return 2 * x  # (..., d)
'''

SUITE_INIT = '''\
"""Hidden suite of assignment $id: $title."""
'''

SUITE_TOML = '''\
# The reference module that solves this assignment: reference/$module.py. Named here only, on the
# reference side (never in the handout, which students get); the project's tests grade it.
reference = "$module"
'''

CONFTEST = '''\
"""Dimensions, reference modules and this suite's own fixtures for the $id suite.

The grading plugin serves `student`, `device`, `make_input` and `input_scale` to every
suite (see grader.suite): override `input_scale` here if the values need larger inputs.
"""
'''

VARIANTS = '''\
"""What common mistakes in assignment $id produce.

For each mistake the contract names, a functional version of the part whose keyword
arguments switch on one mistake each (defaults equal to the reference), and the hint as a
module constant: docs/mistakes.md lists them (python -m reference.hidden.mistake_table).
"""
'''

MUTANTS = '''\
"""Assignment $id's named mistakes, each made in the reference: data for tests/test_mistakes.py.

A mutant is the reference submission with one edit (``old`` -> ``new``, unique in it), so it
differs from a correct solution in exactly the way its name says, and none is a hand-kept
copy. Each part it lists loses exactly the points written beside it, what an instructor would
take for the mistake, with a hint containing that text (None: any hint); every other part
keeps full marks. The grader never collects this module (it is no test_*.py).
"""

from __future__ import annotations

MUTANTS: dict[str, tuple[tuple[str, str], dict[str, tuple[float, str | None]]]] = {}

# A part the submission does not define (renamed): it scores 0, "not found", and these parts,
# which do not use it, keep full marks.
MISSING_PART: tuple[str, tuple[str, ...]] = ("$part", ())

# Each mistake the contract (assignments/$id/assignment.toml) says the grader must name,
# and the mutant above that makes it.
CONTRACT_MISTAKES: dict[str, str] = {}
'''

HIDDEN_TEST = '''\
import pytest

from grader.suite import expect_close, expect_tensor
from reference.$module import $part

pytestmark = pytest.mark.part("$part")


def test_${part}_shape(student, make_input):
    got = student.call("$part", make_input(2, 3, seed=0))
    expect_tensor("$part(x: (2, 3))", got, shape=(2, 3))


def test_${part}_values(student, make_input):
    x = make_input(2, 3, seed=1)
    # A float32 formula: 1e-5 covers CPU and CUDA alike.
    expect_close("$part(x)", student.call("$part", x), $part(x), atol=1e-5)
'''


class ScaffoldError(Exception):
    """The skeleton cannot be written: the message says why."""


def new_assignment(root: Path, assignment_id: str, module: str, title: str | None = None) -> list[Path]:
    """Write assignment ``assignment_id``'s skeleton into the repository at ``root``, with the
    stubs in ``module``.py; regenerate the course pages. Returns the files written."""
    if not re.fullmatch(r"\d\d", assignment_id):
        raise ScaffoldError(f"the assignment id is two digits, as in assignments/03 (got {assignment_id!r})")
    if not module.isidentifier() or keyword.iskeyword(module) or not module.islower():
        raise ScaffoldError(f"the module name is a lowercase Python identifier, as in mha (got {module!r})")
    if not (root / "assignments" / "course.toml").is_file():
        # The reference installed without its repository (not editable): nowhere to write a handout.
        raise ScaffoldError(f"{root} is not the course repository (it has no assignments/course.toml); "
                            "install the grader from a checkout with pip install -e .")
    handout, suite = root / "assignments" / assignment_id, root / "reference" / "hidden" / f"a{assignment_id}"
    title = title or module
    # A JSON string is a TOML basic string: quotes and backslashes in the title stay text.
    fields = {"id": assignment_id, "module": module, "title": title, "title_toml": json.dumps(title),
              "part": PLACEHOLDER}
    files = {
        handout / "assignment.toml": ASSIGNMENT_TOML,
        handout / "README.md": README,
        handout / f"{module}.py": STUB,
        handout / f"test_{module}.py": PUBLIC_TESTS,
        root / "reference" / f"{module}.py": REFERENCE,
        suite / "__init__.py": SUITE_INIT,
        suite / "suite.toml": SUITE_TOML,
        suite / "conftest.py": CONFTEST,
        suite / "variants.py": VARIANTS,
        suite / "mutants.py": MUTANTS,
        suite / f"test_{PLACEHOLDER}.py": HIDDEN_TEST,
    }
    # Checked before anything is written: a refused scaffold leaves no half of itself behind.
    taken = [path for path in (handout, suite, root / "reference" / f"{module}.py") if path.exists()]
    if taken:
        raise ScaffoldError(f"{', '.join(map(str, taken))} already exists: a new assignment overwrites nothing")
    for path, template in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(template).substitute(fields), encoding="utf-8")
    assignment = Assignment.load(handout)
    write_notebook(assignment)
    pages = write_pages(Course.load(root))
    return [*files, assignment.notebook_path, *(page for page in pages if page not in files)]
