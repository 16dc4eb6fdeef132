"""``python -m grader.course``: rewrite docs/course.md and each handout README's contract table."""

from grader.course.pages import main

raise SystemExit(main())
