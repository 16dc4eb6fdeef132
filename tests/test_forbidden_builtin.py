"""Assignment 01 forbids a built-in softmax: decided from the operators that ran in the
student's softmax, never from how its source is spelled.

Three corpora, each graded end to end:

- honest variants, written as students write them (star imports, the word "softmax" in a
  string, a draft in an earlier cell, every spelling of the handout's ``check()``): each
  keeps every point, 43 of 43;
- cheats that reach a built-in softmax by a route the source does not show (a ``match``
  pattern, a global unpickled by name, ``pkgutil.resolve_name``, ``inspect.getattr_static``,
  a cross-entropy, ``torch.ops``, a TorchFunctionMode switched off): each costs what the plain
  ``torch.softmax`` costs, the softmax part's 14 points, and nothing elsewhere;
- code that switches the recording itself off before calling the built-in: no verdict can
  rest on that, so it keeps its points, and the report flags it with the evidence
  (``unrecorded-operators``) for the instructor.
"""

from __future__ import annotations

import pytest

from grader.sandbox.limits import Limits
from reference import as_submission
from reference.hidden.a01 import variants
from tests.conftest import ASSIGNMENTS, TEST_LIMITS, assert_valid, mutant, notebook_text, part

pytestmark = pytest.mark.slow

REFERENCE = as_submission("attention")
SOFTMAX_BODY = ("    row_max = x.amax(dim=dim, keepdim=True)\n"
                "    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))\n"
                "    exp = torch.exp(x - row_max)\n"
                "    return exp / exp.sum(dim=dim, keepdim=True)\n")
FULL_MARKS, SOFTMAX_POINTS = 43, 14
OTHER_PARTS = ("attention_scores", "scaled_dot_product_attention", "SelfAttention")


def with_softmax(body: str, *, before: str = "", after: str = "") -> str:
    """The 01 reference with ``body`` as softmax's body, ``before`` at the top and ``after``
    at the end of the module."""
    return before + mutant(REFERENCE, SOFTMAX_BODY, body) + after


# The defaults' time limits: torch.compile's first call takes seconds, more on a busy machine.
LIMITS = Limits(memory_bytes=TEST_LIMITS.memory_bytes)


def grade_01(grade_source, source: str, suffix: str = ".py"):
    report = grade_source(source, suffix=suffix, assignment=ASSIGNMENTS / "01", limits=LIMITS)
    assert_valid(report)
    assert report.status == "graded", report.error
    return report


# ---- honest code keeps every point ----------------------------------------------------------

