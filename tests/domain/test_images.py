"""The pure image rules: limits, structural detection, verification, references, and file URIs."""

from __future__ import annotations

import base64
import hashlib
import os.path
import re
import urllib.parse
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dex_agents.domain.errors import ImageValidationError, MediaStoreError
from dex_agents.domain.images import (
    MAX_IMAGE_BYTES,
    MAX_IMAGE_URI_LENGTH,
    MAX_IMAGES_PER_MESSAGE,
    SUPPORTED_IMAGE_MIME_TYPES,
    AgentImageReference,
    build_image_reference,
    collect_turn_images,
    detect_image_mime_type,
    encode_file_uri_path,
    image_uri,
    local_directory_root,
    local_directory_store_uri,
    require_images_of_store,
    require_short_image_uris,
    require_store_image_reference,
    validate_image_reference,
    validate_image_references,
    verify_image_bytes,
)
from dex_agents.domain.messages import AgentMessage, MessageRole
from dex_agents.domain.tool_calls import AgentToolCall, ToolCallStatus
from dex_agents.domain.tool_effects import ToolEffect
from tests.domain.images_support import (
    BROKEN_IMAGES,
    MALFORMED_BUT_DETECTED,
    VALID_IMAGE_VARIANTS,
    png,
)

SHA = "9f2c" + "0" * 60
STORE = "s3://agent-media/sessions"


def reference(**changes: object) -> AgentImageReference:
    fields: dict[str, object] = {
        "uri": f"{STORE}/sha256/{SHA}",
        "mime_type": "image/png",
        "sha256": SHA,
        "size_bytes": 48213,
    }
    fields.update(changes)
    return AgentImageReference(**fields)  # type: ignore[arg-type]


def test_the_limits_are_the_spec_numbers() -> None:
    assert MAX_IMAGE_BYTES == 3_750_000
    assert len(base64.b64encode(b"\x00" * MAX_IMAGE_BYTES)) == 5_000_000
    assert MAX_IMAGES_PER_MESSAGE == 20
    assert MAX_IMAGE_URI_LENGTH == 1024
    assert SUPPORTED_IMAGE_MIME_TYPES == ("image/png", "image/jpeg", "image/gif", "image/webp")


@pytest.mark.parametrize(
    ("data", "mime_type"), VALID_IMAGE_VARIANTS.values(), ids=VALID_IMAGE_VARIANTS
)
def test_detects_well_formed_images(data: bytes, mime_type: str) -> None:
    assert detect_image_mime_type(data) == mime_type
    assert detect_image_mime_type(bytearray(data)) == mime_type
    assert detect_image_mime_type(memoryview(data)) == mime_type


@pytest.mark.parametrize(
    ("data", "mime_type"), MALFORMED_BUT_DETECTED.values(), ids=MALFORMED_BUT_DETECTED
)
def test_detection_is_the_cheap_check_not_a_full_decode(data: bytes, mime_type: str) -> None:
    assert detect_image_mime_type(data) == mime_type


@pytest.mark.parametrize("data", BROKEN_IMAGES.values(), ids=BROKEN_IMAGES)
def test_refuses_bytes_that_fail_a_listed_check(data: bytes) -> None:
    assert detect_image_mime_type(data) is None


def _ends_in_eoi_from(data: bytes, cuts: range) -> list[int]:
    return [cut for cut in cuts if data[:cut].endswith(b"\xff\xd9")]


@pytest.mark.parametrize(
    ("data", "mime_type"), VALID_IMAGE_VARIANTS.values(), ids=VALID_IMAGE_VARIANTS
)
def test_truncations_pass_only_where_the_listed_checks_allow(data: bytes, mime_type: str) -> None:
    detected = [cut for cut in range(len(data)) if detect_image_mime_type(data[:cut])]
    expected = {
        "image/png": list(range(16, len(data))),  # signature and IHDR chunk header: 16 bytes
        "image/gif": list(range(13, len(data))),  # header and screen descriptor: 13 bytes
        "image/webp": [],  # the RIFF size counts the whole data
        "image/jpeg": _ends_in_eoi_from(data, range(6, len(data))),  # EOI at the end
    }[mime_type]
    assert detected == expected
    assert all(detect_image_mime_type(data[:cut]) == mime_type for cut in detected)


