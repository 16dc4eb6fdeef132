"""Assignment 07's named mistakes, each made in the reference: data for tests/test_mistakes.py.

A mutant is the reference submission with one edit (``old`` -> ``new``, unique in it), so it
differs from a correct solution in exactly the way its name says, and none is a hand-kept
copy. The parts it lists lose points with a hint containing that text (None: any hint); every
other part keeps full marks. The grader never collects this module (it is no test_*.py).
"""

from __future__ import annotations

Mutants = dict[str, tuple[tuple[str, str], dict[str, str | None]]]

# ---- Head, MultiHead, MLP, Block, GPT ------------------------------------------------------
MODULE_MUTANTS: Mutants = {}

MODULE_CONTRACT_MISTAKES: dict[str, str] = {}

# ---- generate, end_to_end ------------------------------------------------------------------
SAMPLING_MUTANTS: Mutants = {}

SAMPLING_CONTRACT_MISTAKES: dict[str, str] = {}

# ---- the data tests/test_mistakes.py and tests/test_contract.py read ----------------------
MUTANTS: Mutants = {**MODULE_MUTANTS, **SAMPLING_MUTANTS}

# A part the submission does not define (renamed): it scores 0, "not found", and these parts,
# which do not use it, keep full marks.
MISSING_PART: tuple[str, tuple[str, ...]] = ("generate", ("Head", "MultiHead", "MLP", "Block", "GPT", "end_to_end"))

# Each mistake the contract (assignments/07/assignment.toml) says the grader must name,
# and the mutant above that makes it.
CONTRACT_MISTAKES: dict[str, str] = {**MODULE_CONTRACT_MISTAKES, **SAMPLING_CONTRACT_MISTAKES}
