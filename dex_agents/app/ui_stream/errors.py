"""The browser stream's error.

::

    InvalidResumeTokenError (dex_agents.ports.errors)
    └── InvalidAgentEventResumeTokenError   the browser sent a token the Stream refuses
"""

from __future__ import annotations

from dex_agents.ports.errors import InvalidResumeTokenError


class InvalidAgentEventResumeTokenError(InvalidResumeTokenError):
    """The engine refused the resume token of an event stream, such as one of another session.

    Raised before the response starts: answer 400, which stops the browser's
    ``EventSource``, and let the browser load the snapshot again.
    """
