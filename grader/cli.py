"""``grade``: the command line. It parses arguments and calls the library; nothing more.

    grade assignments/03                           # grade your working copy
    grade assignments/03 --submission hw.ipynb --json report.json
    grade batch assignments/03 submissions/ --out results/ [--jobs N] [--force] [--similarity]
    grade notebook assignments/03 [--check]        # regenerate the handout notebook
    grade public-data assignments/03 [--check]     # regenerate the data the public tests compare with
    grade release assignments/03 --out dist/       # the student handout, grader included: dist/03/, dist/03.zip
    grade report results/ [--html FILE]            # a class's plots and statistics from a batch's results
    grade feedback results/                        # each student's feedback page (batch writes them too)
    grade similarity assignments/03 submissions/ --out DIR [--against KNOWN]  # shared code across a class
    grade export gradescope|classroom assignments/03 [--out FILE]  # the grader on Gradescope / GitHub Classroom
    grade export gradescope assignments/03 --visibility after_due_date  # tests shown once the due date has passed
    grade new-assignment 07 --module gpt [--title T]  # the skeleton of a new assignment, every file in its home

Exit status: 0 when grading ran, whatever the score; 1 when the grader failed; 2 for bad
arguments (unknown assignment, missing file).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from grader.core.sanitize import for_terminal
from grader.engine.options import DEFAULT, DEFAULT_BATCH, DEVICES, EXECUTORS, MISSING_SCORES, SANDBOXES, OptionError
from grader.views.terminal import error_text, plain

if TYPE_CHECKING:
    from grader.similarity.report import SimilarityOptions

EXIT_OK, EXIT_GRADER_ERROR, EXIT_USAGE = 0, 1, 2


def _error(console: Console, message: object) -> None:
    from grader.sandbox.isolation import SandboxUnavailable

    # The library names the option; here it is a flag.
    if isinstance(message, OptionError):
        message = f"--{message.option.replace('_', '-')}: {message}"
    elif isinstance(message, SandboxUnavailable):
        message = f"--sandbox strict: {message}"
    # soft_wrap: no line break inside a path, which must stay whole to be copied (the terminal wraps it).
    console.print(error_text(message), soft_wrap=True)


def _say(console: Console, message: object) -> None:
    console.print(plain(message), soft_wrap=True)


def _grade_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grade", description="Grade a submission of a Transformer course assignment.",
                                     epilog=_commands_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("assignment", type=Path, help="the assignment directory, e.g. assignments/03")
    parser.add_argument("--submission", type=Path, help=".py or .ipynb to grade (default: your working copy)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="write the JSON report here")
    _add_limit_options(parser)
    parser.add_argument("--quiet", "-q", action="store_true", help="print nothing; use with --json")
    parser.add_argument("--verbose", "-v", action="store_true", help="also show every failing test and your output")
    return parser


def _add_limit_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--device", choices=DEVICES, default=DEFAULT.device,
                        help="where to run (auto: CUDA when available)")
    parser.add_argument("--timeout", type=_at_least(1.0, "s", "loading a submission takes up to a second"),
                        default=DEFAULT.limits.call_timeout_s, metavar="SECONDS",
                        help="time limit per call into student code (CPU time: a busy machine does not count; a "
                             "call past 1 s may take 3000 times the reference's time for it, up to this, and a whole "
                             "job such as 07's training 3000 times the reference's same job) and per notebook cell "
                             "(default %(default)g)")
    parser.add_argument("--memory", type=_at_least(1.0, "GiB", "the student's process starts with torch loaded, "
                                                    "about 0.7 GiB of address space"),
                        default=DEFAULT.limits.memory_bytes / 2**30, metavar="GIB",
                        help="memory limit of the student's code: each process, and all of a submission's "
                             "together where the machine has a memory cgroup (default %(default)g)")
    parser.add_argument("--sandbox", choices=SANDBOXES, default=DEFAULT.sandbox,
                        help="isolation beyond the child process: basic uses what this machine offers and warns "
                             "about the rest; strict refuses to grade without all of them (namespaces, a cgroup per "
                             "submission with pids, memory and cpu, seccomp, Landlock); off uses none")


def _at_least(minimum: float, unit: str, why: str) -> Callable[[str], float]:
    """An argument type: a number of at least ``minimum``; below it, an error that says why
    (a limit too small would fail every submission, and blame the student's code)."""
    def number(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not value >= minimum:  # NaN too
            raise argparse.ArgumentTypeError(f"{text} is below {minimum:g} {unit}: {why}")
        return value

    return number


def _limits(args: argparse.Namespace):
    return replace(DEFAULT.limits, call_timeout_s=args.timeout, cell_timeout_s=args.timeout,
                   memory_bytes=int(args.memory * 2**30))


def _batch_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grade batch", description="Grade every submission in a folder.")
    parser.add_argument("assignment", type=Path, help="the assignment directory, e.g. assignments/03")
    parser.add_argument("folder", type=Path, help="the submissions (.py, .ipynb; sub-folders allowed)")
    parser.add_argument("--out", type=Path, required=True,
                        help="results folder: reports/, summary.json, grades.csv, canvas.csv, gradescope.csv, feedback/")
    parser.add_argument("--jobs", "-j", type=int, default=DEFAULT_BATCH.jobs,
                        help="submissions graded at once (default %(default)s)")
    parser.add_argument("--force", action="store_true", help="regrade submissions whose report is up to date")
    parser.add_argument("--all-files", action="store_true",
                        help="grade every file a student handed in (default: only the one their grade comes from; "
                             "the others are listed as handed in, not graded)")
    parser.add_argument("--executor", choices=EXECUTORS, default=DEFAULT_BATCH.executor,
                        help="ray: spread over a Ray cluster (pip install 'transformer-grader[ray]')")
    parser.add_argument("--ray-address", help="the cluster to join (default: RAY_ADDRESS, else a local cluster)")
    parser.add_argument("--roster", type=Path, metavar="CSV",
                        help="the students: columns student (required), path, name, email, section, canvas_id, "
                             "sis_user_id, sis_login_id (default: one student per folder; see docs/instructors.md)")
    parser.add_argument("--missing", choices=MISSING_SCORES, default=DEFAULT_BATCH.missing,
                        help="a student who handed in nothing, in canvas.csv and gradescope.csv: blank (default: the "
                             "LMS keeps its own missing, excused or extension) or zero; grades.csv says 0 either way")
    parser.add_argument("--overrides", type=Path, metavar="CSV",
                        help="the instructor's decisions, applied on every run: columns student, part, score (the "
                             "part's final points; blank keeps the autograder's), comment, and file (the file the "
                             "student's grade comes from); see docs/instructors.md")
    parser.add_argument("--canvas-column", metavar="HEADER",
                        help="the assignment's column in canvas.csv, e.g. 'Assignment 03 (12345)' as Canvas's export "
                             "names it (default: a new assignment, 'Assignment ID: TITLE')")
    parser.add_argument("--similarity", action="store_true",
                        help="also write similarity.json and similarity.html: the students whose files share code "
                             "(evidence for you to read; no score changes), linked from the class report")
    _add_similarity_options(parser, prefix="similarity-")
    _add_limit_options(parser)
    return parser


def _notebook_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grade notebook", description="Generate the handout notebook from the stub module.")
    parser.add_argument("assignment", type=Path)
    parser.add_argument("--check", action="store_true", help="only check that the notebook is up to date")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    console = Console(stderr=True)
    if argv[:1] and argv[0] in SUBCOMMANDS:
        command = SUBCOMMANDS[argv[0]]
        return command.run(command.make_parser().parse_args(argv[1:]), console)
    return _grade(_grade_parser().parse_args(argv), console)


def _start_grader(assignment: Path) -> None:
    """Start the zygote server (see grader.sandbox.zygote), then import torch and the engine
    here: the two imports, and those the assignment's suite declares, run side by side, each
    with its collector paused (see grader.sandbox.warm_parent)."""
    from grader.core.assignment import Assignment, AssignmentError
    from grader.sandbox.warm_parent import starting
    from grader.sandbox.zygote import ZygoteServer

    try:
        preload = Assignment.load(assignment).preload
    except AssignmentError:  # said below, where the assignment is loaded for grading
        preload = ()
    ZygoteServer.shared(preload)
    with starting():
        import grader.engine.api  # noqa: F401


def _grade(args: argparse.Namespace, console: Console) -> int:
    _start_grader(args.assignment)
    from grader.core.assignment import AssignmentError
    from grader.core.report import Status
    from grader.engine.api import grade
    from grader.sandbox.isolation import SandboxUnavailable
    from grader.views.terminal import render_report

    if args.submission is not None and not args.submission.is_file():
        _error(console, f"no such submission file: {args.submission}")
        return EXIT_USAGE
    try:
        report = grade(args.assignment, args.submission, device=args.device, limits=_limits(args),
                       sandbox=args.sandbox)
    except (AssignmentError, ValueError, SandboxUnavailable) as exc:
        _error(console, exc)
        return EXIT_USAGE
    if args.json:
        report.write_json(args.json)
    if not args.quiet:
        Console().print(render_report(report, verbose=args.verbose))
    return EXIT_GRADER_ERROR if report.status == Status.GRADER_ERROR else EXIT_OK


def _batch(args: argparse.Namespace, console: Console) -> int:
    if args.executor == "local":
        _start_grader(args.assignment)
    from grader.core.assignment import AssignmentError
    from grader.core.report import json_text
    from grader.engine.batch import grade_batch
    from grader.results.folder import ResultsError
    from grader.results.overrides import OverrideError, Overrides
    from grader.results.students import Roster, RosterError
    from grader.sandbox.isolation import SandboxUnavailable
    from grader.views.class_report import batch_summary

    if not args.folder.is_dir():
        _error(console, f"no such folder: {args.folder}")
        return EXIT_USAGE
    if problem := _similarity_options_error(args):
        _error(console, problem)
        return EXIT_USAGE
    if args.executor == "ray" and importlib.util.find_spec("ray") is None:
        _error(console, "--executor ray needs Ray: pip install 'transformer-grader[ray]'")
        return EXIT_USAGE
    try:
        roster = Roster.load(args.roster) if args.roster else None
    except RosterError as exc:
        _error(console, f"--roster: {exc}")
        return EXIT_USAGE
    try:
        overrides = Overrides.load(args.overrides) if args.overrides else None
    except OverrideError as exc:
        _error(console, f"--overrides: {exc}")
        return EXIT_USAGE
    out = Console()
    progress = _BatchProgress(out)
    try:
        with progress:
            result = grade_batch(args.assignment, args.folder, args.out, jobs=args.jobs, device=args.device,
                                 limits=_limits(args), sandbox=args.sandbox, force=args.force, executor=args.executor,
                                 ray_address=args.ray_address, roster=roster, all_files=args.all_files,
                                 canvas_column=args.canvas_column, missing=args.missing, overrides=overrides,
                                 similarity=_similarity_options(args), **progress.callbacks)
    except OverrideError as exc:  # the reports graded are kept: the same command, the file fixed, reuses them
        _error(console, f"--overrides: {exc}")
        return EXIT_USAGE
    except (AssignmentError, ResultsError, ValueError, SandboxUnavailable) as exc:
        _error(console, exc)
        return EXIT_USAGE
    except KeyboardInterrupt:
        _say(console, "interrupted: the reports written so far are kept; run the same command to resume")
        return 130
    if out.is_terminal:
        out.print(batch_summary(result, args.out))
    else:
        # Not a terminal, but perhaps piped to one: ASCII, with every control character escaped.
        print(json_text(result.summary, indent=None, ascii_only=True))
    if result.similarity_error:
        _error(console, f"the similarity report failed (the grades are written): {result.similarity_error}")
        return EXIT_GRADER_ERROR
    if args.similarity or args.against:
        _say(console, f"wrote the similarity report: {args.out / 'similarity.html'} (and similarity.json)")
    return EXIT_GRADER_ERROR if result.summary["counts"]["grader_error"] else EXIT_OK


class _BatchProgress(Progress):
    """The batch's progress bar: its columns labelled, and the file being graded longest named
    (the one to look at when the bar stalls)."""

    def __init__(self, console: Console) -> None:
        super().__init__(TextColumn("graded"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[rate]}"),
                         TextColumn("elapsed"), TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                         TextColumn("{task.fields[current]}", markup=False), console=console, disable=not console.is_terminal)
        self.task = self.add_task("grading", total=None, rate="", current="")
        self.started = time.monotonic()
        self.graded_now = 0
        self.running: dict[Path, None] = {}  # in the order they started
        self.callbacks = {"on_start": self.on_start, "on_begin": self.on_begin, "on_report": self.on_report}

    def on_start(self, total: int, up_to_date: int) -> None:
        self.update(self.task, total=total, completed=up_to_date)

    def on_begin(self, path: Path) -> None:
        self.running[path] = None
        self._show_running()

    def on_report(self, path: Path, report: object) -> None:
        self.graded_now += 1
        self.running.pop(path, None)
        self.update(self.task, advance=1,
                    rate=f"{(time.monotonic() - self.started) / self.graded_now:.2f} s each")
        self._show_running()

    def _show_running(self) -> None:
        first = next(iter(self.running), None)
        # A file's name is the student's: text, never markup, with no control character.
        self.update(self.task, current=for_terminal(f"now: {first.as_posix()}") if first else "")


def _notebook(args: argparse.Namespace, console: Console) -> int:
    from grader.core.assignment import Assignment, AssignmentError
    from grader.course.notebook import notebook_is_current, write_notebook

    try:
        assignment = Assignment.load(args.assignment)
    except AssignmentError as exc:
        _error(console, exc)
        return EXIT_USAGE
    if args.check:
        if notebook_is_current(assignment):
            return EXIT_OK
        _say(console, f"{assignment.notebook_path} is out of date; run: grade notebook {args.assignment}")
        return EXIT_GRADER_ERROR
    write_notebook(assignment)
    _say(console, f"wrote {assignment.notebook_path}")
    return EXIT_OK


def _public_data_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grade public-data",
                                     description="Generate the data the public tests compare with (test_*.safetensors "
                                                 "beside them) from the reference and the hidden suite's mutants.")
    parser.add_argument("assignments", type=Path, nargs="+", metavar="assignment")
    parser.add_argument("--check", action="store_true", help="only check that the data is up to date")
    return parser


def _public_data(args: argparse.Namespace, console: Console) -> int:
    from grader.core.assignment import Assignment, AssignmentError
    from grader.engine.public_data import PublicDataError, stale_files, write_public_data

    try:
        assignments = [Assignment.load(folder) for folder in args.assignments]
    except AssignmentError as exc:
        _error(console, exc)
        return EXIT_USAGE
    stale = False
    for assignment in assignments:
        try:
            changed = stale_files(assignment) if args.check else write_public_data(assignment)
        except PublicDataError as exc:  # a public test or a mutant needs fixing first
            _error(console, exc)
            return EXIT_GRADER_ERROR
        for path in changed:
            stale = True
            _say(console, f"{path} is out of date; run: grade public-data {assignment.directory}" if args.check
                 else f"wrote {path}" if path.is_file() else f"removed {path} (no public test reads it)")
    return EXIT_GRADER_ERROR if args.check and stale else EXIT_OK


def _report_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grade report",
                                     description="A class report (HTML page and table) from grade batch's results.")
    parser.add_argument("results", type=Path, help="the --out folder of grade batch")
    parser.add_argument("--html", type=Path, metavar="FILE", help="write the page here (default: RESULTS/report.html)")
    return parser


