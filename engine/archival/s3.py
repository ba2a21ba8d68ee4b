"""The S3-compatible store archives go to, through boto3's standard configuration.

The endpoint and credentials come from the environment as boto3 reads them (`AWS_ENDPOINT_URL_S3` or
`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_DEFAULT_REGION`, or an instance
role), so any S3-compatible store works. One client per process (boto3 clients are thread-safe), with
short timeouts and few retries: a store that is down fails the archive step quickly, and the step's row
backs off (engine/shards/parking.py) rather than holding its shard's pass.
"""

from __future__ import annotations

import threading
from typing import Any

POOL_CONNECTIONS = 32
"""Connections the client keeps to the store: one for each archive store thread. boto3 keeps 10, and
a thread beyond them opened a connection for each request and dropped it."""

_client: Any = None
_lock = threading.Lock()


class StoreError(Exception):
    """The store refused or could not be reached (a missing bucket, no permission, no answer)."""


def client() -> Any:
    global _client
    if _client is None:
        with _lock:
            if _client is None:
                import boto3
                from botocore.config import Config

                _client = boto3.client(
                    "s3",
                    config=Config(
                        connect_timeout=5,
                        read_timeout=30,
                        retries={"max_attempts": 2, "mode": "standard"},
                        max_pool_connections=POOL_CONNECTIONS,
                        # Every object is read back and compared whole (engine/archival/history.py),
                        # so boto3's own CRC32 on each PUT and GET adds nothing; with the parameter
                        # checks, they were 15% of an archive's client CPU (measured on radosgw).
                        parameter_validation=False,
                        request_checksum_calculation="when_required",
                        response_checksum_validation="when_required",
                    ),
                )
    return _client


def _errors() -> tuple[type[Exception], ...]:
    from botocore.exceptions import BotoCoreError, ClientError

    return (BotoCoreError, ClientError)


def put(bucket: str, key: str, data: bytes) -> None:
    """Write one object whole (S3 shows an object whole or not at all).

    Raises:
        StoreError: the store refused or did not answer.
    """
    try:
        client().put_object(Bucket=bucket, Key=key, Body=data, ContentType="application/octet-stream")
    except _errors() as e:
        raise StoreError(f"cannot write s3://{bucket}/{key}: {e}") from None


def get(bucket: str, key: str) -> bytes | None:
    """The object's bytes, or None if there is no such object.

    Raises:
        StoreError: the store refused or did not answer.
    """
    from botocore.exceptions import ClientError

    try:
        return bytes(client().get_object(Bucket=bucket, Key=key)["Body"].read())
    except ClientError as e:
        if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
            return None
        raise StoreError(f"cannot read s3://{bucket}/{key}: {e}") from None
    except _errors() as e:
        raise StoreError(f"cannot read s3://{bucket}/{key}: {e}") from None
