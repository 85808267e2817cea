"""Answers that are part of normal work stay out of the console's warnings.

Django logs every 4xx answer as a warning ("Not Found: ..."). Some are expected: a
workstation's kit asks for its figures every 30 s from the start, before the first night's
forecast exists. A view marks such an answer with expect_answer(), and the logging
configuration's QuietExpectedAnswers filter leaves it out. Nothing here imports Django, so
that the settings' logging configuration can load it.
"""

from __future__ import annotations

import logging

# A key in the request's META (the WSGI environ, where servers add keys of their own) that
# marks its error answer as expected, so that it is not logged as a warning.
EXPECTED_ANSWER = "nightshift.expected_answer"


def expect_answer(request) -> None:
    """This request's 4xx answer is part of normal work, not a problem to warn about: a
    workstation's kit asking for figures that are not learnt yet, say."""
    request.META[EXPECTED_ANSWER] = True


class QuietExpectedAnswers(logging.Filter):
    """Leaves out of the log Django's "Not Found: ..." for answers marked expect_answer()."""

    def filter(self, record: logging.LogRecord) -> bool:
        request = getattr(record, "request", None)
        return not getattr(request, "META", {}).get(EXPECTED_ANSWER)
