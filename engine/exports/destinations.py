"""Where a bulk export writes: a folder, or an S3-compatible bucket (`s3://bucket/prefix`).

Both hold one object per run, named by its run id, and the export's state object (`_export.json`), which
is what makes a bulk export resumable. A folder's files are written to a temporary name and renamed, so a
crash leaves no half file under a run's name; the export that resumes removes the temporary one it left.
S3 takes boto3's standard configuration: credentials from the environment or the instance, and
`AWS_ENDPOINT_URL_S3` (or `AWS_ENDPOINT_URL`) for an S3-compatible store other than AWS.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit


class DestinationError(Exception):
    """The destination cannot be used (a malformed URI, a missing bucket, no permission)."""


class Destination(Protocol):
    def exists(self, name: str) -> bool: ...

    def read(self, name: str) -> bytes | None: ...

    def write(self, name: str, data: bytes) -> None: ...

    def describe(self, name: str) -> str:
        """Where `name` is, for people."""
        ...


PARTIAL_PREFIX = ".partial-"


class Folder:
    def __init__(self, root: Path) -> None:
        try:
            root.mkdir(parents=True, exist_ok=True)
            # What an export killed mid-write left (one export writes to a folder at a time).
            for left in root.glob(f"{PARTIAL_PREFIX}*"):
                left.unlink(missing_ok=True)
        except OSError as e:
            raise DestinationError(f"cannot use folder {root}: {e}") from None
        self.root = root

    def exists(self, name: str) -> bool:
        return (self.root / name).exists()

    def read(self, name: str) -> bytes | None:
        try:
            return (self.root / name).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, name: str, data: bytes) -> None:
        fd, temporary = tempfile.mkstemp(dir=self.root, prefix=PARTIAL_PREFIX)
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(temporary, self.root / name)
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise

    def describe(self, name: str) -> str:
        return str(self.root / name)


class Bucket:
    def __init__(self, bucket: str, prefix: str) -> None:
        import boto3
        from botocore.exceptions import BotoCoreError, ClientError

        self._errors = (BotoCoreError, ClientError)
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.client = boto3.client("s3")
        try:
            self.client.head_bucket(Bucket=bucket)
        except self._errors as e:
            raise DestinationError(f"cannot use bucket {bucket!r}: {e}") from None

    def _key(self, name: str) -> str:
        return f"{self.prefix}/{name}" if self.prefix else name

    def exists(self, name: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(name))
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def read(self, name: str) -> bytes | None:
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(name))["Body"].read()
        except self.client.exceptions.NoSuchKey:
            return None

    def write(self, name: str, data: bytes) -> None:
        # One PUT: S3 makes an object visible whole or not at all.
        self.client.put_object(
            Bucket=self.bucket, Key=self._key(name), Body=data, ContentType="application/json"
        )

    def describe(self, name: str) -> str:
        return f"s3://{self.bucket}/{self._key(name)}"


def open_destination(where: str) -> Destination:
    """A folder path, or `s3://bucket[/prefix]`."""
    if where.startswith("s3://"):
        parts = urlsplit(where)
        if not parts.netloc:
            raise DestinationError(f"{where!r} names no bucket: use s3://bucket/prefix")
        return Bucket(parts.netloc, parts.path)
    if "://" in where:
        raise DestinationError(f"{where!r}: a destination is a folder or s3://bucket/prefix")
    return Folder(Path(where))
