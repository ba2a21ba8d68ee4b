"""An S3 stand-in for tests: moto's server on a free loopback port, and the environment boto3 needs to
reach it (boto3's standard variables, as an installation would set them for its S3-compatible store)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

from tests.support import servers


@dataclass(frozen=True)
class S3:
    endpoint: str

    @property
    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self):  # type: ignore[no-untyped-def]
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id="test",
            aws_secret_access_key="test",
            region_name="us-east-1",
        )


@contextlib.contextmanager
def moto_s3() -> Iterator[S3]:
    from moto.server import ThreadedMotoServer

    port = servers.free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield S3(endpoint=f"http://127.0.0.1:{port}")
    finally:
        server.stop()
