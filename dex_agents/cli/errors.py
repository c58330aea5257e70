"""The one error of the ``dex-agents`` command itself.

Everything else it reports comes from the library: ``DatabaseFileError`` for a
database path, ``InvalidSessionIdError`` for a session ID, and the engine errors.
"""

from __future__ import annotations


class CliError(Exception):
    """An error ``dex-agents`` reports as one line on stderr."""
