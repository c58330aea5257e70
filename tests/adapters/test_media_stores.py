"""InMemoryMediaStore and LocalDirectoryMediaStore: the two media stores the built-in loop needs."""

from __future__ import annotations

import asyncio
import fcntl
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from dex_agents.adapters.media.local_directory import LocalDirectoryMediaStore
from dex_agents.adapters.media.memory_store import InMemoryMediaStore
from dex_agents.domain.errors import ImageValidationError, MediaStoreError
from dex_agents.domain.images import (
    AgentImageReference,
    build_image_reference,
    encode_file_uri_path,
    image_uri,
)
from dex_agents.ports.media_store import MediaStore, load_images
from tests.domain.images_support import BROKEN_IMAGES, VALID_IMAGES, jpeg, png

PNG = png()
JPEG = jpeg()
OTHER_PNG = png(total_size=len(png()) + 20)  # another valid PNG: a private chunk pads it

StoreFactory = Callable[[Path], MediaStore]

STORES: dict[str, StoreFactory] = {
    "memory": lambda _: InMemoryMediaStore(),
    "local directory": lambda tmp_path: LocalDirectoryMediaStore(str(tmp_path / "media")),
}


@pytest.fixture(params=sorted(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> MediaStore:
    factory: StoreFactory = STORES[request.param]
    return factory(tmp_path)


# The contract, for both stores.


@pytest.mark.parametrize("kind", sorted(VALID_IMAGES))
async def test_an_image_round_trips(store: MediaStore, kind: str) -> None:
    data, mime_type = VALID_IMAGES[kind]
    reference = await store.put_image(data)
    assert reference == build_image_reference(data, store.store_uri)
    assert reference.mime_type == mime_type
    assert reference.size_bytes == len(data)
    assert reference.uri == image_uri(store.store_uri, reference.sha256)
    assert await store.get_image(reference) == data


async def test_load_images_reads_each_image_once_by_sha256(store: MediaStore) -> None:
    assert isinstance(store, MediaStore)
    first = await store.put_image(PNG)
    second = await store.put_image(JPEG)
    loaded = await load_images(store, [first, second, first])
    assert loaded == {first.sha256: PNG, second.sha256: JPEG}


async def test_putting_the_same_bytes_again_returns_the_same_reference(store: MediaStore) -> None:
    references = [await store.put_image(PNG), await store.put_image(bytes(list(PNG)))]
    references += await asyncio.gather(*(store.put_image(PNG) for _ in range(5)))
    assert set(references) == {references[0]}
    assert await store.get_image(references[0]) == PNG


@pytest.mark.parametrize("name", ["empty", "text", "jpeg without EOI", "gif header only"])
async def test_bytes_that_are_not_an_image_are_refused(store: MediaStore, name: str) -> None:
    with pytest.raises(ImageValidationError):
        await store.put_image(BROKEN_IMAGES[name])


@pytest.mark.parametrize("data", ["iVBORw0KGgo=", 2**20, None])
async def test_data_that_is_not_bytes_is_refused_by_its_type(
    store: MediaStore, data: object
) -> None:
    # An int once became that many zero bytes before any check (a large one, gigabytes),
    # and a str (base64 text, say) was refused as "string argument without an encoding".
    with pytest.raises(TypeError, match=r"^image data must be bytes, bytearray, or memoryview"):
        await store.put_image(data)  # type: ignore[arg-type]


async def test_a_reference_of_another_store_is_refused(store: MediaStore) -> None:
    foreign = build_image_reference(PNG, "s3://elsewhere/prefix")
    await store.put_image(PNG)
    expected = image_uri(store.store_uri, foreign.sha256)
    with pytest.raises(MediaStoreError) as caught:
        await store.get_image(foreign)
    assert str(caught.value) == (
        f"image uri {foreign.uri!r} is not in this media store; its images are {expected!r}"
    )


async def test_an_image_that_was_never_stored_is_missing(store: MediaStore) -> None:
    await store.put_image(JPEG)  # the store exists; this one image does not
    reference = build_image_reference(PNG, store.store_uri)
    with pytest.raises(MediaStoreError, match="is not in this media store"):
        await store.get_image(reference)


async def test_an_invalid_reference_is_refused(store: MediaStore) -> None:
    stored = await store.put_image(PNG)
    invalid = AgentImageReference(
        uri=stored.uri, mime_type="image/bmp", sha256=stored.sha256, size_bytes=stored.size_bytes
    )
    with pytest.raises(
        ImageValidationError, match=r"^image mime_type 'image/bmp' is not supported"
    ):
        await store.get_image(invalid)


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        (
            {"size_bytes": len(PNG) + 1},
            f"{len(PNG)} bytes, but the reference's size_bytes is {len(PNG) + 1}$",
        ),
        (
            {"mime_type": "image/jpeg"},
            "image bytes are image/png, but the reference's mime_type is",
        ),
    ],
)
async def test_a_reference_that_does_not_match_the_bytes_is_refused(
    store: MediaStore, change: dict[str, object], detail: str
) -> None:
    stored = await store.put_image(PNG)
    fields: dict[str, object] = {
        "uri": stored.uri,
        "mime_type": stored.mime_type,
        "sha256": stored.sha256,
        "size_bytes": stored.size_bytes,
        **change,
    }
    wrong = AgentImageReference(**fields)  # type: ignore[arg-type]
    with pytest.raises(MediaStoreError, match=detail):
        await store.get_image(wrong)


