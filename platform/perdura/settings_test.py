"""Settings for the test process: in-process tests run on real Postgres (servers under test are subprocesses)."""

from __future__ import annotations

import base64
import os

import dj_database_url
import psycopg

from perdura.settings import *  # noqa: F403

_CANDIDATES = [
    os.environ.get("PERDURA_TEST_DATABASE_URL", ""),
    "postgres://postgres@127.0.0.1:5432/postgres",
    "postgres://perdura:perdura@127.0.0.1:5432/postgres",
]


def _admin_url() -> str:
    for url in filter(None, _CANDIDATES):
        try:
            with psycopg.connect(url, connect_timeout=3):
                return url
        except psycopg.Error:
            continue
    raise RuntimeError(
        "no reachable Postgres for the tests: run `make services` or set PERDURA_TEST_DATABASE_URL"
    )


DATABASES = {
    "default": {
        **dj_database_url.parse(_admin_url().rpartition("/")[0] + "/perdura_pytest"),
        # As the servers send their statements (the in-process tests run the same SQL).
        "OPTIONS": postgres_statement_options(),  # noqa: F405
        "TEST": {"NAME": f"test_perdura_pytest_{os.getpid()}"},
    }
}
os.environ.setdefault("PERDURA_MASTER_KEY", base64.b64encode(os.urandom(32)).decode())
# The web app's throttle counts stay in the test process (tests clear them).
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "throttle": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "throttle"},
}
# The console's live hints stay in the test process (no web server listens here; tests that need the
# Redis layer configure it: tests/integration/test_live_hints.py).
PERDURA_LIVE = "memory"
CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
# A fast password hasher in this process: the in-process tests sign up and log in hundreds of people, and
# PBKDF2's million rounds were two fifths of an integration worker's CPU. The servers the tests start run
# the real settings, and hash as in production.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
