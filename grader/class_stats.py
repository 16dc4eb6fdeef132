"""What a class's reports add up to: per-part and total scores, statuses, frequent mistakes.

``summary.json`` (:mod:`grader.gradebook`), the batch's table (:mod:`grader.render`) and
``grade report`` (:mod:`grader.class_report`) all show these numbers.
"""

from __future__ import annotations

import bisect
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from grader.report import GradeReport, Status

MOST_FREQUENT_HINTS = 10
MAX_BINS = 10  # below full marks; whole-point scores out of up to 10 get a bin each


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
class ClassStatistics:
    submissions: int
    counts: dict[str, int]  # by status
    total: Scores
    parts: dict[str, Scores]
    hints: list[tuple[str, int]]  # "part: hint" of parts that lost points, most frequent first


def class_statistics(part_ids: Iterable[str], reports: Sequence[GradeReport]) -> ClassStatistics:
    """Scores count for graded reports only; max scores come from every report, since an
    ungradable one still lists each part with its max_score."""
    graded = [report for report in reports if report.status == Status.GRADED]
    parts = {}
    for part_id in part_ids:
        scores = [part.score for report in graded for part in report.parts if part.id == part_id]
        max_score = max((part.max_score for report in reports for part in report.parts if part.id == part_id), default=0)
        parts[part_id] = Scores(scores, max_score)
    hints = Counter(f"{part.id}: {part.hint}" for report in graded for part in report.parts
                    if part.hint and part.score < part.max_score)
    return ClassStatistics(
        submissions=len(reports),
        counts={status: sum(r.status == status for r in reports)
                for status in (Status.GRADED, Status.UNGRADABLE, Status.GRADER_ERROR)},
        total=Scores([r.score for r in graded], max((r.max_score for r in reports), default=0)),
        parts=parts,
        hints=hints.most_common(MOST_FREQUENT_HINTS),
    )


@dataclass(frozen=True)
class Bin:
    low: float
    high: float | None  # None: the full-marks bin
    count: int


def histogram(scores: Scores) -> list[Bin]:
    """Equal bins from 0 to max_score (at most MAX_BINS), then a bin of its own for full marks:
    a grade histogram is read for who got everything right."""
    bins = min(MAX_BINS, math.ceil(scores.max_score))
    lows = [scores.max_score * k / bins for k in range(bins)]
    counts = [0] * (bins + 1)
    for value in scores.values:
        counts[bins if value >= scores.max_score else max(bisect.bisect_right(lows, value) - 1, 0)] += 1
    highs = [*lows[1:], scores.max_score]
    return [Bin(low, high, count) for low, high, count in zip(lows, highs, counts)] + [
        Bin(scores.max_score, None, counts[bins])]
