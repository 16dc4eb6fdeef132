"""An assignment's "do not call X" rule, checked on the submission's source in the trusted
process.

A hidden suite can watch what the student's code calls (``student.watching``), but that
watch runs in the student's process, which the student's code controls: it can be
switched off, and it never sees a softmax inside another built-in. :func:`check_function`
reads the source instead. It follows a function as Python would resolve it: its body,
then the module-level definitions, assignments and imports of every module-level name
that code uses, transitively, so aliases (``sm = torch.softmax``, ``from
torch.nn.functional import softmax as s``) and helpers are followed. Every definition of
a name counts, not only the last one: in a notebook the last definition wins, but which
one ran last depends on which cells raised.

In that code it reports references to forbidden names and whatever hides what is called
(:mod:`grader.evasion`, ``HIDES`` and ``TAMPERS``), as well as names used there that the
submission never defines. Tampering with the grader's machinery counts wherever it is.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from grader.evasion import BUILTIN_NAMES, Effect, constructs, unreadable
from grader.ingest import Program
from grader.parsed_source import ParsedSource, Statement, chain
from grader.report import Flag

FORBIDDEN_BUILTIN = "forbidden-builtin"
UNDEFINED_NAME = "undefined-name"
_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class SourceCheck:
    forbidden: tuple[Flag, ...]  # forbidden names the function's code can reach
    unverifiable: tuple[Flag, ...]  # what keeps the grader from knowing what that code calls
    names: tuple[str, ...]  # the forbidden names among them, e.g. ("softmin",)

    @property
    def flags(self) -> tuple[Flag, ...]:
        return self.forbidden + self.unverifiable


def check_function(program: Program, function: str, forbidden: Collection[str]) -> SourceCheck:
    """What the code reachable from the module-level ``function`` references of
    ``forbidden`` (names as the last part of an attribute chain, an import or a string:
    ``torch.softmax``, ``from torch.nn.functional import softmin``, ``"softmax"``), and what
    makes its calls impossible to know from the source."""
    source = ParsedSource(program)
    reached, names = _reachable(source, function)
    found_forbidden: list[tuple[int, int, Flag]] = []
    found_names: list[str] = []
    unverifiable: list[tuple[int, int, Flag]] = [(-1, 0, construct.flag) for construct in unreadable(source)]
    for index, statement in enumerate(source.statements):
        for construct in constructs(source, statement):
            if construct.effect is Effect.TAMPERS or (construct.effect is Effect.HIDES and index in reached):
                unverifiable.append((index, construct.line, construct.flag))
        # A star import from torch defines every name torch has: it reaches whatever reads one.
        for module in (module for module in statement.star_imports if module.split(".")[0] == "torch"):
            for name in sorted(names & set(forbidden)):
                found_names.append(name)
                found_forbidden.append((index, statement.node.lineno, Flag(
                    FORBIDDEN_BUILTIN, source.where(statement.cell, statement.node.lineno),
                    f"{function} reaches from {module} import *, which may define {name}")))
        if index not in reached:
            continue
        for node, written, name in _forbidden_references(source, statement, forbidden):
            found_names.append(name)
            found_forbidden.append((index, node.lineno, Flag(
                FORBIDDEN_BUILTIN, source.where(statement.cell, node.lineno), f"{function} reaches {written}")))
        for name, line in statement.loads.items():
            if name not in source.bound and name not in BUILTIN_NAMES and not source.star_imports:
                unverifiable.append((index, line, Flag(
                    UNDEFINED_NAME, source.where(statement.cell, line),
                    f"{function} reaches {name}, which the submission never defines")))
    return SourceCheck(_in_order(found_forbidden), _in_order(unverifiable), tuple(dict.fromkeys(found_names)))


def _reachable(source: ParsedSource, function: str) -> tuple[set[int], set[str]]:
    """Indices of the statements ``function`` can reach, and the module-level names read on
    the way. A name's definitions: the statements that bind it or assign its attributes or
    items, and, for a name bound by assignment (a list, a dict, an object), every statement
    that uses it other than by calling it, since a method call can change it."""
    assigned = {name for statement in source.statements for name in statement.assigns}
    definitions: dict[str, list[int]] = {}
    for index, statement in enumerate(source.statements):
        for name in statement.binds | statement.mutates | (statement.uses & assigned):
            definitions.setdefault(name, []).append(index)
    reached: set[int] = set()
    names, pending = {function}, [function]
    while pending:
        for index in definitions.get(pending.pop(), ()):
            if index in reached:
                continue
            reached.add(index)
            statement = source.statements[index]
            new = (statement.loads.keys() | statement.annotation_loads) - names
            names |= new
            pending.extend(new)
    return reached, names


def _forbidden_references(source: ParsedSource, statement: Statement,
                          forbidden: Collection[str]) -> Iterator[tuple[ast.AST, str, str]]:
    """(node, as written, the forbidden name) for each reference to a forbidden name. A
    bare name is the student's own (their ``softmax``) or an import's, reported there."""
    for node in ast.walk(statement.node):
        if isinstance(node, ast.Attribute) and not source.is_attribute_base(node):
            for attribute in (attribute for attribute in chain(node)[1] if attribute in forbidden):
                yield node, source.written(node), attribute
                break
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                for part in (part for part in alias.name.split(".") if part in forbidden):
                    module = f"from {'.' * node.level}{node.module or ''} " if isinstance(node, ast.ImportFrom) else ""
                    yield node, f"{module}import {alias.name}", part
                    break
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in source.inert_strings:
            # getattr(torch, "softmax"), operator.attrgetter("nn.functional.softmax")
            text = node.value.strip()
            if _DOTTED_NAME.fullmatch(text) and text.rsplit(".", 1)[-1] in forbidden:
                yield node, repr(node.value), text.rsplit(".", 1)[-1]


def _in_order(found: list[tuple[int, int, Flag]]) -> tuple[Flag, ...]:
    ordered = sorted(found, key=lambda item: item[:2])
    return tuple(dict.fromkeys(flag for _, _, flag in ordered))