def _report(args: argparse.Namespace, console: Console) -> int:
    from grader.results.folder import ResultsError, read_results
    from grader.views import class_report, feedback_pages, similarity_page

    try:
        results = read_results(args.results)
    except ResultsError as exc:
        _error(console, exc)
        return EXIT_USAGE
    page = args.html or args.results / class_report.PAGE
    feedback = args.results / feedback_pages.FOLDER
    class_report.write_page(results, page, feedback if feedback.is_dir() else None,
                            similarity_page.written(args.results))
    Console().print(class_report.class_table(results))
    _say(console, f"wrote {page}")
    return EXIT_OK


def _feedback_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grade feedback",
                                     description="Write each student's feedback page (HTML and Markdown) from "
                                                 "grade batch's results, into RESULTS/feedback/.")
    parser.add_argument("results", type=Path, help="the --out folder of grade batch")
    return parser


def _feedback(args: argparse.Namespace, console: Console) -> int:
    from grader.results.folder import ResultsError, read_results
    from grader.views.feedback_pages import FOLDER, write_feedback

    try:
        results = read_results(args.results)
    except ResultsError as exc:
        _error(console, exc)
        return EXIT_USAGE
    if not results.students:
        _error(console, f"{args.results} has no gradebook (summary.json) to write feedback for: "
                        "give a results folder that this grader's `grade batch` wrote")
        return EXIT_USAGE
    pages = write_feedback(results, args.results)
    _say(console, f"wrote {len(pages)} feedback pages (HTML and Markdown) in {args.results / FOLDER}")
    return EXIT_OK


