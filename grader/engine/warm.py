"""Modules torch imports lazily on paths every suite takes, imported once here instead.

Each submission's suite process and student child are forks of the grader process, so
what it has imported they start with; what torch imports on first use they would each
pay for again. Measured on the 2-core machine, torch 2.13:

- ``backward(grad_output)`` imports ``torch.fx.experimental.symbolic_shapes`` (sympy):
  0.44 s in every process that computes a gradient, i.e. suite and child alike.
- ``pytest.main`` imports its built-in plugins (``_pytest.debugging`` imports pdb,
  ``_pytest.doctest`` doctest, ...): 0.2 s in every suite process.

Hidden suites add their own in ``suite.toml`` (see ``Assignment.suite_preload``).
"""

import importlib

import torch.fx.experimental.symbolic_shapes  # noqa: F401
from _pytest.config import default_plugins

for _plugin in default_plugins:
    importlib.import_module(f"_pytest.{_plugin}")
