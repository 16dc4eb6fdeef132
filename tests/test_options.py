"""One home per default: the library's options hold them, the CLI reads them from there."""

from __future__ import annotations

import pytest

from grader.cli import _batch_parser, _grade_parser, _limits
from grader.engine.options import DEFAULT, DEFAULT_BATCH, BatchOptions, GradeOptions, OptionError
from grader.student import grade as public


def test_the_cli_defaults_are_the_librarys():
    grade_args = _grade_parser().parse_args(["assignments/03"])
    batch_args = _batch_parser().parse_args(["assignments/03", "submissions", "--out", "results"])
    for args in (grade_args, batch_args):
        assert (args.device, args.sandbox) == (DEFAULT.device, DEFAULT.sandbox)
        assert _limits(args) == DEFAULT.limits
    assert (batch_args.jobs, batch_args.executor) == (DEFAULT_BATCH.jobs, DEFAULT_BATCH.executor)


def test_the_cli_limits_change_only_what_their_flags_name():
    limits = _limits(_grade_parser().parse_args(["a", "--timeout", "3", "--memory", "1.5"]))
    assert (limits.call_timeout_s, limits.cell_timeout_s, limits.memory_bytes) == (3.0, 3.0, 3 * 2**29)
    assert limits.student_time_s == DEFAULT.limits.student_time_s


@pytest.mark.parametrize("flag, value, why", [
    ("--memory", "0.5", "torch loaded"),  # every submission would fail to load, as if its code were wrong
    ("--memory", "-1", "torch loaded"),
    ("--timeout", "0", "loading a submission"),
    ("--timeout", "nan", "loading a submission"),
    ("--timeout", "soon", "not a number"),
])
def test_a_limit_no_submission_could_meet_is_refused_with_why(flag, value, why, capsys):
    with pytest.raises(SystemExit) as exited:
        _grade_parser().parse_args(["a", flag, value])
    err = capsys.readouterr().err
    assert exited.value.code == 2 and flag in err and why in err, err


@pytest.mark.parametrize("make, option", [
    (lambda: GradeOptions(device="gpu"), "device"),
    (lambda: GradeOptions(sandbox="paranoid"), "sandbox"),
    (lambda: BatchOptions(executor="slurm"), "executor"),
])
def test_a_bad_option_is_named_but_no_flag_is(make, option):
    with pytest.raises(OptionError) as raised:
        make()
    assert raised.value.option == option and "--" not in str(raised.value)


def test_the_students_grader_shows_a_path_that_looks_like_markup_as_text(tmp_path, capsys):
    missing = tmp_path / "hw[" / "].py"  # grade --submission 'hw[/].py'
    assert public.main(["assignments/03", "--submission", str(missing)]) == public.EXIT_USAGE
    assert f"no such submission file: {missing}" in " ".join(capsys.readouterr().err.split())
