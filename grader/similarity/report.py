"""A similarity report: the class's pairs above a threshold, as data and as ``similarity.json``.

The report is evidence for a person to read, never a verdict, and says so in its ``note``: two
students may write the same code independently, above all for short parts, and a match shows
where to look, not what happened. Nothing here touches a grade.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.assignment import Assignment
from grader.core.report import write_json as write_json_file
from grader.results.students import Handin
from grader.similarity.compare import WINDOW, K, Pair, common_limit, similar_pairs
from grader.similarity.sources import Source, base_sources, known_sources, student_sources

SCHEMA_VERSION = 1
FILE = "similarity.json"
# Measured (docs/instructors.md): in the hand-written class of tests/similarity_class.py honest
# pairs score at most 0.17 and copies 0.48 or more; in the generated class of 500
# (benchmarks/similarity_500.py) 99.9% of honest pairs score under 0.28, and 0.25 lists 114 of the
# 116 planted copies, 223 honest pairs of 124,641 (0.18%) below most of them.
DEFAULT_THRESHOLD = 0.25
NOTE = ("A similarity is evidence for a person to read, never a verdict: students may write the same code "
        "independently, above all for short parts. Read both files before you decide anything. No score was changed.")


@dataclass(frozen=True)
class SimilarityOptions:
    """What ``grade batch --similarity`` compares with, and what it lists."""
    against: Path | None = None  # a folder of known sources
    threshold: float = DEFAULT_THRESHOLD


@dataclass(frozen=True)
class SimilarityReport:
    assignment: str
    threshold: float
    students: list[Source]
    known: list[Source]
    pairs: list[Pair]
    unreadable: list[tuple[str, str]] = field(default_factory=list)  # (file, why)
    idioms: int = 0  # fingerprints shared by too many students to count between two of them

    def to_json(self) -> dict:
        return {
            "schema_version": SCHEMA_VERSION,
            "assignment": self.assignment,
            "note": NOTE,
            "threshold": self.threshold,
            "method": {"k": K, "window": WINDOW, "common_limit": common_limit(len(self.students)),
                       "idioms_ignored": self.idioms},
            "submissions": [{"student": source.name, "file": source.file} for source in self.students],
            "known_sources": [source.name for source in self.known],
            "unreadable": [{"file": file, "why": why} for file, why in self.unreadable],
            "pairs": [_pair_json(pair) for pair in self.pairs],
        }


def _pair_json(pair: Pair) -> dict:
    return {
        "a": pair.a.name, "a_file": pair.a.file,
        "b": pair.b.name, "b_file": pair.b.file, "b_known": pair.b.known,
        "similarity": round(pair.similarity, 3),
        "shared_fingerprints": pair.shared,
        "matches": [{"a_lines": list(match.a_lines), "b_lines": list(match.b_lines),
                     "a_where": pair.a.where(*match.a_lines), "b_where": pair.b.where(*match.b_lines)}
                    for match in pair.matches],
    }


def find_similar(assignment: Assignment, folder: Path, handins: Iterable[Handin], *, against: Path | None = None,
                 threshold: float = DEFAULT_THRESHOLD) -> SimilarityReport:
    """The report on the file each of ``handins`` is graded by (in ``folder``), compared with each
    other and with every source under ``against``, the assignment's handout as the base."""
    students, unreadable = student_sources(folder, handins)
    known: list[Source] = []
    if against is not None:
        known, unreadable_known = known_sources(against)
        unreadable += unreadable_known
    pairs, idioms = similar_pairs(students, known, base_sources(assignment), threshold)
    return SimilarityReport(assignment.id, threshold, students, known, pairs, unreadable, idioms)


def write_json(report: SimilarityReport, out: Path) -> Path:
    path = out / FILE
    write_json_file(path, report.to_json())  # atomically; a file name that is not UTF-8 cannot break it
    return path
