"""Which hints a part shows, how the rubric scores a part, and how a test's exception becomes its outcome."""

from __future__ import annotations

import pytest

from grader.core import hints
from grader.core.report import Rule, ScoredBy
from grader.core.report import TestResult as Result
from grader.core.report_words import describe_scoring
from grader.core.scoring import also_fails, fix_first, part_hints, score_parts, wrong_by_itself
from grader.engine.plugin import classify
from grader.sandbox.errors import StudentException, StudentTimeout
from grader.suite.checks import CheckFailed


def result(outcome: str, hint: str | None, points: float = 1.0, *, mistake: str | None = None,
           stock: bool | None = None) -> Result:
    """A test's result; ``mistake``: the contract mistake its check matched; ``stock``: whether it
    passed with the stock parts standing in for those its part uses."""
    return Result("t", outcome, "message", hint, points if outcome == "passed" else 0.0, points, mistake, stock)


def part_hint(results: list[Result]) -> str | None:
    return next(iter(part_hints(results)), None)


def test_a_named_mistake_beats_an_exception_hint_that_came_first():
    failing = [result("error", "the shapes going into a matmul are wrong"), result("failed", "pre-norm instead of post-norm")]
    assert part_hint(failing) == "pre-norm instead of post-norm"


def test_an_exception_hint_beats_not_implemented():
    assert part_hint([result("failed", hints.NOT_IMPLEMENTED), result("error", "missing .contiguous()")]) \
        == "missing .contiguous()"


def test_whole_part_hint_when_every_failure_says_it():
    assert part_hint([result("failed", hints.NOT_FOUND), result("passed", None)]) == hints.NOT_FOUND


def test_no_hint_for_a_passing_part():
    assert part_hint([result("passed", None)]) is None


def test_the_costliest_mistake_is_the_headline_and_a_second_one_follows():
    # MultiHeadAttention: an unexpected W_o.bias costs one point, the inverted mask seven.
    failing = [result("failed", "unexpected W_o.bias: use bias=bias"), result("passed", None, 3),
               result("failed", "mask inverted", 2), result("error", "mask inverted", 2),
               result("failed", "mask inverted", 3), result("failed", "unexpected W_o.bias: use bias=bias")]
    assert part_hints(failing) == ["mask inverted", "unexpected W_o.bias: use bias=bias"]


def test_points_lost_rank_hints_and_at_most_two_are_shown():
    # train_step: the missing backward and step fail the trained-values tests; "return a float" one point.
    failing = [result("failed", "return the loss as a float"), result("failed", "no optimizer step", 3),
               result("failed", "no backward", 2), result("error", "no backward", 2), result("failed", None, 9)]
    assert part_hints(failing) == ["no backward", "no optimizer step"]


def test_a_guess_from_an_exception_never_headlines_over_a_named_mistake():
    # 04: a pe stored with a batch dimension is named by the values test (3 points) and crashes
    # the tests with other batch sizes (9 points), whose error message only suggests a cause.
    failing = [result("error", "two tensors' shapes do not line up", 4), result("failed", "store pe as (max_len, d_model)", 3),
               result("error", "two tensors' shapes do not line up", 5)]
    assert part_hints(failing) == ["store pe as (max_len, d_model)", "two tensors' shapes do not line up"]
    # A hint some check named counts as named, whichever outcome carried it first.
    assert part_hints([result("error", "mask inverted", 3), result("failed", "mask inverted"),
                       result("failed", "unexpected W_o.bias", 2)]) == ["mask inverted", "unexpected W_o.bias"]


def test_not_implemented_comes_after_a_mistake_that_cost_less():
    assert part_hints([result("failed", hints.NOT_IMPLEMENTED, 5), result("error", "missing .contiguous()")]) \
        == ["missing .contiguous()", hints.NOT_IMPLEMENTED]


