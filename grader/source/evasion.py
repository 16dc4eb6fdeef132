"""Constructs in a submission's source that look evasive, and what each can do.

A submission for this course calls torch functions by name. Code that reaches a function
without naming it, reaches into torch's or the grader's machinery, or changes what a
name means for everyone else is what an evasion is made of, so the grader reports each
one it finds (the report's ``flags``), wherever it is. What follows from one for a part
that forbids something (assignment 01's built-in softmax) depends on its effect:

- ``TAMPERS``: it can switch off the checks made in the student's process, or run code
  the grader cannot read (``torch._C``, a TorchFunctionMode, the grader's modules,
  ``sys.modules``, ``gc.get_objects``, frames, ctypes, ``eval``, ``__import__``). It
  works at a distance, so it counts wherever it is.
- ``HIDES``: it hides which function a call reaches (``getattr`` with a computed name,
  ``globals()``, ``__dict__``, an assignment to an attribute of torch, a subprocess). It
  counts where the part's code can reach it.
- ``NOTE``: worth a look, no more (signals, paths under ``/proc``).

A cell nested too deeply for the grader to parse is ``TAMPERS`` too: unread, unchecked.

Names are matched as the code spells them and as its imports resolve them
(``from torch import _C as C`` makes ``C.x`` mean ``torch._C.x``).
"""

from __future__ import annotations

import ast
import builtins
import functools
import re
from dataclasses import dataclass
from enum import Enum

from grader.core.report import Flag
from grader.source.parsed import ParsedSource, Statement, chain


class Effect(Enum):
    TAMPERS = "tampers"
    HIDES = "hides"
    NOTE = "note"


TORCH_INTERNALS = "torch-internals"
GRADER_INTERNALS = "grader-internals"
MODULE_TABLE = "module-table"
OBJECT_GRAPH = "object-graph"
FRAME_INSPECTION = "frame-inspection"
NATIVE_CODE = "native-code"
DYNAMIC_IMPORT = "dynamic-import"
DYNAMIC_CODE = "dynamic-code"
COMPUTED_ATTRIBUTE = "computed-attribute"
NAMESPACE_LOOKUP = "namespace-lookup"
MONKEYPATCH = "monkeypatch"
PROCESS = "process"
SIGNAL = "signal"
PROC_PATH = "proc-path"
UNREADABLE = "unreadable"

EFFECTS = {
    TORCH_INTERNALS: Effect.TAMPERS, GRADER_INTERNALS: Effect.TAMPERS, MODULE_TABLE: Effect.TAMPERS,
    OBJECT_GRAPH: Effect.TAMPERS, FRAME_INSPECTION: Effect.TAMPERS, NATIVE_CODE: Effect.TAMPERS,
    DYNAMIC_IMPORT: Effect.TAMPERS, DYNAMIC_CODE: Effect.TAMPERS, UNREADABLE: Effect.TAMPERS,
    COMPUTED_ATTRIBUTE: Effect.HIDES, NAMESPACE_LOOKUP: Effect.HIDES, MONKEYPATCH: Effect.HIDES, PROCESS: Effect.HIDES,
    SIGNAL: Effect.NOTE, PROC_PATH: Effect.NOTE,
}

