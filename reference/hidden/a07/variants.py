"""What common mistakes in assignment 07 produce.

For each mistake the contract names, a functional version of the part whose keyword
arguments switch on one mistake each (defaults equal to the reference), and the hint as a
module constant: docs/mistakes.md lists them (python -m reference.hidden.mistake_table).
"""

# ---- Head, MultiHead, MLP, Block, GPT ------------------------------------------------------

# ---- generate, end_to_end ------------------------------------------------------------------
