"""A submission's source as the trusted side reads it: parsed, never run.

:class:`ParsedSource` parses every cell of a :class:`~grader.core.ingest.Program` once and
answers what the source checks (:mod:`grader.source_check`, :mod:`grader.source.evasion`) ask:
the top-level statements in program order (a notebook's cells share one namespace), the
module-level names each one reads, binds and changes, what an imported name stands for
(``F`` -> ``torch.nn.functional``), and where a line is, as the student numbers it.

Python's scoping decides what a name means: a name assigned in a function is local to it
unless declared ``global``, a class body does not enclose the functions in it, and a
comprehension has a scope of its own. Every walk is iterative, since a file that parses
can still nest too deeply for recursion.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field

from grader.core.ingest import Program

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_Scope = ast.AST | None  # None: the module, which every cell shares


@dataclass
class Statement:
    """One top-level statement of a cell and the module-level names it involves, wherever
    in it they occur (in the functions it defines too)."""

    node: ast.stmt
    cell: int  # index into Program.cells
    loads: dict[str, int] = field(default_factory=dict)  # name read -> first line it is read on
    annotation_loads: set[str] = field(default_factory=set)  # names read in annotations only, maybe never evaluated
    binds: set[str] = field(default_factory=set)  # names it binds (directly, or via `global` in a function)
    assigns: set[str] = field(default_factory=set)  # of those, bound by assignment (data, not def/class/import)
    mutates: set[str] = field(default_factory=set)  # names whose attributes or items it assigns (`torch.exp = f`)
    uses: set[str] = field(default_factory=set)  # names it reads other than by calling them (`table.update(...)`)
    star_imports: list[str] = field(default_factory=list)  # modules of its `from M import *`
    imports: list[tuple[str, int]] = field(default_factory=list)  # (dotted path imported, line)


class ParsedSource:
    def __init__(self, program: Program):
        self.program = program
        self.statements: list[Statement] = []
        self.unreadable: list[int] = []  # cells too deeply nested to parse here (ingest parsed them higher up the stack)
        self.aliases: dict[str, set[str]] = {}  # imported name -> the dotted paths it may stand for
        self.inert_strings: set[int] = set()  # ids of strings that are statements (docstrings): they do nothing
        self._module_level: set[int] = set()  # ids of the Name nodes that read or bind a module-level name
        self._called: set[int] = set()  # ids of the nodes called (a Call's func)
        self._attribute_bases: set[int] = set()  # ids of the nodes that are an Attribute's value
        self._membership_tested: set[int] = set()  # ids of the nodes right of `in` / `not in`
        for index, cell in enumerate(program.cells):
            try:
                with warnings.catch_warnings():  # "invalid escape sequence": the student's business
                    warnings.simplefilter("ignore")
                    tree = ast.parse(cell.source)
            except (RecursionError, MemoryError):  # the parser's depth limit counts the caller's frames
                self.unreadable.append(index)
                continue
            self.statements.extend(_Analysis(self, node, index).statement for node in tree.body)
        self.bound = {name for statement in self.statements for name in statement.binds}
        self.star_imports = [module for statement in self.statements for module in statement.star_imports]

    def where(self, cell: int, line: int) -> str:
        label = self.program.cells[cell].label
        return f"{label}, line {line}" if self.program.kind == "notebook" else f"{label} line {line}"

    def is_module_level(self, name: ast.Name) -> bool:
        return id(name) in self._module_level

    def is_called(self, node: ast.AST) -> bool:
        return id(node) in self._called

    def is_attribute_base(self, node: ast.AST) -> bool:
        return id(node) in self._attribute_bases

    def is_membership_tested(self, node: ast.AST) -> bool:
        """``node`` is only looked in: ``"google.colab" in sys.modules``."""
        return id(node) in self._membership_tested

    def written(self, node: ast.AST) -> str:
        """A Name or Attribute chain as the student wrote it: ``F.softmax``, ``(...).softmax``."""
        root, attributes = chain(node)
        return ".".join([root.id if root is not None else "(...)", *attributes])

    def meanings(self, node: ast.AST) -> set[str]:
        """The dotted paths a Name or Attribute chain may stand for, imports resolved
        (``F.softmax`` -> ``torch.nn.functional.softmax``), and as written."""
        root, attributes = chain(node)
        if root is None:
            return set()
        bases = {root.id} | self.aliases.get(root.id, set())
        return {".".join([base, *attributes]) for base in bases}


def chain(node: ast.AST) -> tuple[ast.Name | None, list[str]]:
    """``a.b.c`` -> (the Name ``a``, ["b", "c"]); the root is None when the chain starts at
    an expression (``f(x).softmax``)."""
    attributes = []
    while isinstance(node, ast.Attribute):
        attributes.append(node.attr)
        node = node.value
    return (node if isinstance(node, ast.Name) else None), attributes[::-1]


def _arguments(arguments: ast.arguments) -> list[ast.arg]:
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs,
            *(a for a in (arguments.vararg, arguments.kwarg) if a is not None)]


def target_root(node: ast.AST) -> ast.Name | None:
    """The Name an assignment target hangs from: ``a`` for ``a.b[0].c``."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node if isinstance(node, ast.Name) else None