DRAFT = "import torch\n\ndef softmax(x, dim=-1):\n    return torch.softmax(x, dim)  # a first try, replaced below\n"
HONEST = {
    # torch's star import rebinds float to torch.float: the student's -inf is written as torch's.
    "a star import from torch above the student's own softmax": mutant(
        with_softmax(SOFTMAX_BODY, before="from torch import *\n"), 'float("-inf")', "-inf"),
    "a star import from torch.nn.functional": with_softmax(
        SOFTMAX_BODY, before="from torch.nn.functional import *\n"),
    "the word softmax as a profiler label": with_softmax(
        "    with torch.profiler.record_function('softmax'):\n"
        "        row_max = x.amax(dim=dim, keepdim=True)\n"
        "        row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))\n"
        "        exp = torch.exp(x - row_max)\n"
        "        return exp / exp.sum(dim=dim, keepdim=True)\n"),
    "strings and a dict keyed by softmax": with_softmax(
        "    NAMES = {'softmax': 'torch.nn.functional.softmax', 'note': 'do not call F.softmax'}\n" + SOFTMAX_BODY),
    "aliases of torch and a helper with a tutorial's name": with_softmax(
        "    return stable_softmax(x, dim)\n",
        before="import torch as T\nimport torch.nn.functional as F\n",
        after="\n\ndef stable_softmax(x, dim):\n    shifted = x - x.max(dim=dim, keepdim=True).values\n"
              "    shifted = T.nan_to_num(shifted, nan=0.0)\n    e = T.exp(shifted)\n"
              "    return e / e.sum(dim=dim, keepdim=True)\n\n\nsm = softmax\n"),
    "a module-level F.softmax used only to compare in a demo": with_softmax(
        SOFTMAX_BODY, before="import torch.nn.functional as F\n",
        after="\n\ndef _compare():\n    x = torch.randn(2, 3)\n    return (softmax(x) - F.softmax(x, -1)).abs().max()\n"),
    "compiled with torch.compile": with_softmax(
        "    return _compiled(x, dim)\n",
        after="\n\n@torch.compile(backend='eager')\ndef _compiled(x, dim: int):\n"
              "    m = torch.nan_to_num(x.amax(dim=dim, keepdim=True), neginf=0.0)\n"
              "    e = torch.exp(x - m)\n    return e / e.sum(dim=dim, keepdim=True)\n"),
    "a cache of tensors kept between calls": with_softmax(
        "    m = x.amax(dim=dim, keepdim=True)\n"
        "    key = (m.shape, m.dtype, m.device)\n"
        "    if key not in _ZEROS:\n        _ZEROS[key] = torch.zeros_like(m)\n"
        "    e = torch.exp(x - torch.where(torch.isfinite(m), m, _ZEROS[key]))\n"
        "    return e / e.sum(dim=dim, keepdim=True)\n", after="\n\n_ZEROS = {}\n"),
    # Moved to the input's device where it is used: on a GPU a CPU constant would fail (the device
    # test sees that on the meta device too).
    "a module-level constant tensor": with_softmax(
        "    z = x.movedim(dim, -1)\n"
        "    e = torch.exp(z - torch.nan_to_num(z.amax(-1, keepdim=True), neginf=0.0))\n"
        "    return (e / (e @ _ONES[: z.shape[-1]].to(e)).unsqueeze(-1)).movedim(-1, dim)\n",
        after="\n\n_ONES = torch.ones(4096)\n"),
    "check() through the package in a notebook": (notebook_text(
        REFERENCE, "import grader\ngrader.check('softmax')", "import grader as g\ng.check(part='softmax')",
        "from grader import check\ncheck('softmax')", "from grader import check as verify\nverify('softmax')"), ".ipynb"),
    "a draft with torch.softmax in an earlier cell": (notebook_text(
        DRAFT, "x = torch.randn(2, 3)\nprint(softmax(x))", REFERENCE,
        "assert torch.allclose(softmax(x), torch.softmax(x, -1))"), ".ipynb"),
}


@pytest.mark.parametrize("name", HONEST)
def test_honest_code_loses_no_point(grade_source, name):
    source, suffix = HONEST[name] if isinstance(HONEST[name], tuple) else (HONEST[name], ".py")
    report = grade_01(grade_source, source, suffix)
    assert report.score == FULL_MARKS, [(p.id, p.score, p.hint) for p in report.parts]
    assert "unrecorded-operators" not in {flag.kind for flag in report.flags}, report.flags


# ---- a built-in softmax by any route costs the part -----------------------------------------

CROSS_ENTROPY = (
    "    # p_i = exp(-cross_entropy(x, i)): log_softmax runs inside the cross-entropy\n"
    "    xt = x.movedim(dim, -1)\n"
    "    n = xt.size(-1)\n"
    "    rows = xt.reshape(-1, n)\n"
    "    targets = torch.arange(n, device=x.device).repeat(rows.size(0))\n"
    "    losses = torch.nn.functional.cross_entropy(rows.repeat_interleave(n, 0), targets, reduction='none')\n"
    "    return torch.exp(-losses).reshape(xt.shape).movedim(-1, dim)\n")
SDPA = (
    "    # softmax(0 @ 0^T + x) @ I: the built-in attention's own softmax, over dim\n"
    "    xt = x.movedim(dim, -1)\n"
    "    n = xt.size(-1)\n"
    "    q = xt.new_zeros(*xt.shape[:-1], 1)\n"
    "    k = xt.new_zeros(*xt.shape[:-2], n, 1)\n"
    "    v = torch.eye(n, dtype=x.dtype, device=x.device).expand(*xt.shape[:-2], n, n)\n"
    "    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=xt).movedim(-1, dim)\n")
