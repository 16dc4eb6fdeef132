"""`grade report`: class statistics, the HTML page (also as a real browser renders it) and the CLI.

The results folders are written directly from synthetic reports: no grading, so it is quick.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import zlib
from dataclasses import replace
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from grader.cli import main
from grader.core.report import GradeReport, PartResult, Status
from grader.results.class_stats import MOST_FREQUENT_HINTS, Scores, histogram
from grader.results.folder import ResultsError, read_results, report_path
from grader.views.class_report import (
    HISTOGRAM_COLOUR,
    MISTAKE_COLOUR,
    class_table,
    render_html,
)

MAX_SCORES = {"split_heads": 4, "combine_heads": 2, "MultiHeadAttention": 6}
SCRIPT_HINT = "<script>alert('x')</script> & friends"
# name: (status, scores by part, hints by part); parts not in the scores get full marks.
CLASS = {
    "alice/mha.py": (Status.GRADED, {}, {}),
    "bob/mha.py": (Status.GRADED, {"MultiHeadAttention": 3}, {"MultiHeadAttention": "scale by sqrt(d_k)"}),
    "carol/mha.ipynb": (Status.GRADED, {"split_heads": 0, "combine_heads": 0, "MultiHeadAttention": 0},
                        {"split_heads": "not implemented", "combine_heads": "not implemented",
                         "MultiHeadAttention": "scale by sqrt(d_k)"}),
    "dave/mha.py": (Status.GRADED, {"split_heads": 2.5}, {"split_heads": SCRIPT_HINT,
                                                          "combine_heads": "a hint on a part with full marks"}),
    "erin/mha.py": (Status.GRADED, {"MultiHeadAttention": 3}, {"MultiHeadAttention": "scale by sqrt(d_k)"}),
    "frank/notes.txt": (Status.UNGRADABLE, {part: 0 for part in MAX_SCORES}, {}),
    "gina/mha.py": (Status.GRADER_ERROR, {part: 0 for part in MAX_SCORES}, {"split_heads": "counted only if graded"}),
}
GRADED = [name for name, (status, _, _) in CLASS.items() if status == Status.GRADED]


def make_report(name: str, status: str, scores: dict[str, float], hints: dict[str, str]) -> GradeReport:
    parts = [PartResult(part_id, scores.get(part_id, max_score), max_score, hints.get(part_id), [])
             for part_id, max_score in MAX_SCORES.items()]
    return GradeReport(assignment="03", submission=name, status=status, error=None if status == Status.GRADED else "x",
                       score=sum(p.score for p in parts), max_score=sum(MAX_SCORES.values()), device="cpu",
                       duration_s=1.0, grader_version="test", parts=parts)


def score(name: str, part_id: str | None = None) -> float:
    _, scores, _ = CLASS[name]
    return scores.get(part_id, MAX_SCORES[part_id]) if part_id else sum(scores.get(p, m) for p, m in MAX_SCORES.items())


@pytest.fixture
def results(tmp_path) -> Path:
    """A `grade batch` results folder, with files under reports/ that are not reports."""
    folder = tmp_path / "results"
    for name, report in CLASS.items():
        make_report(name, *report).write_json(report_path(folder, Path(name)))
    (folder / "reports/broken.json").write_text('{"schema_version": 1, "assign')
    (folder / "reports/list.json").write_text("[1, 2]")
    (folder / "reports/summary.json").write_text(json.dumps({"schema_version": 1, "submissions": 3}))
    (folder / "summary.json").write_text("{}")  # outside reports/: not looked at
    return folder


class Page(HTMLParser):
    """The svg plots of a page: each one's attributes, <title>, and its bars' tooltips."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.plots: list[dict] = []
        self._in: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in ("svg", "rect", "title"):  # only these: void elements such as <meta> never end
            self._in.append(tag)
        if tag == "svg":
            self.plots.append({**dict(attrs), "title": None, "bars": []})
        elif tag == "rect":
            self.plots[-1]["bars"].append({**dict(attrs), "title": None})

    def handle_endtag(self, tag: str) -> None:
        if tag in ("svg", "rect", "title"):
            self._in.pop()

    def handle_data(self, data: str) -> None:
        if self._in[-2:] == ["svg", "title"]:
            self.plots[-1]["title"] = data
        elif self._in[-2:] == ["rect", "title"]:
            self.plots[-1]["bars"][-1]["title"] = data


