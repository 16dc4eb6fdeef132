"""Who handed in what: a batch's files grouped by student, and the one graded for each.

By default the first folder under the batch folder is the student, as LMS exports make one
folder per student; a file at the top is a student of its own, named by its stem, or by
the user id in a Canvas download's name (``smithjane_LATE_1234_5678_mha.py``). A roster
(``grade batch --roster roster.csv``) names the students instead: it maps files or folders
to student ids, carries what the gradebook exports need (name, email, section, Canvas and
SIS ids), and lists the students who handed in nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from grader.core.assignment import Assignment, most_work_done
from grader.results.tables import TableError, read_table, table_rows

SOURCE_SUFFIXES = (".py", ".ipynb")
# Columns of a roster; only `student` is required. `path` is a file or folder under the batch
# folder (default: the folder named like the student); a student may have several rows.
ROSTER_COLUMNS = ("student", "path", "name", "email", "section", "canvas_id", "sis_user_id", "sis_login_id")
# What Canvas's "Download Submissions" names each file: the student's name (lowercase, and
# underscores where it had spaces or other characters), LATE, user id, attachment id, then the
# file's own name (with "-1" before the suffix for a second upload of one name). The name may
# hold underscores and digits, so a file name can split more than one way.
_CANVAS_TAIL = re.compile(r"(?P<late>LATE_)?(?P<user>\d+)_\d+_(?P<file>.+)")


@dataclass(frozen=True)
class CanvasName:
    name: str
    user: str
    late: bool
    file: str  # as the student named it: the prefix and a "-1" before the suffix taken off
    ambiguous: bool  # the name splits more than one way: read as the one whose file is the assignment's


def canvas_name(filename: str) -> CanvasName | None:
    """How Canvas's download named ``filename``, or None if it did not. Where it splits more than
    one way, the shortest name wins: Canvas writes the name, and the student only the file name
    after it, which may hold ``_22222_1_`` to read as another student's id. The choice is then
    marked ambiguous, for the instructor to see."""
    splits = []
    for cut in (match.start() for match in re.finditer("_", filename)):
        name, tail = filename[:cut], _CANVAS_TAIL.fullmatch(filename[cut + 1:])
        if re.fullmatch(r"[a-z0-9_]*[a-z0-9]", name) and tail:
            file = Path(tail["file"])
            splits.append(CanvasName(name, tail["user"], bool(tail["late"]),
                                     re.sub(r"-\d+$", "", file.stem) + file.suffix, False))
    return replace(splits[0], ambiguous=len(splits) > 1) if splits else None


class RosterError(TableError):
    """The roster cannot be used: the message says which row and why."""


@dataclass(frozen=True)
class Student:
    id: str
    name: str = ""
    email: str = ""
    section: str = ""
    canvas_id: str = ""
    sis_user_id: str = ""
    sis_login_id: str = ""
    on_roster: bool = False


@dataclass(frozen=True)
class Roster:
    students: dict[str, Student]  # by id, in the roster's order
    paths: dict[PurePosixPath, str]  # a file or folder under the batch folder: whose it is

    @classmethod
    def load(cls, path: Path) -> Roster:
        return cls.parse(read_table(path, "roster", RosterError), str(path))

    @classmethod
    def parse(cls, text: str, source: str = "roster") -> Roster:
        header, rows = table_rows(text, ROSTER_COLUMNS, RosterError, source)
        if "student" not in header:
            raise RosterError(f"{source} has no `student` column; its first row must name the columns, "
                              f"among: {', '.join(ROSTER_COLUMNS)}")
        students: dict[str, Student] = {}
        paths: dict[PurePosixPath, str] = {}
        for number, values in rows:
            student_id = values.pop("student", "")
            if not student_id:
                raise RosterError(f"{source}, row {number}: no student id")
            where = _roster_path(values.pop("path", "") or student_id, f"{source}, row {number}")
            if paths.get(where, student_id) != student_id:
                raise RosterError(f"{source}, row {number}: {where} is already {paths[where]}'s")
            paths[where] = student_id
            students.setdefault(student_id, Student(student_id, **values, on_roster=True))
        return cls(students, paths)

    def owner(self, relative: Path) -> str | None:
        """The student whose file or folder holds ``relative`` (the deepest that does), if any."""
        path = PurePosixPath(relative.as_posix())
        for where in (path, *path.parents):
            if where in self.paths:
                return self.paths[where]
        return None


def _roster_path(value: str, where: str) -> PurePosixPath:
    path = PurePosixPath(value.replace("\\", "/").rstrip("/"))
    if path.is_absolute() or ".." in path.parts or str(path) in ("", "."):
        raise RosterError(f"{where}: the path {value!r} must lie inside the batch folder")
    return path


@dataclass(frozen=True)
class Handin:
    """A student and what they handed in; ``graded`` is the file their grade comes from."""
    student: Student
    files: tuple[Path, ...] = ()  # relative to the batch folder
    graded: Path | None = None
    note: str = ""  # the choice among several files, a late upload, not on the roster
    late: bool = False
    unlisted: bool = False  # a roster was given and does not name this student
    not_graded: tuple[Path, ...] = ()  # the other files, when only the one their grade comes from is graded
    ambiguous: bool = False  # who it is was read from a Canvas file name that splits more than one way
    pinned: str | None = None  # the instructor chose the file graded (a Pin): their comment, else None

    @property
    def others(self) -> tuple[Path, ...]:
        """The files handed in beside the one graded for the student."""
        return tuple(path for path in self.files if path != self.graded)


@dataclass(frozen=True)
class Pin:
    """The instructor's choice of the file a student's grade comes from (``grade batch
    --overrides``, its ``file`` column), over :data:`FILE_RULE`'s."""
    file: PurePosixPath  # relative to the batch folder, as grades.csv's submission column says
    comment: str = ""


