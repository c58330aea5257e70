"""LocalDirectoryMediaStore: image files in a directory on one machine ("Images", "Local directory").

An image's file is ``<root>/sha256/<sha256>`` and its ``uri`` is
``file://<encoded root>/sha256/<sha256>``; ``dex_agents.domain.images`` makes both from
the same root text, so they always agree. Every path under the root is opened
relative to an open directory without following symbolic links, and the file
system work runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import posixpath
import stat
from typing import Final

from dex_agents.adapters.media.local_temporaries import (
    create_temporary,
    sweep_stale_temporaries,
)
from dex_agents.adapters.media.stored_bytes import checked_stored_image
from dex_agents.domain.errors import MediaStoreError
from dex_agents.domain.images import (
    AgentImageReference,
    build_image_reference,
    image_bytes,
    local_directory_root,
    local_directory_store_uri,
    require_short_image_uris,
    require_store_image_reference,
)

__all__ = ["LocalDirectoryMediaStore"]

_SHA256_DIRECTORY: Final = "sha256"
_DIRECTORY_MODE: Final = 0o700
_FILE_MODE: Final = 0o600
_READ_CHUNK: Final = 1 << 20

# getattr keeps the module importable where these flags do not exist; the store
# itself refuses such a platform when it is built.
_O_DIRECTORY: Final[int] = getattr(os, "O_DIRECTORY", 0)
_O_NOFOLLOW: Final[int] = getattr(os, "O_NOFOLLOW", 0)
_O_NONBLOCK: Final[int] = getattr(os, "O_NONBLOCK", 0)
_O_CLOEXEC: Final[int] = getattr(os, "O_CLOEXEC", 0)
_DIRECTORY_FLAGS: Final = os.O_RDONLY | _O_DIRECTORY | _O_CLOEXEC
# O_NONBLOCK so that a FIFO put in place of an image cannot block the open.
_READ_FLAGS: Final = os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC
_CREATE_FLAGS: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC


def _supports_posix_file_system() -> bool:
    relative = {os.open, os.stat, os.mkdir, os.rename, os.unlink}
    return (
        relative <= os.supports_dir_fd
        and os.stat in os.supports_follow_symlinks
        and all((_O_DIRECTORY, _O_NOFOLLOW, _O_NONBLOCK))
        and hasattr(os, "fchmod")
    )


class LocalDirectoryMediaStore:
    """A ``MediaStore`` that keeps images as files under ``root`` on one machine.

    For a client and Workers that share a file system; use ``S3MediaStore`` across
    machines. ``root`` must be an absolute path (``ValueError`` otherwise); it is made
    absolute as text, without resolving symbolic links or normalizing Unicode.
    ``put_image`` writes ``<root>/sha256/<sha256>`` through a temporary file in the
    same directory and a rename, creates directories with mode ``0700`` and files
    with ``0600``, and syncs the file, the ``sha256`` directory, the root, and the
    root's parent before it returns. It refuses a symbolic link, a special file, or
    an image file with more than one hard link under the root with
    ``MediaStoreError``. Deleting a session deletes no file. Its first put removes the
    temporary files that puts killed before their rename left, once they are an hour
    old and no live writer holds them (``local_temporaries.py``).
    """

    def __init__(self, root: str | os.PathLike[str]) -> None:
        text = os.fspath(root)
        if not isinstance(text, str):
            raise TypeError(f"root must be a str path, not {type(text).__name__}")
        self._root = local_directory_root(text)
        self._swept = False
        self._store_uri = local_directory_store_uri(self._root)
        require_short_image_uris(self._store_uri)
        if not _supports_posix_file_system():
            raise MediaStoreError(
                "LocalDirectoryMediaStore needs a POSIX file system: this platform cannot "
                "open files relative to a directory without following symbolic links"
            )

    @property
    def root(self) -> str:
        """The absolute root directory, as text."""
        return self._root

    @property
    def store_uri(self) -> str:
        """``file://`` and the percent-encoded root; every reference's ``uri`` starts with it."""
        return self._store_uri

    def __repr__(self) -> str:
        return f"LocalDirectoryMediaStore({self._root!r})"

    async def put_image(self, data: bytes) -> AgentImageReference:
        """Store the image as ``<root>/sha256/<sha256>`` and return its reference.

        Storing bytes that are already there succeeds. Raise ``ImageValidationError``
        for bytes that are not a supported image and ``MediaStoreError`` for a failed
        write or a refused path.
        """
        return await asyncio.to_thread(self._put, image_bytes(data))

    async def get_image(self, reference: AgentImageReference) -> bytes:
        """The verified bytes of a reference this store made.

        Raise ``ImageValidationError`` for an invalid reference, and ``MediaStoreError``
        for one of another store, a missing or refused file, or bytes that do not
        match the reference.
        """
        require_store_image_reference(reference, self._store_uri)
        return await asyncio.to_thread(self._get, reference)

    def _image_path(self, sha256: str) -> str:
        return posixpath.join(self._root, _SHA256_DIRECTORY, sha256)

    def _put(self, data: bytes) -> AgentImageReference:
        reference = build_image_reference(data, self._store_uri)
        path = self._image_path(reference.sha256)
        try:
            with contextlib.ExitStack() as fds:
                parent_fd, root_fd = self._open_root()
                fds.callback(os.close, parent_fd)
                fds.callback(os.close, root_fd)
                directory = posixpath.join(self._root, _SHA256_DIRECTORY)
                sha_fd = _open_directory(root_fd, _SHA256_DIRECTORY, directory, create=True)
                fds.callback(os.close, sha_fd)
                if not _holds(sha_fd, reference.sha256, path, data):
                    _write(sha_fd, reference.sha256, data)
                if not self._swept:
                    # Once a store: what a put killed before its rename left behind.
                    self._swept = True
                    sweep_stale_temporaries(sha_fd)
                # Even when the file was already there: its writer may not have synced yet.
                for fd in (sha_fd, root_fd, parent_fd):
                    os.fsync(fd)
        except OSError as error:
            raise MediaStoreError(f"could not store image {path}: {error}") from error
        return reference

    def _open_root(self) -> tuple[int, int]:
        """Open (creating as needed) the root's parent and the root: (parent fd, root fd).

        The root and the directories above it are the user's, so they may be links.
        """
        if self._root == "/":
            parent = os.open("/", _DIRECTORY_FLAGS)
            return parent, os.dup(parent)
        parent = _open_user_directory(posixpath.dirname(self._root))
        try:
            root = _open_directory(
                parent, posixpath.basename(self._root), self._root, create=True, follow=True
            )
        except BaseException:
            os.close(parent)
            raise
        return parent, root

    def _get(self, reference: AgentImageReference) -> bytes:
        path = self._image_path(reference.sha256)
        missing = MediaStoreError(f"image {reference.uri!r} is not in this media store: no {path}")
        try:
            with contextlib.ExitStack() as fds:
                try:
                    root_fd = os.open(self._root, _DIRECTORY_FLAGS)
                except FileNotFoundError:
                    raise missing from None
                fds.callback(os.close, root_fd)
                directory = posixpath.join(self._root, _SHA256_DIRECTORY)
                try:
                    sha_fd = _open_directory(root_fd, _SHA256_DIRECTORY, directory, create=False)
                except FileNotFoundError:
                    raise missing from None
                fds.callback(os.close, sha_fd)
                image_fd = _open_image_file(sha_fd, reference.sha256, path)
                if image_fd is None:
                    raise missing
                fds.callback(os.close, image_fd)
                size = os.fstat(image_fd).st_size
                if size != reference.size_bytes:
                    raise MediaStoreError(
                        f"image file {path} is {size} bytes, but the reference's "
                        f"size_bytes is {reference.size_bytes}"
                    )
                data = _read_at_most(image_fd, reference.size_bytes + 1)
        except OSError as error:
            raise MediaStoreError(f"could not read image {path}: {error}") from error
        return checked_stored_image(data, reference, f"image file {path}")


