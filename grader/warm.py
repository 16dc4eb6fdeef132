"""Modules torch imports lazily on paths every suite takes, imported once here instead.

Each submission's suite process and student child are forks of the grader process, so
what it has imported they start with; what torch imports on first use they would each
pay for again. Measured on the 2-core machine, torch 2.13:

- ``backward(grad_output)`` imports ``torch.fx.experimental.symbolic_shapes`` (sympy):
  0.44 s in every process that computes a gradient, i.e. suite and child alike.
"""

import torch.fx.experimental.symbolic_shapes  # noqa: F401