def test_a_failing_part_that_passes_with_the_stock_part_says_fix_that_first_then_its_own_hint():
    tests = [("split_heads", result("failed", "heads split with view and no transpose", 2)),
             ("combine_heads", result("passed", None, 2)),
             ("MultiHeadAttention", result("failed", "heads split with view and no transpose", 3, stock=True)),
             ("MultiHeadAttention", result("failed", None, 2, stock=True))]
    uses = {"MultiHeadAttention": ("split_heads", "combine_heads")}
    mha = score_parts(("split_heads", "combine_heads", "MultiHeadAttention"), tests, uses)[2]
    assert mha.hints == [fix_first(["split_heads"]), "heads split with view and no transpose"]
    assert mha.hint == "fix split_heads first (it fails its own tests)"


@pytest.mark.parametrize("mha_tests, hints_shown", [
    ([result("passed", None, 3)], []),  # passes everything: untouched
    ([result("failed", hints.NOT_IMPLEMENTED, 3)], [hints.NOT_IMPLEMENTED]),  # its own stub is what fails
    ([result("error", "MultiHeadAttention uses your split_heads, which is still a stub (see README)", 3)],
     ["MultiHeadAttention uses your split_heads, which is still a stub (see README)"]),  # already says so
    ([result("failed", None, 3, stock=True)], [fix_first(["split_heads"])]),  # passes with the stock one: named
])
def test_fix_first_only_where_the_used_part_may_be_the_cause(mha_tests, hints_shown):
    tests = [("split_heads", result("failed", hints.NOT_IMPLEMENTED)), *(("MultiHeadAttention", t) for t in mha_tests)]
    parts = score_parts(("split_heads", "MultiHeadAttention"), tests, {"MultiHeadAttention": ("split_heads",)})
    assert parts[1].hints == hints_shown and parts[1].hint == next(iter(hints_shown), None)


def test_two_failing_used_parts_are_named_together():
    tests = [("split_heads", result("failed", None)), ("combine_heads", result("error", None)),
             ("MultiHeadAttention", result("failed", "mask inverted", stock=True))]
    parts = score_parts(("split_heads", "combine_heads", "MultiHeadAttention"), tests,
                        {"MultiHeadAttention": ("split_heads", "combine_heads")})
    assert parts[2].hints == ["fix split_heads, combine_heads first (they fail their own tests)", "mask inverted"]
    own = [("split_heads", result("failed", None)), ("combine_heads", result("error", None)),
           ("MultiHeadAttention", result("failed", "mask inverted", stock=False))]
    parts = score_parts(("split_heads", "combine_heads", "MultiHeadAttention"), own,
                        {"MultiHeadAttention": ("split_heads", "combine_heads")})
    assert parts[2].hints == ["mask inverted", "split_heads, combine_heads also fail their own tests"]


# 07's chain: Head <- MultiHead <- Block <- GPT <- end_to_end (which has nothing of its own to write).
CHAIN_07 = ("Head", "MultiHead", "MLP", "Block", "GPT", "end_to_end")
USES_07 = {"MultiHead": ("Head",), "Block": ("MultiHead", "MLP"), "GPT": ("Block",), "end_to_end": ("GPT",)}
RAISES = "your Head (heads[0]) raises an exception on these inputs: fix it first (the Head part)"
BLOCK_RAISES = "your MultiHead (attn) raises an exception on these inputs: fix it first (the MultiHead part)"


def test_a_used_part_that_fails_only_through_its_own_used_part_passes_the_blame_on():
    # A Head that raises: MultiHead, Block and GPT fail only through it (each passes with the
    # stock part it uses) and keep their points. Before: Block said "fix MultiHead first",
    # GPT "fix Block first", end_to_end "fix GPT first", though those score full marks.
    tests = [("Head", result("error", None, 14)), ("Head", result("passed", None, 1)),
             ("MultiHead", result("failed", RAISES, 11, stock=True)), ("MLP", result("passed", None, 9)),
             ("Block", result("failed", BLOCK_RAISES, 10, stock=True)),
             ("GPT", result("failed", "your Block (blocks[0]) raises an exception", 15, stock=True)),
             ("end_to_end", result("failed", None, 5, stock=True))]
    parts = {p.id: p for p in score_parts(CHAIN_07, tests, USES_07, nothing_to_write=("end_to_end",))}
    assert [parts[p].score for p in CHAIN_07] == [1, 11, 9, 10, 15, 0]
    assert parts["MultiHead"].hints == [RAISES]  # its own test named Head already
    for user in ("Block", "GPT", "end_to_end"):
        # The hint naming the part in between as the one to fix is dropped, not shown second.
        assert parts[user].hints == [fix_first(["Head"])], user
    assert [parts[p].scored_by.charged_to for p in ("MultiHead", "Block", "GPT")] == [["Head"]] * 3
    assert describe_scoring(parts["Block"].scored_by) == "tests that fail only through Head are charged there (the tests alone: 0)"


