"""Hidden suites, one package per assignment (``aNN``), run by ``grader.engine.runner``.

Tests reach student code only through the ``student`` fixture and compare it with
``reference`` using :mod:`grader.suite.checks`. They never run in the student's process.
"""
