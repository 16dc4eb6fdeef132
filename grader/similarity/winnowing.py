"""Fingerprints of a token sequence by winnowing (Schleimer, Wilkerson and Aiken, "Winnowing:
local algorithms for document fingerprinting", SIGMOD 2003; the algorithm behind Moss).

Every run of ``k`` consecutive tokens (a k-gram) is hashed; of each ``window`` consecutive
hashes the smallest is kept (the rightmost on a tie), once. Two sequences that share a run of
at least ``window + k - 1`` tokens are guaranteed to share a fingerprint; a shared run shorter
than ``k`` never gives one, which keeps the chance matches of short idioms out.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence


def token_codes(texts: Sequence[str]) -> list[int]:
    """A number for each token text, the same in every process (``hash`` of a string is not:
    Python salts it per process, and the fingerprints chosen would change from run to run)."""
    return [zlib.crc32(text.encode("utf-8", "surrogatepass")) for text in texts]


def kgram_hashes(codes: Sequence[int], k: int) -> list[int]:
    """The hash of each k-gram, by its first token's position. A tuple of ints hashes the same in
    every process."""
    codes = tuple(codes)
    return [hash(codes[start:start + k]) for start in range(len(codes) - k + 1)]


def winnow(hashes: Sequence[int], window: int) -> list[tuple[int, int]]:
    """The fingerprints of ``hashes``: ``(hash, position)``, the minimum of each window of
    ``window`` hashes (the rightmost minimum), each position once. A sequence shorter than a
    window is one window."""
    fingerprints: list[tuple[int, int]] = []
    last = -1
    for start in range(max(len(hashes) - window + 1, 1 if hashes else 0)):
        chunk = hashes[start:start + window]
        smallest = min(chunk)
        position = start + len(chunk) - 1 - chunk[::-1].index(smallest)
        if position != last:
            fingerprints.append((smallest, position))
            last = position
    return fingerprints