def test_a_used_part_with_a_mistake_of_its_own_is_still_the_one_to_fix_first():
    # MultiHead fails by itself (its test fails with stock heads too) as well as through Head:
    # Block is told to fix MultiHead, where its failure can be mended.
    tests = [("Head", result("failed", "scores not scaled", 7)),
             ("MultiHead", result("failed", "projected twice", 6, stock=False)),
             ("MultiHead", result("failed", None, 5, stock=True)), ("MLP", result("passed", None, 9)),
             ("Block", result("failed", None, 10, stock=True))]
    parts = {p.id: p for p in score_parts(CHAIN_07[:4], tests, USES_07)}
    assert parts["Block"].hints == [fix_first(["MultiHead"])] and parts["Block"].scored_by.charged_to == ["MultiHead"]
    assert parts["Block"].score == 10


MHA_USES = {"MultiHeadAttention": ("split_heads", "combine_heads")}
PARTS_03 = ("split_heads", "combine_heads", "MultiHeadAttention")
EDGE_CASE = [("split_heads", result("passed", None, 6)), ("split_heads", result("failed", None, 1)),
             ("combine_heads", result("passed", None, 5))]  # split_heads loses 1 of 7 on an edge case


@pytest.mark.parametrize("mha_tests, headline", [
    # MultiHeadAttention returns (output, weights): every test fails with the stock split_heads too.
    ([result("failed", hints.RETURNS_SEVERAL, 3, stock=False),
      result("failed", hints.RETURNS_SEVERAL, 11, stock=False)], hints.RETURNS_SEVERAL),
    # An inverted mask fails the mask tests with the stock parts too; the tests split_heads spoils pass with them.
    ([result("failed", "mask inverted", 3, stock=False), result("failed", None, 2, stock=True),
      result("passed", None, 9)], "mask inverted"),
    # Its own mistake has no name: it is still its own.
    ([result("failed", None, 5, stock=False), result("passed", None, 9)],
     wrong_by_itself("MultiHeadAttention", ["split_heads"])),
    # Nobody tried the stock parts (the student's own grader): a used part is never named as the cause.
    ([result("failed", "mask inverted", 3)], "mask inverted"),
])
def test_a_part_that_fails_with_the_stock_parts_too_leads_with_its_own_mistake(mha_tests, headline):
    parts = score_parts(PARTS_03, [*EDGE_CASE, *(("MultiHeadAttention", t) for t in mha_tests)], MHA_USES)
    assert parts[2].hints == [headline, also_fails(["split_heads"])] and parts[2].hint == headline


def test_a_test_that_fails_only_through_a_used_part_is_charged_there_not_here():
    # split_heads loses 1 of 7; MultiHeadAttention's 2-point test fails with it and passes with the
    # stock split_heads; its 3-point mask test fails with the stock parts too: its own mistake.
    tests = [*EDGE_CASE, ("MultiHeadAttention", result("failed", "mask inverted", 3, stock=False)),
             ("MultiHeadAttention", result("failed", None, 2, stock=True)), ("MultiHeadAttention", result("passed", None, 9))]
    parts = score_parts(PARTS_03, tests, MHA_USES)
    assert [part.score for part in parts] == [6, 5, 11]
    assert parts[2].scored_by == ScoredBy(Rule.TESTS, tests_score=9.0, charged_to=["split_heads"])
    assert describe_scoring(parts[2].scored_by) == \
        "tests that fail only through split_heads are charged there (the tests alone: 9)"


