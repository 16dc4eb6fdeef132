"""Fuzzing grader.core.ingest.load_submission: every file gives a Program or an Ungradable with a
message for the student, never a traceback from the grader.

Generated inputs: arbitrary bytes, text in odd encodings, notebook-shaped JSON with garbage in
every field, deep nesting, huge and special files, and Python that the parser chokes on. The
explicit examples are inputs that once raised, hung or gave a misleading message.
"""

from __future__ import annotations

import json
import os
import re
import threading
import warnings
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from grader.core import ingest
from grader.core.ingest import MAX_NOTEBOOK_BYTES, MAX_SOURCE_BYTES, Program, Ungradable, decode_text, load_submission
from tests.conftest import assert_valid

FUZZ = settings(max_examples=100, deadline=None)  # deadline: a busy 2-core CI box makes timings noisy
SKIP_TAG = ingest.SKIP_TAG


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """One folder for the whole module: hypothesis reruns a test many times, so no tmp_path."""
    return tmp_path_factory.mktemp("fuzz")


def load(folder: Path, data: bytes, name: str) -> Program | Ungradable:
    """``data`` written as ``name`` and loaded."""
    path = folder / name
    path.write_bytes(data)
    return outcome(path)


def outcome(path: Path) -> Program | Ungradable:
    """Anything load_submission raises but Ungradable propagates and fails the test."""
    try:
        result = load_submission(path)
    except Ungradable as exc:
        result = exc
    check_invariants(result, path.name)
    return result


def check_invariants(result: Program | Ungradable, name: str) -> None:
    if isinstance(result, Ungradable):
        assert_readable(str(result))
        return
    assert isinstance(result, Program), result
    assert result.cells, "a Program with nothing to run should have been Ungradable"
    for cell in result.cells:
        assert isinstance(cell.source, str) and cell.source.strip(), cell
        assert isinstance(cell.label, str)
        assert ingest.syntax_error(cell.source) is None, cell  # what the child gets parses
    for note in result.notes:
        assert_readable(note)
    if result.kind == "module":
        assert [cell.label for cell in result.cells] == [Path(name).name] and not result.notes
    else:
        assert result.kind == "notebook"
        numbers = [int(re.fullmatch(r"cell (\d+)", cell.label).group(1)) for cell in result.cells]
        assert numbers == sorted(set(numbers)) and numbers[0] >= 1


def assert_readable(message: str) -> None:
    """A message a student can act on: not blank, no traceback, no empty exception text."""
    assert isinstance(message, str) and message.strip() and message == message.strip(), repr(message)
    assert "Traceback" not in message and "line None" not in message, message
    assert not message.endswith(":") and ": )" not in message and ": ;" not in message, message
    assert len(message) < 5000, message[:200]


def message_of(result: Program | Ungradable) -> str:
    assert isinstance(result, Ungradable), f"expected Ungradable, got {result}"
    return str(result)


# ---- arbitrary bytes, names, encodings -----------------------------------------------------

NAMES = st.sampled_from(["mha.py", "solution.ipynb", "notes.txt", "mha", "MHA.PY", "a.ipynb.bak", "x.tar.py",
                         "caf\u00e9 \u00fc.py", ".py", "run.sh"])


@FUZZ
@given(data=st.binary(max_size=2000), name=NAMES)
@example(data=b"\xff\xfe", name="mha.py")  # a BOM and nothing else
@example(data=b"\x00" * 16, name="solution.ipynb")
def test_arbitrary_bytes_give_a_program_or_a_reason(folder, data, name):
    result = load(folder, data, name)
    if not name.endswith((".py", ".ipynb")):
        assert "not a submission" in message_of(result)
    elif isinstance(result, Program) and result.kind == "module":
        assert result.cells[0].source == decode_text(data)  # nothing is lost or rewritten


# Comments may hold any character but the ones that end a line or cannot be in source.
COMMENT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\n\x00"), max_size=40)


@FUZZ
@given(comment=COMMENT, encoding=st.sampled_from(["utf-8", "utf-8-sig"]), crlf=st.booleans())
def test_utf8_source_with_or_without_bom_is_read_exactly(folder, comment, encoding, crlf):
    source = f"x = 1  # {comment}\ny = x\n"
    data = source.replace("\n", "\r\n" if crlf else "\n").encode(encoding)
    result = load(folder, data, "mha.py")
    assert isinstance(result, Program), message_of(result)
    assert result.cells[0].source == source


