"""The one module hidden suites import from: a suite author's reference.

A hidden suite (``reference/hidden/aNN/``) is a pytest suite that grades a submission it
never imports: the student's code runs in a sandboxed process, and a test reaches it only
through the ``student`` fixture. A suite imports torch, pytest, the reference, its own
modules (conftest, variants) and this module; nothing else of the grader.

Fixtures, served to every suite by the grader's pytest plugin (never imported):

- ``student`` (:class:`Student`): ``student.call("split_heads", x, 4)``;
  ``mha = student.new("MultiHeadAttention", 24, 3)`` then ``mha(q, k, v)``, ``mha.attr("W_q")``,
  ``mha.method("eval")``, ``mha.inspect()``; ``student.new_like(reference, "MultiHeadAttention",
  24, 3)`` holds the reference's parameters; ``student.backward(...)`` and ``obj.backward(...)``
  return the gradients (:class:`Backward`); ``student.define(name, source)`` runs grader-provided
  helper code in the student's process; ``student.watching(ops)`` records which of these
  operators (``aten::_softmax``) run in the student's calls, reported as each one runs: a rule
  such as "no built-in softmax" is decided from what ran, never from the source;
  ``with student.timed_like(work):`` gives a call the reference cannot time by itself (it
  takes the student's model) ``work``'s time as the yardstick of its limit: the same job with
  the reference, run in the suite's process (07's training loop on the reference's GPT);
  ``student.program`` is the source as the grader read it.
- ``device``: the device the suite runs on; put inputs and reference modules there.
- ``make_input(*shape, seed=n, scale=..., dtype=torch.float32)``: a seeded normal tensor on
  ``device``; ``scale`` defaults to the ``input_scale`` fixture (1.0), which a suite's
  conftest may override when its values need larger inputs.
- ``seed_reference(n)`` (a function, not a fixture): seeds the CPU generator a reference module
  built next draws its weights from (build it on the CPU, then ``.to(device)``), as
  ``torch.manual_seed(n)`` does for it, without the 5 ms stack trace that one formats per call
  for each GPU backend not started.
- ``@once_per_grader`` (a decorator, not a fixture): a function of no arguments whose value
  does not depend on the submission (06's model the reference trains) is computed once per
  grader process, not in every suite process (:mod:`grader.suite.computed_once`).
- ``new_graded(reference, class_name, *args)``: the student's module holding the reference's
  weights, a stock piece in place of each piece of theirs that cannot hold them;
  ``new_for_names(reference, class_name, *args)``: the same without the weights, for a check
  of the module's own parameter names. Both use the ``stock_pieces`` fixture (none), which a
  suite's conftest overrides with its :class:`StockPiece` list (below).

Errors: every call into the student's code may raise a :class:`StudentError`:
:class:`StudentException` (their code raised; ``type_name``, ``message``, ``traceback``),
:class:`StudentNotFound`, :class:`StudentTimeout` or :class:`StudentCrashed`. Let them
propagate: the grader turns each into the student's verdict and hint. Catch one only to say
more (then raise :class:`CheckFailed`), never to pass a test.

Checks: each raises :class:`CheckFailed` (message for the student, optional hint) on failure.

Every value from the student's process is checked before the suite computes with it: its
kind and shape (and, for ids, range) against the contract's, so no value of the student's
choosing sizes an allocation or broadcasts against the grader's tensors, and none that is
outside the contract makes trusted code raise (that would be a grader error the student chose).

- :func:`expect_tensor` ``(what, got, shape=, dtype=, device=, hint=)``: a tensor of that kind.
- :func:`expect_token_ids` ``(what, got, vocab_size, shape=, device=)``: a LongTensor of ids in
  ``0..vocab_size-1``; before counting, indexing or one-hot encoding by them.
- :func:`expect_named_tensors` ``(what, got, like, others_allowed=False)``: a state dict with
  ``like``'s names and shapes, returned in ``like``'s dtypes; before loading or comparing it.
- :func:`expect_close` ``(what, got, want, atol=, rtol=, mistakes={hint: tensor or callable})``:
  values within tolerance; else shape, dtype, the largest error, and as the hint the first
  mistake whose value ``got`` matches (a candidate of another shape never matches: nothing
  is broadcast). :func:`expect_equal`: the same, exactly.
  :func:`is_close` is its test as a bool; :func:`describe_difference` its wording,
  :func:`describe_value` what came back instead of a tensor.
- :func:`expect_raises` ``(ValueError, what, lambda: ...)``: the student's code raises that type.
- :func:`buffer_of` ``(module, name)``: a buffer's value and a way to load another into it,
  persistent or not; check the value before computing with it.
- :func:`expect_contract_parameters`: the module's parameter names and shapes are the
  reference's; follow it with :func:`expect_computes_with`, which shows the module computes
  with them (the names are only the student process's word).
- :func:`expect_causal` ``(what, output_with_change_at, length, atol=, hint=, shape=)``: no position
  of the output depends on a later position of the input; the hint names the leaking pairs.
- :func:`expect_derivative`: a gradient the student's code reports is the derivative of the
  loss the same code computes.
- :func:`expect_same_gradients` ``(module, reference, x, grad_output, mistakes=)``: a module holding the
  reference's parameters backpropagates as the reference does (input and every parameter).
  :func:`gradient_mistakes` gives a gradient check each mistake's gradients, so that it names the
  mistake as the value checks do.
- :func:`expect_follows_device` ``(what, output_on, device, shape=)``: ``output_on(where)`` runs
  the code with its inputs on ``where`` (the ``meta`` device on a grader without a GPU, so a
  tensor created on a fixed device shows) and its output must be there, of that shape.

Dropout (:mod:`grader.suite.dropout`), checked once, in the part that owns it, against the
same part with dropout off, so it holds for every correct way to draw the random numbers:
:func:`expect_dropout` ``(what, dropped, kept, p, named=DropoutHints(...))``: each element is
zero or ``kept / (1 - p)``, about a fraction ``p`` zero; :func:`expect_no_dropout_at_zero`:
built with ``dropout=0.0`` the part drops nothing (else its rate is hard-coded);
:func:`expect_new_draws` ``(what, first, again, kept)``: two training-mode calls in a row drop
different units (else a fixed seed); :func:`weights_behind` recovers the attention weights
behind an attention's output, so dropout on them is seen; :func:`zero_fraction_bounds`. Values are graded with dropout off:
:func:`in_eval_mode` ``(module)`` before comparing them. Their hints: ``DROPOUT_UNSCALED``,
``DROPOUT_RATE_IGNORED``, ``DROPOUT_SAME_UNITS``; a device hard-coded: ``FIXED_DEVICE``.

Hints for attention mistakes that several assignments grade, worded once: ``SCALE_BY_LENGTH``,
``SCALE_BY_INPUT_WIDTH``, ``MASK_FILL_NOT_NEGATIVE``, ``FUTURE_VISIBLE`` (for
:func:`expect_causal`). A hint that names one of the contract's mistakes is a :class:`Mistake`
(``Mistake(hint, contract="the contract's words")``, kept in ``variants.py``): when
:func:`expect_close` or :func:`expect_causal` match the student's value with that mistake's,
the failure carries the contract's words as evidence (``CheckFailed.mistake``), by which the
rubric (assignment.toml's ``[rubric.deductions]``) scores the part. A check that names a
mistake without comparing values passes no evidence, and the tests decide.

Part isolation (:mod:`grader.suite.part_isolation`): a part built on pieces graded elsewhere is
graded on its own work. The student's pieces enter the grader's arithmetic only as
:func:`black_box` ``(remote, like=reference_piece)``: each result must have the reference
piece's shape on the same input, else :class:`PieceUnusable`, which the helpers below treat
as a piece that cannot be combined. :func:`expect_wiring` passes an output that matches the reference
or the contract's wiring of the student's own pieces, and names the part's own mistake otherwise
(``OWN_WIRING`` when none matched), then each :class:`Piece` that is wrong by itself; :func:`diagnosing`
says which piece raises when the part does; :func:`expect_gradients` checks that gradients
reach every submodule and input; :func:`call_part` calls a part and names an unfinished part
it calls; :func:`randomize_norms` makes a reference's LayerNorms differ, so wiring mistakes
show. :func:`describe_piece`, ``PIECE_RAISES``, ``PIECES_DIFFER`` and ``OWN_WIRING`` word those notes;
``GRAPH_CUT`` is the hint when a gradient does not arrive.

Stock pieces: build a composite part with :func:`new_graded_like` (``student.new_like`` with
``stock=[StockPiece("FeedForward", build)]``): a piece whose parameter names differ from the
contract's is replaced, in the student's process, by grader-owned code holding the
reference's weights (:func:`with_stock` does it to a module already built, :func:`new_with_stock`
to one it builds, keeping its own weights for a check of its names), and
:func:`noting_stock` adds ``STOCK_REPLACED`` to the hint of a check that fails on it. The stock
code is an answer: send only what the piece needs, ``student.define("stock",
source_defining(STOCK_SOURCE, ["StockMLP"]), answers=True)``, never the whole file, whose other
classes answer other parts (the one under test among them). The
names then cost points where the piece's own class is graded; when the student never wrote that
class, :func:`expect_replaced_pieces_written` charges them to the part that holds the piece. A
bias the contract's layer lacks is loaded as zero for the values (:func:`without_unexpected_biases`),
so the names check charges it once. A
lazy module (``nn.LazyLinear``) reports ``inspect()["uninitialized"]``; loading parameters
materializes it, and :func:`materialized` runs a forward pass before an inspection.
"""