# InMemoryMediaStore.


def test_the_memory_store_location_defaults_to_memory_media() -> None:
    assert InMemoryMediaStore().store_uri == "memory://media"
    assert InMemoryMediaStore("memory://other").store_uri == "memory://other"


async def test_memory_stores_keep_their_images_apart() -> None:
    reference = await InMemoryMediaStore().put_image(PNG)
    with pytest.raises(MediaStoreError) as caught:
        await InMemoryMediaStore().get_image(reference)
    assert str(caught.value) == f"image {reference.uri!r} is not in this media store"


def test_a_memory_store_location_must_make_uris_of_at_most_1024_bytes() -> None:
    longest = "memory://" + "m" * 943  # 952 bytes: "/sha256/" and 64 hex digits make 1024
    assert InMemoryMediaStore(longest).store_uri == longest
    with pytest.raises(ValueError, match="more than MAX_IMAGE_URI_LENGTH"):
        InMemoryMediaStore(longest + "m")
    with pytest.raises(ValueError, match=r"^a media store's URI is empty$"):
        InMemoryMediaStore("")


# LocalDirectoryMediaStore.


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.stat(path, follow_symlinks=False).st_mode)


async def test_a_local_image_is_the_file_root_sha256_digest(tmp_path: Path) -> None:
    root = tmp_path / "media"
    store = LocalDirectoryMediaStore(root)
    reference = await store.put_image(PNG)
    image = root / "sha256" / reference.sha256
    assert image.read_bytes() == PNG
    assert store.root == str(root)
    assert store.store_uri == "file://" + encode_file_uri_path(str(root))
    assert reference.uri == f"{store.store_uri}/sha256/{reference.sha256}"


async def test_a_root_with_spaces_and_non_ascii_gets_a_percent_encoded_uri(tmp_path: Path) -> None:
    store = LocalDirectoryMediaStore(f"{tmp_path}/my images/é#?%")
    reference = await store.put_image(JPEG)
    assert (tmp_path / "my images" / "é#?%" / "sha256" / reference.sha256).read_bytes() == JPEG
    prefix = "file://" + encode_file_uri_path(str(tmp_path))
    assert reference.uri == f"{prefix}/my%20images/%C3%A9%23%3F%25/sha256/{reference.sha256}"
    assert await store.get_image(reference) == JPEG


@pytest.mark.parametrize(
    ("written", "root"),
    [
        ("{tmp}/a/../media/", "{tmp}/media"),
        ("{tmp}/./media//", "{tmp}/media"),
        ("//{tmp}/media", "{tmp}/media"),
    ],
)
def test_the_root_is_made_absolute_as_text(tmp_path: Path, written: str, root: str) -> None:
    tmp = str(tmp_path).lstrip("/")
    store = LocalDirectoryMediaStore("/" + written.format(tmp=tmp).lstrip("/"))
    assert store.root == "/" + root.format(tmp=tmp)


@pytest.mark.parametrize("root", ["media", "./media", "", "~/media"])
def test_a_relative_root_is_refused(root: str) -> None:
    with pytest.raises(ValueError, match=r"^root must be an absolute path") as caught:
        LocalDirectoryMediaStore(root)
    assert str(caught.value) == f"root must be an absolute path, not {root!r}"


def test_a_root_that_makes_too_long_uris_is_refused() -> None:
    with pytest.raises(ValueError, match="more than MAX_IMAGE_URI_LENGTH"):
        LocalDirectoryMediaStore("/" + "é" * 500)