def test_a_part_that_fails_only_through_a_used_part_keeps_every_point():
    tests = [("split_heads", result("failed", "no transpose", 3)), ("split_heads", result("passed", None, 4)),
             *(("MultiHeadAttention", result("failed", "no transpose", points, stock=True)) for points in (3, 2, 2)),
             ("MultiHeadAttention", result("passed", None, 9))]
    parts = score_parts(("split_heads", "MultiHeadAttention"), tests, {"MultiHeadAttention": ("split_heads",)})
    assert [part.score for part in parts] == [4, 16]
    assert parts[1].hint == fix_first(["split_heads"])  # still told where the failure comes from


@pytest.mark.parametrize("whole", [hints.NOT_IMPLEMENTED, hints.NOT_FOUND])
def test_a_used_part_not_written_pays_for_nothing_so_the_part_that_uses_it_does(whole):
    # 05: an inline feed-forward stands for a FeedForward whose class is still the stub.
    tests = [("FeedForward", result("failed", whole, 4)),
             ("EncoderLayer", result("failed", "ffn: the contract names linear1, linear2", 1, stock=True)),
             ("EncoderLayer", result("passed", None, 11))]
    parts = score_parts(("FeedForward", "EncoderLayer"), tests, {"EncoderLayer": ("FeedForward",)})
    assert [part.score for part in parts] == [0, 11] and parts[1].scored_by == ScoredBy()


def test_a_part_with_nothing_to_write_counts_its_tests_however_its_used_part_fails():
    # 06's end_to_end trains with the student's train_step, which never steps: it is train_step in use.
    tests = [("train_step", result("failed", "no optimizer step", 7)),
             ("end_to_end", result("failed", None, 3, stock=True))]
    parts = score_parts(("train_step", "end_to_end"), tests, {"end_to_end": ("train_step",)}, None, {"end_to_end"})
    assert [part.score for part in parts] == [0, 0]
    assert parts[1].scored_by == ScoredBy() and parts[1].hint == fix_first(["train_step"])


@pytest.mark.parametrize("stock", [False, None])  # failed with the stock parts too; or never tried (student's grader)
def test_a_test_not_shown_to_fail_only_through_a_used_part_costs_here(stock):
    tests = [*EDGE_CASE, ("MultiHeadAttention", result("failed", None, 2, stock=stock)),
             ("MultiHeadAttention", result("passed", None, 9))]
    mha = score_parts(PARTS_03, tests, MHA_USES)[2]
    assert mha.score == 9 and mha.scored_by == ScoredBy(Rule.TESTS)


def test_a_test_that_passes_with_stock_parts_is_not_credited_when_no_used_part_fails():
    tests = [("split_heads", result("passed", None, 7)), ("MultiHeadAttention", result("failed", None, 2, stock=True)),
             ("MultiHeadAttention", result("passed", None, 9))]
    assert score_parts(("split_heads", "MultiHeadAttention"), tests, {"MultiHeadAttention": ("split_heads",)})[1].score == 9


SCALE = "scores scaled by `sqrt(d_model)` instead of the head dimension"
RUBRIC = {SCALE: 3.0, "softmax over the wrong dimension": 4.0}


def mha(*tests: Result, deductions=RUBRIC):
    return score_parts(("MultiHeadAttention",), [("MultiHeadAttention", t) for t in tests], None, deductions)[0]


def test_a_part_whose_every_failure_is_one_priced_mistake_loses_its_deduction():
    part = mha(result("passed", None, 3), result("failed", "scaled by sqrt(d_model)", 3, mistake=SCALE),
               result("failed", "scaled by sqrt(d_model)", 6, mistake=SCALE), result("failed", None, 2, mistake=SCALE))
    assert (part.score, part.max_score) == (11.0, 14.0)
    assert part.scored_by == ScoredBy(Rule.RUBRIC, {SCALE: 3.0}, 0.0, 3.0)
    assert describe_scoring(part.scored_by) == f"scored by the rubric: {SCALE}, -3 (the tests alone: 3)"
    assert part.hints == ["scaled by sqrt(d_model)"]  # the hints are the tests' as ever