def handins(files: Iterable[Path], folder: Path, assignment: Assignment, roster: Roster | None = None, *,
            all_files: bool = False, pins: Mapping[str, Pin] | None = None) -> list[Handin]:
    """Every student of the batch, with the file graded for them (by :data:`FILE_RULE`, or as
    ``pins`` says, by student id): each on the roster (with nothing if they handed in
    nothing), then those whose files no roster row names. Unless ``all_files``, only that file
    is graded: one student's many copies cost the batch one."""
    grouped: dict[str, list[Path]] = {}
    found: dict[str, Student] = {}
    for relative in files:
        owner = roster.owner(relative) if roster else None
        student = roster.students[owner] if owner else _student_from_path(relative)
        grouped.setdefault(student.id, []).append(relative)
        found.setdefault(student.id, student)
    listed = dict(roster.students) if roster else {}
    result = [Handin(student) for student_id, student in listed.items() if student_id not in grouped]
    for student_id, paths in grouped.items():
        student = listed.get(student_id, found[student_id])
        result.append(_choose(student, paths, folder, assignment, unlisted=roster is not None and not student.on_roster,
                              all_files=all_files, pin=(pins or {}).get(student_id)))
    order = {student_id: index for index, student_id in enumerate(listed)}
    return sorted(result, key=lambda handin: (order.get(handin.student.id, len(order)), handin.student.id))


def _student_from_path(relative: Path) -> Student:
    if len(relative.parts) > 1:
        return Student(relative.parts[0])
    canvas = _canvas(relative)
    if canvas:
        return Student(canvas.user, name=canvas.name, canvas_id=canvas.user)
    return Student(relative.stem or relative.name)


def _canvas(relative: Path) -> CanvasName | None:
    """How Canvas's download named a file at the top of the batch folder."""
    return canvas_name(relative.name) if len(relative.parts) == 1 else None


def handed_in_name(relative: Path) -> str:
    """The name the student gave the file: a Canvas download's prefix and "-1" taken off."""
    canvas = _canvas(relative)
    return canvas.file if canvas else relative.name


# How the file a student's grade comes from is chosen among several: the note of each such
# student, the feedback page and docs/instructors.md say it in these words.
FILE_RULE = ("among the files named like the handout's module or notebook (else among every .py and .ipynb file, "
             "else among every file), the one with the fewest stubs still raising NotImplementedError; on a tie "
             "the shallowest, then the .py, then the first by name")


def _choose(student: Student, paths: Sequence[Path], folder: Path, assignment: Assignment, *, unlisted: bool,
            all_files: bool, pin: Pin | None) -> Handin:
    """The file graded for the student: the one ``pin`` names, if they handed it in, else the
    one :data:`FILE_RULE` takes, as ``grade`` picks a working copy."""
    pinned = next((path for path in paths if pin and PurePosixPath(path.as_posix()) == pin.file), None)
    if pinned is not None:
        graded = pinned
    else:
        named = [path for path in paths if handed_in_name(path) in (assignment.module, assignment.notebook)]
        sources = [path for path in paths if path.suffix in SOURCE_SUFFIXES]
        pool = sorted(named or sources or paths, key=lambda path: (len(path.parts), path.suffix != ".py", path))
        graded = most_work_done([folder / path for path in pool]).relative_to(folder) if len(pool) > 1 else pool[0]
    notes = []
    if unlisted:
        notes.append("not on the roster")
    if pin and pinned is not None:
        notes.append(f"graded {graded.as_posix()}, pinned by the overrides" + (f": {pin.comment}" if pin.comment else ""))
    elif len(paths) > 1:
        notes.append(f"graded {graded.as_posix()} by the rule: {FILE_RULE}")
    canvas = _canvas(graded)
    late = bool(canvas and canvas.late)
    if late:
        notes.append("late: Canvas marked the upload LATE")
    if canvas and canvas.ambiguous:
        notes.append(f"the Canvas file name {graded.name} splits more than one way: read as user {canvas.user}, "
                     f"named {canvas.name}; give a --roster to be sure")
    others = tuple(path for path in paths if path != graded)
    return Handin(student, tuple(paths), graded, "; ".join(notes), late, unlisted, () if all_files else others,
                  ambiguous=bool(canvas and canvas.ambiguous),
                  pinned=(pin.comment if pin and pinned is not None else None))