CHEATS = {
    # Each of these also switches torch functions off (what a TorchFunctionMode watch sees) by
    # the same route, so that neither the source nor a Python-level watch shows the softmax.
    "a structural match pattern reads the attributes": with_softmax(
        "    match torch._C:\n        case object(DisableTorchFunction=off):\n            pass\n"
        "    match torch.nn.functional:\n        case object(softmax=f):\n            with off():\n"
        "                return f(x, dim)\n"),
    "globals unpickled by name": with_softmax(
        "    off = pickle.loads(b'ctorch._C\\nDisable' + b'TorchFunction\\n.')\n"
        "    with off():\n        return pickle.loads(b'ctorch.nn.functional\\nsoft' + b'max\\n.')(x, dim)\n",
        before="import pickle\n"),
    "pkgutil.resolve_name with computed names": with_softmax(
        "    with pkgutil.resolve_name('torch._C:Disable' + 'TorchFunction')():\n"
        "        return pkgutil.resolve_name('torch.nn.functional:' + 'soft' + 'max')(x, dim)\n",
        before="import pkgutil\n"),
    "inspect.getattr_static with computed names": with_softmax(
        "    off = inspect.getattr_static(inspect.getattr_static(torch, '_' + 'C'), 'Disable' + 'TorchFunction')\n"
        "    with off():\n        return inspect.getattr_static(torch, 'soft' + 'max')(x, dim)\n",
        before="import inspect\n"),
    "exp of a negated cross-entropy": with_softmax(CROSS_ENTROPY),
    "the softmax inside scaled_dot_product_attention": with_softmax(SDPA),
    "softmin of -x through an alias": with_softmax(
        "    return _normalise(-x, dim)\n", before="import torch.nn.functional\n_normalise = torch.nn.functional.softmin\n"),
    "torch.ops.aten._softmax": with_softmax("    return torch.ops.aten._softmax(x, dim, False)\n"),
    "a distribution's probabilities": with_softmax(
        "    return torch.distributions.Categorical(logits=x.movedim(dim, -1)).probs.movedim(-1, dim)\n"),
    "a compiled softmax": with_softmax(
        "    return _compiled(x, dim)\n",
        after="\n\n@torch.compile(backend='eager')\ndef _compiled(x, dim: int):\n    return torch.softmax(x, dim)\n"),
    "torch functions switched off at module level": with_softmax(
        "    return torch.softmax(x, dim=dim)\n", before="import torch\ntorch._C.DisableTorchFunction().__enter__()\n"),
    "a later notebook cell redefines a helper": (notebook_text(
        "def _normalise(e, dim):\n    return e / e.sum(dim=dim, keepdim=True)\n",
        mutant(REFERENCE, SOFTMAX_BODY,
               "    row_max = x.amax(dim=dim, keepdim=True)\n"
               "    row_max = torch.where(torch.isfinite(row_max), row_max, torch.zeros_like(row_max))\n"
               "    return _normalise(torch.exp(x - row_max), dim)\n"),
        "x = torch.randn(2, 3)\nprint(softmax(x))",
        "import torch\ndef _normalise(e, dim):\n    with torch._C.DisableTorchFunction():\n"
        "        return torch.softmax(e.log(), dim)\n"), ".ipynb"),
}


@pytest.mark.parametrize("name", CHEATS)
def test_a_built_in_softmax_by_any_route_costs_the_softmax_part(grade_source, name):
    source, suffix = CHEATS[name] if isinstance(CHEATS[name], tuple) else (CHEATS[name], ".py")
    report = grade_01(grade_source, source, suffix)
    softmax = part(report, "softmax")
    # What calling torch.softmax costs: every softmax test, 14 points; the other parts keep theirs.
    assert softmax.score == 0, (name, softmax.hint)
    assert softmax.hint.startswith(variants.FORBIDDEN_SOFTMAX), softmax.hint
    for part_id in OTHER_PARTS:
        assert part(report, part_id).score == part(report, part_id).max_score, (part_id, part(report, part_id).hint)
    assert report.score == FULL_MARKS - SOFTMAX_POINTS


def test_the_hint_names_the_operator_that_ran(grade_source):
    report = grade_01(grade_source, with_softmax(CROSS_ENTROPY))
    assert "_log_softmax ran inside it" in part(report, "softmax").hint


# ---- switching the recording off: a flag with its evidence, never a deduction ---------------

# A softmax whose own backward (softmax's formula) keeps the gradient test from running
# torch's softmax backward kernel under the recording.
CUSTOM_BACKWARD = (
    "\n\nclass _Softmax(torch.autograd.Function):\n"
    "    @staticmethod\n"
    "    def forward(ctx, x, dim):\n"
    "        y = _forward(x, dim)\n"
    "        ctx.save_for_backward(y)\n"
    "        ctx.dim = dim\n"
    "        return y\n\n"
    "    @staticmethod\n"
    "    def backward(ctx, g):\n"
    "        (y,) = ctx.saved_tensors\n"
    "        return y * (g - (g * y).sum(ctx.dim, keepdim=True)), None\n")


def through_custom_backward(forward: str, before: str = "") -> str:
    """A softmax that computes its output with ``forward`` (the body of ``_forward(x, dim)``)."""
    return with_softmax("    return _Softmax.apply(x, dim)\n", before=before,
                        after=CUSTOM_BACKWARD + "\n\ndef _forward(x, dim):\n" + forward)


