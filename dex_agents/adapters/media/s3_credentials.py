"""Keys passed to ``S3MediaStore`` itself, checked and kept out of every ``repr`` and error.

Without them the store takes the standard AWS chain; with them (a bucket whose keys
are not secret, such as a local development bucket) neither a message nor a
``repr`` ever shows a value.
"""

from __future__ import annotations

__all__ = ["ExplicitCredentials", "explicit_credentials"]


class ExplicitCredentials:
    """Explicit keys, kept out of every ``repr``."""

    __slots__ = ("access_key_id", "secret_access_key", "session_token")

    def __init__(
        self, access_key_id: str, secret_access_key: str, session_token: str | None
    ) -> None:
        self.access_key_id = access_key_id
        self.secret_access_key = secret_access_key
        self.session_token = session_token

    def __repr__(self) -> str:
        return "<credentials>"


def explicit_credentials(
    access_key_id: str | None, secret_access_key: str | None, session_token: str | None
) -> ExplicitCredentials | None:
    """The keys given to the store, or ``None`` for the standard AWS chain.

    ``TypeError`` for a key that is not a non-empty ``str``; ``ValueError`` for one
    of the pair without the other, or a session token without them. No message
    shows a value.
    """
    for name, value in (
        ("access_key_id", access_key_id),
        ("secret_access_key", secret_access_key),
        ("session_token", session_token),
    ):
        if value is not None and (not isinstance(value, str) or not value):
            # The message never shows the value: it may be a key.
            raise TypeError(f"{name} must be a non-empty str or None")
    if access_key_id is None and secret_access_key is None:
        if session_token is not None:
            raise ValueError("session_token needs access_key_id and secret_access_key")
        return None
    if access_key_id is None or secret_access_key is None:
        raise ValueError("pass both access_key_id and secret_access_key, or neither")
    return ExplicitCredentials(access_key_id, secret_access_key, session_token)
