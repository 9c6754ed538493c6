"""GraphDSL conformance fixtures: every ``mat`` test runs on both materializers.

``mat`` is parametrized ``local`` / ``ray``: ``Materializer.local()``, or ``Materializer.ray()`` on the test
run's shared local Ray session (``ray_start.shared_local_ray``: started when the first ``ray`` test needs it,
kept for this directory's next modules; pytest groups a module's tests by this parameter). After every test, each graph the test
started must have stopped. ``local_mat`` is a fresh local materializer, for the cases that are only
run in-process (the Ray-parametrized set is kept small: a Ray graph takes most of a second to start).
"""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

from atoll import Materializer  # noqa: E402
from atoll.testkit import assert_all_stages_stopped  # noqa: E402
from ray_start import shared_local_ray  # noqa: E402


@pytest.fixture(scope="module", params=["local", "ray"])
def module_mat(request):
    if request.param == "local":
        m = Materializer.local()
        yield m
        m.shutdown()
        return
    shared_local_ray()
    m = Materializer.ray(start_timeout=30)
    try:
        yield m
    finally:
        m.shutdown()


@pytest.fixture
def mat(module_mat):
    """The module's materializer (local or Ray); every graph a test starts must have ended at teardown."""
    yield module_mat
    assert_all_stages_stopped(module_mat, timeout=15.0)


@pytest.fixture
def local_mat():
    m = Materializer.local()
    yield m
    try:
        assert_all_stages_stopped(m, timeout=5.0)
    finally:
        m.shutdown()
