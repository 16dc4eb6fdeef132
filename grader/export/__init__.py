"""The grader on course platforms.

Gradescope: ``grade export gradescope`` builds the autograder zip
(:mod:`grader.export.gradescope_zip`); on Gradescope it runs :mod:`grader.export.gradescope`.
GitHub Classroom: ``grade export classroom`` writes the workflow
(:mod:`grader.export.classroom_workflow`); in it, :mod:`grader.export.classroom` hands the
report to the grading reporter. What students read on either comes from
:mod:`grader.core.report_words`, which the views share.
"""


class ExportError(Exception):
    """The export cannot be made as asked: the message says what to do."""
