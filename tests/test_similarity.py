"""`grade similarity` on a class whose copies were made as students make them
(tests/similarity_class.py): each copy ends in the right pair, with the right regions and rank;
honest pairs, and students who left the stub untouched, stay below the threshold; the page
escapes what students wrote; the class report links the page."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from grader.cli import _batch_parser, _similarity_options, main
from grader.core.assignment import Assignment
from grader.core.ingest import MAX_SOURCE_BYTES
from grader.engine.batch import grade_batch
from grader.results.students import handins
from grader.results.submissions import discover
from grader.similarity.compare import MAX_PLACES, Pair, fingerprints, similar_pairs
from grader.similarity.report import (
    DEFAULT_THRESHOLD,
    NOTE,
    SCHEMA_VERSION,
    SimilarityOptions,
    SimilarityReport,
    find_similar,
)
from grader.similarity.sources import base_sources, student_sources
from grader.views.similarity_page import render_html
from tests import similarity_class as cls
from tests.conftest import ASSIGNMENT_03, TEST_LIMITS

ASSIGNMENT = Assignment.load(ASSIGNMENT_03)


def run(folder: Path, against: Path | None = None, threshold: float = DEFAULT_THRESHOLD) -> SimilarityReport:
    return find_similar(ASSIGNMENT, folder, handins(discover(folder), folder, ASSIGNMENT), against=against,
                        threshold=threshold)


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> tuple[Path, Path]:
    return cls.write_class(tmp_path_factory.mktemp("class"))


@pytest.fixture(scope="module")
def report(folders) -> SimilarityReport:
    return run(*folders)


@pytest.fixture(scope="module")
def every_pair(folders) -> dict[frozenset[str], Pair]:
    return {frozenset((pair.a.name, pair.b.name)): pair for pair in run(*folders, threshold=0.0).pairs}


def named(pair: Pair) -> frozenset[str]:
    return frozenset((pair.a.name, pair.b.name))


def definitions(text: str) -> dict[str, range]:
    """The lines of each top-level function and class of a module."""
    return {node.name: range(node.lineno, node.end_lineno + 1) for node in ast.parse(text).body
            if isinstance(node, (ast.FunctionDef, ast.ClassDef))}


def definition_at(spans: dict[str, range], lines: tuple[int, int]) -> str | None:
    """The definition that holds the region ``lines`` whole, if one does."""
    return next((name for name, span in spans.items() if lines[0] in span and lines[1] in span), None)


def test_the_copies_and_only_the_copies_are_listed_the_whole_copy_first(report):
    assert [named(pair) for pair in report.pairs] == [
        frozenset(("ada", "ben")),  # copied whole, disguised
        frozenset(("cal", "dan")),  # the class copied, the functions his own
        frozenset(("fay", cls.TUTORIAL_NAME)),  # adapted from the tutorial
    ]
    tutorial = report.pairs[2]
    assert tutorial.b.known and not tutorial.a.known and tutorial.b.file == f"known/{cls.TUTORIAL_NAME}"


def test_a_copy_renamed_reordered_and_reformatted_matches_each_definition_with_its_own(report):
    pair = report.pairs[0]
    assert (pair.a.name, pair.b.name) == ("ada", "ben")
    ada, ben = definitions(cls.ADA), definitions(cls.BEN)
    matched = {(definition_at(ada, match.a_lines), definition_at(ben, match.b_lines)) for match in pair.matches}
    # Ben moved the class first and swapped the functions: each region still pairs a definition with its own.
    assert matched == {("split_heads", "split_heads"), ("combine_heads", "combine_heads"),
                       ("MultiHeadAttention", "MultiHeadAttention")}
    assert pair.similarity > 0.6


def test_a_class_copied_into_ones_own_functions_matches_the_class_alone(report):
    pair = report.pairs[1]
    cal, dan = definitions(cls.CAL), definitions(cls.DAN)
    regions = {(definition_at(cal, match.a_lines), definition_at(dan, match.b_lines)): match
               for match in pair.matches}
    assert ("MultiHeadAttention", "MultiHeadAttention") in regions
    first, last = regions["MultiHeadAttention", "MultiHeadAttention"].a_lines
    assert last - first + 1 >= 0.8 * len(cal["MultiHeadAttention"])  # most of the class, as one region
    # His own functions share nothing with hers past their signatures, which the contract fixes.
    own = set(cal["split_heads"][1:]) | set(cal["combine_heads"][1:])
    assert not [match for match in pair.matches if own & set(range(match.a_lines[0], match.a_lines[1] + 1))]


def test_code_adapted_from_a_known_source_is_named_with_the_source_and_where(report):
    pair = report.pairs[2]
    fay, tutorial = definitions(cls.FAY), definitions(cls.TUTORIAL)
    starts = {(definition_at(fay, (match.a_lines[0],) * 2), definition_at(tutorial, (match.b_lines[0],) * 2))
              for match in pair.matches}
    assert {("scaled_attention", "attention"), ("MultiHeadAttention", "MultiHeadedAttention")} <= starts
    assert pair.similarity >= DEFAULT_THRESHOLD


def test_honest_pairs_stay_below_the_threshold(every_pair, report):
    honest = [frozenset((a, b)) for i, a in enumerate(cls.HONEST) for b in cls.HONEST[i + 1:]]
    honest += [frozenset((student, cls.TUTORIAL_NAME)) for student in cls.HONEST]
    shared = {pair: every_pair[pair].similarity for pair in honest if pair in every_pair}
    assert shared, "the honest solutions share idioms (the contract's nn.Linear lines): they must be measured"
    assert max(shared.values()) < DEFAULT_THRESHOLD, shared
    # With a margin: the least similar copy scores well above the most similar honest pair.
    assert min(pair.similarity for pair in report.pairs) > 2 * max(shared.values())


def test_students_who_left_the_stub_untouched_share_nothing(folders, every_pair):
    assert not [pair for pair in every_pair if pair & {"gus", "hal"}]  # not even at threshold 0
    # It is the base that hides the stub: without it, the two untouched stubs are one code.
    students, _ = student_sources(folders[0], handins(discover(folders[0]), folders[0], ASSIGNMENT))
    stubs = [source for source in students if source.name in ("gus", "hal")]
    assert similar_pairs(stubs, [], [], 0.5)[0]
    assert not similar_pairs(stubs, [], base_sources(ASSIGNMENT), 0.0)[0]


def test_a_notebook_is_its_code_cells_in_order_and_a_region_names_its_cells(tmp_path):
    folder = tmp_path / "submissions"
    (folder / "ada").mkdir(parents=True)
    (folder / "ada" / "mha.py").write_text(cls.ADA, encoding="utf-8")
    # Jo pasted Ada's module into a notebook, a definition per cell, with the handout's check() cells between.
    blocks = cls.ADA.split("\n\n\n")
    cells = [blocks[0], "from grader import check"]
    for block in blocks[1:]:
        cells += [block, f'check("{block.split()[1].split("(")[0]}")']
    (folder / "jo").mkdir()
    (folder / "jo" / "mha.ipynb").write_text(cls.notebook(cells), encoding="utf-8")
    [pair] = run(folder).pairs
    assert named(pair) == {"ada", "jo"} and pair.similarity > 0.8  # the check() cells break a few k-grams
    jo = pair.a if pair.a.name == "jo" else pair.b
    wheres = [jo.where(*(match.a_lines if pair.a is jo else match.b_lines)) for match in pair.matches]
    assert wheres and all(where.startswith("cell ") for where in wheres), wheres
    assert jo.text.splitlines()[0] == "# cell 2"  # the markdown cell before is no code


def test_only_the_file_the_gradebook_uses_is_compared(tmp_path):
    folder = tmp_path / "submissions"
    for student, text in (("ada", cls.ADA), ("cal", cls.CAL)):
        (folder / student).mkdir(parents=True)
        (folder / student / "mha.py").write_text(text, encoding="utf-8")
    (folder / "ada" / "notes_from_cal.py").write_text(cls.CAL, encoding="utf-8")  # not graded: mha.py is
    report = run(folder, threshold=0.0)
    assert [source.file for source in report.students] == ["ada/mha.py", "cal/mha.py"]
    assert all(pair.similarity < DEFAULT_THRESHOLD for pair in report.pairs)


def test_a_file_that_cannot_be_read_is_listed_with_why(tmp_path):
    folder = tmp_path / "submissions"
    (folder / "ada").mkdir(parents=True)
    (folder / "ada" / "mha.py").write_bytes(b"\x00\x01binary")
    (folder / "bob").mkdir()
    (folder / "bob" / "mha.ipynb").write_text("{not json", encoding="utf-8")
    report = run(folder)
    assert [file for file, _ in report.unreadable] == ["ada/mha.py", "bob/mha.ipynb"]
    assert "binary" in report.unreadable[0][1] and "JSON" in report.unreadable[1][1]


def test_one_students_huge_files_cost_the_report_a_bounded_amount(tmp_path):
    # A line repeated 500 times: each place it is fingerprinted would pair with each in the other file.
    repeated = "x = torch.zeros(3).view(1, 3).transpose(0, 1).contiguous()\n" * 500
    folder = tmp_path / "submissions"
    for student in ("ada", "bob"):
        (folder / student).mkdir(parents=True)
        (folder / student / "mha.py").write_text(repeated, encoding="utf-8")
    (folder / "cyd").mkdir()
    (folder / "cyd" / "mha.ipynb").write_text(cls.notebook([cls.ADA] * (MAX_SOURCE_BYTES // len(cls.ADA) + 1)),
                                              encoding="utf-8")
    students, unreadable = student_sources(folder, handins(discover(folder), folder, ASSIGNMENT))
    assert unreadable == [("cyd/mha.ipynb", f"the notebook has too much code (over {MAX_SOURCE_BYTES} characters)")]
    prints = [fingerprints(source, set()) for source in students]
    assert max(len(places) for own in prints for places in own.values()) == MAX_PLACES
    [pair], _ = similar_pairs(students, [], [], DEFAULT_THRESHOLD)
    assert pair.similarity == 1 and len(pair.matches) >= 1


def test_cli_writes_the_json_and_the_page(folders, tmp_path, capsys):
    submissions, known = folders
    out = tmp_path / "out"
    assert main(["similarity", str(ASSIGNMENT_03), str(submissions), "--against", str(known),
                 "--out", str(out)]) == 0
    data = json.loads((out / "similarity.json").read_text(encoding="utf-8"))
    assert data["schema_version"] == SCHEMA_VERSION and data["note"] == NOTE and "never a verdict" in NOTE
    assert data["threshold"] == DEFAULT_THRESHOLD and data["known_sources"] == [cls.TUTORIAL_NAME]
    assert [(pair["a"], pair["b"]) for pair in data["pairs"]] == [("ada", "ben"), ("cal", "dan"),
                                                                  ("fay", cls.TUTORIAL_NAME)]
    similarities = [pair["similarity"] for pair in data["pairs"]]
    assert similarities == sorted(similarities, reverse=True) and all(0 < s <= 1 for s in similarities)
    first = data["pairs"][0]["matches"][0]
    assert set(first) == {"a_lines", "b_lines", "a_where", "b_where"} and first["a_lines"][0] <= first["a_lines"][1]
    assert {entry["student"] for entry in data["submissions"]} == {"ada", "ben", "cal", "dan", "eve", "fay", "gus",
                                                                   "hal", "ivy"}
    page = (out / "similarity.html").read_text(encoding="utf-8")
    assert "never a verdict" in page and 'id="pair-3"' in page
    shown = capsys.readouterr()
    assert "ada" in shown.out and "ben" in shown.out and "wrote" in shown.err


@pytest.mark.parametrize("arguments, message", [
    (["--threshold", "1.5"], "from 0 to 1"),
    (["--against", "no/such/folder"], "--against"),
])
def test_cli_refuses_bad_options(folders, tmp_path, capsys, arguments, message):
    assert main(["similarity", str(ASSIGNMENT_03), str(folders[0]), "--out", str(tmp_path), *arguments]) == 2
    assert message in capsys.readouterr().err
    assert not (tmp_path / "similarity.json").exists()


@pytest.mark.parametrize("arguments, asked", [
    ([], None),
    (["--similarity"], SimilarityOptions()),
    (["--against", "known", "--similarity-threshold", "0.4"], SimilarityOptions(Path("known"), 0.4)),
])
def test_batch_asks_for_the_report_with_similarity_or_against(arguments, asked):
    args = _batch_parser().parse_args(["assignments/03", "submissions", "--out", "results", *arguments])
    assert _similarity_options(args) == asked


def test_cli_refuses_a_missing_folder(tmp_path, capsys):
    assert main(["similarity", str(ASSIGNMENT_03), str(tmp_path / "none"), "--out", str(tmp_path)]) == 2
    assert "no such folder" in capsys.readouterr().err


HOSTILE = cls.ADA.replace('raise ValueError("d_model must be divisible by num_heads")',
                          'raise ValueError("</script><script>alert(1)</script> {{ 7 * 7 }} {% raw %}")')


def test_the_page_shows_student_code_as_text_and_runs_no_script(tmp_path):
    folder = tmp_path / "submissions"
    for student in ("ada", "<img src=x onerror=alert(2)>"):
        (folder / student).mkdir(parents=True)
        (folder / student / "mha.py").write_text(HOSTILE + "# \x1b]52;c;aGk=\x07\n", encoding="utf-8")
    report = run(folder)
    assert len(report.pairs) == 1
    page = render_html(report)
    assert "<script" not in page.lower() and "<img" not in page.lower() and "\x1b" not in page
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt; {{ 7 * 7 }} {% raw %}" in page
    assert "&lt;img src=x onerror=alert(2)&gt;" in page  # the student's folder, their name


def test_the_class_report_links_the_similarity_page_when_there_is_one(tmp_path):
    from tests.test_layering import _results

    results = _results(tmp_path / "results")
    assert main(["report", str(results)]) == 0
    assert "similarity.html" not in (results / "report.html").read_text(encoding="utf-8")
    (results / "similarity.html").write_text("<p>the page</p>", encoding="utf-8")
    assert main(["report", str(results)]) == 0
    page = (results / "report.html").read_text(encoding="utf-8")
    assert '<a href="similarity.html">' in page and "never a verdict" in page


@pytest.mark.slow
def test_a_batch_with_similarity_writes_the_report_beside_the_grades_and_links_it(folders, tmp_path):
    submissions = tmp_path / "submissions"
    for student in ("ada", "ben", "gus"):
        (submissions / student).mkdir(parents=True)
        (submissions / student / "mha.py").write_bytes((folders[0] / student / "mha.py").read_bytes())
    out = tmp_path / "results"
    result = grade_batch(ASSIGNMENT_03, submissions, out, jobs=2, device="cpu", limits=TEST_LIMITS,
                         similarity=SimilarityOptions(against=folders[1]))
    data = json.loads((out / "similarity.json").read_text(encoding="utf-8"))
    assert [(pair["a"], pair["b"]) for pair in data["pairs"]] == [("ada", "ben")]
    assert '<a href="similarity.html">' in (out / "report.html").read_text(encoding="utf-8")
    # No score changes: both copies keep the full marks their code earns.
    scores = {grade.student: grade.score for grade in result.class_results.students}
    full = result.reports[Path("ada/mha.py")].max_score
    assert scores == {"ada": full, "ben": full, "gus": 0}


@pytest.mark.slow
def test_a_similarity_step_that_fails_leaves_the_grades_written(tmp_path, monkeypatch):
    import grader.engine.batch as batch

    def broken(*args, **kwargs):
        raise RuntimeError("a fault in the comparison")

    monkeypatch.setattr(batch, "find_similar", broken)
    submissions = tmp_path / "submissions"
    (submissions / "ada").mkdir(parents=True)
    (submissions / "ada" / "mha.py").write_text((ASSIGNMENT_03 / "mha.py").read_text(encoding="utf-8"), encoding="utf-8")
    out = tmp_path / "results"
    result = grade_batch(ASSIGNMENT_03, submissions, out, jobs=1, device="cpu", limits=TEST_LIMITS,
                         similarity=SimilarityOptions())
    assert result.similarity_error == "RuntimeError: a fault in the comparison"
    assert (out / "grades.csv").is_file() and (out / "report.html").is_file()
    assert not (out / "similarity.html").exists()