def _add_similarity_options(parser: argparse.ArgumentParser, *, prefix: str = "") -> None:
    from grader.similarity.report import DEFAULT_THRESHOLD

    parser.add_argument("--against", type=Path, metavar="KNOWN_DIR",
                        help="also compare every submission with each .py and .ipynb file here (tutorials, last "
                             "year's solutions), named in the report" + (" (implies --similarity)" if prefix else ""))
    parser.add_argument(f"--{prefix}threshold", type=float, default=DEFAULT_THRESHOLD, metavar="X",
                        dest="similarity_threshold",
                        help="list the pairs whose similarity (0 to 1) is X or more (default %(default)g)")


def _similarity_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grade similarity",
                                     description="Which submissions share code, with each other or with known "
                                                 "sources: DIR/similarity.json and DIR/similarity.html. Evidence for "
                                                 "a person to read, never a verdict; no score changes.")
    parser.add_argument("assignment", type=Path, help="the assignment directory, e.g. assignments/03 (its code is "
                                                      "the handout's, ignored)")
    parser.add_argument("folder", type=Path, help="the submissions, as grade batch takes them (the file each "
                                                  "student's grade comes from is compared)")
    parser.add_argument("--out", type=Path, required=True, help="the folder to write the report into")
    parser.add_argument("--roster", type=Path, metavar="CSV", help="the students, as grade batch --roster takes them")
    _add_similarity_options(parser)
    return parser