@settings(max_examples=100, deadline=None)
@given(
    image=st.sampled_from(sorted(VALID_IMAGE_VARIANTS)), extra=st.binary(min_size=1, max_size=40)
)
def test_bytes_after_the_image_pass_only_where_the_listed_checks_allow(
    image: str, extra: bytes
) -> None:
    data, mime_type = VALID_IMAGE_VARIANTS[image]
    detected = detect_image_mime_type(data + extra)
    if mime_type in ("image/png", "image/gif"):
        assert detected == mime_type  # nothing after the header is read
    elif mime_type == "image/jpeg":
        # "EOI at the end": appended bytes pass exactly when they end in EOI again.
        assert detected == (mime_type if (data + extra).endswith(b"\xff\xd9") else None)
    else:
        assert detected is None  # the RIFF size no longer matches


@settings(max_examples=100, deadline=None)
@given(
    header=st.sampled_from(
        [(b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR", "image/png"), (b"GIF89a", "image/gif")]
    ),
    rest=st.binary(max_size=40),
)
def test_nothing_after_a_png_or_gif_header_is_read(header: tuple[bytes, str], rest: bytes) -> None:
    # PNG: signature and IHDR chunk header, 16 bytes. GIF: header and screen descriptor, 13.
    prefix, mime_type = header
    minimum = 16 if mime_type == "image/png" else 13
    data = prefix + rest
    assert detect_image_mime_type(data) == (mime_type if len(data) >= minimum else None)


@settings(max_examples=100, deadline=None)
@given(fourcc=st.sampled_from([b"VP8 ", b"VP8L", b"VP8X"]), rest=st.binary(max_size=40))
def test_any_riff_webp_with_the_right_size_and_first_chunk_is_detected(
    fourcc: bytes, rest: bytes
) -> None:
    body = b"WEBP" + fourcc + rest
    size = len(body).to_bytes(4, "little")
    assert detect_image_mime_type(b"RIFF" + size + body) == "image/webp"
    wrong = (len(body) + 1).to_bytes(4, "little")
    assert detect_image_mime_type(b"RIFF" + wrong + body) is None


def test_builds_references_for_every_kind_of_image() -> None:
    for data, mime_type in VALID_IMAGE_VARIANTS.values():
        sha256 = hashlib.sha256(data).hexdigest()
        assert build_image_reference(data, STORE + "/") == AgentImageReference(
            uri=f"{STORE}/sha256/{sha256}",
            mime_type=mime_type,
            sha256=sha256,
            size_bytes=len(data),
        )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "image bytes are empty"),
        (png(total_size=MAX_IMAGE_BYTES + 1), "image is 3750001 bytes, more than MAX_IMAGE_BYTES (3750000)"),
        (png()[:15], "bytes are not a supported, well-formed image (PNG, JPEG, GIF, or WebP)"),
        (b"BM" + b"\x00" * 60, "bytes are not a supported, well-formed image (PNG, JPEG, GIF, or WebP)"),
    ],
    ids=["empty", "MAX_IMAGE_BYTES + 1", "png cut inside the IHDR chunk header", "bmp"],
)  # fmt: skip
def test_build_image_reference_refuses_bad_bytes(data: bytes, message: str) -> None:
    with pytest.raises(ImageValidationError) as caught:
        build_image_reference(data, STORE)
    assert str(caught.value) == message


def test_build_image_reference_takes_an_image_of_exactly_max_image_bytes() -> None:
    data = png(total_size=MAX_IMAGE_BYTES)
    assert build_image_reference(data, STORE).size_bytes == MAX_IMAGE_BYTES == len(data)


def test_build_image_reference_edges_of_the_uri_length() -> None:
    longest_store = "s3://" + "b" * 947  # 952 bytes + "/sha256/" + 64 = 1024
    assert len(build_image_reference(png(), longest_store).uri) == 1024
    with pytest.raises(ImageValidationError) as caught:
        build_image_reference(png(), longest_store + "c")
    assert str(caught.value) == (
        "image uri is 1025 bytes as UTF-8, more than MAX_IMAGE_URI_LENGTH (1024)"
    )
    with pytest.raises(ValueError, match=r"^a media store's URI is empty$"):
        build_image_reference(png(), "")


