"""HTTP health of the web app, as a load balancer or a Kubernetes probe asks it: `/healthz` answers while the
process serves at all; `/readyz` only while the database answers, its schema is current and Redis answers
(where the web app uses it), with a small JSON body saying which check failed."""

from __future__ import annotations

import base64
import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support import servers


def get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


MASTER_KEY = base64.b64encode(os.urandom(32)).decode()


def web(tmp: Path, **env: str) -> tuple[servers.Running, str]:
    """`perdura web` alone with this environment (no migrate, no other process): (it, its base URL)."""
    environment = servers._base_env(tmp)
    environment.update(PERDURA_SECRET_KEY=secrets.token_urlsafe(40), PERDURA_MASTER_KEY=MASTER_KEY)
    environment.update(env)
    running = servers.Running(address="", env=environment, database_url=env.get("PERDURA_DATABASE_URL", ""))
    port = servers.free_port()
    proc = running.spawn("web", ["web", "--ip", "127.0.0.1", "--port", str(port), "--workers", "1"])
    try:
        servers.wait_for_port(port, proc, running.logs["web"])
    except BaseException:
        running.stop()
        raise
    return running, f"http://127.0.0.1:{port}"


def test_dev_web_port_is_alive_and_ready(tmp_path):
    port = servers.free_port()
    with servers.dev_server(tmp_path, extra=("--ui-port", str(port))):
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:  # the web thread starts a moment after the gRPC port
            try:
                assert get(base + "/healthz") == (200, {"status": "ok"})
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        # `perdura dev` uses no Redis: nothing to check there.
        assert get(base + "/readyz") == (
            200,
            {"status": "ok", "checks": {"database": "ok", "migrations": "ok"}},
        )


def test_production_web_is_ready_only_once_migrated(tmp_path):
    with servers.postgres_database() as url:
        running, base = web(tmp_path, PERDURA_DATABASE_URL=url, PERDURA_REDIS_URL=servers.REDIS_URL)
        try:
            assert get(base + "/healthz") == (200, {"status": "ok"})
            status, body = get(base + "/readyz")
            assert status == 503, body
            assert body == {
                "status": "unavailable",
                "checks": {"database": "ok", "migrations": "pending", "redis": "ok"},
            }
            subprocess.run(
                [servers.PERDURA, "migrate"],
                env=running.env,
                check=True,
                capture_output=True,
                cwd=servers.ROOT,
            )
            assert get(base + "/readyz") == (
                200,
                {"status": "ok", "checks": {"database": "ok", "migrations": "ok", "redis": "ok"}},
            )
        finally:
            running.stop()


@pytest.mark.parametrize("lost", ["database", "redis"])
def test_production_web_is_alive_but_not_ready_without_its_database_or_redis(tmp_path, lost):
    nobody = f"127.0.0.1:{servers.free_port()}"  # a port nothing listens on
    with servers.postgres_database() as url:
        env = {
            "PERDURA_DATABASE_URL": url,
            "PERDURA_REDIS_URL": servers.REDIS_URL,
            "PERDURA_MASTER_KEY": MASTER_KEY,
        }
        subprocess.run(
            [servers.PERDURA, "migrate"],
            env={**servers._base_env(tmp_path), **env},
            check=True,
            capture_output=True,
            cwd=servers.ROOT,
        )
        if lost == "database":
            env["PERDURA_DATABASE_URL"] = f"postgres://postgres@{nobody}/perdura"
        else:
            env["PERDURA_REDIS_URL"] = f"redis://{nobody}/0"
        running, base = web(tmp_path, **env)
        try:
            assert get(base + "/healthz") == (200, {"status": "ok"})
            status, body = get(base + "/readyz")
            assert status == 503, body
            assert body["status"] == "unavailable"
            assert body["checks"][lost] == "unreachable"
            healthy = {"database", "redis"} - {lost}
            assert all(body["checks"][name] == "ok" for name in healthy), body
            # The body names what failed, never the address or credentials it failed with.
            assert nobody.split(":")[1] not in json.dumps(body)
        finally:
            running.stop()