def _similarity_options_error(args: argparse.Namespace) -> str | None:
    if not 0 <= args.similarity_threshold <= 1:
        return f"the threshold is a similarity from 0 to 1, not {args.similarity_threshold:g}"
    if args.against is not None and not args.against.is_dir():
        return f"--against: no such folder: {args.against}"
    return None


def _similarity_options(args: argparse.Namespace) -> SimilarityOptions | None:
    """``grade batch``'s similarity step, when asked for (``--against`` asks for it too), else None."""
    from grader.similarity.report import SimilarityOptions

    if not (args.similarity or args.against):
        return None
    return SimilarityOptions(args.against, args.similarity_threshold)


def _similarity(args: argparse.Namespace, console: Console) -> int:
    from grader.core.assignment import Assignment, AssignmentError
    from grader.results.students import Roster, RosterError, handins
    from grader.results.submissions import discover
    from grader.similarity.report import FILE, find_similar
    from grader.views.similarity_page import terminal_view, write_report

    problem = _similarity_options_error(args)
    if problem is None and not args.folder.is_dir():
        problem = f"no such folder: {args.folder}"
    if problem:
        _error(console, problem)
        return EXIT_USAGE
    try:
        assignment = Assignment.load(args.assignment)
        roster = Roster.load(args.roster) if args.roster else None
    except (AssignmentError, RosterError) as exc:
        _error(console, exc)
        return EXIT_USAGE
    students = handins(discover(args.folder), args.folder, assignment, roster)
    report = find_similar(assignment, args.folder, students, against=args.against,
                          threshold=args.similarity_threshold)
    page = write_report(report, args.out)
    Console().print(terminal_view(report))
    _say(console, f"wrote {args.out / FILE} and {page}")
    return EXIT_OK