@settings(max_examples=60, deadline=None)
@given(image=st.sampled_from(sorted(VALID_IMAGE_VARIANTS)), data=st.data())
def test_verify_accepts_the_bytes_and_refuses_any_changed_byte(
    image: str, data: st.DataObject
) -> None:
    content = VALID_IMAGE_VARIANTS[image][0]
    built = build_image_reference(content, STORE)
    verify_image_bytes(content, built)
    validate_image_reference(built)
    require_store_image_reference(built, STORE)
    index = data.draw(st.integers(0, len(content) - 1))
    flip = data.draw(st.integers(1, 255))
    changed = content[:index] + bytes((content[index] ^ flip,)) + content[index + 1 :]
    with pytest.raises(ImageValidationError, match=r"^image bytes have SHA-256 "):
        verify_image_bytes(changed, built)


def _verify_case(mutate: Callable[[bytes], tuple[bytes, AgentImageReference]]) -> str:
    data, ref = mutate(png())
    with pytest.raises(ImageValidationError) as caught:
        verify_image_bytes(data, ref)
    return str(caught.value)


def test_verify_image_bytes_names_what_was_wrong() -> None:
    good = build_image_reference(png(), STORE)
    cut = png()[:15]  # inside the IHDR chunk header
    cut_sha = hashlib.sha256(cut).hexdigest()
    other_sha = hashlib.sha256(b"other").hexdigest()
    assert _verify_case(lambda d: (d, attrs.evolve(good, sha256=other_sha))) == (
        f"image bytes have SHA-256 {good.sha256}, but the reference's sha256 is {other_sha}"
    )
    assert _verify_case(lambda d: (d, attrs.evolve(good, size_bytes=len(d) + 1))) == (
        f"image bytes are {len(png())} bytes, but the reference's size_bytes is {len(png()) + 1}"
    )
    assert _verify_case(lambda d: (d, attrs.evolve(good, mime_type="image/jpeg"))) == (
        "image bytes are image/png, but the reference's mime_type is image/jpeg"
    )
    truncated = attrs.evolve(good, sha256=cut_sha, size_bytes=len(cut))
    assert _verify_case(lambda _d: (cut, truncated)) == (
        "image bytes are not a well-formed image, but the reference's mime_type is image/png"
    )
    assert _verify_case(lambda d: (d, attrs.evolve(good, mime_type="image/bmp"))) == (
        "image mime_type 'image/bmp' is not supported"
    )


