"""The demo's Spark job and its recovery step, in process on the shared Ray and Spark sessions: the failure-free
per-user counts, then the same job with its aggregate island killed once mid-run giving equal counts."""
from __future__ import annotations

import pytest

from atoll import Materializer
from atoll.demo import USERS, recovery_job, spark_job

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
