"""Keys out of botocore's debug lines: the session token and the access key ID an S3 client sends.

With ``DEBUG`` logging on, botocore logs each request it signs: ``botocore.auth`` its
canonical request, which holds the ``x-amz-security-token`` header, and
``botocore.endpoint`` the prepared request, whose headers hold that token and the
``Authorization`` header's ``Credential=<access key ID>/...``; ``botocore.parsers``
logs each response body, and S3's answer to a request whose signature it refused
quotes the canonical request. ``S3MediaStore``
never logs its keys ("Images", "Stores"), so the first store a process builds puts
a filter on those two loggers that writes ``<hidden>`` in their place. The filter
hides them for every botocore client of the process, as it cannot tell whose
request a line is; it changes nothing else, and costs nothing while their debug
level is off, since a logger runs filters only for records it makes.
"""

from __future__ import annotations

import logging
import re
from typing import Final

__all__ = ["HIDDEN", "hide_keys_in_botocore_logs"]

HIDDEN: Final = "<hidden>"
"""What a hidden value reads as in a log line."""

_LOGGERS: Final = ("botocore.auth", "botocore.endpoint", "botocore.parsers")

# The token as a canonical-request line (x-amz-security-token:<token>), a header in a
# dict's repr ('X-Amz-Security-Token': b'<token>') or a query parameter (...=<token>);
# the key ID as Authorization's Credential=<key id>/<scope>. Neither value holds a
# quote, white space, '&', ',', '<' or a backslash (a repr's \n): a token is base64,
# URL-encoded in a query; a key ID is letters and digits, and '/' ends it.
_KEYS: Final = re.compile(
    r"""(?i)(x-amz-security-token['"]?\s*[:=]\s*b?['"]?)[^'"\s&,<\\]+"""
    r"""|(credential=)[^'"\s&,<\\/]+"""
)


def _hide(match: re.Match[str]) -> str:
    return (match.group(1) or match.group(2)) + HIDDEN


class _HideKeys(logging.Filter):
    """Rewrites a record whose message shows a session token or an access key ID."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            # A filter that raised would fail botocore's request; the handler reports it.
            return True
        hidden = _KEYS.sub(_hide, message)
        if hidden != message:
            record.msg, record.args = hidden, None
        return True


_FILTER: Final = _HideKeys()


def hide_keys_in_botocore_logs() -> None:
    """Put the filter on botocore's request loggers; calling it again changes nothing."""
    for name in _LOGGERS:
        logging.getLogger(name).addFilter(_FILTER)  # addFilter skips a filter already there