def _open_user_directory(path: str) -> int:
    """Open the absolute directory ``path`` above the root, creating it and any missing
    directory above it.

    Opened by its path, not one directory at a time from ``/``: resolving a path needs
    only search permission on the directories above it, where opening each of them
    needs read permission, which a directory such as a home of mode 0711 does not give.
    """
    try:
        return os.open(path, _DIRECTORY_FLAGS)
    except FileNotFoundError:
        if path == "/":
            raise
    above = _open_user_directory(posixpath.dirname(path))
    try:
        return _open_directory(above, posixpath.basename(path), path, create=True, follow=True)
    finally:
        os.close(above)


def _open_directory(
    dir_fd: int, name: str, path: str, *, create: bool, follow: bool = False
) -> int:
    """Open the directory ``name`` in ``dir_fd``, creating it with mode 0700 if asked."""
    flags = _DIRECTORY_FLAGS if follow else _DIRECTORY_FLAGS | _O_NOFOLLOW
    try:
        return _open_checked(dir_fd, name, path, flags)
    except FileNotFoundError:
        if not create:
            raise
    try:
        os.mkdir(name, _DIRECTORY_MODE, dir_fd=dir_fd)
    except FileExistsError:
        # Another put created it first; its parent sync is its creator's.
        return _open_checked(dir_fd, name, path, flags)
    child = _open_checked(dir_fd, name, path, flags)
    try:
        os.fchmod(child, _DIRECTORY_MODE)  # the umask may have taken bits away
        os.fsync(dir_fd)
    except BaseException:
        os.close(child)
        raise
    return child