def _export_parser() -> argparse.ArgumentParser:
    from grader.export.classroom_workflow import DEFAULT_GRADER_SOURCE, DEFAULT_OUT
    from grader.export.gradescope import add_visibility_options

    parser = argparse.ArgumentParser(prog="grade export", description="Package the grader for a course platform.")
    platforms = parser.add_subparsers(dest="platform", required=True)
    gradescope = platforms.add_parser("gradescope",
                                      help="a Gradescope autograder zip (setup.sh, run_autograder, the grader)")
    gradescope.add_argument("assignment", type=Path, help="the assignment directory, e.g. assignments/03")
    gradescope.add_argument("--out", type=Path, default=Path("autograder.zip"), help="default: autograder.zip")
    add_visibility_options(gradescope)
    classroom = platforms.add_parser("classroom", help="a GitHub Classroom autograding workflow")
    classroom.add_argument("assignment", type=Path,
                           help="the assignment directory: a relative path, the same in the students' repositories")
    classroom.add_argument("--out", type=Path, default=Path(DEFAULT_OUT), help=f"default: {DEFAULT_OUT}")
    classroom.add_argument("--grader-source", default=DEFAULT_GRADER_SOURCE, metavar="PIP_SPEC",
                           help="what pip installs the grader from, with the hidden suites: a private repository, "
                                "reached with a secret token (default: %(default)s)")
    return parser


