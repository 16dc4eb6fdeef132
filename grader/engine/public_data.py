"""``grade public-data``: the data files the public tests compare with (:mod:`grader.core.public_cases`).

A public test module that reads cases (``CASES = Cases(__file__)``) is run here as plain
functions, on code of the course's only, never a student's:

- on the reference (:func:`reference.as_submission`): each case's inputs and parameters are
  made, numbers ``k / 1024`` drawn from a generator seeded by their name (so the same bits on
  every machine), and the output the test expects is recorded as the right one;
- on the mutant of the hidden suite (``reference/hidden/aNN/mutants.py``, its
  ``CONTRACT_MISTAKES``) that makes each mistake a case names: its output on the same inputs,
  recorded as that mistake's.

Each module's cases then go to ``test_x.safetensors`` beside ``test_x.py``. A mistake a case
names must give an output the test tells apart from the right one and from the other named
mistakes', or generation fails and says so: a hint the data gives is never a guess.

    grade public-data assignments/03 [--check]

The release refuses stale data (:func:`stale_files`), as it refuses a stale notebook.
"""

from __future__ import annotations

import importlib.util
import inspect
import math
import sys
import types
import zlib
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save

from grader.core.assignment import Assignment
from grader.core.public_cases import (
    ATOL,
    DATA_SUFFIX,
    EXPECTED,
    INPUT,
    MISTAKE,
    PARAMETER,
    RTOL,
    Case,
    Cases,
    key,
    same,
)
from reference import as_submission, module_for

LATTICE = 1024  # inputs and parameters are k / LATTICE (times a power of two): exact in float32
# Outputs are the reference's arithmetic, whose last bits may differ between machines (their
# vector units): a file is current when its outputs are this close to a fresh run's.
CURRENT_RTOL, CURRENT_ATOL = 1e-6, 1e-7


class PublicDataError(Exception):
    """The public tests' data cannot be made: the message says which test or mutant to fix."""


def data_path(test_module: Path) -> Path:
    return test_module.with_suffix(DATA_SUFFIX)


def public_data(assignment: Assignment) -> dict[Path, dict[str, torch.Tensor]]:
    """The data file each public test module that reads cases needs, by its path."""
    reference = as_submission(module_for(assignment.id))
    mutants = import_module(f"reference.hidden.a{assignment.id}.mutants")
    made = {}
    for test_module in sorted(assignment.directory.glob("test_*.py")):
        tensors = _module_data(assignment, test_module, reference, mutants)
        if tensors:
            made[data_path(test_module)] = tensors
    return made


def stale_files(assignment: Assignment) -> list[Path]:
    """The data files that are missing, out of date, or beside no test module that reads cases."""
    made = public_data(assignment)
    return [path for path, tensors in made.items() if not _holds(path, tensors)] + _unread(assignment, made)


def write_public_data(assignment: Assignment) -> list[Path]:
    """Write the data files that are stale and remove those no test reads; returns their paths.
    A current file is left as it is, whatever machine made it."""
    made = public_data(assignment)
    changed = []
    for path, tensors in made.items():
        if not _holds(path, tensors):
            path.write_bytes(save(tensors))  # keys sorted, no metadata: the same bytes for the same tensors
            changed.append(path)
    for unread in _unread(assignment, made):
        unread.unlink()
        changed.append(unread)
    return changed


def _unread(assignment: Assignment, made: dict[Path, dict[str, torch.Tensor]]) -> list[Path]:
    return sorted(set(assignment.directory.glob(f"test_*{DATA_SUFFIX}")) - made.keys())


def _holds(path: Path, fresh: dict[str, torch.Tensor]) -> bool:
    """Whether the file at ``path`` holds ``fresh``: its inputs and parameters bit for bit, its
    outputs but for the last bits a machine may change."""
    if not path.is_file():
        return False
    stored = load_file(path)
    if stored.keys() != fresh.keys():
        return False
    for name, tensor in fresh.items():
        old = stored[name]
        if old.dtype != tensor.dtype or old.shape != tensor.shape:
            return False
        role = name.split("/")[1]
        if role in (INPUT, PARAMETER) or not tensor.is_floating_point():
            if not torch.equal(old, tensor):
                return False
        elif not torch.allclose(old, tensor, rtol=CURRENT_RTOL, atol=CURRENT_ATOL, equal_nan=True):
            return False
    return True


