"""grader.core.ingest: a .py file or a notebook becomes a Program, or an Ungradable with a reason.

Nothing here runs student code, so these tests only decode and parse small files.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from grader.core import ingest
from grader.core.ingest import (
    Cell,
    Program,
    Ungradable,
    decode_text,
    load_submission,
    parse_submission,
    read_submission,
    strip_magics,
    submission_sha256,
    syntax_error,
)
from tests.conftest import bytes_read

BOM = b"\xef\xbb\xbf"


def load(tmp_path, data: bytes | str, name: str = "mha.py") -> Program:
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))
    return load_submission(path)


def load_notebook(tmp_path, *cells, prefix: bytes = b"") -> Program:
    """Write an nbformat-4 notebook of ``cells`` (strings are code cells) and load it."""
    nb_cells = [new_code_cell(cell) if isinstance(cell, str) else cell for cell in cells]
    text = nbformat.writes(new_notebook(cells=nb_cells))
    return load(tmp_path, prefix + text.encode("utf-8"), "solution.ipynb")


def ungradable(tmp_path, data: bytes | str, name: str = "mha.py") -> str:
    with pytest.raises(Ungradable) as info:
        load(tmp_path, data, name)
    return str(info.value)


def same_code(a: str, b: str) -> bool:
    return ast.dump(ast.parse(a)) == ast.dump(ast.parse(b))


# ---- .py files ------------------------------------------------------------------------


def test_valid_module_is_one_cell_labelled_with_the_file_name(tmp_path):
    source = "def f(x):\n    return x + 1\n"
    assert load(tmp_path, source, "mha.py") == Program("module", (Cell(source, "mha.py"),), ())


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (BOM + b"x = 1\n", "x = 1\n"),
        (b"x = 1\r\ny = 2\r\n", "x = 1\ny = 2\n"),
        (b"x = 1\ry = 2\r", "x = 1\ny = 2\n"),
        (b"x = 1\r\ny = 2\rz = 3\n", "x = 1\ny = 2\nz = 3\n"),
        (b"# caf\xe9\nx = 1\n", "# caf\u00e9\nx = 1\n"),
        ("# caf\u00e9 \u2014 \u03b1\u03b2\nx = 1\n".encode("utf-8"), "# caf\u00e9 \u2014 \u03b1\u03b2\nx = 1\n"),
    ],
    ids=["utf8-bom", "crlf", "lone-cr", "mixed-endings", "latin1-comment", "utf8-non-ascii"],
)
def test_module_text_is_decoded_and_normalised(tmp_path, data, expected):
    program = load(tmp_path, data)
    assert program.kind == "module"
    assert program.cells == (Cell(expected, "mha.py"),)


@pytest.mark.parametrize("data", [b"", b"   ", b"\n\n\t \r\n"], ids=["zero-bytes", "spaces", "blank-lines"])
def test_empty_module_is_ungradable_as_empty(tmp_path, data):
    assert "empty" in ungradable(tmp_path, data)


@pytest.mark.parametrize("data", [BOM, BOM + b"\r\n"], ids=["bom-only", "bom-newline"])
def test_module_of_only_a_bom_is_ungradable_as_empty(tmp_path, data):
    assert "empty" in ungradable(tmp_path, data)


@pytest.mark.parametrize("name", ["mha.py", "solution.ipynb"])
@pytest.mark.parametrize("nul_at", [0, 8191], ids=["first-byte", "last-byte-of-8k"])
def test_nul_byte_in_first_8k_is_ungradable_as_binary(tmp_path, name, nul_at):
    data = b"#" * nul_at + b"\x00" + b"\nx = 1\n"
    assert "binary" in ungradable(tmp_path, data, name)


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("x = (1,\n", 1),
        ("x = 1\ny = 2\ndef f(:\n    pass\n", 3),
        ("x = 1\r\n\r\nif x\r\n    pass\r\n", 3),
        ("import os\n\n\n\n\nreturn = 5\n", 6),
    ],
    ids=["unclosed-paren", "bad-def", "crlf-missing-colon", "keyword-target"],
)
def test_module_syntax_error_is_ungradable_naming_the_line(tmp_path, source, line):
    message = ungradable(tmp_path, source, "mha.py")
    assert "syntax error" in message
    assert f"line {line}" in message
    assert "mha.py" in message


def test_module_over_size_limit_is_ungradable_as_too_large(tmp_path, monkeypatch):
    data = b"x = 1\n" * 10
    monkeypatch.setattr(ingest, "MAX_SOURCE_BYTES", len(data) - 1)
    message = ungradable(tmp_path, data)
    assert "too large" in message
    assert str(len(data)) in message and str(len(data) - 1) in message


def test_module_exactly_at_size_limit_is_loaded(tmp_path, monkeypatch):
    data = b"x = 1\n" * 10
    monkeypatch.setattr(ingest, "MAX_SOURCE_BYTES", len(data))
    assert load(tmp_path, data).cells == (Cell(data.decode(), "mha.py"),)


def test_notebook_over_size_limit_is_ungradable_as_too_large(tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "MAX_NOTEBOOK_BYTES", 100)
    with pytest.raises(Ungradable, match="too large"):
        load_notebook(tmp_path, "x = 1")


# ---- reading the file: read_submission ---------------------------------------------------


def refusal(path) -> str:
    with pytest.raises(Ungradable) as info:
        read_submission(path)
    return str(info.value)


@pytest.mark.parametrize("name", ["mha.py", "solution.ipynb", "notes.txt"])
def test_read_submission_returns_the_bytes_of_a_regular_file(tmp_path, name):
    data = b"x = 1\r\n\xff\x00"  # as they are: decoding and checking the text is parsing's job
    (tmp_path / name).write_bytes(data)
    assert read_submission(tmp_path / name) == data
    assert submission_sha256(data) == hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize("target", ["file", "folder", "nothing", "/dev/zero"])
def test_a_link_is_refused_as_a_link_whatever_it_points_to(tmp_path, target):
    (tmp_path / "file").write_text("x = 1\n")
    (tmp_path / "folder").mkdir()
    link = tmp_path / "mha.py"
    link.symlink_to(target if target.startswith("/") else tmp_path / target)
    message = refusal(link)
    assert "mha.py is a link" in message and "submit the file itself" in message
    assert "not a regular file" in message  # what a link to /dev/zero was told before links were refused


@pytest.mark.parametrize("kind", ["fifo", "folder"])
def test_what_is_not_a_regular_file_is_refused_at_once(tmp_path, kind):
    path = tmp_path / "mha.py"
    os.mkfifo(path) if kind == "fifo" else path.mkdir()  # a FIFO opened without O_NONBLOCK waits for a writer
    assert refusal(path) == "mha.py is not a regular file"


def test_a_missing_file_cannot_be_read(tmp_path):
    assert "cannot be read" in refusal(tmp_path / "mha.py")


@pytest.mark.parametrize(("name", "limit"), [("mha.py", "MAX_SOURCE_BYTES"), ("solution.ipynb", "MAX_NOTEBOOK_BYTES"),
                                             ("notes.txt", "MAX_NOTEBOOK_BYTES")])
def test_a_file_over_its_size_limit_is_refused_before_a_byte_is_read(tmp_path, name, limit):
    path = tmp_path / name
    path.write_bytes(b"x = 1\n")
    os.truncate(path, 16 * 2**30)  # sparse: no disk, and reading it would take a minute
    before = bytes_read()
    message = refusal(path)
    assert bytes_read() - before < 2**20
    assert message.startswith(f"the file is too large ({16 * 2**30} bytes; the limit is {getattr(ingest, limit)})")
    assert ("outputs" in message) == name.endswith(".ipynb")  # what makes a notebook large


def test_a_file_that_grew_since_its_size_was_checked_is_refused_not_read_on(tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "MAX_SOURCE_BYTES", 10)
    path = tmp_path / "mha.py"
    path.write_bytes(b"x = 1\n" * 2**18)
    real_fstat = os.fstat

    def fstat_before_it_grew(fd):
        info = real_fstat(fd)
        return os.stat_result((*info[:6], 10, *info[7:10]))

    monkeypatch.setattr(ingest.os, "fstat", fstat_before_it_grew)
    before = bytes_read()
    assert refusal(path) == "the file is too large (it grew past the limit of 10 bytes while it was read)"
    assert bytes_read() - before < 2**16  # not the whole 1.5 MiB: one byte past the limit


def test_parse_submission_names_what_is_not_a_submission():
    with pytest.raises(Ungradable, match="notes.txt is not a submission"):
        parse_submission("notes.txt", b"x = 1\n")


# ---- notebooks: whole-file problems ----------------------------------------------------


def test_notebook_that_is_not_json_names_the_line(tmp_path):
    text = '{\n  "cells": [],\n  "metadata": {},\n  "nbformat": 4,,\n}\n'
    message = ungradable(tmp_path, text, "solution.ipynb")
    assert "not valid JSON" in message
    assert "line 4" in message


@pytest.mark.parametrize(
    "text",
    [
        "[1, 2]",
        '{"a": 1}',
        '"hello"',
        "42",
        "null",
        '{"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": 5}',
    ],
    ids=["list", "dict", "string", "number", "null", "cells-not-a-list"],
)
def test_json_that_is_not_a_notebook_is_ungradable(tmp_path, text):
    assert "not a Jupyter notebook" in ungradable(tmp_path, text, "solution.ipynb")


@pytest.mark.parametrize(
    "text",
    ["[" * 100_000, '{"a": ' * 100_000, "[" * 900 + "]" * 900],
    ids=["unclosed-lists", "unclosed-dicts", "closed-lists"],
)
def test_deeply_nested_json_is_ungradable_not_a_crash(tmp_path, text):
    message = ungradable(tmp_path, text, "solution.ipynb")
    assert "JSON" in message


@pytest.mark.parametrize(
    "cells",
    [
        [new_markdown_cell("# Title")],
        [new_markdown_cell("# Title"), new_markdown_cell("text")],
        [new_markdown_cell("# Title"), new_code_cell("")],
        [],
    ],
    ids=["one-markdown", "two-markdown", "markdown-and-blank-code", "no-cells"],
)
def test_notebook_without_code_cells_is_ungradable(tmp_path, cells):
    with pytest.raises(Ungradable, match="no code cells"):
        load_notebook(tmp_path, *cells)


def test_notebook_whose_only_code_cell_is_broken_says_why(tmp_path):
    with pytest.raises(Ungradable, match="no code cells") as info:
        load_notebook(tmp_path, new_markdown_cell("# Title"), "x = (")
    assert "cell 2" in str(info.value) and "syntax error" in str(info.value)


# ---- notebooks: cells ------------------------------------------------------------------


def test_code_cells_kept_in_order_labelled_by_position_among_all_cells(tmp_path):
    program = load_notebook(
        tmp_path,
        new_markdown_cell("# Attention"),
        "import math",
        new_markdown_cell("Now the heads."),
        new_markdown_cell("More prose."),
        "def split_heads(x):\n    return x",
        "",  # blank code cell: nothing to run
        "y = split_heads(1)",
    )
    assert program.kind == "notebook"
    assert program.cells == (
        Cell("import math", "cell 2"),
        Cell("def split_heads(x):\n    return x", "cell 5"),
        Cell("y = split_heads(1)", "cell 7"),
    )
    assert program.notes == ()


def test_cell_with_syntax_error_is_dropped_with_a_note_and_rest_kept(tmp_path):
    program = load_notebook(tmp_path, new_markdown_cell("# Title"), "a = 1", "b = 2\nc = (3,\n", "d = 4")
    assert [cell.label for cell in program.cells] == ["cell 2", "cell 4"]
    assert [cell.source for cell in program.cells] == ["a = 1", "d = 4"]
    (note,) = program.notes
    assert "cell 3" in note and "syntax error" in note and "line 2" in note


@pytest.mark.parametrize(
    "source",
    [
        "%matplotlib inline\nimport math\nx = math.pi",
        "!pip install x\nx = 1",
        "x = 1\nif x:\n    !ls\n    y = 2\nelse:\n    %time z = 3\nprint(x)",
        "%load_ext autoreload\n%autoreload 2\nx = 1",
        "for i in range(3):\n    !echo $i\n",
    ],
    ids=["matplotlib", "pip", "indented-in-if-else", "consecutive", "only-statement-in-block"],
)
def test_line_magics_and_shell_lines_are_neutralised(tmp_path, source):
    (cell,) = load_notebook(tmp_path, source).cells
    assert syntax_error(cell.source) is None
    before, after = source.split("\n"), cell.source.split("\n")
    assert len(after) == len(before)
    for old, new in zip(before, after):
        if old.lstrip().startswith(("%", "!")):
            indent = old[: len(old) - len(old.lstrip())]
            assert new.startswith(indent) and not new[len(indent):].startswith((" ", "\t"))
            assert all(isinstance(node, ast.Pass) for node in ast.parse(new.strip()).body)
        else:
            assert new == old


@pytest.mark.parametrize(
    "source",
    ['message = ("%d items"\n           % 3)', 's = """\n!important\n%s\n"""'],
    ids=["modulo-continuation", "inside-string"],
)
def test_valid_python_with_lines_starting_with_percent_or_bang_is_unchanged(tmp_path, source):
    program = load_notebook(tmp_path, source)
    assert program.cells == (Cell(source, "cell 1"),)
    assert program.notes == ()


@pytest.mark.parametrize("magic", ["%%time", "%%capture", "%%capture out", "%%timeit -n 1", "%%time  "])
def test_python_cell_magic_keeps_its_body(tmp_path, magic):
    body = "x = 1\ny = x + 1"
    program = load_notebook(tmp_path, "a = 0", f"{magic}\n{body}")
    assert [cell.label for cell in program.cells] == ["cell 1", "cell 2"]
    assert same_code(program.cells[1].source, body)
    assert "%" not in program.cells[1].source
    assert program.notes == ()


def test_syntax_error_in_python_cell_magic_names_the_cells_line(tmp_path):
    program = load_notebook(tmp_path, "a = 0", "%%time\nx = 1\ny = (\n")
    (note,) = program.notes
    assert "cell 2" in note and "line 3" in note


@pytest.mark.parametrize("magic", ["bash", "html", "writefile out.py", "javascript"])
def test_non_python_cell_magic_is_dropped_with_a_note(tmp_path, magic):
    program = load_notebook(tmp_path, "a = 0", f"%%{magic}\nx = 1", "b = 2")
    assert program.cells == (Cell("a = 0", "cell 1"), Cell("b = 2", "cell 3"))
    (note,) = program.notes
    assert "cell 2" in note and f"%%{magic.split()[0]}" in note and "not run" in note


def test_cell_tagged_grader_skip_is_dropped_with_a_note(tmp_path):
    skipped = new_code_cell("raise SystemExit('scratch work')", metadata={"tags": ["scratch", "grader-skip"]})
    other_tags = new_code_cell("b = 2", metadata={"tags": ["solution"]})
    program = load_notebook(tmp_path, "a = 1", skipped, other_tags)
    assert program.cells == (Cell("a = 1", "cell 1"), Cell("b = 2", "cell 3"))
    (note,) = program.notes
    assert "cell 2" in note and "grader-skip" in note


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (["x = 1\n", "y = 2\n", "z = x + y"], "x = 1\ny = 2\nz = x + y"),
        ("x = 1\ny = 2", "x = 1\ny = 2"),
    ],
    ids=["list-of-lines", "one-string"],
)
def test_cell_source_as_list_or_string_is_read(tmp_path, source, expected):
    notebook = {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {},
        "cells": [
            {"cell_type": "markdown", "id": "m1", "metadata": {}, "source": ["# Title\n", "text"]},
            {"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": None, "outputs": [],
             "source": source},
        ],
    }
    program = load(tmp_path, json.dumps(notebook), "solution.ipynb")
    assert program.cells == (Cell(expected, "cell 2"),)


def test_nbformat_v3_notebook_is_upgraded_and_read(tmp_path):
    notebook = {
        "nbformat": 3,
        "nbformat_minor": 0,
        "metadata": {},
        "worksheets": [{
            "cells": [
                {"cell_type": "markdown", "source": "# Old notebook", "metadata": {}},
                {"cell_type": "code", "input": "x = 1", "language": "python", "outputs": [], "metadata": {}},
            ],
            "metadata": {},
        }],
    }
    program = load(tmp_path, json.dumps(notebook), "solution.ipynb")
    assert program == Program("notebook", (Cell("x = 1", "cell 2"),), ())


def test_notebook_with_more_cells_than_the_limit_is_ungradable_before_any_cell_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(ingest, "MAX_NOTEBOOK_CELLS", 3)
    assert len(load_notebook(tmp_path, "x = 1", new_markdown_cell(""), "y = 2").cells) == 2
    with pytest.raises(Ungradable, match=r"too many cells \(4; the limit is 3\)"):
        load_notebook(tmp_path, "x = 1", new_markdown_cell(""), "y = 2", "z = 3")


@pytest.fixture
def handed_to_nbformat(monkeypatch) -> list[dict]:
    """The notebooks nbformat.reads is handed (it still reads them)."""
    handed = []
    reads = nbformat.reads

    def spy(text, *args, **kwargs):
        handed.append(json.loads(text))
        return reads(text, *args, **kwargs)

    monkeypatch.setattr(nbformat, "reads", spy)
    return handed


def test_nbformat_4_notebook_is_read_without_nbformat(tmp_path, handed_to_nbformat):
    program = load_notebook(tmp_path, new_markdown_cell("# Title"), "x = 1")
    assert program.cells == (Cell("x = 1", "cell 2"),) and handed_to_nbformat == []


def test_old_notebook_is_upgraded_from_what_the_grader_reads_only(tmp_path, handed_to_nbformat):
    """Outputs, prose and metadata never reach nbformat; nor does a heading's level, which it
    would expand into that many '#': 10**9 of them took 1.9 GiB."""
    code = {"cell_type": "code", "input": "x = 1", "language": "python", "prompt_number": 3,
            "outputs": [{"output_type": "stream", "text": "noise" * 1000}],
            "metadata": {"tags": ["t", 5], "big": [0] * 999}}
    heading = {"cell_type": "heading", "level": 10**9, "source": "Title", "metadata": {}}
    notebook = {"nbformat": 3, "nbformat_minor": 0, "metadata": {"big": [0] * 999},
                "worksheets": [{"metadata": {}, "cells": [heading, "not a cell", code]}]}
    program = load(tmp_path, json.dumps(notebook), "solution.ipynb")
    assert program == Program("notebook", (Cell("x = 1", "cell 2"),), ())
    [handed] = handed_to_nbformat
    assert handed == {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "worksheets": [{"metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ""},
        {"cell_type": "code", "outputs": [], "input": "x = 1", "metadata": {"tags": ["t"]}}]}]}


def test_notebook_with_utf8_bom_is_read(tmp_path):
    program = load_notebook(tmp_path, new_markdown_cell("# Title"), "x = 'caf\u00e9'", prefix=BOM)
    assert program.cells == (Cell("x = 'caf\u00e9'", "cell 2"),)


# ---- public helpers --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"", ""),
        (BOM + b"a\r\nb", "a\nb"),
        (b"a\rb\r\nc\n", "a\nb\nc\n"),
        (b"caf\xe9", "caf\u00e9"),
        (BOM + b"caf\xe9", "caf\u00e9"),
        ("caf\u00e9".encode("utf-8"), "caf\u00e9"),
        (b"a\xef\xbb\xbfb", "a\ufeffb"),  # only a leading BOM is removed
    ],
    ids=["empty", "bom-crlf", "cr-mix", "latin1", "bom-then-latin1", "utf8", "inner-bom-kept"],
)
def test_decode_text_decodes_and_normalises(data, expected):
    assert decode_text(data) == expected


def test_syntax_error_is_none_for_valid_source():
    assert syntax_error("def f():\n    return 1\n") is None
    assert syntax_error("") is None


def test_syntax_error_names_the_line_and_the_problem():
    message = syntax_error("x = 1\n\nwhile True\n    pass\n")
    assert message is not None and message.startswith("line 3:")
    assert "expected ':'" in message


@pytest.mark.parametrize(
    "source",
    ["(" * 300, "1" + "+1" * 100_000],
    ids=["nested-parens", "long-expression"],
)
def test_syntax_error_reports_pathological_source_instead_of_raising(source):
    message = syntax_error(source)
    assert isinstance(message, str) and message


def test_syntax_error_for_nul_byte_does_not_say_line_none():
    message = syntax_error("x = 1\x00")
    assert message is not None
    assert "None" not in message


def test_strip_magics_leaves_plain_python_unchanged():
    source = "import math\n\ndef f(x):\n    return x % 3  # 100%!\n"
    assert strip_magics(source) == (source, None)


def test_strip_magics_keeps_indentation_of_neutralised_lines():
    source, why = strip_magics("if True:\n    !ls\n    %time y = 1\nz = 2")
    assert why is None
    assert ast.parse(source)  # the block is still valid
    lines = source.split("\n")
    assert lines[0] == "if True:" and lines[3] == "z = 2"
    assert lines[1].startswith("    ") and lines[2].startswith("    ")
    assert "!" not in lines[1].split("#")[0] and "%" not in lines[2].split("#")[0]


@pytest.mark.parametrize(
    ("source", "body"),
    [("%%time\nx = 1", "x = 1"), ("%%capture captured\nprint(1)\n", "print(1)\n")],
)
def test_strip_magics_drops_python_cell_magic_line(source, body):
    stripped, why = strip_magics(source)
    assert why is None
    assert same_code(stripped, body)


@pytest.mark.parametrize("source", ["%%bash\nls -l", "%%html\n<b>hi</b>", "%%\nx = 1"])
def test_strip_magics_refuses_non_python_cell_magic(source):
    stripped, why = strip_magics(source)
    assert stripped == ""
    assert why is not None and "not Python" in why
    assert source.split("\n")[0].split()[0] in why


def test_notebook_without_cell_ids_is_read_without_warnings(tmp_path, recwarn):
    path = tmp_path / "old.ipynb"
    path.write_text('{"cells": [{"cell_type": "code", "source": "x = 1", "metadata": {}, "outputs": [],'
                    ' "execution_count": null}], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    program = load_submission(path)
    assert [cell.source for cell in program.cells] == ["x = 1"]
    assert not [w for w in recwarn if "nbformat" in str(w.filename)]


def test_an_exported_cell_magic_is_read_as_its_body_only_where_it_stands_alone(tmp_path):
    path = tmp_path / "exported.py"
    path.write_text("get_ipython().run_cell_magic('time', '', 'first = \\'é\\'\\n')  # a comment\n"
                    "get_ipython().run_cell_magic('bash', '', 'ls\\n')\n"
                    "x = 1; get_ipython().run_cell_magic('time', '', 'second = 2\\n')\n", encoding="utf-8")
    (cell,) = load_submission(path).cells
    assert cell.source == "first = 'é'\npass\nx = 1; get_ipython().run_cell_magic('time', '', 'second = 2\\n')\n"
