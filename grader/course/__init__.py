"""The course as an instructor ships it: the contract's pages, the handout notebook, a new
assignment's skeleton, and the student handout (``grade release``). ``python -m grader.course``
rewrites docs/course.md and the handouts' contract tables.
"""
