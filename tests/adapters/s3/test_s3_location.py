"""Buckets, prefixes and ``s3://`` store URIs: the pure rules of S3MediaStore's names."""

from __future__ import annotations

import pytest

from dex_agents.adapters.media.s3_location import S3Location, parse_s3_store_uri
from dex_agents.adapters.media.s3_store import _read_at_most
from dex_agents.domain.images import MAX_IMAGE_URI_LENGTH, image_uri
from dex_agents.s3 import S3MediaStore

SHA = "0" * 64


@pytest.mark.parametrize(
    ("uri", "bucket", "prefix"),
    [
        ("s3://agent-media/sessions", "agent-media", "sessions"),
        ("s3://agent-media/sessions/", "agent-media", "sessions"),
        ("s3://agent-media/a/b c/ü", "agent-media", "a/b c/ü"),
        ("s3://agent-media", "agent-media", ""),
        ("s3://agent-media/", "agent-media", ""),
        ("s3://Legacy_Bucket.1/x?y#z", "Legacy_Bucket.1", "x?y#z"),
    ],
)
def test_a_store_uri_names_a_bucket_and_a_prefix_as_written(
    uri: str, bucket: str, prefix: str
) -> None:
    store = S3MediaStore.from_store_uri(uri)
    assert (store.bucket, store.prefix) == (bucket, prefix)
    assert store.store_uri == uri.removesuffix("/")
    assert S3MediaStore.from_store_uri(store.store_uri).store_uri == store.store_uri
    key = store.object_key(SHA)
    assert image_uri(store.store_uri, SHA) == f"s3://{bucket}/{key}"
    assert key == (f"{prefix}/sha256/{SHA}" if prefix else f"sha256/{SHA}")


@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("file:///srv/media", "does not start with 's3://'"),
        ("S3://media/p", "does not start with 's3://'"),
        ("s3://", "names no bucket"),
        ("s3:///prefix", "names no bucket"),
        ("s3://media//p", "starts with '/'"),
        ("s3://media/a//b", "empty, '.' or '..' segment"),
        ("s3://media/a/../b", "empty, '.' or '..' segment"),
        ("s3://media/./b", "empty, '.' or '..' segment"),
        ("s3://media/a\nb", "control character"),
        ("s3://media/\udc80", "not valid Unicode"),
        ("s3://-media/p", "is not a bucket name"),
        ("s3://me dia/p", "is not a bucket name"),
        ("s3://media:9000/p", "is not a bucket name"),
    ],
)
def test_other_store_uris_are_refused(uri: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        S3MediaStore.from_store_uri(uri)


def test_a_location_that_makes_too_long_image_uris_is_refused() -> None:
    # s3://b/<prefix>/sha256/<64 hex>: the longest prefix that still fits.
    fitting = "p" * (MAX_IMAGE_URI_LENGTH - len("s3://b/") - len("/sha256/") - 64)
    store = S3MediaStore("b", fitting)
    assert len(image_uri(store.store_uri, SHA).encode("utf-8")) == MAX_IMAGE_URI_LENGTH
    with pytest.raises(ValueError, match="MAX_IMAGE_URI_LENGTH"):
        S3MediaStore("b", fitting + "p")
    with pytest.raises(ValueError, match="MAX_IMAGE_URI_LENGTH"):
        S3MediaStore("b", fitting[:-1] + "é")  # two bytes as UTF-8
    with pytest.raises(ValueError, match="MAX_IMAGE_URI_LENGTH"):
        S3MediaStore.from_store_uri(f"s3://b/{fitting}p")


def test_names_of_the_wrong_type_are_type_errors() -> None:
    with pytest.raises(TypeError, match="bucket must be a str"):
        S3MediaStore(b"media")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="prefix must be a str"):
        S3Location(bucket="media", prefix=None)
    with pytest.raises(TypeError, match="store_uri must be a str"):
        parse_s3_store_uri(None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="endpoint_url must be a str or None"):
        S3MediaStore("media", endpoint_url=9000)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="force_path_style must be a bool"):
        S3MediaStore("media", force_path_style="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "endpoint_url",
    ["127.0.0.1:9000", "localhost:9000", "", "http://", "ftp://127.0.0.1", "http://[::1"],
)
def test_an_endpoint_url_that_is_no_http_url_with_a_host_is_refused_when_built(
    endpoint_url: str,
) -> None:
    # botocore refused most of these only at the first image stored or read, in a Worker.
    with pytest.raises(ValueError, match=r"is not an http:// or https:// URL with a host"):
        S3MediaStore("media", endpoint_url=endpoint_url)
    with pytest.raises(ValueError, match=r"is not an http:// or https:// URL with a host"):
        S3MediaStore.from_store_uri("s3://media/p", endpoint_url=endpoint_url)


@pytest.mark.parametrize(
    ("endpoint_url", "shown"),
    [
        ("http://minio:minio-password@127.0.0.1:9000", "http://<redacted>@127.0.0.1:9000"),
        ("https://minio-password@s3.example.com", "https://<redacted>@s3.example.com"),
        ("http://127.0.0.1:9000/?X-Amz-Security-Token=minio-password", "http://127.0.0.1:9000/"),
    ],
)
def test_an_endpoint_url_with_a_user_password_or_query_is_refused_without_showing_them(
    endpoint_url: str, shown: str
) -> None:
    # Found by an audit: such a URL was kept and shown whole in the store's repr, and
    # failed only at the first image stored or read, in a Worker: every request with
    # "Cannot combine AUTHORIZATION header with AUTH argument or credentials encoded
    # in URL", or the client with an error quoting the query.
    refusal = (
        f"endpoint_url {shown!r} must hold no user, password or query; pass keys as "
        "access_key_id and secret_access_key"
    )
    with pytest.raises(ValueError, match="must hold no user") as raised:
        S3MediaStore("media", endpoint_url=endpoint_url)
    assert str(raised.value) == refusal
    with pytest.raises(ValueError, match="must hold no user") as raised:
        S3MediaStore.from_store_uri("s3://media/p", endpoint_url=endpoint_url)
    assert str(raised.value) == refusal


def test_an_endpoint_url_refused_as_no_http_url_shows_no_user_or_password() -> None:
    with pytest.raises(ValueError, match="is not an http") as raised:
        S3MediaStore("media", endpoint_url="minio:minio-password@127.0.0.1:9000")
    assert "minio-password" not in str(raised.value)
    assert "'<redacted>@127.0.0.1:9000' is not an http:// or https:// URL" in str(raised.value)


@pytest.mark.parametrize(
    "endpoint_url",
    ["http://127.0.0.1:9000", "https://s3.example.com", "http://[::1]:9000", "http://minio/"],
)
def test_an_http_endpoint_url_with_a_host_is_kept(endpoint_url: str) -> None:
    store = S3MediaStore("media", endpoint_url=endpoint_url)
    assert f"endpoint_url={endpoint_url!r}" in repr(store)


class _Stream:
    """A body that would hand out more bytes than asked for, if it were asked."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.asked = 0

    async def read(self, amount: int) -> bytes:
        self.asked += amount
        chunk, self.data = self.data[:amount], self.data[amount:]
        return chunk


async def test_a_read_stops_one_byte_past_the_size() -> None:
    stream = _Stream(b"x" * 5_000_000)
    assert await _read_at_most(stream, 101) == b"x" * 101
    assert stream.asked == 101
    assert await _read_at_most(_Stream(b"abc"), 101) == b"abc"