@FUZZ
@given(comment=st.text(st.characters(max_codepoint=0xFF, exclude_characters="\r\n\x00"), max_size=40))
def test_latin1_source_is_read(folder, comment):
    data = f"x = 1  # {comment}\n".encode("latin-1")
    result = load(folder, data, "mha.py")
    assert isinstance(result, Program), message_of(result)
    # Bytes that happen to be valid UTF-8 are read as UTF-8; the rest falls back to Latin-1.
    assert result.cells[0].source in (data.decode("latin-1"), data.decode("utf-8", errors="replace"))


@FUZZ
@given(comment=COMMENT, encoding=st.sampled_from(["utf-16", "utf-32", "utf-16-le", "utf-16-be", "utf-32-le",
                                                  "utf-32-be"]),
       name=st.sampled_from(["mha.py", "solution.ipynb"]))
@example(comment="", encoding="utf-16-le", name="mha.py")  # once "the file is binary"
def test_utf16_and_utf32_are_named_not_called_binary(folder, comment, encoding, name):
    data = f'x = 1  # {comment}\n{{"cells": []}}\n'.encode(encoding)
    message = message_of(load(folder, data, name))
    with_bom = encoding in ("utf-16", "utf-32")  # what Windows "Unicode" editors and PowerShell's > write
    latin_utf16 = encoding in ("utf-16-le", "utf-16-be") and max(map(ord, comment), default=0) < 256
    if with_bom or latin_utf16:
        assert "UTF-16 or UTF-32" in message and "save it as UTF-8" in message
    else:  # UTF-32 without a BOM, or UTF-16 of non-Latin text without one: no way to tell from binary
        assert re.search("binary|UTF-16 or UTF-32", message), message


@FUZZ
@given(prefix=st.binary(max_size=300), garbage=st.sampled_from([b"\xc3\x28", b"\xff", b"\xed\xa0\x80", b"\xf8\x88"]),
       nul=st.booleans(), name=st.sampled_from(["mha.py", "solution.ipynb"]))
def test_invalid_utf8_and_nul_bytes(folder, prefix, garbage, nul, name):
    data = prefix + garbage + (b"\x00" if nul else b"") + b"\nx = 1\n"
    result = load(folder, data, name)
    if nul:
        assert isinstance(result, Ungradable)
        assert re.search("binary|UTF-16", str(result))


@pytest.mark.parametrize("name", ["mha.py", "solution.ipynb"])
@pytest.mark.parametrize("data", [b"", b" \n\t\r\n", b"\xef\xbb\xbf", b"\xef\xbb\xbf\r\n  "],
                         ids=["zero-bytes", "whitespace", "bom", "bom-whitespace"])
def test_empty_files_are_ungradable_as_empty(folder, name, data):
    assert "empty" in message_of(load(folder, data, name))


# ---- huge and special files ----------------------------------------------------------------


@pytest.mark.parametrize(("name", "limit"), [("mha.py", MAX_SOURCE_BYTES), ("solution.ipynb", MAX_NOTEBOOK_BYTES)])
def test_file_over_the_size_limit_is_ungradable_without_being_read(tmp_path, name, limit):
    path = tmp_path / name
    with path.open("wb") as file:  # sparse: costs no disk and no time to write
        file.write(b"x = 1\n")
        file.truncate(limit + 1)
    message = message_of(outcome(path))
    assert "too large" in message and str(limit) in message and str(limit + 1) in message


