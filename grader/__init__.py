"""Autograder for the Transformer course.

The trusted grader runs hidden pytest suites against a reference; student code runs only
in sandboxed child processes (:mod:`grader.sandbox`). Start at :func:`grader.engine.api.grade`.

The package's face is lazy (PEP 562): ``from grader import grade`` imports the engine
(torch, pytest), while ``import grader.core.report`` or the zygote server's
``import grader.sandbox._child`` import only what they use.
"""

import os

# Must precede the first `import torch`: asking whether CUDA is available would otherwise
# initialise it, and a process with CUDA initialised cannot hand CUDA to forked children.
os.environ.setdefault("PYTORCH_NVML_BASED_CUDA_CHECK", "1")

__all__ = ["grade", "check", "GradeReport", "SCHEMA_VERSION"]


def __getattr__(name: str):
    if name == "check":  # in a notebook: a part's public tests on its current definitions
        from grader.core.cells import check_while_graded, loading

        if loading():  # a grader is running the notebook, maybe where no other grader file can be read
            return check_while_graded
        from grader.student.notebook import check

        return check
    if name == "grade":
        from grader.engine.api import grade

        return grade
    if name in ("GradeReport", "SCHEMA_VERSION"):
        from grader.core import report

        return getattr(report, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
