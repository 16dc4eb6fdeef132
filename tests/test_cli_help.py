"""`grade --help` is where a newcomer finds every command: each on a line of its own, said in a line."""

from __future__ import annotations

import contextlib
import io
import re

import pytest

from grader.cli import SUBCOMMANDS, main


@pytest.fixture(scope="module")
def help_text() -> str:
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    return shown.getvalue()


def test_help_lists_every_command_with_a_one_line_description(help_text):
    assert "new-assignment" in SUBCOMMANDS  # the command the old help forgot
    described = dict(re.findall(r"^  grade ([\w-]+) +(\S.*)$", help_text, re.MULTILINE))
    assert set(described) == {"ASSIGNMENT", *SUBCOMMANDS}, help_text
    for name, command in SUBCOMMANDS.items():
        assert described[name] == command.summary


def test_each_command_line_fits_a_terminal(help_text):
    lines = [line for line in help_text.splitlines() if line.startswith("  grade ")]
    assert lines and all(len(line) <= 80 for line in lines), lines