def test_fifo_is_ungradable_not_a_hang(tmp_path):
    """Was: reading a FIFO named mha.py blocked the grader forever."""
    fifo = tmp_path / "mha.py"
    os.mkfifo(fifo)
    results = []
    reader = threading.Thread(target=lambda: results.append(outcome(fifo)), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # a writer that leaves at once ends the read
        reader.join(10)
        pytest.fail("load_submission blocked reading a FIFO")
    assert "not a regular file" in message_of(results[0])


@pytest.mark.parametrize("target", ["/dev/null", "directory"])
def test_special_files_are_ungradable_as_not_regular(tmp_path, target):
    """A symlink to a device (/dev/zero would be read for ever) or a folder named like a submission."""
    path = tmp_path / "solution.ipynb"
    if target == "directory":
        path.mkdir()
    else:
        path.symlink_to(target)
    assert "not a regular file" in message_of(outcome(path))


def test_notebook_code_over_the_source_limit_is_ungradable(tmp_path, monkeypatch):
    """Was: a notebook under its 64 MiB limit could hold 64 MiB of code, which took the grader
    minutes to parse (4 MiB: 23 s); its code now has the same budget as a .py file."""
    monkeypatch.setattr(ingest, "MAX_SOURCE_BYTES", 100)
    notebook = valid_v4([CODE | {"source": "x = 1" + " " * 55}])
    cells = notebook["cells"]
    assert isinstance(load(tmp_path, json.dumps(notebook).encode(), "a.ipynb"), Program)
    notebook["cells"] = cells * 2
    message = message_of(load(tmp_path, json.dumps(notebook).encode(), "a.ipynb"))
    assert "too much code" in message and "100" in message


# ---- notebooks -----------------------------------------------------------------------------

# Placeholders replaced by raw JSON tokens that json.dumps cannot write itself.
RAW_TOKENS = ["1" + "0" * 5000, "NaN", "-Infinity", "1e999", "-0", "123456789012345678901234567890"]
raw = st.sampled_from([f"@@raw{i}@@" for i in range(1, len(RAW_TOKENS))])  # raw0 makes any file unreadable
scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=10) | raw)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text("abc_", max_size=4), children, max_size=3),
    max_leaves=8,
)

VALID_CODE = [
    "x = 1", "import math", "def f(x):\n    return x", "print('%d%%' % 3)", "class A:\n    pass", "# caf\u00e9",
    "if True:\n    !ls\n    y = 2", "s = '''\n!not a shell line\n%s\n'''", "m = ('%d items'\n     % 3)",
    "for i in range(2):\n    %time y = i",
]
MAGICS = ["%matplotlib inline", "!pip install torch", "  %time y = 2", "    %who", "%%time", "%%capture out", "%%bash",
          "%%", "%% time", "%%writefile a.py", "!", "%"]
NOISE = ["y = (1,", "    2)", "", "   ", "'''", '"""', "\\", "\t", "\x0c", "x = '\ud800'", "return 1", "if True:",
         "async def g(): await x", "lambda: (yield)", "    return x"]
# Mostly valid Python (so that cells get past the parser), with magics and noise.
code_sources = st.lists(st.sampled_from(VALID_CODE * 2 + MAGICS + NOISE), min_size=1, max_size=5).map("\n".join)
sources = (
    code_sources
    | st.lists(code_sources.map(lambda line: line + "\n"), max_size=4)  # nbformat's list of lines
    | st.lists(code_sources | st.integers() | st.none() | st.lists(st.text(max_size=3), max_size=2), max_size=3)
    | st.integers() | st.floats() | st.none() | st.text(max_size=20) | json_values
)
tags = st.lists(st.sampled_from([SKIP_TAG, "solution", "", "grader"]), max_size=3) | st.sampled_from(
    [SKIP_TAG, "no-" + SKIP_TAG, f"{SKIP_TAG}-not", None, 5, {SKIP_TAG: True}, [[SKIP_TAG]]])
metadata = st.fixed_dictionaries({}, optional={"tags": tags, "collapsed": json_values, "trusted": json_values}) | json_values
CELL_TYPES = ["code", "markdown", "raw", "heading", "Code", "", "code ", None, 5, ["code"], {"code": 1}]
# Cells that nbformat lets through, garbage only where it does not mind, so that the grader's own
# handling of cells is reached; `cells` has garbage anywhere and mostly makes nbformat refuse the file.
plausible_cells = st.fixed_dictionaries(
    {
        "cell_type": st.sampled_from(["code", "code", "code", "code", "markdown", "raw", "heading", "Code", "code "]),
        "metadata": st.fixed_dictionaries({}, optional={"tags": tags, "collapsed": json_values}),
        "source": code_sources | st.lists(code_sources.map(lambda line: line + "\n"), max_size=4)
        | st.sampled_from([None, 5, 1.5, [], ""]),
    },
    optional={
        "id": st.text(max_size=8) | st.integers(), "execution_count": json_values, "extra": json_values,
    },
).map(lambda cell: cell | {"outputs": []} if cell["cell_type"] == "code" else cell)
cells = st.fixed_dictionaries(
    {},
    optional={
        "cell_type": st.sampled_from(CELL_TYPES), "source": sources, "metadata": metadata,
        "outputs": st.lists(json_values, max_size=2) | json_values, "execution_count": json_values,
        "id": st.text(max_size=8) | json_values, "attachments": json_values, "extra": json_values,
        "input": sources,  # nbformat 3's name for source
    },
)
VERSIONS = [4, 3, 2, 1, 5, 0, -1, 99, 4.0, 4.5, "4", "", None, True, [4], {"major": 4}, 10**30, -(10**30), "@@raw0@@",
            "@@raw1@@", "@@raw2@@"]
