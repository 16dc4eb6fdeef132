"""Which files of a package some code needs, read from its import statements (never run).

``grade release`` ships the grader modules the student's grader imports
(:func:`grader.course.release.student_modules`); ``grade export gradescope`` bundles the reference
modules the assignment's hidden suite imports (:mod:`grader.export.gradescope_zip`).
"""

from __future__ import annotations

import ast
from pathlib import Path


def imported_names(path: Path) -> set[str]:
    """Every dotted name an import statement anywhere in the Python file at ``path`` binds or
    loads: ``from a.b import c`` gives ``a.b`` and ``a.b.c`` (c may be a module or a name).
    Absolute imports only, as the grader and the reference write them."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def module_files(package_dir: Path, dotted: str) -> list[Path]:
    """The files importing ``dotted`` runs: each sub-package's ``__init__.py``, then the module.
    Nothing for the top package, or for a name that is not a module (``grader.engine.api.grade``)."""
    files = []
    directory = package_dir
    for part in dotted.split(".")[1:]:
        if (directory / part / "__init__.py").is_file():
            directory = directory / part
            files.append(directory / "__init__.py")
            continue
        if (directory / f"{part}.py").is_file():
            files.append(directory / f"{part}.py")
        break
    return files
