"""S3MediaStore: image bytes in an S3-compatible bucket, one object per image ("Images").

An image's object key is ``<prefix>/sha256/<sha256>``; ``s3_location`` makes keys and
URIs from the same bucket and prefix. The store talks to S3 through aiobotocore, the
asyncio client under aioboto3, opening a client for its calls (calls that overlap on one
event loop share it, ``s3_clients.py``), so one store is safe to use from any event loop
and needs no closing. The clients share their TLS settings (``s3_tls.py``), and
explicit keys stay out of every ``repr`` (``s3_credentials.py``).

Writes are conditional: ``PutObject`` with ``If-None-Match: *``. ``412`` means the same
content-addressed object already exists, which is success; ``409`` (a concurrent
conditional write) retries twice and then asks ``HeadObject`` for an object of the
image's size. A service that refuses conditional writes (``501``, or the error code
``NotImplemented``) gets ``HeadObject`` first and a plain ``PutObject`` when nothing is
there, and the store remembers the refusal. Every S3 or connection failure raises
``MediaStoreError``; the store never shows credentials in its ``repr``, its errors, or
a log line, botocore's debug lines included (``s3_logging.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any, Final

import aiohttp
from aiobotocore.config import AioConfig  # type: ignore[import-untyped]
from aiobotocore.session import AioSession  # type: ignore[import-untyped]
from botocore.exceptions import BotoCoreError, ClientError  # type: ignore[import-untyped]

from dex_agents.adapters.media.s3_clients import SharedClients
from dex_agents.adapters.media.s3_credentials import explicit_credentials
from dex_agents.adapters.media.s3_location import (
    S3Location,
    parse_s3_store_uri,
    require_endpoint_url,
)
from dex_agents.adapters.media.s3_logging import hide_keys_in_botocore_logs
from dex_agents.adapters.media.s3_tls import SharedTlsSession
from dex_agents.adapters.media.stored_bytes import checked_stored_image
from dex_agents.domain.errors import MediaStoreError
from dex_agents.domain.images import (
    AgentImageReference,
    build_image_reference,
    require_store_image_reference,
)

__all__ = ["CONDITIONAL_WRITE_ATTEMPTS", "S3MediaStore"]

CONDITIONAL_WRITE_ATTEMPTS: Final = 3
"""Conditional uploads of one image that may meet ``409``: the first and two retries."""

_CONFLICT_BACKOFF_SECONDS: Final = 0.05
_READ_CHUNK: Final = 1 << 20
# aiohttp.ClientError: a body cut short (ClientPayloadError) is neither an OSError nor
# converted to botocore's errors by aiobotocore's streaming body.
_TRANSPORT_ERRORS: Final = (BotoCoreError, OSError, asyncio.TimeoutError, aiohttp.ClientError)


class _ConditionalWritesRefused(Exception):
    """The service does not implement ``If-None-Match`` on ``PutObject``."""


def _status(error: ClientError) -> int | None:
    status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
    return status if isinstance(status, int) else None


def _code(error: ClientError) -> str:
    code = error.response.get("Error", {}).get("Code")
    return str(code) if code is not None else ""


def _describe(error: BaseException) -> str:
    if isinstance(error, ClientError):
        message = error.response.get("Error", {}).get("Message") or ""
        return f"{_status(error)} {_code(error)} {message}".rstrip()
    return f"{type(error).__name__}: {error}"


def _is_missing(error: ClientError) -> bool:
    # A HEAD answer has no body, so its code is the bare status; NoSuchBucket is also 404.
    return _code(error) in ("404", "NoSuchKey", "NotFound")


def _refuses_conditional_writes(error: ClientError) -> bool:
    return _status(error) == 501 or _code(error) == "NotImplemented"


class S3MediaStore:
    """A ``MediaStore`` that keeps each image as one object in an S3-compatible bucket.

    ``S3MediaStore(bucket, prefix)`` stores the image ``sha256`` at
    ``<prefix>/sha256/<sha256>``; its ``store_uri`` is ``s3://<bucket>/<prefix>``
    (``s3://<bucket>`` without a prefix; one trailing ``/`` of the prefix is dropped).
    ``endpoint_url`` names an S3-compatible service (an ``http://`` or ``https://``
    URL with a host; ``ValueError`` otherwise), ``region_name`` the region, and
    ``force_path_style`` puts the bucket in the URL path rather than the host name.
    Credentials come from the standard AWS chain unless ``access_key_id`` and
    ``secret_access_key`` (and ``session_token``) are given; pass them only for a
    bucket whose keys are not secret, such as a local development bucket. A bucket,
    prefix, or name that would make an image ``uri`` longer than
    ``MAX_IMAGE_URI_LENGTH`` raises ``ValueError``.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        force_path_style: bool = False,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
    ) -> None:
        endpoint_url = require_endpoint_url(endpoint_url)
        if region_name is not None and not isinstance(region_name, str):
            raise TypeError(f"region_name must be a str or None, not {type(region_name).__name__}")
        if not isinstance(force_path_style, bool):
            raise TypeError(
                f"force_path_style must be a bool, not {type(force_path_style).__name__}"
            )
        self._location = S3Location(bucket=bucket, prefix=prefix)
        self._endpoint_url = endpoint_url
        self._region_name = region_name
        self._force_path_style = force_path_style
        self._credentials = explicit_credentials(access_key_id, secret_access_key, session_token)
        # botocore's debug lines show the session token and key ID each request sends.
        hide_keys_in_botocore_logs()
        self._session = AioSession()
        self._config = AioConfig(
            s3={"addressing_style": "path" if force_path_style else "auto"},
            retries={"mode": "standard"},
            # S3-compatible services often refuse the flexible checksums botocore adds by
            # default; get_image checks the SHA-256 of every read itself.
            request_checksum_calculation="when_required",
            response_checksum_validation="when_required",
            http_session_cls=SharedTlsSession,
        )
        self._conditional_writes = True
        self._clients = SharedClients(self._open_client)

    @classmethod
    def from_store_uri(
        cls,
        store_uri: str,
        *,
        endpoint_url: str | None = None,
        region_name: str | None = None,
        force_path_style: bool = False,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        session_token: str | None = None,
    ) -> S3MediaStore:
        """The store at ``s3://bucket`` or ``s3://bucket/prefix``; ``ValueError`` for others.

        The text after the bucket is the prefix as written (no percent-decoding), so
        ``S3MediaStore.from_store_uri(store.store_uri)`` names the same objects.
        """
        location = parse_s3_store_uri(store_uri)
        return cls(
            location.bucket,
            location.prefix,
            endpoint_url=endpoint_url,
            region_name=region_name,
            force_path_style=force_path_style,
            access_key_id=access_key_id,
            secret_access_key=secret_access_key,
            session_token=session_token,
        )

    @property
    def store_uri(self) -> str:
        """``s3://<bucket>/<prefix>``; every reference's ``uri`` starts with it."""
        return self._location.store_uri

    @property
    def bucket(self) -> str:
        """The bucket the images are in."""
        return self._location.bucket

    @property
    def prefix(self) -> str:
        """The key prefix, without a leading or trailing ``/``; empty for the bucket's root."""
        return self._location.prefix

    def object_key(self, sha256: str) -> str:
        """The object key of the image ``sha256``: ``<prefix>/sha256/<sha256>``."""
        return self._location.object_key(sha256)

    def __repr__(self) -> str:
        shown = [f"store_uri={self.store_uri!r}"]
        if self._endpoint_url is not None:
            shown.append(f"endpoint_url={self._endpoint_url!r}")
        if self._region_name is not None:
            shown.append(f"region_name={self._region_name!r}")
        if self._force_path_style:
            shown.append("force_path_style=True")
        if self._credentials is not None:
            shown.append("credentials=<explicit>")
        return f"S3MediaStore({', '.join(shown)})"

    def _client(self) -> contextlib.AbstractAsyncContextManager[Any]:
        return self._clients.client()

    async def _open_client(self) -> tuple[Any, Any]:
        keys: dict[str, str | None] = {}
        if self._credentials is not None:
            keys = {
                "aws_access_key_id": self._credentials.access_key_id,
                "aws_secret_access_key": self._credentials.secret_access_key,
                "aws_session_token": self._credentials.session_token,
            }
        try:
            creator = self._session.create_client(
                "s3",
                region_name=self._region_name,
                endpoint_url=self._endpoint_url,
                config=self._config,
                **keys,
            )
            return creator, await creator.__aenter__()
        except _TRANSPORT_ERRORS as error:
            raise MediaStoreError(
                f"could not open an S3 client for {self.store_uri!r}: {_describe(error)}"
            ) from error

    async def put_image(self, data: bytes) -> AgentImageReference:
        """Store the image and return its reference.

        ``ImageValidationError`` for bytes that are not a supported image;
        ``MediaStoreError`` for a write that failed or that found a different object.
        """
        reference = build_image_reference(data, self.store_uri)
        body = bytes(data)
        key = self.object_key(reference.sha256)
        async with self._client() as client:
            if self._conditional_writes:
                try:
                    await self._put_if_absent(client, key, body, reference)
                except _ConditionalWritesRefused:
                    self._conditional_writes = False
                else:
                    return reference
            await self._put_after_head(client, key, body, reference)
        return reference

    async def _put_if_absent(
        self, client: Any, key: str, body: bytes, reference: AgentImageReference
    ) -> None:
        for attempt in range(CONDITIONAL_WRITE_ATTEMPTS):
            if attempt:
                await asyncio.sleep(_CONFLICT_BACKOFF_SECONDS * attempt)
            try:
                await self._put(client, key, body, reference, if_none_match=True)
            except ClientError as error:
                if _status(error) == 412:
                    return  # the same content-addressed object is already there
                if _status(error) == 409:
                    continue
                if _refuses_conditional_writes(error):
                    raise _ConditionalWritesRefused from error
                raise self._write_failed(key, error) from error
            return
        size = await self._head_size(client, key)
        if size != reference.size_bytes:
            found = "no object" if size is None else f"an object of {size} bytes"
            raise MediaStoreError(
                f"every conditional upload of {reference.uri!r} met 409 Conflict, and the "
                f"bucket holds {found}, not one of {reference.size_bytes} bytes"
            )

    async def _put_after_head(
        self, client: Any, key: str, body: bytes, reference: AgentImageReference
    ) -> None:
        size = await self._head_size(client, key)
        if size == reference.size_bytes:
            return
        if size is not None:
            raise MediaStoreError(
                f"the bucket already holds {reference.uri!r} with {size} bytes, not "
                f"{reference.size_bytes}; it is not this image"
            )
        try:
            await self._put(client, key, body, reference, if_none_match=False)
        except ClientError as error:
            raise self._write_failed(key, error) from error

    async def _put(
        self,
        client: Any,
        key: str,
        body: bytes,
        reference: AgentImageReference,
        *,
        if_none_match: bool,
    ) -> None:
        conditions = {"IfNoneMatch": "*"} if if_none_match else {}
        try:
            await client.put_object(
                Bucket=self.bucket,
                Key=key,
                Body=body,
                ContentType=reference.mime_type,
                **conditions,
            )
        except _TRANSPORT_ERRORS as error:
            raise self._write_failed(key, error) from error

    async def _head_size(self, client: Any, key: str) -> int | None:
        """The object's ``Content-Length``, or ``None`` when there is no object."""
        try:
            response = await client.head_object(Bucket=self.bucket, Key=key)
        except ClientError as error:
            if _is_missing(error):
                return None
            raise self._request_failed("HeadObject", key, error) from error
        except _TRANSPORT_ERRORS as error:
            raise self._request_failed("HeadObject", key, error) from error
        size = response.get("ContentLength")
        if not isinstance(size, int):
            raise MediaStoreError(
                f"HeadObject of {key!r} in {self.bucket!r} gave no Content-Length"
            )
        return size

    def _write_failed(self, key: str, error: BaseException) -> MediaStoreError:
        return self._request_failed("PutObject", key, error)

    def _request_failed(self, operation: str, key: str, error: BaseException) -> MediaStoreError:
        return MediaStoreError(
            f"S3 {operation} of {key!r} in bucket {self.bucket!r} failed: {_describe(error)}"
        )

    async def get_image(self, reference: AgentImageReference) -> bytes:
        """The verified bytes of a reference this store made.

        ``ImageValidationError`` for an invalid reference; ``MediaStoreError`` for one of
        another store, a missing object, a ``Content-Length`` other than ``size_bytes``,
        bytes that do not match the reference, or a failed read. At most one byte past
        ``size_bytes`` is read.
        """
        require_store_image_reference(reference, self.store_uri)
        key = self.object_key(reference.sha256)
        async with self._client() as client:
            try:
                response = await client.get_object(Bucket=self.bucket, Key=key)
            except ClientError as error:
                if _is_missing(error):
                    raise MediaStoreError(
                        f"image {reference.uri!r} is not in this media store"
                    ) from error
                raise self._request_failed("GetObject", key, error) from error
            except _TRANSPORT_ERRORS as error:
                raise self._request_failed("GetObject", key, error) from error
            async with response["Body"] as stream:
                length = response.get("ContentLength")
                if length != reference.size_bytes:
                    raise MediaStoreError(
                        f"image {reference.uri!r} is stored with Content-Length {length}, "
                        f"but the reference's size_bytes is {reference.size_bytes}"
                    )
                try:
                    data = await _read_at_most(stream, reference.size_bytes + 1)
                except _TRANSPORT_ERRORS as error:
                    raise self._request_failed("GetObject", key, error) from error
        return checked_stored_image(data, reference, f"image {reference.uri!r}")


async def _read_at_most(stream: Any, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = await stream.read(min(remaining, _READ_CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