versions = st.sampled_from(VERSIONS) | st.integers()
cell_lists = st.lists(cells | json_values, max_size=5)
notebooks = st.fixed_dictionaries(
    {},
    optional={
        "nbformat": versions, "nbformat_minor": versions, "metadata": json_values | st.just({}),
        "cells": cell_lists | json_values, "worksheets": st.lists(st.fixed_dictionaries({"cells": cell_lists}),
                                                                  max_size=2) | json_values,
        "extra": json_values,
    },
)


def notebook_bytes(notebook: object, ensure_ascii: bool = True, bom: bool = False) -> bytes:
    text = json.dumps(notebook, ensure_ascii=ensure_ascii)
    for i, token in enumerate(RAW_TOKENS):
        text = text.replace(f'"@@raw{i}@@"', token)
    return (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", errors="surrogatepass")


CODE = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None}


def valid_v4(cells_: list) -> dict:
    return {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": cells_}


@FUZZ
@given(notebook=notebooks | json_values, ensure_ascii=st.booleans(), bom=st.booleans())
@example(notebook={"nbformat": "@@raw0@@", "cells": []}, ensure_ascii=True, bom=False)  # once a ValueError
@example(notebook={"nbformat": 3, "worksheets": 5}, ensure_ascii=True, bom=False)
@example(notebook={"nbformat": 4, "cells": [5, "x", None]}, ensure_ascii=True, bom=False)
@example(notebook={"nbformat": 4, "nbformat_minor": 4.0, "metadata": {}, "cells": []}, ensure_ascii=True, bom=False)
def test_notebook_shaped_json_gives_a_program_or_a_reason(folder, notebook, ensure_ascii, bom):
    result = load(folder, notebook_bytes(notebook, ensure_ascii, bom), "solution.ipynb")
    if isinstance(result, Program):
        check_cells_kept(notebook, result)


@settings(max_examples=150, deadline=None)
@given(cells_=st.lists(plausible_cells, min_size=1, max_size=6), garbage=st.lists(cells | json_values, max_size=1),
       minor=st.sampled_from([0, 4, 5, 99, -1, None]))
@example(cells_=[CODE | {"metadata": {"tags": 5}, "source": "x = 1"}], garbage=[], minor=5)  # once a TypeError
@example(cells_=[CODE | {"metadata": {"tags": "no-grader-skip"}, "source": "x = 1"}], garbage=[], minor=5)  # was skipped
def test_cells_of_a_v4_notebook_give_a_program_or_a_reason(folder, cells_, garbage, minor):
    """Mostly well-formed notebooks, so that the cell-level handling is reached, not only nbformat's checks."""
    notebook = {"nbformat": 4, "metadata": {}, "cells": cells_ + garbage} | (
        {} if minor is None else {"nbformat_minor": minor})
    result = load(folder, notebook_bytes(notebook), "solution.ipynb")
    if isinstance(result, Program):
        check_cells_kept(notebook, result)


def check_cells_kept(notebook: object, program: Program) -> None:
    """For an nbformat-4 notebook: the program holds exactly the code cells that can run, unchanged
    when they have no magics, and nothing else."""
    if not (isinstance(notebook, dict) and type(notebook.get("nbformat")) is int and notebook["nbformat"] == 4):
        return
    cells_ = notebook["cells"]
    by_label = {cell.label: cell.source for cell in program.cells}
    for number, cell in enumerate(cells_, start=1):
        label = f"cell {number}"
        is_code = isinstance(cell, dict) and cell.get("cell_type") == "code"
        if not is_code:
            assert label not in by_label, (label, cell)
            continue
        tags_ = cell["metadata"].get("tags") if isinstance(cell.get("metadata"), dict) else None
        skipped = isinstance(tags_, list) and SKIP_TAG in tags_
        if skipped:
            assert label not in by_label and any(label in note and SKIP_TAG in note for note in program.notes)
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            source = "".join(source)
        plain = (isinstance(source, str) and source.strip() and "\r" not in source
                 and not re.search(r"^\s*[%!]", source, re.MULTILINE) and ingest.syntax_error(source) is None)
        if plain:
            assert by_label.get(label) == source, (label, source, program)


@FUZZ
@given(code=code_sources)
@example(code="%%bash\nrm -rf /")
@example(code="%%\nx = 1")
def test_magics_and_shell_lines_in_a_code_cell(folder, code):
    notebook = valid_v4([CODE | {"source": code}, CODE | {"source": "z = 0"}])
    result = load(folder, notebook_bytes(notebook), "solution.ipynb")
    assert isinstance(result, Program), message_of(result)  # the second cell always runs
    assert result.cells[-1].label == "cell 2"
    ran = [cell for cell in result.cells if cell.label == "cell 1"]
    first, _, rest = code.partition("\n")
    body = rest if first.strip().startswith("%%") else code  # what is left to run under a cell magic
    if ran:
        assert len(ran[0].source.split("\n")) == len(code.split("\n"))  # line numbers are kept
    elif body.strip():  # Python that does not run is never dropped in silence
        assert any("cell 1" in note for note in result.notes), (code, result.notes)


# ---- deep nesting --------------------------------------------------------------------------


@settings(max_examples=15, deadline=None)
@given(depth=st.integers(1, 100_000), opener=st.sampled_from(['[', '{"a": ', '{"cells": ', '[{"a": ']),
       closed=st.booleans())
@example(depth=100_000, opener="[", closed=False)
@example(depth=100_000, opener="[", closed=True)
def test_deeply_nested_json_is_ungradable_not_a_crash(folder, depth, opener, closed):
    closer = {"[": "]", '{"a": ': "}", '{"cells": ': "}", '[{"a": ': "}]"}[opener]
    text = opener * depth + ("0" + closer * depth if closed else "")
    message = message_of(load(folder, text.encode(), "solution.ipynb"))
    assert re.search("nested too deeply|not valid JSON|not a Jupyter notebook|no code cells", message), message


@settings(max_examples=20, deadline=None)
@given(depth=st.integers(1, 3000))
@example(depth=700)  # valid JSON that nbformat recursed on: once "JSON but not a notebook (RecursionError...)"
def test_deep_metadata_in_a_valid_notebook(folder, depth):
    notebook = valid_v4([CODE | {"source": "x = 1"}])
    text = json.dumps(notebook).replace('"metadata": {}', '"metadata": {"deep": ' + "[" * depth + "]" * depth + "}", 1)
    result = load(folder, text.encode(), "solution.ipynb")
    if depth <= 100:
        assert isinstance(result, Program), message_of(result)
    elif isinstance(result, Ungradable):
        assert "nested too deeply" in str(result), str(result)


# ---- Python sources ------------------------------------------------------------------------

PYTHONISH = st.lists(st.sampled_from(list("()[]{}:;=.,'\"\\#%!@ \t\n\r\x00\x0c\u00e9\u2028abcdefx0123+-*/") + [
    "def ", "class ", "return ", "lambda ", "if ", "else", "await ", "yield ", "import ", "f'", "b'", "'''", "    "]),
    max_size=80).map("".join)


@FUZZ
@given(source=PYTHONISH)
@example(source="x = 1\x00")
@example(source="\x0c\x0c\x0c")
def test_python_source_gives_a_program_or_a_syntax_error(folder, source):
    result = load(folder, source.encode("utf-8"), "mha.py")
    if isinstance(result, Ungradable):
        message = str(result)
        assert re.search("empty|mha.py has a syntax error|binary|UTF-16", message), message  # x\0y\0 is UTF-16
    else:
        assert ingest.syntax_error(decode_text(source.encode())) is None


NESTING = {
    "parens": lambda n: "x = " + "(" * n + "1" + ")" * n,
    "unclosed": lambda n: "(" * n,
    "lists": lambda n: "x = " + "[" * n + "]" * n,
    "unary": lambda n: "x = " + "-" * n + "1",
    "not": lambda n: "x = " + "not " * n + "1",
    "attributes": lambda n: "a" + ".b" * n,
    "calls": lambda n: "f" + "()" * n,
    "sum": lambda n: "1" + "+1" * n,
    "power": lambda n: "2" + "**2" * n,
    "lambdas": lambda n: "f = " + "lambda: " * n + "1",
    "conditional": lambda n: "x = " + "1 if 1 else " * n + "1",
    "blocks": lambda n: "".join(" " * i + "if 1:\n" for i in range(min(n, 500))) + " " * min(n, 500) + "pass\n",
    "long line": lambda n: "x = '" + "a" * (n * 10) + "'",
}


@settings(max_examples=25, deadline=None)
@given(kind=st.sampled_from(sorted(NESTING)), depth=st.integers(0, 40_000), name=st.sampled_from(["mha.py", "a.ipynb"]))
@example(kind="unary", depth=100_000, name="mha.py")  # MemoryError from the parser: once "syntax error: MemoryError: "
@example(kind="attributes", depth=100_000, name="a.ipynb")  # RecursionError from the parser
def test_pathological_python_gives_a_reason_not_a_crash(folder, kind, depth, name):
    source = NESTING[kind](depth)
    if name.endswith(".ipynb"):
        data = notebook_bytes(valid_v4([CODE | {"source": source}]))
    else:
        data = source.encode()
    result = load(folder, data, name)
    if isinstance(result, Ungradable):
        message = str(result)
        assert re.search("syntax error|empty|no code cells", message), message
        assert "MemoryError" not in message and "RecursionError" not in message, message


def test_parsing_student_code_prints_no_warnings(folder):
    """Was: ast.parse printed SyntaxWarnings about the student's code on the grader's stderr."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = load(folder, b"x = 1if 1 else 2\ns = '\\d'\n", "mha.py")
        notebook = load(folder, notebook_bytes(valid_v4([CODE | {"source": "y = [0x1for x in ()]"}])), "a.ipynb")
    assert isinstance(module, Program) and isinstance(notebook, Program)
    assert not caught, [str(warning.message) for warning in caught]


def test_parser_limits_are_reported_as_nesting_not_as_an_empty_error(folder):
    message = message_of(load(folder, NESTING["unary"](100_000).encode(), "mha.py"))
    assert "nested too deeply" in message and "MemoryError" not in message


# ---- through the real grader ---------------------------------------------------------------

NASTY = {
    "not-json": (b'{"cells": [,]}', ".ipynb", "not valid JSON"),
    "deep-nesting": (b"[" * 100_000, ".ipynb", "nested too deeply"),
    "huge-integer": (b'{"nbformat": ' + b"9" * 5000 + b"}", ".ipynb", "cannot be read"),
    "nul-bytes": (b"x = 1\n\x00\x01\x02 binary", ".py", "binary"),
    "binary": (bytes(range(256)) * 4, ".ipynb", "binary"),
    "utf-16": ("def split_heads(x):\n    return x\n".encode("utf-16"), ".py", "UTF-16"),
    "parser-limit": (b"x = " + b"-" * 100_000 + b"1", ".py", "nested too deeply"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(NASTY))
def test_nasty_files_through_the_grader_give_an_ungradable_report(grade_source, case):
    data, suffix, expected = NASTY[case]
    report = grade_source(data, suffix)
    assert_valid(report)
    assert report.status == "ungradable", (report.status, report.error)
    assert report.error and expected in report.error, report.error
    assert_readable(report.error)
    assert report.score == 0 and report.max_score > 0
    assert all(part.score == 0 and part.max_score > 0 and part.hint == report.error for part in report.parts)


@pytest.mark.slow
def test_notebook_with_broken_cells_through_the_grader_is_graded_with_notes(grade_source):
    notebook = valid_v4([
        CODE | {"source": "%%bash\nrm -rf ~"},
        CODE | {"source": "x = ("},
        CODE | {"metadata": {"tags": 5}, "source": "!pip install torch\nimport math"},
        CODE | {"metadata": {"tags": "not-" + SKIP_TAG}, "source": "y = 1"},
        {"cell_type": "raw", "metadata": {}, "source": "def split_heads(x): pass"},
    ])
    report = grade_source(notebook_bytes(notebook), ".ipynb")
    assert_valid(report)
    assert report.status == "graded", report.error
    assert any("cell 1" in note and "%%bash" in note for note in report.notes), report.notes
    assert any("cell 2" in note and "syntax error" in note for note in report.notes), report.notes
    assert not any("cell 4" in note for note in report.notes), report.notes  # "not-grader-skip" is not the tag