def _uri_of_bytes(length: int, *, char: str = "a") -> str:
    suffix = f"/sha256/{SHA}"
    body = length - len(suffix.encode())
    return char * (body // len(char.encode())) + "x" * (body % len(char.encode())) + suffix


@pytest.mark.parametrize(
    "ref",
    [
        reference(),
        reference(size_bytes=1),
        reference(size_bytes=MAX_IMAGE_BYTES),
        reference(uri=_uri_of_bytes(1024)),
        reference(uri=_uri_of_bytes(1024, char="é")),
        *(reference(mime_type=mime) for mime in SUPPORTED_IMAGE_MIME_TYPES),
    ],
    ids=["spec example", "1 byte", "MAX_IMAGE_BYTES", "uri 1024", "uri 1024 utf-8", "png", "jpeg", "gif", "webp"],
)  # fmt: skip
def test_valid_references_pass(ref: AgentImageReference) -> None:
    validate_image_reference(ref)
    assert validate_image_references([ref]) == (ref,)


SUPPORTED = "image/png, image/jpeg, image/gif, image/webp"


@pytest.mark.parametrize(
    ("ref", "message"),
    [
        ({"type": "image"}, "an image must be an AgentImageReference, not dict"),
        (reference(mime_type="image/bmp"), f"image mime_type 'image/bmp' is not supported; use one of {SUPPORTED}"),
        (reference(mime_type="IMAGE/PNG"), f"image mime_type 'IMAGE/PNG' is not supported; use one of {SUPPORTED}"),
        (reference(sha256=SHA.upper()), f"image sha256 {SHA.upper()!r} is not 64 lowercase hex digits"),
        (reference(sha256=SHA[:63]), f"image sha256 {SHA[:63]!r} is not 64 lowercase hex digits"),
        (reference(sha256=None), "image sha256 None is not 64 lowercase hex digits"),
        (reference(size_bytes=0), "image size_bytes 0 is not from 1 to MAX_IMAGE_BYTES (3750000)"),
        (reference(size_bytes=MAX_IMAGE_BYTES + 1), "image size_bytes 3750001 is not from 1 to MAX_IMAGE_BYTES (3750000)"),
        (reference(size_bytes=True), "image size_bytes True is not from 1 to MAX_IMAGE_BYTES (3750000)"),
        (reference(size_bytes="48213"), "image size_bytes '48213' is not from 1 to MAX_IMAGE_BYTES (3750000)"),
        (reference(uri=""), "image uri '' is not a non-empty string"),
        (reference(uri=_uri_of_bytes(1025)), "image uri is 1025 bytes as UTF-8, more than MAX_IMAGE_URI_LENGTH (1024)"),
        (reference(uri=_uri_of_bytes(1025, char="é")), "image uri is 1025 bytes as UTF-8, more than MAX_IMAGE_URI_LENGTH (1024)"),
        (reference(uri=f"{STORE}/{SHA}"), f"image uri '{STORE}/{SHA}' does not end in /sha256/{SHA}"),
        (reference(uri=f"{STORE}/sha256/{SHA}/"), f"image uri '{STORE}/sha256/{SHA}/' does not end in /sha256/{SHA}"),
        (reference(uri="\ud800" + f"/sha256/{SHA}"), "image uri is not valid Unicode text: "),
    ],
    ids=[
        "dict", "bmp", "upper-case type", "upper-case sha256", "63 hex digits", "sha256 None",
        "size 0", "size MAX_IMAGE_BYTES + 1", "size bool", "size str", "empty uri",
        "uri 1025", "uri 1025 utf-8", "uri without /sha256/", "uri with a trailing /", "uri surrogate",
    ],
)  # fmt: skip
def test_invalid_references_are_refused(ref: AgentImageReference, message: str) -> None:
    with pytest.raises(ImageValidationError) as caught:
        validate_image_reference(ref)
    assert str(caught.value).startswith(message)
    assert str(caught.value) == message or message.endswith(": ")
    with pytest.raises(ImageValidationError) as in_list:
        validate_image_references([reference(), ref])
    assert str(in_list.value) == f"image 2: {caught.value}"


def test_validate_image_references_counts_to_max_images_per_message() -> None:
    twenty = [reference()] * MAX_IMAGES_PER_MESSAGE
    assert validate_image_references(iter(twenty)) == tuple(twenty)
    assert validate_image_references([]) == ()
    with pytest.raises(ImageValidationError) as caught:
        validate_image_references([*twenty, reference()])
    assert str(caught.value) == (
        "21 images; one message or tool result carries at most MAX_IMAGES_PER_MESSAGE (20)"
    )
    with pytest.raises(ImageValidationError) as single:
        validate_image_references(reference())  # type: ignore[arg-type]
    assert str(single.value) == (
        "images must be a sequence of AgentImageReference, not AgentImageReference"
    )


@pytest.mark.parametrize(
    ("images", "type_name"),
    [("a" * 21, "str"), ("ab", "str"), (b"\x89PNG", "bytes"), (bytearray(b"ab"), "bytearray"),
     (memoryview(b"ab"), "memoryview"), ({"uri": "s3://b/sha256/x"}, "dict")],
    ids=["21 characters", "a str", "bytes", "bytearray", "memoryview", "a mapping"],
)  # fmt: skip
def test_validate_image_references_refuses_what_only_iterates(
    images: object, type_name: str
) -> None:
    # A str iterated into characters read as "image 1: ... not str", or as 21 images.
    with pytest.raises(ImageValidationError) as caught:
        validate_image_references(images)  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"images must be a sequence of AgentImageReference, not {type_name}"
    )


@pytest.mark.parametrize(
    ("store_uri", "longest"),
    [("s3://" + "b" * 947, None), ("s3://" + "b" * 947 + "/", None), ("s3://" + "b" * 948, 1025), ("file:///x" + "é" * 472, 1025)],
    ids=["952 bytes", "952 bytes and a slash", "953 bytes", "953 bytes of UTF-8"],
)  # fmt: skip
def test_require_short_image_uris(store_uri: str, longest: int | None) -> None:
    if longest is None:
        require_short_image_uris(store_uri)
        return
    with pytest.raises(ValueError, match=r"^media store URI ") as caught:
        require_short_image_uris(store_uri)
    assert not isinstance(caught.value, ImageValidationError)
    assert str(caught.value).endswith(
        f"makes image URIs of {longest} bytes as UTF-8, more than MAX_IMAGE_URI_LENGTH (1024); "
        "use a shorter bucket, prefix, or root"
    )


