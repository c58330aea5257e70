"""The TLS settings every S3 client of the process shares: one SSL context per ``verify``.

``S3MediaStore`` opens a client for its calls, and each new client built its own SSL
context on its first request; loading the system's certificates into it took about
50 ms of CPU. ``SharedTlsSession`` makes the context once per process for each
``verify`` setting instead.
"""

from __future__ import annotations

import ssl
import threading

from aiobotocore.httpsession import AIOHTTPSession  # type: ignore[import-untyped]

__all__ = ["SharedTlsSession"]

_TLS_CONTEXTS: dict[object, ssl.SSLContext] = {}
_TLS_LOCK = threading.Lock()


class SharedTlsSession(AIOHTTPSession):  # type: ignore[misc]
    """aiobotocore's HTTP session, whose endpoint TLS context is made once per process for
    each ``verify`` setting instead of once per client.

    A context is shared only where nothing changes it after it is made: a proxy or a
    client certificate gets a context of its own, as before. An aiobotocore without
    ``_build_ssl_contexts`` never calls this, and builds one per client as it did.
    """

    def _build_ssl_contexts(self, proxy_url: str | None) -> tuple[ssl.SSLContext, None]:
        if proxy_url or getattr(self, "_cert_file", None):
            built: tuple[ssl.SSLContext, None] = super()._build_ssl_contexts(proxy_url)
            return built
        verify = self._verify
        with _TLS_LOCK:
            context = _TLS_CONTEXTS.get(verify)
            if context is None:
                context = _TLS_CONTEXTS[verify] = self._build_verify_context()
        return context, None
