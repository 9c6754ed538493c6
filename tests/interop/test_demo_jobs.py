"""The demo's Spark job and its recovery step, in process on the shared Ray and Spark sessions: the failure-free
per-user counts, then the same job with its aggregate island killed once mid-run giving equal counts; and the
demo's graph with the model scored in the enrich island (``--model-actors 0``) giving the pool's windows."""
from __future__ import annotations

import pytest

from atoll import Keep, Materializer, Sink
from atoll.demo import USERS, click_events, recovery_job, spark_job, user_windows

N = 100_000


@pytest.mark.slow
def test_the_demo_job_and_its_recovery_after_a_kill_give_the_same_counts(spark, ray_session):
    mat = Materializer.ray(start_timeout=60)
    try:
        per_user = spark_job(mat, spark, N)
    finally:
        mat.shutdown()
    assert sum(per_user.values()) == N and len(per_user) == USERS
    assert recovery_job(spark, N, per_user) is True  # killed mid-run (not None), and the counts are equal


def test_the_model_scored_in_the_enrich_island_gives_the_pools_windows(spark, ray_session):
    mat = Materializer.ray(start_timeout=60)
    try:
        got = {}
        for actors in (2, 0):
            (pool, _stats), windows = user_windows(click_events(spark, 20_000), Sink.seq(), Keep.both,
                                                   model_actors=actors).run(mat)
            assert (pool is None) == (actors == 0)
            got[actors] = sorted((w["user_id"], w["window_start"], w["events"], w["purchases"], w["dwell_s"],
                                  w["propensity"]) for w in windows.result(120))
    finally:
        mat.shutdown()
    assert sum(row[2] for row in got[0]) == 20_000
    assert got[0] == got[2]
