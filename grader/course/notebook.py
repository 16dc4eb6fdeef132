"""The handout notebook is generated from the stub module, never edited by hand.

The module docstring becomes the first markdown cell, the imports one code cell (then one that
imports ``check``), and each top-level definition a markdown heading followed by its code cell;
a part's code cell is followed by ``check("Part")``, which runs that part's public tests in the
notebook (:mod:`grader.student.notebook`), and the notebook ends with ``check()`` for every part.
When the notebook is graded, by either grader, those cells do nothing
(:func:`grader.student.check_function`). Cell ids are derived from the position so the output is
byte-for-byte reproducible (and checkable in CI).
"""

from __future__ import annotations

import ast

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.core.assignment import Assignment


def _segments(source: str) -> list[tuple[ast.stmt, str]]:
    """Each top-level statement with its source, comments above it included."""
    tree = ast.parse(source)
    lines = source.splitlines()
    starts = [min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])]) for node in tree.body]
    segments = []
    for index, node in enumerate(tree.body):
        begin = starts[index] - 1
        while begin > 0 and lines[begin - 1].startswith("#"):
            begin -= 1
        segments.append((node, "\n".join(lines[begin:node.end_lineno]).strip("\n")))
    return segments


CHECK_IMPORT = "from grader import check  # check(\"Part\") runs that part's public tests; graded, it does nothing"


def build_notebook(assignment: Assignment) -> nbformat.NotebookNode:
    source = assignment.module_path.read_text(encoding="utf-8")
    cells = []
    imports: list[str] = []
    checked = set(assignment.parts) - set(assignment.parts_without_stub)
    check_imported = False
    for node, text in _segments(source):
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) and not cells:
            cells.append(new_markdown_cell(ast.literal_eval(text)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(text)
        else:
            if imports:
                cells.append(new_code_cell("\n".join(imports)))
                imports = []
            if not check_imported:
                cells.append(new_code_cell(CHECK_IMPORT))
                check_imported = True
            name = getattr(node, "name", None)
            if name:
                cells.append(new_markdown_cell(f"### `{name}`"))
            cells.append(new_code_cell(text))
            if name in checked:
                cells.append(new_code_cell(f'check("{name}")'))
    cells += [
        new_markdown_cell("## Check your work\n\nEvery part's public tests, on the definitions above:"),
        new_code_cell("check()"),
        new_markdown_cell(
            "These are the public tests only: the hidden tests, and your grade, run on submission. To test the "
            "notebook as the grader loads it (every cell, in order, from a fresh start), save it and run in a "
            f"terminal:\n\n    grade assignments/{assignment.id} --submission "
            f"assignments/{assignment.id}/{assignment.notebook}"),
    ]
    for number, cell in enumerate(cells):
        cell["id"] = f"cell-{number:02d}"
    notebook = new_notebook(cells=cells, metadata={
        "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
        "language_info": {"name": "python"},
    })
    return notebook


def render_notebook(assignment: Assignment) -> str:
    return nbformat.writes(build_notebook(assignment)) + "\n"


def notebook_is_current(assignment: Assignment) -> bool:
    path = assignment.notebook_path
    return path.is_file() and path.read_text(encoding="utf-8") == render_notebook(assignment)


def write_notebook(assignment: Assignment) -> None:
    assignment.notebook_path.write_text(render_notebook(assignment), encoding="utf-8")