async def test_created_directories_get_0700_and_files_0600(tmp_path: Path) -> None:
    root = tmp_path / "deeper" / "still" / "media"
    # A umask that takes the owner's write bit: the store sets the modes itself.
    previous = os.umask(0o277)
    try:
        store = LocalDirectoryMediaStore(root)
        reference = await store.put_image(PNG)
        again = await store.put_image(PNG)
    finally:
        os.umask(previous)
    assert again == reference
    for directory in (tmp_path / "deeper", tmp_path / "deeper" / "still", root, root / "sha256"):
        assert _mode(directory) == 0o700, directory
    image = root / "sha256" / reference.sha256
    assert _mode(image) == 0o600
    assert os.listdir(root / "sha256") == [reference.sha256]
    assert os.listdir(root) == ["sha256"]


async def test_an_existing_identical_file_is_success(tmp_path: Path) -> None:
    store = LocalDirectoryMediaStore(tmp_path)
    reference = build_image_reference(PNG, store.store_uri)
    (tmp_path / "sha256").mkdir()
    image = tmp_path / "sha256" / reference.sha256
    image.write_bytes(PNG)
    image.chmod(0o644)
    before = os.stat(image).st_ino
    assert await store.put_image(PNG) == reference
    assert os.stat(image).st_ino == before  # nothing was written
    assert _mode(image) == 0o644


async def test_a_damaged_file_is_replaced_by_a_put_of_its_bytes(tmp_path: Path) -> None:
    store = LocalDirectoryMediaStore(tmp_path)
    reference = await store.put_image(PNG)
    image = tmp_path / "sha256" / reference.sha256
    image.write_bytes(PNG[:-1])
    assert await store.put_image(PNG) == reference
    assert image.read_bytes() == PNG
    assert os.listdir(tmp_path / "sha256") == [reference.sha256]


async def test_a_first_put_removes_only_the_stale_unlocked_temporaries_of_killed_puts(
    tmp_path: Path,
) -> None:
    first = await LocalDirectoryMediaStore(tmp_path).put_image(PNG)
    directory = tmp_path / "sha256"
    long_ago = time.time() - 2 * 3600

    def temporary(token: str, modified: float) -> Path:
        # What a put killed between its write and its rename leaves.
        path = directory / f".{first.sha256}.{token}.tmp"
        path.write_bytes(PNG[:100])
        os.utime(path, (modified, modified))
        return path

    stale = temporary("0" * 16, long_ago)
    recent = temporary("1" * 16, time.time())
    held = temporary("2" * 16, long_ago)
    outside = tmp_path / "outside.tmp"
    outside.write_bytes(b"not the store's")
    link = directory / f".{first.sha256}.{'3' * 16}.tmp"
    link.symlink_to(outside)
    os.utime(link, (long_ago, long_ago), follow_symlinks=False)
    foreign = directory / ".notes.tmp"
    foreign.write_text("not a name a put makes")
    os.utime(foreign, (long_ago, long_ago))
    with held.open("rb") as writer:
        fcntl.flock(writer, fcntl.LOCK_EX)  # a live writer, stalled for two hours
        second = await LocalDirectoryMediaStore(tmp_path).put_image(JPEG)
    assert not stale.exists()
    kept = {first.sha256, second.sha256, recent.name, held.name, link.name, foreign.name}
    assert set(os.listdir(directory)) == kept
    assert outside.read_bytes() == b"not the store's"


async def test_a_missing_root_means_a_missing_image(tmp_path: Path) -> None:
    store = LocalDirectoryMediaStore(tmp_path / "never created")
    reference = build_image_reference(PNG, store.store_uri)
    path = f"{tmp_path}/never created/sha256/{reference.sha256}"
    with pytest.raises(MediaStoreError) as caught:
        await store.get_image(reference)
    assert str(caught.value) == f"image {reference.uri!r} is not in this media store: no {path}"
    assert not (tmp_path / "never created").exists()  # a read creates nothing


async def test_a_truncated_file_is_refused_by_its_size(tmp_path: Path) -> None:
    store = LocalDirectoryMediaStore(tmp_path)
    reference = await store.put_image(PNG)
    image = tmp_path / "sha256" / reference.sha256
    image.write_bytes(PNG[:-3])
    with pytest.raises(MediaStoreError) as caught:
        await store.get_image(reference)
    assert str(caught.value) == (
        f"image file {image} is {len(PNG) - 3} bytes, but the reference's size_bytes is {len(PNG)}"
    )


async def test_a_replaced_file_of_the_same_size_is_refused_by_its_sha256(tmp_path: Path) -> None:
    store = LocalDirectoryMediaStore(tmp_path)
    reference = await store.put_image(PNG)
    image = tmp_path / "sha256" / reference.sha256
    replaced = PNG[:-5] + b"\x00" + PNG[-4:]
    image.write_bytes(replaced)
    with pytest.raises(MediaStoreError) as caught:
        await store.get_image(reference)
    assert str(caught.value).startswith(
        f"image file {image} does not match its reference: image bytes have SHA-256 "
    )
    assert isinstance(caught.value.__cause__, ImageValidationError)