def test_the_rubric_prices_the_part_s_own_mistake_once_the_used_part_s_are_charged_there():
    # The scale is its own mistake (priced 3); the 2-point test fails only through split_heads.
    tests = [*EDGE_CASE, ("MultiHeadAttention", result("failed", "scaled", 6, mistake=SCALE, stock=False)),
             ("MultiHeadAttention", result("failed", "no transpose", 2, mistake="heads split with view", stock=True)),
             ("MultiHeadAttention", result("passed", None, 8))]
    mha = score_parts(PARTS_03, tests, MHA_USES, RUBRIC)[2]
    assert (mha.score, mha.max_score) == (13, 16)
    assert mha.scored_by == ScoredBy(Rule.RUBRIC, {SCALE: 3.0}, 0.0, 8.0, ["split_heads"])
    assert describe_scoring(mha.scored_by) == (f"scored by the rubric: {SCALE}, -3; tests that fail only through "
                                               "split_heads are charged there (the tests alone: 8)")


def test_a_second_unrelated_slip_costs_its_own_points_not_the_rubric_s_whole_benefit():
    # Karpathy's Head as written: scores scaled by C (priced 2), which fails 8 points of checks,
    # and no ValueError for T > context_length, a 1-point test no priced mistake explains.
    part = mha(result("passed", None, 6), result("failed", "scaled", 3, mistake=SCALE),
               result("failed", "scaled", 5, mistake=SCALE), result("failed", "raise ValueError", 1))
    assert (part.score, part.max_score) == (11.0, 15.0)  # 15 - 3 (the deduction) - 1 (the ValueError test)
    assert part.scored_by == ScoredBy(Rule.RUBRIC, {SCALE: 3.0}, 1.0, 6.0)
    assert describe_scoring(part.scored_by) == \
        f"scored by the rubric: {SCALE}, -3; other failing checks, -1 (the tests alone: 6)"


def test_two_priced_mistakes_each_cost_their_deduction_once():
    softmax = "softmax over the wrong dimension"
    part = mha(result("passed", None, 4), result("failed", "scaled", 5, mistake=SCALE),
               result("failed", "softmax", 3, mistake=softmax), result("failed", "softmax", 2, mistake=softmax))
    assert part.score == 14 - 3 - 4
    assert part.scored_by.deductions == {SCALE: 3.0, softmax: 4.0} and part.scored_by.unexplained == 0


def test_a_priced_mistake_never_costs_more_than_its_tests_lose():
    # The scale is priced 3 but its one failing check is worth 1; the other failure is unexplained.
    part = mha(result("passed", None, 8), result("failed", "scaled", 1, mistake=SCALE), result("failed", None, 5))
    assert part.score == 8 and part.scored_by == ScoredBy(Rule.TESTS)


@pytest.mark.parametrize("failing", [
    [result("failed", "scaled", 3, mistake=SCALE), result("failed", None, 2)],  # one failure shows no mistake
    [result("failed", "scaled", 3, mistake=SCALE),
     result("failed", "softmax", 2, mistake="softmax over the wrong dimension")],  # two different mistakes
    [result("failed", "inverted", 3, mistake='mask inverted (True read as "blocked")')],  # not priced
    [result("failed", "scaled", 2, mistake=SCALE)],  # the tests take less than the deduction
    [result("failed", "scaled", 3, mistake=SCALE)],  # ... or as much
])
def test_otherwise_the_tests_decide(failing):
    part = mha(result("passed", None, 9), *failing)
    assert part.score == 9.0 and part.scored_by == ScoredBy(Rule.TESTS)
    assert describe_scoring(part.scored_by) is None