# ---- one test module ----------------------------------------------------------------------


class _Recording:
    """What running one test module records: its data file's tensors, and per case the tests
    that read it, the mistakes it names and the tolerance it compares with."""

    def __init__(self) -> None:
        self.tensors: dict[str, torch.Tensor] = {}
        self.readers: dict[str, set[str]] = {}
        self.named: dict[str, tuple[str, ...]] = {}
        self.tolerance: dict[str, tuple[float, float]] = {}


def _module_data(assignment: Assignment, test_module: Path, reference: str,
                 mutants: types.ModuleType) -> dict[str, torch.Tensor]:
    recording = _Recording()
    module_name = Path(assignment.module).stem
    failed = _run_tests(test_module, module_name, reference, _Recorder(test_module, recording, None))
    if failed:
        test, exc = next(iter(failed.items()))
        raise PublicDataError(f"{test_module.name}::{test} fails on the reference: {type(exc).__name__}: {exc}")
    for mistake in sorted({mistake for names in recording.named.values() for mistake in names}):
        naming = sorted(case for case, names in recording.named.items() if mistake in names)
        mutant = mutants.CONTRACT_MISTAKES.get(mistake)
        if mutant is None:
            raise PublicDataError(f"{test_module.name}'s case {naming[0]!r} names {mistake!r}, which no mutant makes "
                                  f"(CONTRACT_MISTAKES in reference/hidden/a{assignment.id}/mutants.py)")
        (old, new), _ = mutants.MUTANTS[mutant]
        readers = set().union(*(recording.readers[case] for case in naming))
        failed = _run_tests(test_module, module_name, _edited(reference, old, new, mutant),
                            _Recorder(test_module, recording, mistake), readers)
        for case in naming:
            _check_mistake(test_module, recording, case, mistake, failed)
    for case, names in recording.named.items():
        made = [(name, recording.tensors[key(case, MISTAKE, name)]) for name in names]
        for index, (first, output) in enumerate(made):
            for second, other in made[index + 1:]:
                if same(output, other, *recording.tolerance[case]):
                    raise PublicDataError(f"{test_module.name}'s case {case!r} cannot tell {first!r} from {second!r}: "
                                          "both give the same output on its inputs")
    return recording.tensors


def _check_mistake(test_module: Path, recording: _Recording, case: str, mistake: str,
                   failed: dict[str, BaseException]) -> None:
    output = recording.tensors.get(key(case, MISTAKE, mistake))
    if output is None:
        why = "; ".join(f"{test} raised {type(exc).__name__}: {exc}" for test, exc in failed.items()
                        if test in recording.readers[case])
        raise PublicDataError(f"{test_module.name}'s case {case!r} names {mistake!r}, but its mutant gives the case "
                              f"no output{': ' + why if why else ''}")
    expected = recording.tensors[key(case, EXPECTED)]
    if output.shape != expected.shape or output.dtype != expected.dtype:
        raise PublicDataError(f"{test_module.name}'s case {case!r}: the mutant for {mistake!r} gives a "
                              f"{output.dtype} {tuple(output.shape)}, not a {expected.dtype} {tuple(expected.shape)}: "
                              "name that mistake in a test that checks the shape")
    if same(output, expected, *recording.tolerance[case]):
        raise PublicDataError(f"{test_module.name}'s case {case!r} cannot tell {mistake!r} from the right output: "
                              "its inputs must make them differ")


def _edited(source: str, old: str, new: str, mutant: str) -> str:
    if source.count(old) != 1:
        raise PublicDataError(f"mutant {mutant!r}: its edit must match the reference exactly once")
    return source.replace(old, new)