from grader.core.hints import (
    DROPOUT_RATE_IGNORED,
    DROPOUT_SAME_UNITS,
    DROPOUT_UNSCALED,
    FIXED_DEVICE,
    FUTURE_VISIBLE,
    MASK_FILL_NOT_NEGATIVE,
    SCALE_BY_INPUT_WIDTH,
    SCALE_BY_LENGTH,
    Mistake,
)
from grader.sandbox.errors import StudentCrashed, StudentError, StudentException, StudentNotFound, StudentTimeout
from grader.sandbox.session import Backward
from grader.source.definitions import source_defining
from grader.suite.checks import (
    CheckFailed,
    buffer_of,
    describe_difference,
    describe_value,
    expect_causal,
    expect_close,
    expect_computes_with,
    expect_contract_parameters,
    expect_derivative,
    expect_equal,
    expect_follows_device,
    expect_named_tensors,
    expect_objects,
    expect_raises,
    expect_same_gradients,
    expect_tensor,
    expect_token_ids,
    gradient_mistakes,
    is_close,
)
from grader.suite.computed_once import once_per_grader
from grader.suite.contract_parameters import expect_replaced_pieces_written, without_unexpected_biases
from grader.suite.dropout import (
    DropoutHints,
    expect_dropout,
    expect_new_draws,
    expect_no_dropout_at_zero,
    in_eval_mode,
    weights_behind,
    zero_fraction_bounds,
)
from grader.suite.part_isolation import (
    GRAPH_CUT,
    OWN_WIRING,
    PIECE_RAISES,
    PIECES_DIFFER,
    STOCK_REPLACED,
    BlackBox,
    Piece,
    PieceUnusable,
    StockPiece,
    black_box,
    call_part,
    describe_piece,
    diagnosing,
    expect_gradients,
    expect_wiring,
    materialized,
    new_graded_like,
    new_with_stock,
    noting_stock,
    randomize_norms,
    with_stock,
)
from grader.suite.seeding import seed_reference
from grader.suite.student_protocol import Remote, Student