def tooltip_counts(plot: dict) -> list[int]:
    return [int(bar["title"].split(" submission")[0]) for bar in plot["bars"]]


# ---- statistics ----------------------------------------------------------------------


@pytest.mark.parametrize("values, max_score, lows, counts", [
    ([4, 4, 3, 0, 2.5], 4, [0, 1, 2, 3, 4], [1, 0, 1, 1, 2]),  # whole points: a bar each, full marks apart
    ([0, 2.4, 2.39, 11.99, 12, 13], 12, [0, 2, 4, 6, 8, 10, 12], [1, 2, 0, 0, 0, 1, 2]),  # 2 points a bin
    ([25.5, 24, 23.9, 0.5], 26, [0, 3, 6, 9, 12, 15, 18, 21, 24, 26], [1, 0, 0, 0, 0, 0, 0, 1, 2, 0]),  # 24 ≤ s < 26
    ([0.5, 1.5], 1.5, [0, 1, 1.5], [1, 0, 1]),  # a whole point, then what is left
    ([], 0, [0], [0]),
])
def test_histogram_bins_hold_every_score_once(values, max_score, lows, counts):
    bins = histogram(Scores(values, max_score))
    assert [b.low for b in bins] == pytest.approx(lows)
    assert [b.count for b in bins] == counts
    assert bins[-1].high is None and all(b.high == pytest.approx(next_.low) for b, next_ in zip(bins, bins[1:]))


@pytest.mark.parametrize("max_score, labels", [
    (4, ["0", "1", "2", "3", "4"]),  # a point wide: 2 holds 2 up to 3
    (12, ["0–<2", "2–<4", "4–<6", "6–<8", "8–<10", "10–<12", "12"]),  # a 3 is in 2–<4, never in a bin labelled 2
    (26, ["0–<3", "3–<6", "6–<9", "9–<12", "12–<15", "15–<18", "18–<21", "21–<24", "24–<26", "26"]),
    (1.5, ["0", "1", "1.5"]),
])
def test_histogram_bins_are_labelled_by_the_scores_they_hold(max_score, labels):
    assert [b.label for b in histogram(Scores([], max_score))] == labels


def test_the_plots_label_each_bar_with_its_bins_range(results):
    page = render_html(read_results(results))
    total = page[page.index("<svg"):page.index("</svg>")]  # out of 12: bins 2 points wide
    assert re.findall(r'class="tick">([^<]*)</text>', total) == [
        "0–&lt;2", "2–&lt;4", "4–&lt;6", "6–&lt;8", "8–&lt;10", "10–&lt;12", "12"]


def test_class_data_counts_statuses_scores_and_mistakes(results):
    data = read_results(results)
    stats = data.statistics
    assert data.assignment == "03" and stats.submissions == len(CLASS)
    assert stats.counts == {"graded": 5, "ungradable": 1, "grader_error": 1}
    assert list(stats.parts) == list(MAX_SCORES)  # report order
    for part_id, scores in stats.parts.items():
        assert scores.values == [score(name, part_id) for name in GRADED]
        assert scores.max_score == MAX_SCORES[part_id]
        assert scores.stats()["mean"] == pytest.approx(statistics.fmean(score(name, part_id) for name in GRADED))
    assert stats.total.values == [score(name) for name in GRADED]
    # Only graded parts that lost points count; the most frequent first.
    assert stats.hints == [("MultiHeadAttention: scale by sqrt(d_k)", 3), ("split_heads: not implemented", 1),
                           ("combine_heads: not implemented", 1), (f"split_heads: {SCRIPT_HINT}", 1)]