def test_without_a_rubric_the_tests_decide():
    failing = [result("passed", None, 3), result("failed", "scaled", 11, mistake=SCALE)]
    assert mha(*failing, deductions=None).score == 3.0
    assert mha(*failing, deductions={}).scored_by == ScoredBy(Rule.TESTS)
    assert mha(*failing).score == 11.0


def test_a_passing_part_is_scored_by_its_tests():
    part = mha(result("passed", None, 14))
    assert part.score == 14.0 and part.scored_by == ScoredBy(Rule.TESTS)


def test_parts_keep_contract_order_and_sum_points():
    tests = [("b", result("passed", None, 2)), ("a", result("failed", "x", 3)), ("b", result("failed", None, 1))]
    parts = score_parts(("a", "b"), tests)
    assert [(p.id, p.score, p.max_score) for p in parts] == [("a", 0, 3), ("b", 2, 3)]


@pytest.mark.parametrize("message, part, expected", [
    ("split_heads: see assignments/03/README.md", "split_heads", hints.NOT_IMPLEMENTED),
    ("", "split_heads", hints.NOT_IMPLEMENTED),
    ("MultiHeadAttention.__init__: see README", "MultiHeadAttention", hints.NOT_IMPLEMENTED),
    ("MultiHeadAttention: from assignment 03: paste your solution here", "EncoderLayer",
     "EncoderLayer uses your MultiHeadAttention, which is still a stub (from assignment 03: paste your solution here)"),
])
def test_not_implemented_names_the_stub_that_raised(message, part, expected):
    exc = StudentException(part, "NotImplementedError", message, "", stub=True)
    assert classify(exc, part).hint == expected


def test_a_not_implemented_error_torch_raises_is_the_students_error_not_a_stub():
    # torch has no kernel for integers: the code runs, on the wrong dtype.
    exc = StudentException("Head.forward", "NotImplementedError",
                           "\"softmax_lastdim_kernel_impl\" not implemented for 'Long'", "", stub=False)
    verdict = classify(exc, "Head")
    assert verdict.outcome == "error" and "not implemented for 'Long'" in verdict.message
    assert verdict.hint.startswith("a tensor of integers (or bools) reaches an operation that needs floats")


@pytest.mark.parametrize("exc, outcome", [
    (None, "passed"),
    (CheckFailed("values differ", "a hint"), "failed"),
    (StudentException("f", "RuntimeError", "boom", ""), "error"),
    (StudentTimeout("f: time limit of 1 s exceeded"), "timeout"),
    (ZeroDivisionError("hidden suite bug"), "error"),
])
def test_outcomes(exc, outcome):
    assert classify(exc, "p").outcome == outcome


def test_a_fault_in_the_suite_is_flagged_internal_and_never_blamed_on_the_student():
    verdict = classify(KeyError("W_q.weight"), "p")
    assert verdict.internal is True and "internal grader error" in verdict.message


def test_a_rerun_s_stub_hint_quotes_nothing_its_process_could_have_put_there():
    # A rerun's process held the grader's stock parts (answers): a stub message could carry
    # their source into the hint, which may become the test's (engine/plugin.py).
    stolen = "class StockHead(nn.Module): ..."
    exc = StudentException("MultiHead", "NotImplementedError", f"Head.forward: {stolen}", "", stub=True,
                           stub_owner="Head")
    assert stolen in classify(exc, "MultiHead").hint
    assert classify(exc, "MultiHead", quote=False).hint == "MultiHead uses your Head, which is still a stub"


def test_only_a_stub_hint_counts_as_the_same_hint_quoted():
    unquoted = hints.another_parts_stub("Head.forward: paste it here", "MultiHead", quote=False)
    assert hints.quotes_stub(hints.another_parts_stub("Head.forward: paste it here", "MultiHead"), unquoted)
    assert not hints.quotes_stub(unquoted, unquoted)
    # A part's own mistake, then a note on a piece: a hint of its own, not a quote of it.
    assert not hints.quotes_stub("projected twice; also wrong by itself: your Head", "projected twice")
    assert not hints.quotes_stub("projected twice (see the README)", "projected twice")
