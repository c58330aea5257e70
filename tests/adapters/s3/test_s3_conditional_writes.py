"""Conditional uploads: 412 is success, 409 retries, and a service that refuses them.

``fake_s3`` plays each service; its request log shows which calls the store made.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from dex_agents.adapters.media.s3_store import CONDITIONAL_WRITE_ATTEMPTS
from dex_agents.domain.errors import MediaStoreError
from dex_agents.s3 import S3MediaStore
from tests.adapters.s3.fake_s3 import FakeS3, running_fake_s3
from tests.domain.images_support import jpeg, png

PNG = png()
OTHER_PNG = png(total_size=len(PNG) + 20)
PUT_IF_ABSENT = ("PUT", True)
PUT = ("PUT", False)
HEAD = ("HEAD", False)
GET = ("GET", False)


@pytest.fixture
async def fake() -> AsyncIterator[FakeS3]:
    async with running_fake_s3(FakeS3()) as running:
        yield running


def store_of(fake: FakeS3) -> S3MediaStore:
    return S3MediaStore(
        "media",
        "p",
        endpoint_url=fake.endpoint_url,
        region_name="us-east-1",
        force_path_style=True,
        access_key_id="loopback",
        secret_access_key="loopback-secret",
    )


async def test_an_upload_sends_if_none_match_and_412_means_it_is_already_there(
    fake: FakeS3,
) -> None:
    store = store_of(fake)
    first = await store.put_image(PNG)
    again = await store.put_image(PNG)
    assert first == again
    assert [seen.if_none_match for seen in fake.requests] == ["*", "*"]
    assert fake.methods() == [PUT_IF_ABSENT, PUT_IF_ABSENT]  # the 412 needed no HEAD
    assert fake.objects == {f"p/sha256/{first.sha256}": PNG}


async def test_a_409_conflict_retries_the_conditional_upload(fake: FakeS3) -> None:
    fake.conflicts_left = CONDITIONAL_WRITE_ATTEMPTS - 1
    reference = await store_of(fake).put_image(PNG)
    assert fake.methods() == [PUT_IF_ABSENT] * CONDITIONAL_WRITE_ATTEMPTS
    assert fake.objects == {f"p/sha256/{reference.sha256}": PNG}


async def test_when_every_attempt_conflicts_a_head_must_find_the_image(fake: FakeS3) -> None:
    store = store_of(fake)
    reference = await store.put_image(PNG)
    fake.requests.clear()
    fake.conflicts_left = CONDITIONAL_WRITE_ATTEMPTS
    assert await store.put_image(PNG) == reference
    assert fake.methods() == [PUT_IF_ABSENT] * CONDITIONAL_WRITE_ATTEMPTS + [HEAD]


async def test_when_every_attempt_conflicts_and_no_image_is_there_the_put_fails(
    fake: FakeS3,
) -> None:
    fake.conflicts_left = CONDITIONAL_WRITE_ATTEMPTS
    with pytest.raises(MediaStoreError, match="met 409 Conflict, and the bucket holds no object"):
        await store_of(fake).put_image(PNG)
    assert fake.methods() == [PUT_IF_ABSENT] * CONDITIONAL_WRITE_ATTEMPTS + [HEAD]
    assert fake.objects == {}


async def test_when_every_attempt_conflicts_an_object_of_another_size_fails_the_put(
    fake: FakeS3,
) -> None:
    store = store_of(fake)
    reference = await store.put_image(PNG)
    fake.objects[f"p/sha256/{reference.sha256}"] = OTHER_PNG
    fake.conflicts_left = CONDITIONAL_WRITE_ATTEMPTS
    with pytest.raises(MediaStoreError, match=f"an object of {len(OTHER_PNG)} bytes"):
        await store.put_image(PNG)


async def test_a_service_that_refuses_conditional_writes_gets_a_head_first(
    fake: FakeS3,
) -> None:
    fake.refuse_conditional_writes = True
    store = store_of(fake)
    reference = await store.put_image(PNG)
    assert fake.methods() == [PUT_IF_ABSENT, HEAD, PUT]
    assert fake.objects == {f"p/sha256/{reference.sha256}": PNG}
    fake.requests.clear()
    # The store remembers the refusal: HEAD, and no upload for an image already there.
    assert await store.put_image(PNG) == reference
    other = await store.put_image(jpeg())
    assert fake.methods() == [HEAD, HEAD, PUT]
    assert await store.get_image(other) == jpeg()


async def test_without_conditional_writes_an_object_of_another_size_fails_the_put(
    fake: FakeS3,
) -> None:
    fake.refuse_conditional_writes = True
    store = store_of(fake)
    reference = await store.put_image(PNG)
    fake.objects[f"p/sha256/{reference.sha256}"] = OTHER_PNG
    with pytest.raises(MediaStoreError, match=f"with {len(OTHER_PNG)} bytes, not {len(PNG)}"):
        await store.put_image(PNG)


async def test_without_conditional_writes_concurrent_puts_leave_the_same_content(
    fake: FakeS3,
) -> None:
    fake.refuse_conditional_writes = True
    store = store_of(fake)
    references = await asyncio.gather(*(store.put_image(PNG) for _ in range(4)))
    assert set(references) == {references[0]}
    assert fake.objects == {f"p/sha256/{references[0].sha256}": PNG}
    assert await store.get_image(references[0]) == PNG


async def test_an_object_served_without_the_references_length_is_refused_unread(
    fake: FakeS3,
) -> None:
    store = store_of(fake)
    reference = await store.put_image(PNG)
    fake.objects[f"p/sha256/{reference.sha256}"] = PNG + b"\x00" * 4_000_000
    fake.requests.clear()
    with pytest.raises(MediaStoreError, match="Content-Length 4000067"):
        await store.get_image(reference)
    assert fake.methods() == [GET]
