"""S3MediaStore against moto's server: the MediaStore contract, and reads that refuse.

moto honours ``If-None-Match: *``, so these uploads take the conditional path; the
services that refuse it or conflict are in ``test_s3_conditional_writes.py``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from aiobotocore import httpsession  # type: ignore[import-untyped]
from aiobotocore.client import AioBaseClient  # type: ignore[import-untyped]
from aiobotocore.session import AioSession  # type: ignore[import-untyped]

from dex_agents.adapters.media import s3_tls
from dex_agents.domain.errors import ImageValidationError, MediaStoreError
from dex_agents.domain.images import build_image_reference, image_uri
from dex_agents.ports.media_store import MediaStore, load_images
from dex_agents.s3 import S3MediaStore
from tests.adapters.s3.conftest import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, moto_store
from tests.domain.images_support import BROKEN_IMAGES, VALID_IMAGES, jpeg, png

PNG = png()
JPEG = jpeg()
OTHER_PNG = png(total_size=len(PNG) + 20)  # another valid PNG: a private chunk pads it


@pytest.mark.parametrize("kind", sorted(VALID_IMAGES))
async def test_an_image_round_trips_as_one_object(
    s3_store: S3MediaStore, s3_admin: Any, bucket: str, kind: str
) -> None:
    data, mime_type = VALID_IMAGES[kind]
    reference = await s3_store.put_image(data)
    assert reference == build_image_reference(data, f"s3://{bucket}/sessions")
    assert reference.uri == f"s3://{bucket}/sessions/sha256/{reference.sha256}"
    assert reference.mime_type == mime_type
    stored = s3_admin.get_object(Bucket=bucket, Key=f"sessions/sha256/{reference.sha256}")
    assert (stored["Body"].read(), stored["ContentType"]) == (data, mime_type)
    assert await s3_store.get_image(reference) == data


async def test_the_same_bytes_make_one_object_however_often_they_are_put(
    s3_store: S3MediaStore, s3_admin: Any, bucket: str
) -> None:
    assert isinstance(s3_store, MediaStore)
    references = [await s3_store.put_image(PNG)]
    references += await asyncio.gather(*(s3_store.put_image(PNG) for _ in range(5)))
    assert set(references) == {references[0]}
    listed = s3_admin.list_objects_v2(Bucket=bucket)["Contents"]
    assert [item["Key"] for item in listed] == [f"sessions/sha256/{references[0].sha256}"]
    loaded = await load_images(s3_store, [references[0], await s3_store.put_image(JPEG)])
    assert list(loaded.values()) == [PNG, JPEG]


async def test_every_client_shares_the_tls_settings_made_once(
    moto_endpoint: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # One client per call; each built an SSL context and loaded the system's
    # certificates on its first request, about 50 ms of CPU per image read or written.
    loads: list[object] = []
    cert_path = httpsession.get_cert_path

    def counted(verify: object) -> object:
        loads.append(verify)
        return cert_path(verify)

    monkeypatch.setattr(httpsession, "get_cert_path", counted)
    monkeypatch.setattr(s3_tls, "_TLS_CONTEXTS", {})
    store, other = moto_store(moto_endpoint, bucket), moto_store(moto_endpoint, bucket, "b")
    reference = await store.put_image(PNG)
    for _ in range(3):
        assert await store.get_image(reference) == PNG
    await other.put_image(JPEG)
    assert len(loads) == 1  # one context, for the one verify setting of both stores


async def test_reads_that_overlap_share_one_client_which_the_last_one_closes(
    s3_store: S3MediaStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Making a client costs about 12 ms of CPU, more than a read; a model call reads
    # all of its images at once (load_images).
    opened: list[object] = []
    closed: list[object] = []
    create, leave = AioSession.create_client, AioBaseClient.__aexit__

    def counted_create(self: AioSession, *args: Any, **kwargs: Any) -> Any:
        opened.append(self)
        return create(self, *args, **kwargs)

    async def counted_leave(self: AioBaseClient, *exc_info: Any) -> None:
        closed.append(self)
        await leave(self, *exc_info)

    monkeypatch.setattr(AioSession, "create_client", counted_create)
    monkeypatch.setattr(AioBaseClient, "__aexit__", counted_leave)
    images = [PNG, JPEG, OTHER_PNG]
    references = [await s3_store.put_image(data) for data in images]
    assert (len(opened), len(closed)) == (3, 3)  # one at a time: a client each
    loaded = await load_images(s3_store, references)
    assert list(loaded.values()) == images
    assert (len(opened), len(closed)) == (4, 4)
    missing = build_image_reference(png(total_size=len(PNG) + 40), s3_store.store_uri)
    with pytest.raises(MediaStoreError, match="is not in this media store"):
        await load_images(s3_store, [*references, missing])
    assert (len(opened), len(closed)) == (5, 5)
    assert await s3_store.get_image(references[0]) == PNG
    assert (len(opened), len(closed)) == (6, 6)


async def test_a_second_store_on_the_same_prefix_reads_the_first_ones_images(
    moto_endpoint: str, bucket: str
) -> None:
    writer = moto_store(moto_endpoint, bucket, "shared/")
    reference = await writer.put_image(PNG)
    reader = S3MediaStore.from_store_uri(
        f"s3://{bucket}/shared",
        endpoint_url=moto_endpoint,
        region_name="us-east-1",
        force_path_style=True,
        access_key_id="testing-access-key",
        secret_access_key=SECRET_ACCESS_KEY,
    )
    assert reader.store_uri == writer.store_uri == f"s3://{bucket}/shared"
    assert await reader.get_image(reference) == PNG


async def test_a_store_without_a_prefix_keeps_images_at_the_bucket_root(
    moto_endpoint: str, bucket: str, s3_admin: Any
) -> None:
    store = moto_store(moto_endpoint, bucket, "")
    reference = await store.put_image(PNG)
    assert reference.uri == f"s3://{bucket}/sha256/{reference.sha256}"
    s3_admin.head_object(Bucket=bucket, Key=f"sha256/{reference.sha256}")
    assert await store.get_image(reference) == PNG


@pytest.mark.parametrize("name", ["empty", "text", "jpeg without EOI", "gif header only"])
async def test_bytes_that_are_not_an_image_are_refused_before_any_upload(
    s3_store: S3MediaStore, s3_admin: Any, bucket: str, name: str
) -> None:
    with pytest.raises(ImageValidationError):
        await s3_store.put_image(BROKEN_IMAGES[name])
    assert "Contents" not in s3_admin.list_objects_v2(Bucket=bucket)


async def test_a_reference_of_another_store_or_prefix_is_refused(
    s3_store: S3MediaStore, bucket: str
) -> None:
    await s3_store.put_image(PNG)
    for other in ("s3://elsewhere/sessions", f"s3://{bucket}/other", f"s3://{bucket}"):
        with pytest.raises(MediaStoreError, match="is not in this media store"):
            await s3_store.get_image(build_image_reference(PNG, other))


async def test_a_missing_object_is_a_media_store_error(s3_store: S3MediaStore) -> None:
    reference = build_image_reference(PNG, s3_store.store_uri)
    with pytest.raises(MediaStoreError, match="is not in this media store"):
        await s3_store.get_image(reference)


async def test_an_object_of_another_size_is_refused_by_its_content_length(
    s3_store: S3MediaStore, s3_admin: Any, bucket: str
) -> None:
    reference = await s3_store.put_image(PNG)
    key = f"sessions/sha256/{reference.sha256}"
    s3_admin.put_object(Bucket=bucket, Key=key, Body=OTHER_PNG)
    with pytest.raises(MediaStoreError, match=f"Content-Length {len(OTHER_PNG)}"):
        await s3_store.get_image(reference)


async def test_an_object_of_the_right_size_but_other_bytes_is_refused(
    s3_store: S3MediaStore, s3_admin: Any, bucket: str
) -> None:
    reference = await s3_store.put_image(PNG)
    key = f"sessions/sha256/{reference.sha256}"
    s3_admin.put_object(Bucket=bucket, Key=key, Body=PNG[:-1] + b"\x00")
    with pytest.raises(MediaStoreError, match=r"does not match its reference: .*SHA-256"):
        await s3_store.get_image(reference)


async def test_an_object_that_is_not_the_references_type_is_refused(
    s3_store: S3MediaStore, s3_admin: Any, bucket: str
) -> None:
    reference = await s3_store.put_image(PNG)
    forged = build_image_reference(PNG, s3_store.store_uri)
    as_jpeg = type(forged)(
        uri=forged.uri, mime_type="image/jpeg", sha256=forged.sha256, size_bytes=forged.size_bytes
    )
    with pytest.raises(MediaStoreError, match="image/png, but the reference's mime_type"):
        await s3_store.get_image(as_jpeg)
    assert await s3_store.get_image(reference) == PNG


async def test_a_missing_bucket_fails_puts_and_reads_with_media_store_error(
    moto_endpoint: str,
) -> None:
    store = moto_store(moto_endpoint, "no-such-bucket")
    with pytest.raises(MediaStoreError, match=r"PutObject .* failed: 404 NoSuchBucket"):
        await store.put_image(PNG)
    with pytest.raises(MediaStoreError, match=r"GetObject .* failed: 404 NoSuchBucket"):
        await store.get_image(build_image_reference(PNG, store.store_uri))


async def test_an_unreachable_service_is_a_media_store_error() -> None:
    store = S3MediaStore(
        "media",
        "p",
        endpoint_url="http://127.0.0.1:9",  # the discard port: nothing listens
        region_name="us-east-1",
        access_key_id="loopback",
        secret_access_key=SECRET_ACCESS_KEY,
    )
    with pytest.raises(MediaStoreError, match=r"PutObject of .p/sha256/.*EndpointConnectionError"):
        await store.put_image(PNG)


async def test_explicit_keys_never_reach_the_repr_an_error_or_a_log_line(
    moto_endpoint: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    store = moto_store(moto_endpoint, "no-such-bucket")
    assert repr(store) == (
        f"S3MediaStore(store_uri='s3://no-such-bucket/sessions', endpoint_url='{moto_endpoint}', "
        "region_name='us-east-1', force_path_style=True, credentials=<explicit>)"
    )
    with pytest.raises(MediaStoreError) as raised:
        await store.put_image(PNG)
    texts = [repr(store), str(raised.value), repr(raised.value), caplog.text]
    cause: BaseException | None = raised.value
    while cause is not None:
        texts.append(str(cause))
        cause = cause.__cause__
    assert "botocore" in caplog.text  # the client's debug log was captured
    assert not [text for text in texts if SECRET_ACCESS_KEY in text]
    assert SECRET_ACCESS_KEY not in repr(vars(store))


async def test_a_session_token_and_key_id_never_reach_botocores_debug_lines(
    moto_endpoint: str, bucket: str, caplog: pytest.LogCaptureFixture
) -> None:
    # botocore logs the canonical request and the prepared request of every call at
    # DEBUG: they held the x-amz-security-token header and Credential=<key id>.
    caplog.set_level(logging.DEBUG)
    token = "testing-session-token-5d1c"
    store = S3MediaStore(
        bucket,
        "sessions",
        endpoint_url=moto_endpoint,
        region_name=REGION,
        force_path_style=True,
        access_key_id=ACCESS_KEY_ID,
        secret_access_key=SECRET_ACCESS_KEY,
        session_token=token,
    )
    reference = await store.put_image(PNG)
    assert await store.get_image(reference) == PNG
    assert "x-amz-security-token:<hidden>" in caplog.text  # the canonical request was logged
    assert "Credential=<hidden>/" in caplog.text  # and the prepared request
    for secret in (token, ACCESS_KEY_ID, SECRET_ACCESS_KEY):
        assert secret not in caplog.text
        assert secret not in repr(store)


def test_keys_come_as_a_pair() -> None:
    with pytest.raises(ValueError, match="both access_key_id and secret_access_key"):
        S3MediaStore("media", access_key_id="only-the-id")
    with pytest.raises(ValueError, match="session_token needs"):
        S3MediaStore("media", session_token="token")
    with pytest.raises(TypeError, match="secret_access_key must be a non-empty str") as raised:
        S3MediaStore("media", access_key_id="id", secret_access_key=b"k3y")  # type: ignore[arg-type]
    assert "k3y" not in str(raised.value)


def test_without_keys_the_store_uses_the_standard_chain_and_says_nothing_of_it() -> None:
    store = S3MediaStore("agent-media", "sessions")
    assert repr(store) == "S3MediaStore(store_uri='s3://agent-media/sessions')"
    assert store.object_key("ab" * 32) == f"sessions/sha256/{'ab' * 32}"
    assert image_uri(store.store_uri, "ab" * 32).endswith(store.object_key("ab" * 32))


async def test_a_body_cut_short_fails_the_read_with_media_store_error() -> None:
    # A server (or a proxy) that sends the image's Content-Length and then closes halfway:
    # aiohttp's ClientPayloadError is not an OSError, and aiobotocore passes it on as it is.
    image = png(total_size=200_000)

    async def answer_half(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.lower().split(b"\r\n")
                if line.startswith(b"content-length:")
            ),
            0,
        )
        await reader.readexactly(length)
        writer.write(
            f"HTTP/1.1 200 OK\r\nContent-Length: {len(image)}\r\n"
            "Content-Type: image/png\r\n\r\n".encode()
            + image[: len(image) // 2]
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer_half, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    store = moto_store(f"http://127.0.0.1:{port}", "bucket")
    try:
        with pytest.raises(MediaStoreError, match="GetObject"):
            await store.get_image(build_image_reference(image, store.store_uri))
    finally:
        server.close()
        await server.wait_closed()