async def test_a_symbolic_link_in_place_of_the_sha256_directory_is_refused(
    tmp_path: Path,
) -> None:
    root = tmp_path / "media"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    other = await LocalDirectoryMediaStore(elsewhere).put_image(PNG)
    root.mkdir()
    (root / "sha256").symlink_to(elsewhere / "sha256")
    store = LocalDirectoryMediaStore(root)
    message = (
        f"{root}/sha256 is a symbolic link; LocalDirectoryMediaStore follows no symbolic link "
        "under its root"
    )
    with pytest.raises(MediaStoreError) as put:
        await store.put_image(JPEG)
    assert str(put.value) == message
    with pytest.raises(MediaStoreError) as get:
        await store.get_image(build_image_reference(PNG, store.store_uri))
    assert str(get.value) == message
    assert os.listdir(elsewhere / "sha256") == [other.sha256]


async def test_a_symbolic_link_in_place_of_the_image_file_is_refused(tmp_path: Path) -> None:
    elsewhere = await LocalDirectoryMediaStore(tmp_path / "elsewhere").put_image(PNG)
    store = LocalDirectoryMediaStore(tmp_path / "media")
    reference = await store.put_image(JPEG)  # makes the sha256 directory
    image = tmp_path / "media" / "sha256" / elsewhere.sha256
    image.symlink_to(tmp_path / "elsewhere" / "sha256" / elsewhere.sha256)
    ours = build_image_reference(PNG, store.store_uri)
    message = (
        f"{image} is a symbolic link; LocalDirectoryMediaStore follows no symbolic link "
        "under its root"
    )
    for action in (store.put_image(PNG), store.get_image(ours)):
        with pytest.raises(MediaStoreError) as caught:
            await action
        assert str(caught.value) == message
    assert image.is_symlink()
    assert await store.get_image(reference) == JPEG


async def test_a_hard_linked_image_file_is_refused(tmp_path: Path) -> None:
    store = LocalDirectoryMediaStore(tmp_path / "media")
    reference = await store.put_image(PNG)
    image = tmp_path / "media" / "sha256" / reference.sha256
    os.link(image, tmp_path / "another name")
    message = f"image file {image} has 2 hard links; an image file must have one"
    for action in (store.get_image(reference), store.put_image(PNG)):
        with pytest.raises(MediaStoreError) as caught:
            await action
        assert str(caught.value) == message


@pytest.mark.parametrize("make", ["fifo", "directory"])
async def test_a_special_file_in_place_of_the_image_file_is_refused(
    tmp_path: Path, make: str
) -> None:
    store = LocalDirectoryMediaStore(tmp_path)
    reference = build_image_reference(PNG, store.store_uri)
    (tmp_path / "sha256").mkdir()
    image = tmp_path / "sha256" / reference.sha256
    if make == "fifo":
        os.mkfifo(image)
    else:
        image.mkdir()
    for action in (store.get_image(reference), store.put_image(PNG)):
        with pytest.raises(MediaStoreError) as caught:
            await action
        assert str(caught.value) == f"{image} is not a regular file"


async def test_a_file_in_place_of_the_sha256_directory_is_refused(tmp_path: Path) -> None:
    (tmp_path / "sha256").write_bytes(b"not a directory")
    store = LocalDirectoryMediaStore(tmp_path)
    with pytest.raises(MediaStoreError) as caught:
        await store.put_image(PNG)
    assert str(caught.value) == f"{tmp_path}/sha256 is not a directory"


async def test_a_root_that_is_a_symbolic_link_is_followed(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "target")
    store = LocalDirectoryMediaStore(tmp_path / "link")
    reference = await store.put_image(PNG)
    assert store.root == f"{tmp_path}/link"
    assert (tmp_path / "target" / "sha256" / reference.sha256).read_bytes() == PNG
    assert await store.get_image(reference) == PNG


async def test_two_stores_on_one_root_share_their_images(tmp_path: Path) -> None:
    reference = await LocalDirectoryMediaStore(tmp_path).put_image(PNG)
    assert await LocalDirectoryMediaStore(f"{tmp_path}/").get_image(reference) == PNG
    with pytest.raises(MediaStoreError, match="is not in this media store"):
        await LocalDirectoryMediaStore(tmp_path / "other").get_image(reference)
