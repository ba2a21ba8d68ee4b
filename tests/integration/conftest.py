"""Shared fixtures of the integration tests."""

from __future__ import annotations

import pytest
from django.core.cache import caches


@pytest.fixture(autouse=True)
def _no_throttle_counts_from_other_tests():
    """Each test starts with the anonymous endpoints' throttle counts at zero. They live in this process's
    memory (settings_test.py), and an xdist worker runs many modules: sign-ups of earlier modules spent
    the 127.0.0.1 allowance of a later one that signs up without clearing it (a 429 one run in ten)."""
    caches["throttle"].clear()
