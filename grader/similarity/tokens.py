"""Python source as the tokens that survive the cheap ways of disguising a copy.

What a copier changes without changing the code is dropped or made equal: comments,
docstrings, whitespace and line breaks (a statement is one ``;`` token however it is laid
out), literals (every number is ``N``, every string ``S``), ``print(...)`` statements, and the
names the file itself defines (its variables, parameters, functions, classes, attributes it
assigns, import aliases), which all become ``V``. Names the file only uses are kept: the API it
calls (``.transpose``, ``masked_fill``, ``softmax``, ``dim=``) and builtins (``len``,
``ValueError``). Renaming a variable therefore hides nothing, while two students who wrote the
same step with different calls (``view`` and ``reshape``, ``permute`` and ``transpose``) stay
apart: keeping those names costs a copier nothing they could rename away.

Only :mod:`tokenize` reads the source, so a file that does not parse (a copy broken on purpose,
a tutorial's fragment) is still read, up to where its tokens end.
"""

from __future__ import annotations

import io
import keyword
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

VARIABLE, NUMBER, STRING, END = "V", "N", "S", ";"
_ASSIGNMENTS = {"=", "+=", "-=", "*=", "/=", "//=", "%=", "@=", "&=", "|=", "^=", ">>=", "<<=", "**="}
_COMPOUND = {"if", "elif", "else", "while", "for", "with", "try", "except", "finally", "def", "class", "async"}
_SKIPPED = {tokenize.COMMENT, tokenize.NL, tokenize.INDENT, tokenize.DEDENT, tokenize.ENCODING, tokenize.ENDMARKER,
            tokenize.ERRORTOKEN}
# Python 3.12 splits an f-string into pieces; 3.11 has one STRING token.
_FSTRING_START = getattr(tokenize, "FSTRING_START", None)
_FSTRING_END = getattr(tokenize, "FSTRING_END", None)


@dataclass(frozen=True)
class Token:
    text: str  # normalised
    first_line: int  # in the text shown for the file, from 1
    last_line: int


Statement = list[tokenize.TokenInfo]


def normalised_tokens(pieces: Sequence[tuple[str, int]]) -> list[Token]:
    """The normalised tokens of ``pieces``, each a source and the number of lines before it in
    the text shown for the file (a notebook's cells, in order; a module is one piece). Names
    that any piece defines count as defined in all of them, as a notebook's cells share one
    namespace."""
    statements = [(statement, offset) for source, offset in pieces for statement in _statements(source)]
    defined = set().union(*(_defined_names(statement) for statement, _ in statements))
    tokens: list[Token] = []
    for statement, offset in statements:
        if _is_noise(statement):
            continue
        tokens += [Token(_normalised(token, defined), token.start[0] + offset, token.end[0] + offset)
                   for token in statement]
        last = statement[-1].end[0] + offset
        tokens.append(Token(END, last, last))
    return tokens


def _raw_tokens(source: str) -> Iterable[tokenize.TokenInfo]:
    """The tokens of ``source`` up to where it stops being Python; f-strings (3.12) as one STRING."""
    depth = 0
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type == _FSTRING_START:
                depth += 1
                if depth == 1:
                    start = token
            elif token.type == _FSTRING_END:
                depth -= 1
                if depth == 0:
                    yield tokenize.TokenInfo(tokenize.STRING, "f''", start.start, token.end, token.line)
            elif depth == 0:
                yield token
    except (tokenize.TokenError, SyntaxError):  # unterminated, or badly indented: what came before still counts
        return


def _statements(source: str) -> list[Statement]:
    """The logical statements of ``source`` (split at newlines and at ``;``), each without its end."""
    statements: list[Statement] = []
    current: Statement = []
    depth = 0
    for token in _raw_tokens(source):
        if token.type in _SKIPPED:
            continue
        ends = token.type == tokenize.NEWLINE or (token.type == tokenize.OP and token.string == ";" and depth == 0)
        if ends:
            if current:
                statements.append(current)
            current = []
            continue
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth = max(depth - 1, 0)
        current.append(token)
    if current:
        statements.append(current)
    return statements


