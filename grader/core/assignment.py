"""An assignment: its handout directory, its contract and where its hidden suite is.

``assignments/NN/assignment.toml`` is the single definition of an assignment's contract: its
parts (signature and semantics, in report order), the mistakes the grader must name and what
each costs under the rubric (``[rubric.deductions]``; ``assignments/course.toml``'s ``[rubric]
enabled`` turns the rubric off for the course, an assignment's own ``[rubric] enabled`` for
itself). The
stub module, the notebook, the README's contract table, the reference, the public tests and
the hidden suite are generated from it or checked against it (tests/test_contract.py).
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from grader.core.ingest import Ungradable, read_submission

# What locates the reference: grader/course/release.py ships no module that imports one of these.
REFERENCE_LOCATORS = ("reference_dir",)


class AssignmentError(Exception):
    """The assignment cannot be used: the message says what to do."""


def reference_dir() -> Path:
    """Where the reference package is. Located, not imported: the grader process forks the
    student's, which must not inherit the reference (one attribute away from the solutions' source)."""
    spec = find_spec("reference")
    if spec is None or not spec.submodule_search_locations:
        raise AssignmentError("the reference package is not installed: this grader can run the public tests only "
                              "(the hidden tests run on submission)")
    return Path(spec.submodule_search_locations[0]).resolve()


@dataclass(frozen=True)
class Part:
    """One part of the contract: what the student writes, and what it must do."""

    name: str
    contract: str  # the semantics, in markdown
    signature: str | None = None  # "split_heads(x, num_heads)"; None: no stub, graded through other parts
    methods: tuple[str, ...] = ()  # a class's methods besides __init__: "forward(x, mask=None)"
    # Parts of the same assignment it calls and is graded through, so that their mistakes
    # show in its tests: a failing test that passes with the stock part in place of a failing
    # used part is charged there, and says to fix that one first. (Part isolation grades a
    # part's values with its pieces as black boxes; what it does not cover, the stock parts do.)
    uses: tuple[str, ...] = ()

    @classmethod
    def from_spec(cls, spec: dict) -> Part:
        signature = spec.get("signature")
        # The name is written once: a stubbed part's is the one its signature defines.
        name = signature.partition("(")[0] if signature else spec["name"]
        return cls(name, spec["contract"], signature, tuple(spec.get("methods", ())), tuple(spec.get("uses", ())))


@dataclass(frozen=True)
class Assignment:
    id: str
    title: str
    directory: Path
    module: str  # the stub module the student edits, e.g. "mha.py"
    contract: tuple[Part, ...]  # in the order the report lists them
    about: str = ""  # what holds for every part, said before them (05: post-norm)
    mistakes: tuple[str, ...] = ()  # the mistakes the grader must recognise and name
    # The rubric: (mistake, points) for those of ``mistakes`` that have a deduction. A part whose
    # every failing test matched one mistake's value scores its points less that deduction
    # (grader.core.scoring), when that gives more than its tests.
    deductions: tuple[tuple[str, float], ...] = ()
    rubric_enabled: bool = True  # the assignment's [rubric] enabled, else the course's, else on

    @classmethod
    def load(cls, directory: str | Path) -> Assignment:
        directory = Path(directory)
        spec_path = directory / "assignment.toml"
        if not spec_path.is_file():
            raise AssignmentError(f"{directory} is not an assignment: it has no assignment.toml "
                                  "(expected a directory such as assignments/03)")
        try:
            spec = tomllib.loads(spec_path.read_text(encoding="utf-8"))
            mistakes = tuple(spec.get("mistakes", ()))
            rubric = spec.get("rubric", {})
            return cls(str(spec["id"]), spec["title"], directory, spec["module"],
                       tuple(Part.from_spec(part) for part in spec["parts"]), spec.get("about", ""),
                       mistakes, _deductions(rubric.get("deductions", {}), mistakes),
                       _enabled(rubric.get("enabled", _course_rubric(directory).get("enabled", True))))
        except (tomllib.TOMLDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
            raise AssignmentError(f"{spec_path} is malformed: {exc}") from None

    @property
    def parts(self) -> tuple[str, ...]:
        return tuple(part.name for part in self.contract)

    @property
    def rubric(self) -> dict[str, float]:
        """What each priced mistake costs (the contract's words -> points); empty when the
        rubric is off, and the tests alone score every part."""
        return dict(self.deductions) if self.rubric_enabled else {}

    @property
    def parts_without_stub(self) -> tuple[str, ...]:
        """Graded, but through other parts (06's end_to_end trains a model with train_step)."""
        return tuple(part.name for part in self.contract if part.signature is None)

    @property
    def notebook(self) -> str:
        """The same stubs as a notebook, generated from the module: "mha.py" -> "mha.ipynb"."""
        return str(Path(self.module).with_suffix(".ipynb"))

    @property
    def module_path(self) -> Path:
        return self.directory / self.module

    @property
    def notebook_path(self) -> Path:
        return self.directory / self.notebook

    @property
    def hidden_suite(self) -> Path:
        suite = reference_dir() / "hidden" / f"a{self.id}"
        if not suite.is_dir():
            raise AssignmentError(f"no hidden suite for assignment {self.id} (looked in {suite})")
        return suite

    @property
    def preload(self) -> tuple[str, ...]:
        """Modules the student's processes import lazily on the suite's paths: the zygote
        server imports them once, before it forks them (the suite.toml's ``preload``)."""
        return tuple(self._suite_spec().get("preload", ()))

    @property
    def suite_preload(self) -> tuple[str, ...]:
        """Modules the suite's own side imports lazily: the grader imports them once, before it
        forks each submission's suite process (the suite.toml's ``suite_preload``)."""
        return tuple(self._suite_spec().get("suite_preload", ()))

    @property
    def reference_module(self) -> str | None:
        """The reference solution's module, as its suite.toml names it ("reference.multihead")."""
        name = self._suite_spec().get("reference")
        return f"reference.{name}" if name else None

    @property
    def stand_ins(self) -> Path | None:
        """The hidden suite's stock parts for the parts others use (its suite.toml's
        ``stand_ins``): they stand in for the student's when the grader checks whether a failing
        part fails because of a part it uses. Answers: sent only into a child that ends with it."""
        name = self._suite_spec().get("stand_ins")
        return self.hidden_suite / name if name else None

    def _suite_spec(self) -> dict:
        spec = self.hidden_suite / "suite.toml"
        return tomllib.loads(spec.read_text(encoding="utf-8")) if spec.is_file() else {}

    def working_copy(self) -> Path:
        """The student's copy to grade: the module or the notebook, whichever holds more of
        their work; the module on a tie (see :func:`most_work_done`)."""
        return most_work_done((self.module_path, self.notebook_path))


def _deductions(table: dict, mistakes: tuple[str, ...]) -> tuple[tuple[str, float], ...]:
    """``[rubric.deductions]``: each key one of the contract's mistakes, each value its points."""
    for mistake, points in table.items():
        if mistake not in mistakes:
            raise ValueError(f"[rubric.deductions] prices {mistake!r}, which is not one of the contract's mistakes")
        if isinstance(points, bool) or not isinstance(points, (int, float)) or not 0 <= points < float("inf"):
            raise ValueError(f"[rubric.deductions] gives {mistake!r} {points!r} points: give a number, 0 or more")
    return tuple((mistake, float(points)) for mistake, points in table.items())


def _enabled(value: object) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"[rubric] enabled is {value!r}: write true or false")
    return value


def _course_rubric(directory: Path) -> dict:
    """The course's ``[rubric]`` (``assignments/course.toml``, beside the assignment's folder), if any."""
    course = directory.parent / "course.toml"
    if not course.is_file():
        return {}
    try:
        return tomllib.loads(course.read_text(encoding="utf-8")).get("rubric", {})
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{course}: {exc}") from None


def most_work_done(paths: Sequence[Path]) -> Path:
    """Of a student's copies, the one that holds the most of their work: the fewest stubs still
    raising NotImplementedError; the first on a tie.

    Each is read as it is graded (a link is never followed), since the folder may be a
    student's upload: a file the grader refuses to read is never picked over one it reads.
    """
    def work_left(path: Path) -> tuple[int, int]:
        """Least for most work done: a file read, by its stubs left; then a file refused (a
        link, too large), whose report will say why; then no file at all."""
        try:
            return 0, read_submission(path).count(b"NotImplementedError")
        except Ungradable:
            return (1 if os.path.lexists(path) else 2), 0

    return min(paths, key=work_left)
