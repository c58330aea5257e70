"""Fixtures of the S3 store tests: moto's threaded server on 127.0.0.1, one bucket per test.

The keys are moto's fixed loopback keys, not secrets; ``boto3`` (which moto needs
anyway) creates buckets and tampers with objects behind the store's back.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import Any

import boto3  # type: ignore[import-untyped]
import pytest
from moto.server import ThreadedMotoServer

from dex_agents.s3 import S3MediaStore

ACCESS_KEY_ID = "testing-access-key"
SECRET_ACCESS_KEY = "testing-secret-key-9f3a"
REGION = "us-east-1"

_buckets = itertools.count()


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_admin(moto_endpoint: str) -> Any:
    """A plain boto3 client of the moto server, for setting up and inspecting buckets."""
    return boto3.client(
        "s3",
        endpoint_url=moto_endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY_ID,
        aws_secret_access_key=SECRET_ACCESS_KEY,
    )


@pytest.fixture
def bucket(s3_admin: Any) -> str:
    name = f"media-{next(_buckets)}"
    s3_admin.create_bucket(Bucket=name)
    return name


def moto_store(endpoint: str, bucket: str, prefix: str = "sessions") -> S3MediaStore:
    return S3MediaStore(
        bucket,
        prefix,
        endpoint_url=endpoint,
        region_name=REGION,
        force_path_style=True,
        access_key_id=ACCESS_KEY_ID,
        secret_access_key=SECRET_ACCESS_KEY,
    )


@pytest.fixture
def s3_store(moto_endpoint: str, bucket: str) -> S3MediaStore:
    return moto_store(moto_endpoint, bucket)