def test_only_the_most_frequent_mistakes_are_kept(tmp_path):
    for i in range(MOST_FREQUENT_HINTS + 3):  # mistake 0 twice, then 11 others once
        hint = f"mistake {i % (MOST_FREQUENT_HINTS + 2)}"
        make_report(f"s{i}.py", Status.GRADED, {"split_heads": 0}, {"split_heads": hint}).write_json(
            tmp_path / "reports" / f"s{i}.py.json")
    hints = read_results(tmp_path).statistics.hints
    assert len(hints) == MOST_FREQUENT_HINTS and hints[0] == ("split_heads: mistake 0", 2)


def test_files_that_are_not_reports_are_skipped_and_listed(results):
    data = read_results(results)
    assert sorted(p.as_posix() for p in data.skipped) == [
        "reports/broken.json", "reports/list.json", "reports/summary.json"]


@pytest.mark.parametrize("files, message", [
    (None, "has no reports/ folder"),
    ({}, "no grade reports"),
    ({"a.json": "not json"}, r"no grade reports .*\(1 unreadable"),
    ({"a.json": make_report("a.py", Status.GRADED, {}, {}),
      "b.json": replace(make_report("b.py", Status.GRADED, {}, {}), assignment="04")},
     r"several assignments \(03, 04\)"),
])
def test_a_folder_without_the_reports_of_one_assignment_is_an_error(tmp_path, files, message):
    if files is not None:
        (tmp_path / "reports").mkdir()
    for name, content in (files or {}).items():
        if isinstance(content, GradeReport):
            content.write_json(tmp_path / "reports" / name)
        else:
            (tmp_path / "reports" / name).write_text(content)
    with pytest.raises(ResultsError, match=message):
        read_results(tmp_path)


# ---- the page ------------------------------------------------------------------------


def test_page_plots_every_histogram_and_the_mistakes(results):
    page = render_html(read_results(results))
    assert "Assignment 03" in page and f"{len(CLASS)} submissions" in page
    plots = Page(page).plots
    assert len(plots) == 2 + len(MAX_SCORES)  # total, mistakes, one per part
    for plot in plots:
        assert plot["role"] == "img" and plot["aria-label"] == plot["title"] and plot["title"]
        assert all(bar["title"] and float(bar["height"]) > 0 for bar in plot["bars"])
    total, mistakes, *parts = plots
    assert sum(tooltip_counts(total)) == len(GRADED)
    for plot, part_id in zip(parts, MAX_SCORES):
        assert part_id in plot["title"]
        assert sorted(tooltip_counts(plot)) == sorted(b.count for b in histogram(Scores(
            [score(name, part_id) for name in GRADED], MAX_SCORES[part_id])) if b.count)
    assert tooltip_counts(mistakes) == [3, 1, 1, 1]
    # A bar's length is its count's share of the longest.
    widths = [float(bar["width"]) for bar in mistakes["bars"]]
    assert widths[1] == pytest.approx(widths[0] / 3)


def test_page_escapes_report_text(results):
    page = render_html(read_results(results))
    assert "<script" not in page
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; friends" in page
    mistakes = Page(page).plots[1]
    assert any(bar["title"].endswith(SCRIPT_HINT) for bar in mistakes["bars"])  # what a reader sees


def test_page_is_self_contained(results):
    page = render_html(read_results(results))
    for reference in ("http://", "https://", "//", "src=", "href=", "url(", "@import"):
        assert reference not in page


# ---- the terminal view and the command -----------------------------------------------


def test_terminal_view(results):
    from rich.console import Console

    console = Console(width=120, record=True)
    console.print(class_table(read_results(results)))
    text = console.export_text()
    assert all(part_id in text for part_id in MAX_SCORES)
    assert "▃ ▃ █" in text  # split_heads' bins 0 1 2 3 4 (full marks) hold 1 0 1 0 3
    assert re.search(r"\b3 +│ MultiHeadAttention: scale by sqrt\(d_k\)", text) and SCRIPT_HINT in text
    assert "skipped 3 files that are not grade reports" in text


def test_cli_writes_the_page_and_prints_the_table(results, tmp_path, capsys):
    assert main(["report", str(results)]) == 0
    assert "MultiHeadAttention" in capsys.readouterr().out
    assert (results / "report.html").read_text(encoding="utf-8") == render_html(read_results(results))
    assert main(["report", str(results), "--html", str(tmp_path / "elsewhere" / "class.html")]) == 0
    assert (tmp_path / "elsewhere" / "class.html").is_file()


