"""Which files in a folder are submissions: every one handed in, links included, never followed."""

from __future__ import annotations

import os
from pathlib import Path


def discover(folder: Path) -> list[Path]:
    """Every file under ``folder`` (relative paths, sorted), hidden files and folders aside.

    All of them get a report: a file that is not ``.py`` or ``.ipynb`` is ungradable, so
    nothing handed in is silently skipped. Sub-folders (one per student, as LMS exports
    do) keep files of the same name apart. A link, to a file or to a folder, is listed as
    it is, never followed: it gets a report saying it is a link.
    """
    found = []
    for root, dirs, files in os.walk(folder):  # lists a link to a folder among dirs, but never enters it
        linked = [name for name in dirs if Path(root, name).is_symlink()]
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in linked)
        found += [Path(root, name).relative_to(folder) for name in files + linked if not name.startswith(".")]
    return sorted(found)