class _Analysis:
    """Scopes and names of one top-level statement: bindings are collected first (a name
    assigned anywhere in a function is local to all of it), then every read is resolved."""

    def __init__(self, source: ParsedSource, node: ast.stmt, cell: int):
        self.source = source
        self.statement = Statement(node, cell)
        self.bound: dict[_Scope, set[str]] = {}
        self.declared_global: dict[_Scope, set[str]] = {}
        self.enclosing: dict[_Scope, _Scope] = {}
        self.bindings: list[tuple[str, _Scope, bool]] = []  # (name, scope, by assignment)
        self.reads: list[tuple[ast.Name, _Scope]] = []
        self.in_annotations: set[int] = set()  # ids of the nodes inside annotations
        self.mutation_roots: list[tuple[ast.Name, _Scope]] = []
        self._collect(node)
        self._resolve()

    # ---- phase 1: walk every node in the scope it is evaluated in ---------------------------

    def _collect(self, top: ast.stmt) -> None:
        pending: list[tuple[ast.AST, _Scope]] = [(top, None)]
        while pending:
            node, scope = pending.pop()
            self._visit(node, scope)
            pending.extend(reversed(list(self._children(node, scope))))

    def _visit(self, node: ast.AST, scope: _Scope) -> None:
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                self.reads.append((node, scope))
            else:
                self._bind(node.id, scope, by_assignment=True)
        elif isinstance(node, ast.arg):
            self._bind(node.arg, scope)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            self._bind(node.name, scope)
            self.enclosing[node] = scope
            if not isinstance(node, ast.ClassDef):
                self._note_annotations([*(a.annotation for a in _arguments(node.args)), node.returns])
        elif isinstance(node, (ast.Lambda, *_COMPREHENSIONS)):
            self.enclosing[node] = scope
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            self._import(node, scope)
        elif isinstance(node, ast.Global):
            self.declared_global.setdefault(scope, set()).update(node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self._bind(node.name, scope, by_assignment=True)
        elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
            self._bind(node.name, scope, by_assignment=True)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            self._bind(node.rest, scope, by_assignment=True)
        elif isinstance(node, ast.Call):
            self.source._called.add(id(node.func))
            if isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr") and node.args:
                root = target_root(node.args[0])  # setattr(torch, ...) changes torch
                if root is not None:
                    self.mutation_roots.append((root, scope))
        elif isinstance(node, ast.Attribute):
            self.source._attribute_bases.add(id(node.value))
        elif isinstance(node, ast.Compare):
            self.source._membership_tested.update(
                id(right) for op, right in zip(node.ops, node.comparators) if isinstance(op, (ast.In, ast.NotIn)))
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            self.source.inert_strings.add(id(node.value))
        if isinstance(node, ast.AnnAssign):
            self._note_annotations([node.annotation])
        if isinstance(node, (ast.Attribute, ast.Subscript)) and not isinstance(node.ctx, ast.Load):
            root = target_root(node)
            if root is not None:
                self.mutation_roots.append((root, scope))

    def _children(self, node: ast.AST, scope: _Scope) -> Iterator[tuple[ast.AST, _Scope]]:
        """Each child of ``node`` with the scope it is evaluated in: a function's defaults,
        annotations and decorators outside it, its body inside; a comprehension's first
        iterable outside it, the rest inside."""
        if isinstance(node, _FUNCTIONS):
            every = _arguments(node.args)
            outside = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
            if isinstance(node, ast.Lambda):
                body = [node.body]
            else:
                outside += [*node.decorator_list, *(a.annotation for a in every if a.annotation is not None),
                            *([node.returns] if node.returns is not None else [])]
                body = node.body
            yield from ((child, scope) for child in outside)
            yield from ((child, node) for child in [*every, *body])
        elif isinstance(node, ast.ClassDef):
            yield from ((child, scope) for child in [*node.decorator_list, *node.bases, *node.keywords])
            yield from ((child, node) for child in node.body)
        elif isinstance(node, _COMPREHENSIONS):
            first, *rest = node.generators
            yield first.iter, scope
            inside = [first.target, *first.ifs]
            for generator in rest:
                inside += [generator.target, generator.iter, *generator.ifs]
            inside += [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]
            yield from ((child, node) for child in inside)
        elif isinstance(node, ast.NamedExpr):
            # `(y := ...)` in a comprehension binds y in the function around it.
            yield node.value, scope
            yield node.target, self._outside_comprehensions(scope)
        elif isinstance(node, ast.arg):
            return  # its annotation was yielded with the function, outside it
        else:
            yield from ((child, scope) for child in ast.iter_child_nodes(node))

    def _note_annotations(self, annotations) -> None:
        """Annotations may never be evaluated (``from __future__ import annotations``)."""
        for annotation in annotations:
            if annotation is not None:
                self.in_annotations.update(id(node) for node in ast.walk(annotation))

    def _outside_comprehensions(self, scope: _Scope) -> _Scope:
        while isinstance(scope, _COMPREHENSIONS):
            scope = self.enclosing[scope]
        return scope

    def _bind(self, name: str, scope: _Scope, *, by_assignment: bool = False) -> None:
        self.bound.setdefault(scope, set()).add(name)
        self.bindings.append((name, scope, by_assignment))

    def _import(self, node: ast.Import | ast.ImportFrom, scope: _Scope) -> None:
        module = "." * getattr(node, "level", 0) + (node.module or "") if isinstance(node, ast.ImportFrom) else ""
        for alias in node.names:
            if alias.name == "*":
                self.statement.star_imports.append(module)
                continue
            path = f"{module}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
            self.statement.imports.append((path, node.lineno))
            if alias.asname is not None or isinstance(node, ast.ImportFrom):
                name, meaning = alias.asname or alias.name, path
            else:  # `import a.b.c` binds a
                name = meaning = alias.name.split(".")[0]
            self.source.aliases.setdefault(name, set()).add(meaning)
            self._bind(name, scope)

    # ---- phase 2: which names are the module's ----------------------------------------

    def _module_level(self, name: str, scope: _Scope) -> bool:
        if scope is None or name in self.declared_global.get(scope, ()):
            return True
        if name in self.bound.get(scope, ()):
            return False
        scope = self.enclosing[scope]
        while scope is not None:
            if not isinstance(scope, ast.ClassDef):  # class bodies do not enclose
                if name in self.declared_global.get(scope, ()):
                    return True
                if name in self.bound.get(scope, ()):
                    return False
            scope = self.enclosing[scope]
        return True

    def _resolve(self) -> None:
        statement = self.statement
        for name, scope, by_assignment in self.bindings:
            if scope is None or name in self.declared_global.get(scope, ()):
                statement.binds.add(name)
                if by_assignment:
                    statement.assigns.add(name)
        for node, scope in self.reads:
            if self._module_level(node.id, scope):
                self.source._module_level.add(id(node))
                if id(node) in self.in_annotations:
                    statement.annotation_loads.add(node.id)
                    continue
                statement.loads.setdefault(node.id, node.lineno)
                if not self.source.is_called(node):
                    statement.uses.add(node.id)
        for node, scope in self.mutation_roots:
            if self._module_level(node.id, scope):
                statement.mutates.add(node.id)
