"""Shared fixtures: a fresh local materializer per test that must end with every graph stopped."""
from __future__ import annotations

import pytest

from atoll import Materializer
from atoll.testkit import assert_all_stages_stopped


@pytest.fixture
def mat():
    m = Materializer.local()
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()