def _is_noise(statement: Statement) -> bool:
    """A docstring or another bare string, or a ``print(...)`` call: no part of what the code does."""
    if all(token.type == tokenize.STRING for token in statement):
        return True
    return (len(statement) >= 3 and statement[0].string == "print" and statement[1].string == "("
            and _closing(statement, 1) == len(statement) - 1)


def _closing(statement: Statement, opening: int) -> int:
    """The index of the bracket that closes the one at ``opening`` (-1: none)."""
    depth = 0
    for index in range(opening, len(statement)):
        token = statement[index]
        if token.type == tokenize.OP and token.string in "([{":
            depth += 1
        elif token.type == tokenize.OP and token.string in ")]}":
            depth -= 1
            if depth == 0:
                return index
    return -1


def _is_name(token: tokenize.TokenInfo) -> bool:
    return token.type == tokenize.NAME and not keyword.iskeyword(token.string)


def _defined_names(statement: Statement) -> set[str]:
    """The names ``statement`` binds, read from its tokens: assignment targets (attributes
    too), ``def``/``class`` names and parameters, ``as``, ``import``, ``for``, ``lambda``,
    ``global`` and ``:=`` targets."""
    names: set[str] = set()
    words = [token.string if token.type in (tokenize.NAME, tokenize.OP) else "" for token in statement]
    first = words[0]
    for index, token in enumerate(statement):
        before = words[index - 1] if index else ""
        after = words[index + 1] if index + 1 < len(words) else ""
        if not _is_name(token):
            continue
        if before in ("def", "class", "as", "global", "nonlocal") or after == ":=":
            names.add(token.string)
        elif first in ("import", "from") and "import" in words[:index] and before != ".":
            names.add(token.string)
        elif first == "import" and before in ("import", ","):
            names.add(token.string)
    names |= _bound_between(statement, words, "for", "in")
    names |= _bound_between(statement, words, "lambda", ":")
    if first in ("def", "async"):
        names |= _parameters(statement, words)
    names |= _assignment_targets(statement, words)
    return names


def _bound_between(statement: Statement, words: list[str], start: str, stop: str) -> set[str]:
    names: set[str] = set()
    inside = False
    for token, word in zip(statement, words):
        if token.type == tokenize.NAME and word == start:
            inside = True
        elif inside and word == stop:
            inside = False
        elif inside and _is_name(token):
            names.add(token.string)
    return names


def _parameters(statement: Statement, words: list[str]) -> set[str]:
    """The parameters of a ``def``: the names that open each item of its brackets."""
    opening = words.index("(") if "(" in words else -1
    closing = _closing(statement, opening) if opening >= 0 else -1
    depth, names = 0, set()
    for index in range(opening + 1, closing):
        word = words[index]
        if word in ("(", "[", "{"):
            depth += 1
        elif word in (")", "]", "}"):
            depth -= 1
        elif depth == 0 and _is_name(statement[index]) and words[index - 1] in ("(", ",", "*", "**"):
            names.add(word)
    return names


def _assignment_targets(statement: Statement, words: list[str]) -> set[str]:
    """Every name left of the statement's last top-level assignment: ``a, self.b[i] = ...``
    binds a, self, b and i (i is bound already, or it is a name the file uses anyway). An
    annotation (``x: int = 0``) binds what is left of its colon; a one-line compound statement
    (``for i in x: total += i``), what follows its header's colon."""
    depth, colons, last = 0, [], -1
    for index, word in enumerate(words):
        if word in ("(", "[", "{"):
            depth += 1
        elif word in (")", "]", "}"):
            depth = max(depth - 1, 0)
        elif depth == 0 and word == ":":
            colons.append(index)
        elif depth == 0 and word in _ASSIGNMENTS:
            last = index
    if last < 0:
        return set()
    start, stop = 0, last
    before = [colon for colon in colons if colon < last]
    if words[0] in _COMPOUND and before:
        start = before[0] + 1
    elif before:
        stop = before[0]
    return {token.string for token in statement[start:stop] if _is_name(token)}


def _normalised(token: tokenize.TokenInfo, defined: set[str]) -> str:
    if token.type == tokenize.NUMBER:
        return NUMBER
    if token.type == tokenize.STRING:
        return STRING
    if token.type == tokenize.NAME and token.string in defined:
        return VARIABLE
    return token.string
