"""Packages a submission imports that the grading machine does not have.

Students write on their own machines and on Colab, where matplotlib, tqdm, seaborn or
google.colab are at hand. A leftover ``import matplotlib.pyplot as plt`` at the top of a module,
or in a notebook's first cell beside ``import torch``, would end that cell where it stands, and
every part defined after it would be lost, for code that is right. So both graders run a cell
that raised ModuleNotFoundError for a top-level package no finder here has once more, with a
stand-in for that package: the import succeeds, and any use of the stand-in (a call, iteration,
indexing, arithmetic) raises ModuleNotFoundError naming the package, in the part that uses it.

Only an import that ended a cell gets a stand-in: code that catches ImportError itself
(``try: import google.colab``) still finds the package missing, and a name the grader hides
(its reference, another submission) is refused, not stood in for. A stand-in lives in the
student's process only: nothing in it reaches the trusted side but what a call returns.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from collections.abc import Callable
from typing import NoReturn

MAX_PER_CELL = 8  # packages stood in for in one cell: each costs the cell another run


def run_standing_in(run: Callable[[], None], allowed: int = MAX_PER_CELL) -> tuple[list[str], BaseException | None]:
    """Run a cell (``run``), again each time it ends on an import of a package that is not
    installed here, with a stand-in for it, at most ``allowed`` times. Returns the packages
    stood in for, in order, and what the last run raised (None: it ran to its end). The cell
    runs from its start each time: its statements before the import ran twice, as after a
    rerun in Jupyter."""
    stood_in: list[str] = []
    while True:
        try:
            run()
        except BaseException as exc:  # noqa: BLE001 - SystemExit and KeyboardInterrupt end a cell too
            package = _not_installed(exc)
            if package is None or len(stood_in) >= allowed:
                return stood_in, exc
            if _FINDER not in sys.meta_path:  # the last finder: anything installed comes first
                sys.meta_path.append(_FINDER)
            _FINDER.packages.add(package)
            stood_in.append(package)
        else:
            return stood_in, None


def valid_package_name(name: object) -> bool:
    """Whether ``name`` could be what :func:`run_standing_in` returns: a module's dotted name."""
    return (type(name) is str and 0 < len(name) <= 100 and name.isascii()
            and all(part.isidentifier() for part in name.split(".")))


def _not_installed(exc: BaseException) -> str | None:
    """The package ``exc`` says is missing, if no finder here has it and no stand-in stands for
    it yet: a top-level one, or a portion of a namespace package that other distributions
    share (``google.colab`` beside protobuf's ``google``)."""
    name = exc.name if type(exc) is ModuleNotFoundError else None
    if not valid_package_name(name) or _FINDER.stands_for(name):
        return None
    parent, _, _ = name.rpartition(".")
    if parent and not _is_namespace_package(sys.modules.get(parent)):
        return None  # a module an installed package lacks (torch.not_a_module): a mistake of the code's
    try:
        found = importlib.util.find_spec(name)
    except (ImportError, ValueError):  # a name the grader refuses (its reference): never stood in for
        return None
    return name if found is None else None


def _is_namespace_package(module: types.ModuleType | None) -> bool:
    return module is not None and getattr(module, "__file__", None) is None and hasattr(module, "__path__")


def _fail(name: str) -> NoReturn:
    package = next((package for package in _FINDER.packages if name == package or name.startswith(package + ".")),
                   name.split(".")[0])
    raise ModuleNotFoundError(f"No module named {package!r} where your code is graded: importing it was let "
                              f"through, using it ({name}) is not", name=package)


class _Missing:
    """What a stand-in package's attributes are: more of it, and an error at any use."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        object.__setattr__(self, "_name", name)

    def __getattr__(self, attribute: str) -> _Missing:
        if attribute.startswith("__"):  # copy, pickle and inspect probe for these: none here
            raise AttributeError(attribute)
        return _Missing(f"{self._name}.{attribute}")

    def __repr__(self) -> str:
        return f"<{self._name}: not installed where this code is graded>"

    def _use(self, *args: object, **kwargs: object) -> NoReturn:
        _fail(object.__getattribute__(self, "_name"))

    __call__ = __iter__ = __len__ = __bool__ = __getitem__ = __setitem__ = __delitem__ = _use
    __setattr__ = __contains__ = __enter__ = __exit__ = __index__ = __int__ = __float__ = _use
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _use
    __matmul__ = __rmatmul__ = __pow__ = __rpow__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _use


class _MissingModule(types.ModuleType):
    """A stand-in package (and each of its submodules): importable, its attributes :class:`_Missing`."""

    def __init__(self, name: str):
        super().__init__(name)
        self.__path__: list[str] = []  # a package, so that `import matplotlib.pyplot` finds its submodule

    def __getattr__(self, attribute: str) -> _Missing:
        if attribute.startswith("__"):
            raise AttributeError(attribute)
        return _Missing(f"{self.__name__}.{attribute}")

    def __repr__(self) -> str:
        return f"<module {self.__name__!r}: not installed where this code is graded>"


class _StandInFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """The last finder: the stood-in packages and their submodules."""

    def __init__(self) -> None:
        self.packages: set[str] = set()

    def stands_for(self, name: str) -> bool:
        return any(name == package or name.startswith(package + ".") for package in self.packages)

    def find_spec(self, name: str, path: object = None, target: object = None) -> importlib.machinery.ModuleSpec | None:
        return importlib.util.spec_from_loader(name, self, is_package=True) if self.stands_for(name) else None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        return _MissingModule(spec.name)

    def exec_module(self, module: types.ModuleType) -> None:
        pass


_FINDER = _StandInFinder()
