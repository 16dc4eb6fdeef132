"""The grader on course platforms.

Gradescope: ``grade export gradescope`` builds the autograder zip
(:mod:`grader.export.gradescope_zip`); on Gradescope it runs :mod:`grader.export.gradescope`.
GitHub Classroom: ``grade export classroom`` writes the workflow
(:mod:`grader.export.classroom_workflow`); in it, :mod:`grader.export.classroom` hands the
report to the grading reporter. What students read on either: :mod:`grader.export.feedback`.
"""

# The wheel the course is built and measured on (README), CPU-only: neither platform grades
# on a GPU, and the default index's wheel pulls several GB of CUDA packages.
TORCH_VERSION = "2.13.0"
TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


class ExportError(Exception):
    """The export cannot be made as asked: the message says what to do."""
