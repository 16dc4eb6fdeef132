"""The pieces of the similarity report: which disguises the normalised tokens see through, and
the winnowing guarantee (a shared run long enough always shares a fingerprint)."""

from __future__ import annotations

import random
import subprocess
import sys

from grader.similarity.compare import WINDOW, K
from grader.similarity.tokens import normalised_tokens
from grader.similarity.winnowing import kgram_hashes, token_codes, winnow
from tests.conftest import ROOT

ORIGINAL = '''import torch


def split_heads(x, num_heads):
    batch, length, d_model = x.shape
    if d_model % num_heads != 0:
        raise ValueError(f"d_model={d_model} is not divisible by num_heads={num_heads}")
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)
'''

# The same code: every name renamed, comments, a docstring and prints added, the lines broken
# differently, other literals.
DISGUISED = '''import torch


def cut_into_heads(inp, h):
    """Cut the features into h heads."""
    # the three sizes
    n, s, e = inp.shape; print("sizes", n, s, e)
    if e % h != 0:
        raise ValueError('bad number of heads')
    print(
        "splitting"
    )
    return inp.view(n, s, h,
                    e // h).transpose(2, 1)
'''


def texts(source: str) -> list[str]:
    return [token.text for token in normalised_tokens([(source, 0)])]


def test_renaming_comments_docstrings_prints_layout_and_literals_change_no_token():
    assert texts(DISGUISED) == texts(ORIGINAL)


def test_the_api_a_student_calls_is_kept_so_other_calls_are_other_code():
    # view -> reshape and transpose -> permute: the same step written another way, not a rename.
    rewritten = ORIGINAL.replace(".view(", ".reshape(").replace(".transpose(1, 2)", ".permute(0, 2, 1, 3)")
    assert texts(rewritten) != texts(ORIGINAL)
    assert "reshape" in texts(rewritten) and "view" in texts(ORIGINAL)


def test_a_name_the_file_defines_is_a_placeholder_wherever_it_is_used():
    tokens = texts("class Block:\n    def __init__(self, width):\n        self.proj = width\n\n"
                   "    def run(self, x):\n        return self.proj(x).view(2)\n")
    assert "proj" not in tokens and "width" not in tokens and "run" not in tokens and "Block" not in tokens
    assert "view" in tokens  # used, never defined here: the API


def test_lines_point_into_the_text_shown_and_a_broken_file_is_read_up_to_its_error():
    tokens = normalised_tokens([("x = 1\n\ny = (2 +\n     3)\n", 10)])
    assert (tokens[0].first_line, tokens[-1].last_line) == (11, 14)
    broken = normalised_tokens([("x = f(1)\ny = (2 +\n", 0)])  # an unclosed bracket at the end
    assert [token.text for token in broken][:7] == ["V", "=", "f", "(", "N", ")", ";"]


def test_a_shared_run_of_window_plus_k_minus_one_tokens_always_shares_a_fingerprint():
    rng = random.Random(1)
    for _ in range(200):
        shared = [rng.randrange(50) for _ in range(WINDOW + K - 1)]
        a = [rng.randrange(1000) for _ in range(rng.randrange(40))] + shared + [rng.randrange(1000) for _ in range(9)]
        b = [rng.randrange(1000) for _ in range(rng.randrange(40))] + shared
        prints_a = {value for value, _ in winnow(kgram_hashes(a, K), WINDOW)}
        prints_b = {value for value, _ in winnow(kgram_hashes(b, K), WINDOW)}
        assert prints_a & prints_b


def test_winnowing_keeps_the_rightmost_minimum_of_each_window_once():
    assert winnow([5, 3, 3, 9, 7, 1, 8], 3) == [(3, 2), (1, 5)]
    assert winnow([4, 2], 3) == [(2, 1)]  # shorter than a window: one window
    assert winnow([], 3) == []


def test_fingerprints_are_the_same_in_every_process():
    # Python salts str hashes per process: fingerprints built on them would change from run to run.
    code = ("from grader.similarity.tokens import normalised_tokens\n"
            "from grader.similarity.winnowing import kgram_hashes, token_codes, winnow\n"
            f"tokens = normalised_tokens([({ORIGINAL!r}, 0)])\n"
            "print(winnow(kgram_hashes(token_codes([t.text for t in tokens]), 5), 4))\n")
    runs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True,
                           env={"PYTHONHASHSEED": seed}).stdout for seed in ("1", "2")}
    assert len(runs) == 1
    assert token_codes(["V"]) == token_codes(["V"]) != token_codes(["N"])
