"""The S3 protocol server of the archival tests, and the environment boto3 needs to reach it (boto3's
standard variables, as an installation would set them for its S3-compatible store).

Two tiers, chosen by PERDURA_TEST_S3:
- `moto` (the default): moto's server mode on a free loopback port, started per module (0.6 s). It
  accepts any credentials.
- `radosgw`: Ceph's radosgw from Debian's packages (infra/scripts/ceph-rgw-up.sh installs them when
  missing), one per test session: a single-node cluster on loopback with a memstore OSD, in a temp dir
  of its own, killed at the session's end. A real S3 server: SigV4 is enforced, so a wrong secret is
  refused. Starting it costs about 25 s; restarting radosgw alone (the store down, then back) 1 s.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support import servers

TIER_VARIABLE = "PERDURA_TEST_S3"
TIERS = ("moto", "radosgw")
RGW_UP = servers.ROOT / "infra" / "scripts" / "ceph-rgw-up.sh"


def tier() -> str:
    """The S3 server the archival tests run against: `moto` unless PERDURA_TEST_S3 says `radosgw`."""
    value = os.environ.get(TIER_VARIABLE, "") or "moto"
    if value not in TIERS:
        raise ValueError(f"{TIER_VARIABLE}={value!r}: expected one of {', '.join(TIERS)}")
    return value


@dataclass(frozen=True)
class S3:
    endpoint: str
    access_key: str = "test"
    secret_key: str = "test"

    @property
    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL_S3": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name="us-east-1",
        )

    def ensure_bucket(self, bucket: str) -> None:
        """Create the bucket, or keep it if this user made it already (the radosgw tier's one server
        outlives the modules that create their buckets)."""
        from botocore.exceptions import ClientError

        try:
            self.client().create_bucket(Bucket=bucket)
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") != "BucketAlreadyOwnedByYou":
                raise


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


class RestartableMoto(S3):
    """moto's server on a port of its own that a test can stop and start again (the store down, then
    back). Buckets and objects live in this process's moto backends, so they outlast a restart."""

    def __init__(self, port: int) -> None:
        super().__init__(endpoint=f"http://127.0.0.1:{port}")
        object.__setattr__(self, "_port", port)
        object.__setattr__(self, "_server", None)

    def start(self) -> None:
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=self._port, verbose=False)
        server.start()
        object.__setattr__(self, "_server", server)

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            object.__setattr__(self, "_server", None)


@contextlib.contextmanager
def restartable_moto_s3() -> Iterator[RestartableMoto]:
    """moto's server on a port reserved for it, that the test may stop and start (`stop`, `start`)."""
    running = RestartableMoto(servers.free_port())
    running.start()
    try:
        yield running
    finally:
        running.stop()