__all__ = [
    # checks
    "CheckFailed", "buffer_of", "describe_difference", "describe_value", "expect_close", "expect_computes_with",
    "expect_contract_parameters", "expect_causal", "expect_derivative", "expect_equal", "expect_named_tensors",
    "expect_objects",
    "expect_raises", "expect_same_gradients", "expect_tensor", "expect_token_ids", "gradient_mistakes", "is_close",
    "expect_follows_device",
    # dropout
    "DropoutHints", "expect_dropout", "expect_new_draws", "expect_no_dropout_at_zero", "in_eval_mode",
    "weights_behind", "zero_fraction_bounds",
    # hints for mistakes several assignments grade, and the contract's mistakes
    "DROPOUT_RATE_IGNORED", "DROPOUT_SAME_UNITS", "DROPOUT_UNSCALED", "FIXED_DEVICE", "FUTURE_VISIBLE",
    "MASK_FILL_NOT_NEGATIVE", "SCALE_BY_INPUT_WIDTH", "SCALE_BY_LENGTH", "Mistake",
    # errors from the student's side
    "StudentCrashed", "StudentError", "StudentException", "StudentNotFound", "StudentTimeout",
    # what a test calls
    "Backward", "Remote", "Student",
    # part isolation
    "GRAPH_CUT", "OWN_WIRING", "PIECE_RAISES", "PIECES_DIFFER", "BlackBox", "Piece", "PieceUnusable", "black_box",
    "call_part", "describe_piece", "diagnosing", "expect_gradients", "expect_wiring", "randomize_norms",
    # stock pieces and lazy modules
    "STOCK_REPLACED", "StockPiece", "expect_replaced_pieces_written", "materialized", "new_graded_like", "new_with_stock",
    "noting_stock", "source_defining", "with_stock", "without_unexpected_biases",
    # reference modules and values
    "once_per_grader", "seed_reference",
]
