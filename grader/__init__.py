"""Autograder for the Transformer course.

The trusted grader runs hidden pytest suites against a reference; student code runs only
in sandboxed child processes (:mod:`grader.sandbox`). Start at :func:`grader.api.grade`.
"""

import os

# Must precede the first `import torch`: asking whether CUDA is available would otherwise
# initialise it, and a process with CUDA initialised cannot hand CUDA to forked children.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

from grader.api import grade  # noqa: E402
from grader.report import SCHEMA_VERSION, GradeReport  # noqa: E402

__all__ = ["grade", "GradeReport", "SCHEMA_VERSION"]