def _export(args: argparse.Namespace, console: Console) -> int:
    from grader.core.assignment import AssignmentError
    from grader.export import ExportError
    from grader.export.classroom_workflow import write_workflow
    from grader.export.gradescope import visibility_from
    from grader.export.gradescope_zip import build_autograder

    try:
        if args.platform == "gradescope":
            build_autograder(args.assignment, args.out, visibility_from(args))
        else:
            write_workflow(args.assignment, args.out, args.grader_source)
    except (AssignmentError, ExportError) as exc:
        _error(console, exc)
        return EXIT_USAGE
    _say(console, f"wrote {args.out}")
    return EXIT_OK


def _release_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grade release",
                                     description="Build the student handout: the assignment and a grader that runs "
                                                 "its public tests (no reference, no hidden suite), as a folder and a zip.")
    parser.add_argument("assignment", type=Path, help="the assignment directory, e.g. assignments/03")
    parser.add_argument("--out", type=Path, required=True, help="writes OUT/<id>/ and OUT/<id>.zip, replacing them")
    return parser


def _release(args: argparse.Namespace, console: Console) -> int:
    from grader.core.assignment import AssignmentError
    from grader.course.release import ReleaseError, release

    try:
        folder, archive = release(args.assignment, args.out)
    except AssignmentError as exc:
        _error(console, exc)
        return EXIT_USAGE
    except ReleaseError as exc:  # like `grade notebook --check`: the handout needs fixing first
        _error(console, exc)
        return EXIT_GRADER_ERROR
    _say(console, f"wrote {folder} and {archive}")
    return EXIT_OK


def _new_assignment_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="grade new-assignment",
                                     description="Write the skeleton of a new assignment into the repository that "
                                                 "holds the reference (see docs/writing-an-assignment.md).")
    parser.add_argument("id", help="two digits: the handout is assignments/ID/")
    parser.add_argument("--module", required=True, help="the stub module's name, without .py (e.g. gpt)")
    parser.add_argument("--title", help="the assignment's title (default: the module name)")
    return parser


def _new_assignment(args: argparse.Namespace, console: Console) -> int:
    from grader.core.assignment import AssignmentError, reference_dir
    from grader.course.scaffold import ScaffoldError, new_assignment

    try:
        written = new_assignment(reference_dir().parent, args.id, args.module, args.title)
    except (AssignmentError, ScaffoldError) as exc:
        _error(console, exc)
        return EXIT_USAGE
    for path in written:
        _say(console, f"wrote {path}")
    _say(console, f"next: fill in assignments/{args.id}/assignment.toml, as docs/writing-an-assignment.md says")
    return EXIT_OK


class Command(NamedTuple):
    summary: str  # its line in `grade --help`
    make_parser: Callable[[], argparse.ArgumentParser]
    run: Callable[[argparse.Namespace, Console], int]


# `grade NAME ...`: each subcommand. Anything else is `grade ASSIGNMENT`.
SUBCOMMANDS = {
    "batch": Command("grade a folder of submissions, one report each", _batch_parser, _batch),
    "report": Command("a class report (HTML page, table) from batch results", _report_parser, _report),
    "feedback": Command("each student's feedback page, from a batch's results", _feedback_parser, _feedback),
    "similarity": Command("shared code across a class, and with known sources", _similarity_parser,
                          _similarity),
    "export": Command("package the grader for Gradescope or GitHub Classroom", _export_parser, _export),
    "release": Command("build the student handout: a folder and a zip", _release_parser, _release),
    "notebook": Command("regenerate the handout notebook from the stub module", _notebook_parser, _notebook),
    "public-data": Command("regenerate the data the public tests compare with",
                           _public_data_parser, _public_data),
    "new-assignment": Command("write the skeleton of a new assignment", _new_assignment_parser, _new_assignment),
}


def _commands_help() -> str:
    """The epilog of `grade --help`: every command, one line each."""
    width = max(map(len, SUBCOMMANDS)) + len("grade ")
    lines = [f"  {'grade ASSIGNMENT':<{width}}  grade one submission (the options above)"]
    lines += [f"  {'grade ' + name:<{width}}  {command.summary}" for name, command in SUBCOMMANDS.items()]
    return "commands:\n" + "\n".join(lines) + "\n\n`grade COMMAND --help` shows a command's arguments."


if __name__ == "__main__":
    sys.exit(main())
