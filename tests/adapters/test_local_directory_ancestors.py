"""LocalDirectoryMediaStore under a directory its user may search but not read.

A home directory of mode 0711 (or a service's directory of 0311) lets its user
reach the directories below it by path, but not open it for reading. The store
runs in a child process with the permission bits in force: as root, without the
capabilities that bypass them (``setpriv``), since root reads every directory.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

PUT = """
import asyncio, sys
from dex_agents.adapters.media.local_directory import LocalDirectoryMediaStore
from tests.domain.images_support import png

async def main():
    store = LocalDirectoryMediaStore(sys.argv[1])
    reference = await store.put_image(png())
    assert await store.get_image(reference) == png()
    print(reference.sha256)

asyncio.run(main())
"""


def _without_permission_overrides() -> list[str]:
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("root reads every directory, and setpriv is not here to stop that")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search"]


@pytest.mark.skipif(sys.platform != "linux", reason="setpriv and the capabilities are Linux's")
def test_a_root_below_a_directory_its_user_cannot_read_takes_images(tmp_path: Path) -> None:
    # The store opened every directory from / down to the root, one at a time, and
    # opening one that its user may only search failed the put with Permission denied.
    outer = tmp_path / "outer"
    (outer / "inner").mkdir(parents=True)
    root = outer / "inner" / "media"  # missing: the put creates it
    outer.chmod(0o311)  # its owner may search and write it, not read it
    try:
        done = subprocess.run(
            [*_without_permission_overrides(), sys.executable, "-c", PUT, str(root)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        outer.chmod(0o700)
    assert done.returncode == 0, done.stderr
    sha256 = done.stdout.strip()
    assert os.listdir(root / "sha256") == [sha256]
