"""Whether a Gradescope submission is late, from the ``submission_metadata.json`` Gradescope
writes next to it (https://gradescope-autograders.readthedocs.io/en/latest/submission_metadata/).

The documented format gives the submission's time (``created_at``) and the assignment's
``due_date``, both ISO 8601 with an offset. It documents no extensions, but the files
Gradescope writes give each of the ``users`` their own dates (``users[].assignment.due_date``),
which an extension moves: when there, that due date is the one that counts.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

METADATA = Path("submission_metadata.json")  # under the autograder root
# What a missing, unreadable or unexpected file raises on the way: the file is Gradescope's,
# its format not ours, and grading goes on without it.
UNREADABLE = (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError)


def is_late(root: Path) -> bool | None:
    """Whether the submission under ``root`` was handed in after its due date; None when
    that is not known (no metadata file, or one without the times or unreadable)."""
    try:
        metadata = json.loads((root / METADATA).read_text(encoding="utf-8"))
        return _instant(metadata["created_at"]) > _due_date(metadata)
    except UNREADABLE:
        return None


def _due_date(metadata: dict) -> datetime:
    """The latest due date among the submitters (a group is late only when late for each
    of them), each their own if the file gives one, else the assignment's."""
    default = metadata["assignment"]["due_date"]
    own = [(user.get("assignment") or {}).get("due_date") or default for user in metadata.get("users") or ()]
    return max(_instant(text) for text in own or [default])


def _instant(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    if moment.tzinfo is None:  # a local time of somewhere unknown: not comparable
        raise ValueError(f"{text!r} has no UTC offset")
    return moment
