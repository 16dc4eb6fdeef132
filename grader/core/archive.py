"""Reproducible zip files: the same entries give the same bytes (fixed dates, given modes)."""

from __future__ import annotations

import zipfile
from pathlib import Path

REGULAR, EXECUTABLE = 0o644, 0o755
_EPOCH = (1980, 1, 1, 0, 0, 0)  # the earliest date a zip can hold


def write_zip(out: Path, entries: dict[str, tuple[bytes, int]]) -> None:
    """Write ``entries`` (name -> (content, permission bits)) to ``out``, in the given order."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w") as archive:
        for name, (data, mode) in entries.items():
            info = zipfile.ZipInfo(name, _EPOCH)
            info.external_attr = (0o100000 | mode) << 16  # a regular file with these permissions
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, data)