def test_require_short_image_uris_refuses_an_empty_uri() -> None:
    with pytest.raises(ValueError, match=r"^a media store's URI is empty$"):
        require_short_image_uris("")


def test_require_store_image_reference() -> None:
    own = reference()
    require_store_image_reference(own, STORE)
    require_store_image_reference(own, STORE + "/")
    with pytest.raises(MediaStoreError) as caught:
        require_store_image_reference(own, "s3://agent-media/other")
    assert str(caught.value) == (
        f"image uri '{STORE}/sha256/{SHA}' is not in this media store; its images are "
        f"'s3://agent-media/other/sha256/{SHA}'"
    )
    with pytest.raises(MediaStoreError):
        require_store_image_reference(reference(uri=f"{STORE}/x/sha256/{SHA}"), STORE)
    with pytest.raises(ImageValidationError, match=r"^image size_bytes 0 "):
        require_store_image_reference(reference(size_bytes=0), STORE)


def test_require_images_of_store_names_the_first_image_of_another_store() -> None:
    own, other = reference(), reference(uri=f"s3://agent-media/other/sha256/{SHA}")
    require_images_of_store([own, own], STORE, source="tool x returned")
    require_images_of_store([], STORE, source="tool x returned")
    with pytest.raises(ImageValidationError) as caught:
        require_images_of_store([own, other], STORE + "/", source="the message has")
    assert str(caught.value) == (
        f"image 2: the message has image uri 's3://agent-media/other/sha256/{SHA}', which is "
        f"not in the runner's media store; its images are '{STORE}/sha256/{SHA}'"
    )


def test_image_uri_drops_one_trailing_slash() -> None:
    assert image_uri(STORE, SHA) == image_uri(STORE + "/", SHA) == f"{STORE}/sha256/{SHA}"
    assert image_uri("file:///", SHA) == f"file:///sha256/{SHA}"


@pytest.mark.parametrize(
    ("path", "encoded"),
    [
        ("/data/media", "/data/media"),
        ("/tmp/My Images", "/tmp/My%20Images"),
        ("/srv/caf\u00e9", "/srv/caf%C3%A9"),
        ("/srv/cafe\u0301", "/srv/cafe%CC%81"),
        ("/a/100%/b", "/a/100%25/b"),
        ("/~user/a-b_c.d", "/~user/a-b_c.d"),
        ("/a+b=c&d?e#f;g:h@i,j", "/a%2Bb%3Dc%26d%3Fe%23f%3Bg%3Ah%40i%2Cj"),
        ("/q'\"!$*()[]", "/q%27%22%21%24%2A%28%29%5B%5D"),
        ("/tab\there\n", "/tab%09here%0A"),
        ("/\U0001f600", "/%F0%9F%98%80"),
        ("/raw\udcff", "/raw%FF"),
        ("relative\\win", "relative%5Cwin"),
    ],
)
def test_encode_file_uri_path(path: str, encoded: str) -> None:
    assert encode_file_uri_path(path) == encoded


def test_encode_file_uri_path_refuses_a_lone_surrogate() -> None:
    with pytest.raises(ValueError, match=r"^path '/a\\ud800' is not encodable as UTF-8: "):
        encode_file_uri_path("/a\ud800")


@settings(max_examples=100, deadline=None)
@given(st.text())
def test_encode_file_uri_path_is_quote_with_only_slash_safe(path: str) -> None:
    assert encode_file_uri_path(path) == urllib.parse.quote(path, safe="/")
    assert urllib.parse.unquote_to_bytes(encode_file_uri_path(path)) == path.encode()


@pytest.mark.parametrize(
    ("root", "store_uri"),
    [
        ("/", "file:///"),
        ("/data/media", "file:///data/media"),
        ("/data/media/", "file:///data/media"),
        ("/data//media/./x/..", "file:///data/media"),
        ("/..", "file:///"),
        ("//srv", "file:///srv"),  # every leading slash collapses to one, two included
        ("///srv", "file:///srv"),
        ("//", "file:///"),
        ("////srv//a/", "file:///srv/a"),
        ("/home/me/My Images", "file:///home/me/My%20Images"),
        ("/m\u00e9dia/~x/50%", "file:///m%C3%A9dia/~x/50%25"),
    ],
)
def test_local_directory_store_uri(root: str, store_uri: str) -> None:
    assert local_directory_store_uri(root) == store_uri
    assert image_uri(store_uri, SHA) == f"{store_uri.removesuffix('/')}/sha256/{SHA}"


