"""Which sources share code, how much, and where: fingerprints in an inverted index.

Each source's fingerprints (:mod:`grader.similarity.winnowing`) that the base also has are
dropped: the handout's code is in every submission. The others go into one index, fingerprint
-> the students that have it, so only pairs that share a fingerprint are ever looked at, and
the cost grows with the fingerprints shared, not with the square of the class or of a file.

A fingerprint that more than :func:`common_limit` students share is an idiom of the
assignment (everyone's ``x.transpose(1, 2).contiguous().view(...)``), not evidence that two of
them share code, and counts for no pair of students (Moss's ``-m``). It still counts between a
student and a known source: a tutorial half the class copied is exactly what ``--against``
is there to show.

The similarity of two students is the share of their fingerprints, taken together, that they
share (``|A & B| / |A | B|``): a file copied whole scores 1, a third of one copied into a file
of the same size about 0.2. That of a student and a known source is the share of the student's
fingerprints found in it (``|A & K| / |A|``), since a tutorial is much longer than what is
taken from it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, KeysView, Sequence
from dataclasses import dataclass
from itertools import combinations, groupby

from grader.similarity.sources import Source
from grader.similarity.winnowing import kgram_hashes, token_codes, winnow

# Measured on the synthetic classes of benchmarks/similarity_500.py: see docs/instructors.md.
K = 12  # tokens in a k-gram: about one line of code
WINDOW = 8  # a run of K + WINDOW - 1 = 19 shared tokens always shows
COMMON_MIN, COMMON_SHARE = 10, 0.05
# Where one source has a fingerprint, at most this many places count: a line repeated ten
# thousand times in two files would otherwise pair every copy with every copy.
MAX_PLACES = 16


@dataclass(frozen=True)
class Match:
    """A region the two sources share: lines of each one's text, from the first to the last."""
    a_lines: tuple[int, int]
    b_lines: tuple[int, int]


@dataclass(frozen=True)
class Pair:
    a: Source  # a student
    b: Source  # a student, or a known source
    similarity: float
    shared: int  # fingerprints
    matches: tuple[Match, ...]


Fingerprints = dict[int, list[int]]  # hash -> the token positions where the source has it


def common_limit(students: int) -> int:
    """The most students a fingerprint may be shared by and still count between two of them."""
    return max(COMMON_MIN, math.ceil(COMMON_SHARE * students))


def fingerprints(source: Source, base: set[int]) -> Fingerprints:
    """``source``'s winnowed fingerprints that are not in ``base``, with where it has them."""
    prints: Fingerprints = {}
    for value, position in winnow(kgram_hashes(token_codes([token.text for token in source.tokens]), K), WINDOW):
        places = prints.setdefault(value, []) if value not in base else None
        if places is not None and len(places) < MAX_PLACES:
            places.append(position)
    return prints


def base_hashes(base: Sequence[Source]) -> set[int]:
    """Every k-gram of the base, not only its fingerprints: a student's fingerprint is the
    handout's wherever the handout has its k-gram."""
    return {value for source in base
            for value in kgram_hashes(token_codes([token.text for token in source.tokens]), K)}


def similar_pairs(students: Sequence[Source], known: Sequence[Source], base: Sequence[Source],
                  threshold: float) -> tuple[list[Pair], int]:
    """The pairs whose similarity is ``threshold`` or more, most similar first; and how many
    fingerprints were set aside as idioms of the class."""
    ignored = base_hashes(base)
    prints = [fingerprints(source, ignored) for source in students]
    index: dict[int, list[int]] = {}
    for number, own in enumerate(prints):
        for value in own:
            index.setdefault(value, []).append(number)
    limit = common_limit(len(students))
    common = {value for value, owners in index.items() if len(owners) > limit}
    candidates = {pair for value, owners in index.items() if value not in common for pair in combinations(owners, 2)}
    # What they share at most, idioms included, is a bound that spares most pairs the regions' work.
    pairs = [_pair(students[first], students[second], prints[first], prints[second], common)
             for first, second in candidates
             if _jaccard(prints[first].keys(), prints[second].keys()) >= threshold]
    for source in known:
        own = fingerprints(source, ignored)
        found = {number for value in own for number in index.get(value, ())}
        pairs += [_pair(students[number], source, prints[number], own, set()) for number in found]
    pairs = [pair for pair in pairs if pair.similarity >= threshold]
    pairs.sort(key=lambda pair: (-pair.similarity, pair.a.name, pair.b.known, pair.b.name))
    return pairs, len(common)


