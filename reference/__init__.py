"""Reference solutions for the course, one module per idea (the contract: docs/course.md).

Later assignments import earlier ones (``multihead`` uses ``attention``) so each idea is
written once. :func:`as_submission` inlines those imports to produce the single file a
student would hand in, which the project's tests and benchmarks grade.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


def module_for(assignment_id: str) -> str:
    """The reference module that solves assignment ``assignment_id`` (its handout is
    assignments/<id>/), as its hidden suite's suite.toml names it: "multihead" for 03."""
    spec = PACKAGE_DIR / "hidden" / f"a{assignment_id}" / "suite.toml"
    return tomllib.loads(spec.read_text(encoding="utf-8"))["reference"]


def _module_source(name: str) -> str:
    return (PACKAGE_DIR / f"{name}.py").read_text(encoding="utf-8")


def _reference_imports(tree: ast.Module) -> list[ast.ImportFrom]:
    return [
        node
        for node in tree.body
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("reference.")
    ]


def as_submission(module: str) -> str:
    """Return ``reference/<module>.py`` as one self-contained source file.

    Each ``from reference.<dep> import ...`` is replaced by the dependency's own code
    (recursively, each dependency once, dependencies first).
    """
    ordered: list[str] = []

    def visit(name: str) -> None:
        if name in ordered:
            return
        for node in _reference_imports(ast.parse(_module_source(name))):
            visit(node.module.removeprefix("reference."))
        ordered.append(name)

    visit(module)
    chunks = []
    for name in ordered:
        source = _module_source(name)
        lines = source.splitlines()
        for node in sorted(_reference_imports(ast.parse(source)), key=lambda n: -n.lineno):
            del lines[node.lineno - 1 : node.end_lineno]
        chunks.append(f"# ---- reference/{name}.py ----\n" + "\n".join(lines))
    return "\n\n".join(chunks) + "\n"
