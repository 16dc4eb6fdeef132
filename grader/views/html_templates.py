"""The Jinja2 environment that renders the HTML pages from ``templates/``: each student's
feedback page (``feedback.html.j2``) and the class report (``class_report.html.j2``).

Everything but the grader's own words comes from reports that student code can influence. So
autoescape is on for every template, and a value shows as HTML only if it is
:class:`~markupsafe.Markup`, which only this module's ``lines`` filter makes, from text it
escapes first: escaping is the rule, not a habit of each template. And every value loses its
control characters (:func:`grader.core.sanitize.for_terminal`), which no HTML, nor the XML of an
inline SVG, may hold.

Imported by the pages' modules only, never by the student's grader (``grader.views.terminal``),
whose handout does not ship Jinja2.
"""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup

from grader.core.sanitize import for_terminal


def _without_control_characters(value: object) -> object:
    # Markup is left as it is: the lines filter made it from text it had cleaned.
    if isinstance(value, str) and not isinstance(value, Markup):
        return for_terminal(value)
    return value


def _lines(text: str) -> Markup:
    """``text`` with its newlines shown as line breaks: each line escaped, then joined by ``<br>``."""
    return Markup("<br>").join(for_terminal(text).split("\n"))


ENVIRONMENT = Environment(
    loader=PackageLoader("grader.views", "templates"),
    autoescape=True,  # every template here is HTML: escaping never depends on a file's name
    undefined=StrictUndefined,  # a misspelt field is an error, not an empty cell
    finalize=_without_control_characters,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)
ENVIRONMENT.filters["lines"] = _lines


def render(template: str, **values: object) -> str:
    return ENVIRONMENT.get_template(template).render(**values)