def _jaccard(a: KeysView[int], b: KeysView[int]) -> float:
    return len(a & b) / len(a | b)


def _pair(a: Source, b: Source, a_prints: Fingerprints, b_prints: Fingerprints, common: set[int]) -> Pair:
    """The two compared. A shared region counts when one of its fingerprints is not an idiom:
    the idioms inside a passage copied in one piece are part of the copy, an idiom shared on
    its own is not."""
    points = sorted((at_a, at_b, value) for value in a_prints.keys() & b_prints.keys()
                    for at_a in a_prints[value] for at_b in b_prints[value])
    regions = [run for run in _runs(points) if any(value not in common for _, _, value in run)]
    shared = {value for run in regions for _, _, value in run}
    whole = len(a_prints) if b.known else len(a_prints.keys() | b_prints.keys())
    matches = _merged(Match(_lines(a, run[0][0], run[-1][0]), _lines(b, run[0][1], run[-1][1])) for run in regions)
    return Pair(a, b, len(shared) / whole, len(shared), tuple(matches))


def _runs(points: list[tuple[int, int, int]]) -> list[list[tuple[int, int, int]]]:
    """The shared fingerprints ``(position in a, position in b, hash)``, sorted, joined into
    runs in which both positions advance together, as in a passage copied in one piece (a
    passage moved elsewhere, a function reordered, starts a run of its own). A position is
    paired once: of a repeated line's fingerprints (four ``nn.Linear`` lines alike), each
    continues the run it fits, not every run at once."""
    runs: list[list[tuple[int, int, int]]] = []
    open_runs: list[list[tuple[int, int, int]]] = []  # those a later point may still extend
    used_a: set[int] = set()
    used_b: set[int] = set()
    gap = K + WINDOW
    for at_a, group in groupby(points, key=lambda point: point[0]):
        open_runs = [run for run in open_runs if at_a - run[-1][0] <= gap]  # points come by position in a
        choices = [point for point in group if point[1] not in used_b]
        extended = next(((run, point) for run in reversed(open_runs) for point in choices
                         if 0 < point[1] - run[-1][1] <= gap), None)
        if extended:
            run, point = extended
        elif choices and at_a not in used_a:
            run, point = [], choices[0]
            runs.append(run)
            open_runs.append(run)
        else:
            continue
        run.append(point)
        used_a.add(at_a)
        used_b.add(point[1])
    return runs


def _merged(matches: Iterable[Match]) -> list[Match]:
    """Regions that overlap on both sides, as one."""
    merged: list[Match] = []
    for match in sorted(matches, key=lambda m: (m.a_lines, m.b_lines)):
        last = merged[-1] if merged else None
        if last and match.a_lines[0] <= last.a_lines[1] + 1 and _overlap(last.b_lines, match.b_lines):
            merged[-1] = Match((last.a_lines[0], max(last.a_lines[1], match.a_lines[1])),
                               (min(last.b_lines[0], match.b_lines[0]), max(last.b_lines[1], match.b_lines[1])))
        else:
            merged.append(match)
    return merged


def _overlap(first: tuple[int, int], second: tuple[int, int]) -> bool:
    return first[0] <= second[1] + 1 and second[0] <= first[1] + 1


def _lines(source: Source, first: int, last: int) -> tuple[int, int]:
    """The lines of the tokens from the k-gram at ``first`` to the one at ``last``."""
    return source.tokens[first].first_line, source.tokens[min(last + K - 1, len(source.tokens) - 1)].last_line
