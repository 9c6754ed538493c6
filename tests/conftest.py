"""Shared fixtures: a fresh local materializer per test that must end with every graph stopped; the shared local
Ray shut down at the end of the run."""
from __future__ import annotations

import os

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


@pytest.fixture(scope="session", autouse=True)
def _shared_ray_shut_down_at_the_end():
    """The run's shared local Ray (``ray_start.shared_local_ray``) is shut down when the run ends."""
    yield
    from ray_start import release_shared_ray

    release_shared_ray()


@pytest.fixture(scope="module", autouse=True)
def _shared_ray_kept_within_a_directory(request):
    """The shared local Ray serves the modules of one test directory: it is shut down before a module of another
    directory runs (set up before the module's own fixtures, torn down after them)."""
    import ray_start

    directory = os.path.dirname(str(request.path))
    ray_start.module_starts(directory)
    yield
    ray_start.module_ended(directory)