# name -> (submission, the softmax tests that fail, the evidence flagged). A recording switched
# off for the forward pass only still sees the gradient test's backward, and softmax's own
# backward kernel (aten::_softmax_backward_data) is evidence that a built-in softmax ran: that
# test's 1 point goes. Otherwise nothing was seen to run: no evidence, no deduction.
SWITCHED_OFF = {
    "the dispatch key excluded": (with_softmax(
        "    with torch._C._ExcludeDispatchKeyGuard(torch._C.DispatchKeySet(torch._C.DispatchKey.Python)):\n"
        "        return torch.softmax(x, dim)\n"), ["test_softmax_gradient"], "made by no recorded operator"),
    "the current modes disabled": (with_softmax(
        "    with torch.utils._python_dispatch._disable_current_modes():\n"
        "        return torch.softmax(x, dim)\n"), ["test_softmax_gradient"], "made by no recorded operator"),
    "the recording popped and never put back": (with_softmax(
        "    if torch._C._len_torch_dispatch_stack():\n"
        "        torch._C._pop_torch_dispatch_stack(None)\n"
        "    return torch.softmax(x, dim)\n"), [], "made by no recorded operator"),
    "the result smuggled into a recorded operator": (with_softmax(
        "    with torch.utils._python_dispatch._disable_current_modes():\n"
        "        done = torch.softmax(x, dim)\n"
        "    return done.clone()\n"), ["test_softmax_gradient"], "that no recorded operator made"),
    "written in place while the modes are disabled": (through_custom_backward(
        "    y = torch.empty_like(x)\n"
        "    with torch.utils._python_dispatch._disable_current_modes():\n"
        "        y.copy_(torch.softmax(x, dim))\n"
        "    return y\n"), [], "changed in place by no recorded operator"),
    "written in place by another thread": (through_custom_backward(
        "    y = torch.empty_like(x)\n"
        "    worker = threading.Thread(target=lambda: y.copy_(torch.softmax(x, dim)))\n"
        "    worker.start()\n    worker.join()\n    return y\n", before="import threading\n"),
        [], "changed in place by no recorded operator"),
    "a tensor subclass that dispatches on its own": (through_custom_backward(
        "    trigger = torch.Tensor._make_subclass(_Trigger, torch.zeros(()))\n"
        "    trigger.dim_ = dim\n"
        "    return torch.add(x, trigger)\n",
        before="import torch\n\n\nclass _Trigger(torch.Tensor):\n    @classmethod\n"
               "    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):\n"
               "        return torch.softmax(args[0], args[1].dim_)\n\n\n"),
        [], "a tensor subclass that runs operators of its own"),
}


@pytest.mark.parametrize("name", SWITCHED_OFF)
def test_a_recording_switched_off_is_flagged_with_its_evidence_and_costs_nothing(grade_source, name):
    source, failing, evidence = SWITCHED_OFF[name]
    report = grade_01(grade_source, source)
    unrecorded = [flag for flag in report.flags if flag.kind == "unrecorded-operators"]
    assert unrecorded and all(flag.where == "a call of softmax" for flag in unrecorded), report.flags
    assert any(evidence in flag.detail for flag in unrecorded), unrecorded
    failed = {test.name: test for test in part(report, "softmax").tests if test.outcome != "passed"}
    assert list(failed) == failing, failed
    assert all("_softmax_backward_data ran inside it" in test.hint for test in failed.values())
    assert part(report, "softmax").score == SOFTMAX_POINTS - len(failing)
    assert report.score == FULL_MARKS - len(failing)


def test_numbers_from_outside_torch_are_flagged_not_deducted(grade_source):
    # A max taken in numpy: the grader cannot see what made those numbers (a scipy softmax
    # would look the same), so it says so, and takes nothing.
    report = grade_01(grade_source, with_softmax(
        "    m = np.max(x.detach().cpu().numpy(), axis=dim, keepdims=True)\n"
        "    m = torch.tensor(np.where(np.isfinite(m), m, 0), device=x.device)\n"
        "    e = torch.exp(x - m)\n"
        "    return e / e.sum(dim=dim, keepdim=True)\n", before="import numpy as np\n"))
    assert report.score == FULL_MARKS, [(p.id, p.score, p.hint) for p in report.parts]
    assert any("built from Python or numpy data" in flag.detail for flag in report.flags), report.flags