def test_cli_without_reports_exits_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nothing")]) == 2
    assert "no reports/ folder" in capsys.readouterr().err
    assert not (tmp_path / "nothing").exists()


# ---- in a real browser ---------------------------------------------------------------


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    if binary is None:
        if os.environ.get("REQUIRE_BROWSER") == "1":
            pytest.fail("REQUIRE_BROWSER=1 but no chromium on PATH")
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    # Headless as root in a container, and no network: nothing may reach out.
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={tmp_path / 'profile'}"]
    return subprocess.run([binary, *flags, *args], capture_output=True, text=True, timeout=30, check=True)


def png_pixels(path: Path) -> np.ndarray:
    """An 8-bit RGB(A) PNG, as Chromium writes screenshots, as a (height, width) array of 0xRRGGBB."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, at = {}, 8
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        chunks[kind] = chunks.get(kind, b"") + data[at + 8:at + 8 + length]
        at += 12 + length
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunks[b"IHDR"])
    assert depth == 8 and colour in (2, 6) and not interlace, "not a screenshot-like PNG"
    channels = 3 if colour == 2 else 4
    raw = np.frombuffer(zlib.decompress(chunks[b"IDAT"]), np.uint8).reshape(height, 1 + width * channels)
    rows = np.zeros((height + 1, width * channels), np.int64)  # row 0: the zeros above the image
    for y, (kind, line) in enumerate(zip(raw[:, 0], raw[:, 1:].astype(np.int64)), start=1):
        if kind == 0:
            rows[y] = line
        elif kind == 1:  # each byte adds the decoded byte of the same channel to its left
            rows[y] = np.cumsum(line.reshape(width, channels), axis=0).reshape(-1) % 256
        elif kind == 2:
            rows[y] = (line + rows[y - 1]) % 256
        else:
            rows[y] = unfilter_byte_by_byte(kind, line.tolist(), rows[y - 1].tolist(), channels)
    return rows[1:].reshape(height, width, channels)[..., :3] @ np.array([1 << 16, 1 << 8, 1])


def unfilter_byte_by_byte(kind: int, line: list[int], up: list[int], step: int) -> list[int]:
    """PNG's average (3) and Paeth (4) filters predict from the decoded byte to the left:
    no vectorising, so plain lists."""
    out: list[int] = []
    for x, value in enumerate(line):
        left, upper_left = (out[x - step], up[x - step]) if x >= step else (0, 0)
        if kind == 3:
            predicted = (left + up[x]) // 2
        else:
            guess = left + up[x] - upper_left
            predicted = min((left, up[x], upper_left), key=lambda byte: abs(guess - byte))  # ties: in this order
        out.append((value + predicted) % 256)
    return out


@pytest.mark.slow
def test_a_browser_renders_the_plots(results, tmp_path):
    assert main(["report", str(results)]) == 0
    page = results / "report.html"
    plots = Page(page.read_text(encoding="utf-8")).plots
    assert len(plots) == 2 + len(MAX_SCORES) and all(plot["bars"] for plot in plots)
    # Every plot, bar and tooltip is in the DOM Chromium built from the page.
    assert Page(chromium(tmp_path, "--dump-dom", page.as_uri()).stdout).plots == plots

    screenshot = tmp_path / "report.png"
    chromium(tmp_path, f"--screenshot={screenshot}", "--window-size=1200,2000", page.as_uri())
    pixels = png_pixels(screenshot)
    assert pixels.shape == (2000, 1200)
    # The bars are painted in their colours, at about the size the SVG gives them (CSS may
    # scale a plot down to fit, and edges blend into the background).
    for colour, svgs in ((HISTOGRAM_COLOUR, [plots[0], *plots[2:]]), (MISTAKE_COLOUR, [plots[1]])):
        drawn = sum(float(bar["width"]) * float(bar["height"]) for plot in svgs for bar in plot["bars"])
        assert 0.5 * drawn < (pixels == int(colour.lstrip("#"), 16)).sum() <= drawn * 1.05, colour
    assert len(np.unique(pixels)) > 20  # text and plots, not a blank page
