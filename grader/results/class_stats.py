"""What a class's reports add up to: per-part and total scores, statuses, frequent mistakes.

``summary.json`` (:mod:`grader.results.folder`), the batch's table (:mod:`grader.views.terminal`) and
``grade report`` (:mod:`grader.views.class_report`) all show these numbers.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from grader.core.report import GradeReport, Outcome, Status

MOST_FREQUENT_HINTS = 10
Key = TypeVar("Key", str, Path)  # a report's name in a results folder, or its file's path in a batch
MAX_BINS = 10  # below full marks, each a whole number of points wide


@dataclass(frozen=True)
class Scores:
    """The graded submissions' scores for one part (or their totals) and what they are out of."""
    values: list[float]
    max_score: float

    def stats(self) -> dict:
        if not self.values:
            return {"mean": None, "median": None, "max": None, "max_score": self.max_score}
        return {"mean": round(statistics.fmean(self.values), 4), "median": statistics.median(self.values),
                "max": max(self.values), "max_score": self.max_score}


@dataclass(frozen=True)
class TestRate:
    """How many graded submissions passed one test: what the class found hardest."""
    part: str
    test: str
    passed: int
    run: int  # graded submissions in which it ran (a skipped test did not)

    @property
    def rate(self) -> float:
        return self.passed / self.run if self.run else 1.0


@dataclass(frozen=True)
class ClassStatistics:
    submissions: int
    counts: dict[str, int]  # by status
    total: Scores
    parts: dict[str, Scores]
    hints: list[tuple[str, int]]  # "part: hint" of parts that lost points, most frequent first
    tests: list[TestRate]  # the lowest pass rate first
    not_graded: list[GradeReport]  # ungradable and grader_error reports, each with its reason
    flagged: list[GradeReport]  # reports with flags for the instructor, also of the files not counted
    also_handed_in: int  # files a student handed in beside the one graded for them: not counted


def class_statistics(part_ids: Iterable[str], reports: Sequence[GradeReport],
                     also_handed_in: Sequence[GradeReport] = ()) -> ClassStatistics:
    """The numbers of ``reports``, one per student (the file graded for them); of the other files
    a student handed in, ``also_handed_in``, only the flags count, so that an abandoned copy
    weighs on no mean, and an attack in one is still seen. Scores count for graded reports
    only; max scores come from every report, since an ungradable one still lists each part
    with its max_score."""
    graded = [report for report in reports if report.status == Status.GRADED]
    parts = {}
    for part_id in part_ids:
        scores = [part.score for report in graded for part in report.parts if part.id == part_id]
        max_score = max((part.max_score for report in reports for part in report.parts if part.id == part_id), default=0)
        parts[part_id] = Scores(scores, max_score)
    hints = Counter(f"{part.id}: {part.hint}" for report in graded for part in report.parts
                    if part.hint and part.score < part.max_score)
    runs: Counter[tuple[str, str]] = Counter()
    passes: Counter[tuple[str, str]] = Counter()
    for report in graded:
        for part in report.parts:
            for test in part.tests:
                if test.outcome != Outcome.SKIPPED:
                    runs[part.id, test.name] += 1
                    passes[part.id, test.name] += test.outcome == Outcome.PASSED
    tests = sorted((TestRate(part, test, passes[part, test], run) for (part, test), run in runs.items()),
                   key=lambda rate: (rate.rate, rate.part, rate.test))
    return ClassStatistics(
        submissions=len(reports),
        counts={status: sum(r.status == status for r in reports)
                for status in (Status.GRADED, Status.UNGRADABLE, Status.GRADER_ERROR)},
        total=Scores([r.score for r in graded], max((r.max_score for r in reports), default=0)),
        parts=parts,
        hints=hints.most_common(MOST_FREQUENT_HINTS),
        tests=tests,
        not_graded=[report for report in reports if report.status != Status.GRADED],
        flagged=[report for report in (*reports, *also_handed_in) if report.flags],
        also_handed_in=len(also_handed_in),
    )


def student_statistics(part_ids: Iterable[str], reports: Mapping[Key, GradeReport],
                       graded_for_students: Iterable[Key]) -> ClassStatistics:
    """:func:`class_statistics` of the reports graded for the students (``graded_for_students``,
    keys of ``reports``: one file each); the others are ``also_handed_in``."""
    counted = set(graded_for_students) & reports.keys()
    return class_statistics(part_ids, [reports[key] for key in sorted(counted)],
                            [report for key, report in reports.items() if key not in counted])


@dataclass(frozen=True)
class Bin:
    low: float
    high: float | None  # None: the full-marks bin
    count: int

    @property
    def label(self) -> str:
        """The scores it holds, as its axis label: ``2–<4`` (2 or more, under 4); a bin one point
        wide or less by its low end alone (``2``: 2 up to 3), as is the full-marks bin."""
        if self.high is None or self.high - self.low <= 1:
            return f"{self.low:g}"
        return f"{self.low:g}–<{self.high:g}"


def histogram(scores: Scores) -> list[Bin]:
    """Bins from 0 to max_score that start at whole points (each the same whole number of
    points wide, at most MAX_BINS of them; the last may be narrower), then a bin of its own
    for full marks: a grade histogram is read for who got everything right."""
    width = max(math.ceil(scores.max_score / MAX_BINS), 1)
    lows = [float(low) for low in range(0, math.ceil(scores.max_score), width)]
    bins = len(lows)
    counts = [0] * (bins + 1)
    for value in scores.values:
        counts[bins if value >= scores.max_score else max(bisect.bisect_right(lows, value) - 1, 0)] += 1
    highs = [*lows[1:], scores.max_score]
    return [Bin(low, high, count) for low, high, count in zip(lows, highs, counts)] + [
        Bin(scores.max_score, None, counts[bins])]
