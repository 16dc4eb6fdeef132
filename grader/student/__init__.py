"""The student's side, all of which ships in the handout (``grade release``): the student's
``grade`` (:mod:`grader.student.grade`, the public tests on the working copy) and ``check()``
in a notebook (:mod:`grader.student.notebook`), which the package's face gives as
``from grader import check`` except while a grader loads the notebook
(:func:`grader.core.cells.check_while_graded`).
"""
