"""Where an ``S3MediaStore`` keeps its images: a bucket, a prefix, and their ``s3://`` URI.

An image's object key is ``<prefix>/sha256/<sha256>`` (``sha256/<sha256>`` without a
prefix) and its ``uri`` is ``s3://<bucket>/<prefix>/sha256/<sha256>``. The URI holds the
bucket and prefix as they are, not percent-encoded, so ``parse_s3_store_uri`` reads back
exactly what ``S3Location.store_uri`` wrote. ``require_endpoint_url`` checks the URL of
an S3-compatible service. Pure rules, no I/O.
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import urlsplit

import attrs
from botocore.utils import (  # type: ignore[import-untyped]
    is_valid_endpoint_url,
    is_valid_ipv6_endpoint_url,
)

from dex_agents.domain.images import image_uri, require_short_image_uris

__all__ = ["S3_SCHEME", "S3Location", "parse_s3_store_uri", "require_endpoint_url"]

S3_SCHEME: Final = "s3://"

# The characters S3 allows in a bucket name, legacy names included; AWS refuses more.
_BUCKET = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?")
_MAX_BUCKET_LENGTH: Final = 255
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _require_bucket(bucket: object) -> str:
    if not isinstance(bucket, str):
        raise TypeError(f"bucket must be a str, not {type(bucket).__name__}")
    if len(bucket) > _MAX_BUCKET_LENGTH or not _BUCKET.fullmatch(bucket):
        raise ValueError(
            f"bucket {bucket[:80]!r} is not a bucket name: use letters, digits, '.', '-' "
            f"and '_', starting and ending with a letter or digit, at most {_MAX_BUCKET_LENGTH}"
        )
    return bucket


def _require_prefix(prefix: object) -> str:
    """The prefix without its trailing ``/``; ``ValueError`` for one S3 keys cannot carry well."""
    if not isinstance(prefix, str):
        raise TypeError(f"prefix must be a str, not {type(prefix).__name__}")
    shown = repr(prefix[:80])
    if prefix.startswith("/"):
        raise ValueError(f"prefix {shown} starts with '/'; write it without the leading '/'")
    if _CONTROL.search(prefix):
        raise ValueError(f"prefix {shown} holds a control character")
    try:
        prefix.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"prefix {shown} is not valid Unicode text: {error}") from None
    trimmed = prefix.rstrip("/")
    if trimmed and any(segment in ("", ".", "..") for segment in trimmed.split("/")):
        raise ValueError(f"prefix {shown} has an empty, '.' or '..' segment")
    return trimmed


@attrs.frozen(kw_only=True)
class S3Location:
    """A bucket and a prefix (no leading or trailing ``/``; empty for the bucket's root)."""

    bucket: str = attrs.field(converter=_require_bucket)
    prefix: str = attrs.field(converter=_require_prefix)

    def __attrs_post_init__(self) -> None:
        require_short_image_uris(self.store_uri)

    @property
    def store_uri(self) -> str:
        """``s3://<bucket>/<prefix>``, or ``s3://<bucket>`` without a prefix."""
        return f"{S3_SCHEME}{self.bucket}/{self.prefix}" if self.prefix else S3_SCHEME + self.bucket

    def object_key(self, sha256: str) -> str:
        """The key of the image ``sha256``: its ``uri`` without ``s3://<bucket>/``."""
        return image_uri(self.store_uri, sha256).removeprefix(f"{S3_SCHEME}{self.bucket}/")


def parse_s3_store_uri(store_uri: str) -> S3Location:
    """The location of ``s3://bucket`` or ``s3://bucket/prefix``; ``ValueError`` for others.

    The text after the bucket is the prefix as it is: no query, fragment, or
    percent-decoding, so a store's own ``store_uri`` always parses back to it.
    """
    if not isinstance(store_uri, str):
        raise TypeError(f"store_uri must be a str, not {type(store_uri).__name__}")
    if not store_uri.startswith(S3_SCHEME):
        raise ValueError(f"store URI {store_uri[:80]!r} does not start with {S3_SCHEME!r}")
    bucket, _, prefix = store_uri.removeprefix(S3_SCHEME).partition("/")
    if not bucket:
        raise ValueError(f"store URI {store_uri[:80]!r} names no bucket")
    return S3Location(bucket=bucket, prefix=prefix)


def require_endpoint_url(endpoint_url: object) -> str | None:
    """``endpoint_url`` when it is ``None`` or an ``http://`` or ``https://`` URL with a host.

    ``TypeError`` for a value that is no ``str``; ``ValueError`` for another URL, such
    as ``127.0.0.1:9000`` without its scheme, and for one with a user, a password or a
    query. ``S3MediaStore`` checks it when it is built: botocore refuses such a URL
    only when it opens a client (a query), or every request fails (a user or
    password, which the HTTP client will not send next to the request's signature),
    at the first image stored or read, in a Worker's tool or model call that no retry
    could fix. A user, password or query may hold a credential, and the store shows
    its endpoint in its ``repr``, so the errors show the URL without them.
    """
    if endpoint_url is None:
        return None
    if not isinstance(endpoint_url, str):
        raise TypeError(f"endpoint_url must be a str or None, not {type(endpoint_url).__name__}")
    try:
        parts = urlsplit(endpoint_url)
        valid = parts.scheme in ("http", "https") and (
            # botocore's own test, so every URL it would refuse is refused here.
            is_valid_endpoint_url(endpoint_url) or is_valid_ipv6_endpoint_url(endpoint_url)
        )
    except ValueError:  # such as an IPv6 host without its closing bracket
        valid = False
    if not valid:
        raise ValueError(
            f"endpoint_url {_shown_endpoint(endpoint_url)!r} is not an http:// or https:// "
            "URL with a host, such as 'http://127.0.0.1:9000'"
        )
    if "@" in parts.netloc or parts.query:
        raise ValueError(
            f"endpoint_url {_shown_endpoint(endpoint_url)!r} must hold no user, password "
            "or query; pass keys as access_key_id and secret_access_key"
        )
    return endpoint_url


def _shown_endpoint(endpoint_url: str) -> str:
    """``endpoint_url`` for an error: no user, password, query or fragment; 80 characters."""
    shown = endpoint_url.split("?", 1)[0].split("#", 1)[0]
    before, at, host = shown.rpartition("@")
    if at:
        scheme, slashes, _ = before.partition("//")
        shown = f"{scheme}{slashes}<redacted>@{host}" if slashes else f"<redacted>@{host}"
    return shown[:80]
