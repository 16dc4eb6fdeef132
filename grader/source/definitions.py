"""The part of a grader-owned source that defines some of its names.

The grader's stock parts are answers: a student process given one must not find beside it the
answer to another part, least of all to the part under test (a stock GPT next to the stock MLP
that stands in for a student's ``nn.Sequential``). So what is sent is only what the stock names
need: :func:`source_defining`.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Sequence

from grader.core.ingest import Cell, Program
from grader.source.parsed import ParsedSource, Statement


def source_defining(source: str, names: Sequence[str]) -> str:
    """What of ``source`` (a module the grader owns) defines ``names``: its imports, and the
    top-level statements that bind those names or what they use, transitively; nothing else."""
    statements = _statements(source)
    keep: set[int] = set()
    pending, reached = list(names), set()
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        reached.add(name)
        for index, statement in enumerate(statements):
            if name in statement.binds and index not in keep:
                keep.add(index)
                pending.extend((*statement.loads, *statement.annotation_loads))
    kept = [statement.node for index, statement in enumerate(statements)
            if index in keep or isinstance(statement.node, (ast.Import, ast.ImportFrom))]
    return ast.unparse(ast.Module(body=kept, type_ignores=[]))


@functools.lru_cache(maxsize=16)
def _statements(source: str) -> list[Statement]:
    """``source``'s top-level statements and the module-level names each binds and reads, parsed
    once per process for all the submissions it grades."""
    return ParsedSource(Program("module", (Cell(source, "stock"),))).statements
