"""``dex_agents.s3`` without its extra: ``ImportError`` naming ``dex-agents[s3]``."""

from __future__ import annotations

from tests.support.missing_extras import import_without


def test_importing_without_the_extra_names_it() -> None:
    assert import_without("aiobotocore", "dex_agents.s3") == (
        "ImportError dex_agents.s3 | dex_agents.s3 needs aiobotocore: install it with "
        'pip install "dex-agents[s3]" | ModuleNotFoundError'
    )