def _open_checked(dir_fd: int, name: str, path: str, flags: int) -> int:
    """``os.open`` relative to ``dir_fd``, naming a refused symbolic link or non-directory."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as error:
        if not flags & _O_NOFOLLOW:
            raise  # a path the user chose, such as the root: its own error says enough
        try:
            status = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
        except OSError:
            raise error from None
        _refuse_special(status, path, expect_directory=bool(flags & _O_DIRECTORY))
        raise


def _refuse_special(status: os.stat_result, path: str, *, expect_directory: bool) -> None:
    if stat.S_ISLNK(status.st_mode):
        raise MediaStoreError(
            f"{path} is a symbolic link; LocalDirectoryMediaStore follows no symbolic link "
            "under its root"
        )
    if expect_directory and not stat.S_ISDIR(status.st_mode):
        raise MediaStoreError(f"{path} is not a directory")
    if not expect_directory and not stat.S_ISREG(status.st_mode):
        raise MediaStoreError(f"{path} is not a regular file")


def _open_image_file(sha_fd: int, name: str, path: str) -> int | None:
    """Open an image file for reading, or ``None`` when there is none."""
    try:
        # Look before opening, so that a device or socket is never opened.
        _require_image_file(os.stat(name, dir_fd=sha_fd, follow_symlinks=False), path)
        fd = _open_checked(sha_fd, name, path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    try:
        # Check again what was opened: the name may have been replaced in between.
        _require_image_file(os.fstat(fd), path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _require_image_file(status: os.stat_result, path: str) -> None:
    _refuse_special(status, path, expect_directory=False)
    if status.st_nlink > 1:
        raise MediaStoreError(
            f"image file {path} has {status.st_nlink} hard links; an image file must have one"
        )


def _holds(sha_fd: int, name: str, path: str, data: bytes) -> bool:
    """Whether the image file already holds exactly ``data``."""
    fd = _open_image_file(sha_fd, name, path)
    if fd is None:
        return False
    try:
        if os.fstat(fd).st_size != len(data):
            return False
        return _read_at_most(fd, len(data) + 1) == data
    finally:
        os.close(fd)


def _write(sha_fd: int, name: str, data: bytes) -> None:
    """Write ``data`` to a synced temporary file and rename it to ``name``.

    The temporary file stays open, and locked, until it is renamed: a sweep takes
    only the unlocked files of writers that ended (``local_temporaries.py``)."""
    temporary, fd = create_temporary(sha_fd, name, _CREATE_FLAGS, _FILE_MODE)
    try:
        try:
            os.fchmod(fd, _FILE_MODE)  # the umask may have taken bits away
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
            os.rename(temporary, name, src_dir_fd=sha_fd, dst_dir_fd=sha_fd)
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=sha_fd)
        raise


def _read_at_most(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    remaining = limit
    while remaining > 0:
        chunk = os.read(fd, min(remaining, _READ_CHUNK))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
