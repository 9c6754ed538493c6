"""Ray fixtures: the test run's shared local Ray session (``ray_start.shared_local_ray``), and a check that no island
actor outlives a test."""
from __future__ import annotations

import os
import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from atoll import Materializer  # noqa: E402
from atoll.testkit import assert_all_stages_stopped  # noqa: E402
from ray_start import shared_local_ray  # noqa: E402


@pytest.fixture(scope="module")
def ray_session():
    """The shared local Ray (4 CPUs, a dashboard for the state API), up for this module; not shut down after it."""
    ctx = shared_local_ray()
    import ray_helpers

    ray_helpers.DASHBOARD = ctx.dashboard_url
    yield


@pytest.fixture(scope="module")
def ray_mat(ray_session):
    m = Materializer.ray(start_timeout=30)
    yield m
    m.shutdown()


@pytest.fixture
def rmat(ray_mat):
    """The module's Ray materializer; every graph a test starts must have ended at teardown."""
    yield ray_mat
    assert_all_stages_stopped(ray_mat, timeout=15.0)