def _answers(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
        return True
    return False


def _gone(pid: int) -> bool:
    """The process has exited: no such process, or a zombie (the script daemonizes Ceph's processes, so
    they are not our children to reap; a container's first process may not reap them either)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return any(line.split()[1:2] == ["Z"] for line in status.splitlines() if line.startswith("State:"))


def _kill(pid: int, timeout: float = 15, sig: int = signal.SIGTERM) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    deadline = time.monotonic() + timeout
    while not _gone(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        time.sleep(0.05)


class Radosgw(S3):
    """Ceph's radosgw on a single-node cluster of its own (infra/scripts/ceph-rgw-up.sh). `stop` and
    `start` stop and start the radosgw daemon alone (the store down, then back): the monitor and the OSD
    keep the buckets and objects."""

    def __init__(self, directory: Path, port: int, access_key: str, secret_key: str) -> None:
        super().__init__(f"http://127.0.0.1:{port}", access_key, secret_key)
        object.__setattr__(self, "directory", directory)
        object.__setattr__(self, "port", port)
        object.__setattr__(self, "started_in", 0.0)
        object.__setattr__(self, "_restarted", None)
        object.__setattr__(self, "_daemon_stopped", False)

    @property
    def log(self) -> Path:
        return self.directory / "log" / "client.admin.log"

    def _pid(self) -> int | None:
        with contextlib.suppress(FileNotFoundError, ValueError):
            return int((self.directory / "run" / "client.admin.pid").read_text().strip())
        return None

    def stop(self) -> None:
        if self._restarted is not None:
            self._restarted.terminate()
            self._restarted.wait(timeout=15)
            object.__setattr__(self, "_restarted", None)
        elif not self._daemon_stopped and (pid := self._pid()) is not None:
            _kill(pid)  # the radosgw the script started, daemonized
            object.__setattr__(self, "_daemon_stopped", True)
        deadline = time.monotonic() + 15
        while _answers(self.port):
            if time.monotonic() > deadline:
                raise RuntimeError(f"radosgw still answers on {self.port} after it was stopped")
            time.sleep(0.05)

    def start(self) -> None:
        # In the foreground, as this process's child: stopped and reaped by `stop`.
        process = subprocess.Popen(
            ["radosgw", "-f", "-c", str(self.directory / "ceph.conf"), "-n", "client.admin"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        object.__setattr__(self, "_restarted", process)
        deadline = time.monotonic() + 60
        while not _answers(self.port):
            if process.poll() is not None:
                raise RuntimeError(f"radosgw exited with {process.returncode}; see {self.log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"radosgw did not answer on {self.port} within 60 s; see {self.log}")
            time.sleep(0.05)

    def stop_cluster(self) -> None:
        """radosgw, the OSD and the monitor, each waited for. The OSD and monitor are killed outright:
        their data is in RAM and thrown away (a clean OSD shutdown takes seconds)."""
        self.stop()
        for pidfile in sorted((self.directory / "run").glob("*.pid")):
            if pidfile.name == "client.admin.pid":
                continue  # radosgw: stopped above (a restarted one's pid may be stale)
            with contextlib.suppress(FileNotFoundError, ValueError):
                _kill(int(pidfile.read_text().strip()), sig=signal.SIGKILL)


@contextlib.contextmanager
def radosgw_s3() -> Iterator[Radosgw]:
    """A single-node Ceph cluster and its radosgw, on free loopback ports, in a temp dir of its own;
    stopped and removed at the end. Installs Ceph's Debian packages when missing (as root)."""
    directory = Path(tempfile.mkdtemp(prefix="perdura-rgw-"))
    port = servers.free_port()
    env = {
        **os.environ,
        "MON_V2_PORT": str(servers.free_port()),
        "MON_V1_PORT": str(servers.free_port()),
        "RGW_ACCESS_KEY": "perdura-test",
        "RGW_SECRET_KEY": f"perdura-secret-{os.urandom(8).hex()}",
        "MEMSTORE_BYTES": str(1 << 30),
    }
    running = Radosgw(directory, port, env["RGW_ACCESS_KEY"], env["RGW_SECRET_KEY"])
    began = time.monotonic()
    try:
        done = subprocess.run(
            ["bash", str(RGW_UP), str(directory), str(port)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{RGW_UP.name} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
            )
        object.__setattr__(running, "started_in", time.monotonic() - began)
        yield running
    finally:
        running.stop_cluster()
        shutil.rmtree(directory, ignore_errors=True)


@contextlib.contextmanager
def restartable_s3(request: Any) -> Iterator[RestartableMoto | Radosgw]:
    """The store of a module's archival tests, that a test may stop and start: a moto server of its own,
    or (PERDURA_TEST_S3=radosgw) the session's radosgw (the `radosgw` fixture, tests/conftest.py)."""
    if tier() == "radosgw":
        yield request.getfixturevalue("radosgw")
    else:
        with restartable_moto_s3() as running:
            yield running


@contextlib.contextmanager
def s3_store(request: Any) -> Iterator[S3]:
    """The store of a module's archival tests: a moto server of its own, or the session's radosgw."""
    if tier() == "radosgw":
        yield request.getfixturevalue("radosgw")
    else:
        with moto_s3() as running:
            yield running
