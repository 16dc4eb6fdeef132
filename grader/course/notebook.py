"""The handout notebook is generated from the stub module, never edited by hand.

The module docstring becomes the first markdown cell, the imports one code cell, and each
top-level definition a markdown heading followed by its code cell. Cell ids are derived
from the position so the output is byte-for-byte reproducible (and checkable in CI).
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


def build_notebook(assignment: Assignment) -> nbformat.NotebookNode:
    source = assignment.module_path.read_text(encoding="utf-8")
    cells = []
    imports: list[str] = []
    for node, text in _segments(source):
        if isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) and not cells:
            cells.append(new_markdown_cell(ast.literal_eval(text)))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(text)
        else:
            if imports:
                cells.append(new_code_cell("\n".join(imports)))
                imports = []
            name = getattr(node, "name", None)
            if name:
                cells.append(new_markdown_cell(f"### `{name}`"))
            cells.append(new_code_cell(text))
    cells.append(new_markdown_cell(
        "## Check your work\n\nSave the notebook, then run in a terminal:\n\n"
        f"    grade assignments/{assignment.id} --submission assignments/{assignment.id}/{assignment.notebook}"
    ))
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