# Dotted paths, matched as prefixes at a dot; a trailing * matches any name that starts so.
PATHS = {
    "torch.ops": TORCH_INTERNALS, "torch.overrides": TORCH_INTERNALS, "torch.library": TORCH_INTERNALS,
    # pytest is not here: it runs in the trusted process, so patching its copy changes nothing.
    "grader": GRADER_INTERNALS, "reference": GRADER_INTERNALS,
    "sys.modules": MODULE_TABLE,
    "gc.get_objects": OBJECT_GRAPH, "gc.get_referrers": OBJECT_GRAPH, "gc.get_referents": OBJECT_GRAPH,
    "sys._getframe": FRAME_INSPECTION, "sys._current_frames": FRAME_INSPECTION, "sys.settrace": FRAME_INSPECTION,
    "sys.setprofile": FRAME_INSPECTION, "threading.settrace": FRAME_INSPECTION,
    "threading.setprofile": FRAME_INSPECTION, "inspect.currentframe": FRAME_INSPECTION,
    "inspect.stack": FRAME_INSPECTION, "inspect.trace": FRAME_INSPECTION, "inspect.getouterframes": FRAME_INSPECTION,
    "inspect.getinnerframes": FRAME_INSPECTION,
    "ctypes": NATIVE_CODE, "_ctypes": NATIVE_CODE, "cffi": NATIVE_CODE,
    "importlib": DYNAMIC_IMPORT, "imp": DYNAMIC_IMPORT, "runpy": DYNAMIC_IMPORT, "zipimport": DYNAMIC_IMPORT,
    "marshal": DYNAMIC_CODE, "types.FunctionType": DYNAMIC_CODE, "types.CodeType": DYNAMIC_CODE,
    "builtins": NAMESPACE_LOOKUP, "inspect.getmembers": NAMESPACE_LOOKUP,
    "subprocess": PROCESS, "multiprocessing": PROCESS, "pty": PROCESS, "os.system": PROCESS, "os.popen": PROCESS,
    "os.fork": PROCESS, "os.forkpty": PROCESS, "os.exec*": PROCESS, "os.spawn*": PROCESS,
    "os.posix_spawn*": PROCESS,
    "signal": SIGNAL, "os.kill": SIGNAL, "os.killpg": SIGNAL,
}
# The grader's face to students (the handout tells them to call it in their notebook): a graded
# notebook's check() does nothing (grader.core.cells.check_while_graded), so it reaches nothing of the grader's.
# Importing the package is how `grader.check(...)` is spelled: what is then used of it is checked.
STUDENT_FACING = frozenset({"grader.check"})
STUDENT_FACING_PACKAGE = "grader"
# Attribute names that mean one thing whatever they hang from.
ATTRIBUTES = {
    "DisableTorchFunction": TORCH_INTERNALS, "DisableTorchFunctionSubclass": TORCH_INTERNALS,
    "TorchFunctionMode": TORCH_INTERNALS, "TorchDispatchMode": TORCH_INTERNALS,
    "__torch_function__": TORCH_INTERNALS, "__torch_dispatch__": TORCH_INTERNALS,
    "f_back": FRAME_INSPECTION, "f_globals": FRAME_INSPECTION, "f_locals": FRAME_INSPECTION,
    "f_builtins": FRAME_INSPECTION, "tb_frame": FRAME_INSPECTION, "gi_frame": FRAME_INSPECTION,
    "cr_frame": FRAME_INSPECTION, "ag_frame": FRAME_INSPECTION,
    "__subclasses__": OBJECT_GRAPH,
    "__code__": DYNAMIC_CODE, "__closure__": DYNAMIC_CODE,
    "__dict__": NAMESPACE_LOOKUP, "__globals__": NAMESPACE_LOOKUP, "__builtins__": NAMESPACE_LOOKUP,
    "__getattribute__": COMPUTED_ATTRIBUTE,
    # IPython's exec (an exported notebook's %%time cells are expanded when the file is read).
    "run_cell_magic": DYNAMIC_CODE,
}
# nn.Module's methods that say what a module holds: the grader asks a module through them, so a
# module that defines its own may answer what it is not (a plain attribute listed as a buffer).
MODULE_INTROSPECTION = frozenset({"named_buffers", "named_parameters", "named_modules", "register_buffer",
                                  "register_parameter", "state_dict", "load_state_dict", "_apply"})
# Python's built-in functions that hide what runs (getattr and friends: only with a computed name).
BUILTINS = {
    "eval": DYNAMIC_CODE, "exec": DYNAMIC_CODE, "compile": DYNAMIC_CODE, "__import__": DYNAMIC_IMPORT,
    "globals": NAMESPACE_LOOKUP, "vars": NAMESPACE_LOOKUP, "locals": NAMESPACE_LOOKUP,
    "__builtins__": NAMESPACE_LOOKUP,
}
NAME_ARGUMENT = {"getattr": 1, "setattr": 1, "delattr": 1, "operator.attrgetter": 0, "operator.methodcaller": 0}
BUILTIN_NAMES = frozenset(dir(builtins)) | {"__name__", "__doc__", "__package__", "__loader__", "__spec__",
                                            "__builtins__", "__annotations__"}
# torch's settings are attributes to assign (torch.backends.cudnn.deterministic = True), not patches.
_SETTINGS = ("torch.backends",)
_PRIVATE = re.compile(r"^_[^_]")  # _C, _ops, _masked_softmax: not dunders
_PROC = re.compile(r"(?<![\w.])/proc(/|$)")


@dataclass(frozen=True)
class Construct:
    effect: Effect
    line: int
    flag: Flag