def test_local_directory_image_uri_under_the_file_system_root() -> None:
    assert image_uri(local_directory_store_uri("/"), SHA) == f"file:///sha256/{SHA}"


@pytest.mark.parametrize(
    ("root", "message"),
    [
        ("", "root must be an absolute path, not ''"),
        ("media", "root must be an absolute path, not 'media'"),
        ("./media", "root must be an absolute path, not './media'"),
        ("~/media", "root must be an absolute path, not '~/media'"),
        ("/a\x00b", "root '/a\\x00b' holds a NUL character"),
    ],
)
def test_local_directory_root_refuses_relative_roots(root: str, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        local_directory_root(root)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        local_directory_store_uri(root)


@settings(max_examples=100, deadline=None)
@given(st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=30))
def test_local_directory_uri_is_the_absolute_path_as_text(tail: str) -> None:
    root = "/" + tail
    # os.path.abspath keeps exactly two leading slashes; the store collapses them to one.
    expected = "/" + os.path.abspath(root).lstrip("/")
    assert local_directory_root(root) == expected
    uri = local_directory_store_uri(root)
    assert uri.startswith("file://")
    assert urllib.parse.unquote_to_bytes(uri.removeprefix("file://")) == expected.encode()


# collect_turn_images


@dataclass(frozen=True)
class FakeTurn:
    """A turn as ``collect_turn_images`` reads it; a frozen dataclass like the port's context."""

    messages: tuple[AgentMessage, ...] = ()
    tool_calls: Mapping[str, AgentToolCall] = field(default_factory=dict)


def _image(number: int) -> AgentImageReference:
    sha256 = f"{number:064x}"
    return reference(uri=f"{STORE}/sha256/{sha256}", sha256=sha256)


def _message(sequence: int, *images: AgentImageReference) -> AgentMessage:
    role = MessageRole.USER if sequence % 2 else MessageRole.TOOL
    return AgentMessage(
        sequence=sequence, turn_id="turn-1", role=role, framework_item="{}", images=images
    )


def _call(call_id: str, order: int, *images: AgentImageReference) -> AgentToolCall:
    return AgentToolCall(
        tool_call_id=call_id,
        tool_name="screenshot",
        arguments="{}",
        turn_id="turn-1",
        effect=ToolEffect.READ,
        requires_approval=False,
        status=ToolCallStatus.SUCCEEDED,
        deferral_order=order,
        images=images,
    )


@pytest.mark.parametrize(
    ("turn", "numbers"),
    [
        (FakeTurn(), []),
        (FakeTurn(messages=(_message(1), _message(2))), []),
        (FakeTurn(messages=(_message(1, _image(1), _image(2)), _message(2, _image(3)))), [1, 2, 3]),
        # Deduplicated by sha256 at its first reference, even within one message.
        (FakeTurn(messages=(_message(1, _image(2), _image(1), _image(2)), _message(3, _image(1)))), [2, 1]),
        # The same image from another store is the same image.
        (FakeTurn(messages=(_message(1, _image(1), attrs.evolve(_image(1), uri=f"file:///m/sha256/{1:064x}")),)), [1]),
        # Messages first, then the records in the model's order, not the mapping's.
        (
            FakeTurn(
                messages=(_message(1, _image(5)), _message(2, _image(4))),
                tool_calls={"c2": _call("c2", 1, _image(3), _image(4)), "c1": _call("c1", 0, _image(2))},
            ),
            [5, 4, 2, 3],
        ),
        (FakeTurn(tool_calls={"c1": _call("c1", 0, _image(7), _image(7))}), [7]),
    ],
    ids=["empty", "no images", "in order", "deduplicated", "another store", "records", "one record"],
)  # fmt: skip
def test_collect_turn_images(turn: FakeTurn, numbers: list[int]) -> None:
    collected = collect_turn_images(turn)
    assert isinstance(collected, tuple)
    assert [int(image.sha256, 16) for image in collected] == numbers