def _run_tests(test_module: Path, module_name: str, source: str, recorder: _Recorder,
               only: set[str] | None = None) -> dict[str, BaseException]:
    """Run the module's tests that take no fixtures (of ``only``, when given) with ``source`` as
    the module they import and ``recorder`` for their cases; the exception each that failed raised."""
    saved = sys.modules.get(module_name)
    candidate = types.ModuleType(module_name)
    sys.modules[module_name] = candidate  # before it runs: a dataclass looks its module up
    try:
        exec(compile(source, f"<{module_name}: the reference{', ' + recorder.mistake if recorder.mistake else ''}>",
                     "exec"), candidate.__dict__)
        spec = importlib.util.spec_from_file_location(f"_public_tests_{test_module.stem}", test_module)
        tests = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tests)
        for name, value in list(vars(tests).items()):
            if isinstance(value, Cases):
                setattr(tests, name, recorder)
        failed = {}
        for name, function in vars(tests).items():
            if (name.startswith("test_") and inspect.isfunction(function) and not inspect.signature(function).parameters
                    and (only is None or name in only)):
                recorder.test = name
                try:
                    function()
                except KeyboardInterrupt:
                    raise
                except BaseException as exc:  # pytest.fail's exception is no Exception
                    failed[name] = exc
        return failed
    finally:
        if saved is None:
            sys.modules.pop(module_name, None)
        else:
            sys.modules[module_name] = saved


class _Recorder(Cases):
    """The cases of a test module being run on the reference (``mistake`` None: making its
    inputs, recording the right outputs) or on the mutant that makes ``mistake``."""

    def __init__(self, test_module: Path, recording: _Recording, mistake: str | None) -> None:
        super().__init__(test_module)
        self.recording, self.mistake, self.test = recording, mistake, ""

    def __getitem__(self, case: str) -> Case:
        self.recording.readers.setdefault(case, set()).add(self.test)
        return _RecordingCase(case, self)


class _RecordingCase(Case):
    def __init__(self, name: str, recorder: _Recorder) -> None:
        super().__init__(name, recorder.recording.tensors, recorder.path.name)
        self.recorder = recorder

    def tensor(self, name: str, *shape: int) -> torch.Tensor:
        self._make(name, lambda generator: _lattice(shape, generator))
        return super().tensor(name, *shape)

    def tokens(self, name: str, high: int, *shape: int) -> torch.Tensor:
        self._make(name, lambda generator: torch.randint(0, high, shape, generator=generator))
        return super().tokens(name, high, *shape)

    def load(self, module: Any) -> Any:
        if self.recorder.mistake is None and not self._stored(PARAMETER):
            for name, parameter in module.named_parameters():
                full_key = key(self.name, PARAMETER, name)
                # About a layer's own initial scale, 1/sqrt(fan-in), as a power of two.
                scale = 2.0 ** -round(math.log2(math.sqrt(parameter.shape[-1])))
                self._tensors[full_key] = _lattice(tuple(parameter.shape), _seeded(full_key)) * scale
        return super().load(module)

    def expect(self, output: Any, *, mistakes: tuple[str, ...] = (), atol: float = ATOL, rtol: float = RTOL) -> None:
        recording, mistake = self.recorder.recording, self.recorder.mistake
        if mistake is None:
            if self.name in recording.named:
                raise PublicDataError(f"{self._file_name}: case {self.name!r} is expected twice; "
                                      "give each its own name")
            if not isinstance(output, torch.Tensor):
                raise PublicDataError(f"{self._file_name}: case {self.name!r} expects a {type(output).__name__}, "
                                      "not a tensor")
            self._tensors[key(self.name, EXPECTED)] = output.detach().cpu().clone().contiguous()
            recording.named[self.name], recording.tolerance[self.name] = tuple(mistakes), (atol, rtol)
        elif mistake in mistakes and isinstance(output, torch.Tensor):
            self._tensors[key(self.name, MISTAKE, mistake)] = output.detach().cpu().clone().contiguous()

    def _make(self, name: str, make: Callable[[torch.Generator], torch.Tensor]) -> None:
        """On the reference, the input's first reading makes it; later ones, and the mutants', read it."""
        full_key = key(self.name, INPUT, name)
        if self.recorder.mistake is None and full_key not in self._tensors:
            self._tensors[full_key] = make(_seeded(full_key))


def _lattice(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    return torch.randint(-LATTICE, LATTICE + 1, shape, generator=generator).to(torch.float32) / LATTICE


def _seeded(name: str) -> torch.Generator:
    return torch.Generator().manual_seed(zlib.crc32(name.encode("utf-8")))