def constructs(source: ParsedSource, statement: Statement) -> list[Construct]:
    """The evasive-looking constructs in one top-level statement, in source order, one per
    kind and line."""
    found: dict[tuple[str, int], str] = {}

    def add(kind: str, node: ast.AST, detail: str) -> None:
        found.setdefault((kind, node.lineno), detail)

    for path, line in statement.imports:
        for kind in _path_kinds(path) if path != STUDENT_FACING_PACKAGE else ():
            found.setdefault((kind, line), f"import {path}")
    for module in statement.star_imports:
        for kind in _path_kinds(module):
            found.setdefault((kind, statement.node.lineno), f"from {module} import *")
    for node in ast.walk(statement.node):
        if isinstance(node, ast.Attribute) and not source.is_attribute_base(node):
            _chain(source, node, add)
        elif isinstance(node, ast.Name) and not source.is_attribute_base(node):
            _name(source, node, add)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ATTRIBUTES:
            add(ATTRIBUTES[node.name], node, f"def {node.name}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in MODULE_INTROSPECTION:
            add(TORCH_INTERNALS, node, f"def {node.name} (nn.Module's own, which the grader asks a module)")
        elif isinstance(node, ast.Call):
            _call(source, node, add)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in source.inert_strings \
                and _PROC.search(node.value):
            add(PROC_PATH, node, f"the path {node.value[:60]!r}")
    return [Construct(EFFECTS[kind], line, Flag(kind, source.where(statement.cell, line), detail))
            for (kind, line), detail in sorted(found.items(), key=lambda item: item[0][1])]


def unreadable(source: ParsedSource) -> list[Construct]:
    """Cells the grader could not parse here: what it cannot read, it cannot check."""
    return [Construct(Effect.TAMPERS, 1, Flag(UNREADABLE, source.where(cell, 1),
                                              "the code is nested too deeply for the grader to read"))
            for cell in source.unreadable]


def is_torch_object(path: str) -> bool:
    """``path`` names torch or something in it that a solution calls (not a setting)."""
    return (path == "torch" or path.startswith("torch.")) and not path.startswith(_SETTINGS)


@functools.lru_cache(maxsize=4096)  # a name imported under many aliases is read with each of them at every use
def _path_kinds(path: str) -> tuple[str, ...]:
    """The kinds ``path`` (a dotted name, imports resolved) is one of."""
    if path in STUDENT_FACING:
        return ()
    kinds = [kind for pattern, kind in PATHS.items()
             if (path.startswith(pattern[:-1]) if pattern.endswith("*")
                 else path == pattern or path.startswith(pattern + "."))]
    parts = path.split(".")
    if parts[0] == "torch" and any(_PRIVATE.match(part) for part in parts[1:]):
        kinds.append(TORCH_INTERNALS)
    return tuple(kinds)


def _used_kinds(source: ParsedSource, node: ast.AST, path: str) -> list[str]:
    """The kinds of ``path`` as ``node`` uses it: only looking in sys.modules
    (``"google.colab" in sys.modules``) reaches no module."""
    return [kind for kind in _path_kinds(path) if not (kind == MODULE_TABLE and source.is_membership_tested(node))]


def _chain(source: ParsedSource, node: ast.Attribute, add) -> None:
    written = source.written(node)
    root, attributes = chain(node)
    if root is not None and not source.is_module_level(root):
        meanings = {written}  # a local variable: no import stands behind it
    else:
        meanings = source.meanings(node)
    for path in meanings:
        for kind in _used_kinds(source, node, path):
            add(kind, node, written)
    for attribute in attributes:
        if attribute in ATTRIBUTES:
            add(ATTRIBUTES[attribute], node, written)
    if not isinstance(node.ctx, ast.Load) and any(is_torch_object(path.rsplit(".", 1)[0]) for path in meanings):
        add(MONKEYPATCH, node, f"assignment to {written}")


def _name(source: ParsedSource, node: ast.Name, add) -> None:
    if not source.is_module_level(node):
        return
    for path in source.aliases.get(node.id, ()):
        for kind in _used_kinds(source, node, path):
            add(kind, node, node.id)
    if node.id in source.bound or node.id not in BUILTIN_NAMES:
        return  # the student's own name, or one no builtin stands behind
    if node.id in BUILTINS:
        add(BUILTINS[node.id], node, node.id)
    elif node.id in NAME_ARGUMENT and not source.is_called(node):
        add(COMPUTED_ATTRIBUTE, node, f"{node.id}, passed around instead of called")


def _call(source: ParsedSource, node: ast.Call, add) -> None:
    """getattr(obj, name) and friends: fine with a constant name, hidden with a computed one;
    setattr on torch is a patch whatever the name."""
    function = node.func
    if isinstance(function, ast.Attribute):
        names = source.meanings(function)
    elif isinstance(function, ast.Name) and source.is_module_level(function):
        names = source.aliases.get(function.id, set()) | ({function.id} if function.id not in source.bound else set())
    else:
        names = set()
    for name in names & NAME_ARGUMENT.keys():
        position = NAME_ARGUMENT[name]
        argument = node.args[position] if len(node.args) > position else None
        if not (isinstance(argument, ast.Constant) and isinstance(argument.value, str)):
            add(COMPUTED_ATTRIBUTE, node, f"{name.rsplit('.', 1)[-1]} with a computed name")
        elif name in ("setattr", "delattr") and node.args and any(
                is_torch_object(path) for path in source.meanings(node.args[0])):
            add(MONKEYPATCH, node, f"{name}({source.written(node.args[0])}, {argument.value!r}, ...)")
