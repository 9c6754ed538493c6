"""One Ray session and one Spark-on-Ray session for all the interop tests.

Starting Ray takes ~3 s and a RayDP Spark session ~10-15 s, so both are shared by every test in this directory.
The fixtures are package-scoped (this directory is a package): they are torn down when the last interop test has
run, before other test directories (tests/ray starts its own Ray) run in the same pytest process.
"""
from __future__ import annotations

import os

os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a stray ~/.ray/auth_token must not switch on token auth

import pytest  # noqa: E402
import ray  # noqa: E402

#: Small and quiet: the machine has 2 cores; Spark gets one executor with one core.
SPARK_TEST_CONFIGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.driver.memory": "512m",
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
}


#: A small object store, so that test_spark_on_demand can stream a DataFrame of 4x its size through it.
OBJECT_STORE_BYTES = 100 * 1024 * 1024


@pytest.fixture(scope="package")
def ray_session():
    """Ray, started here (2 CPUs, a 100 MiB object store, no dashboard) unless something already started it (the run's
    shared session is shut down first: these tests need the small store)."""
    from ray_start import release_shared_ray

    release_shared_ray()
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, object_store_memory=OBJECT_STORE_BYTES)
    yield
    if started:
        ray.shutdown()


@pytest.fixture(scope="module", params=["local", "ray"])
def smat(request, ray_session):
    """Each module's tests on both materializers (one of each per module, shut down after it)."""
    from atoll import Materializer

    m = Materializer.local() if request.param == "local" else Materializer.ray(start_timeout=60)
    yield m
    m.shutdown()


@pytest.fixture(scope="package")
def spark(ray_session):
    """The shared Spark-on-Ray session (one executor, one core), stopped when the interop tests end."""
    from atoll.interop import spark_session

    session = spark_session.session(app_name="atoll-interop-tests", num_executors=1, executor_cores=1,
                                    executor_memory="512m", configs=SPARK_TEST_CONFIGS)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    spark_session.stop()


#: Every Spark type the Spark edge supports, as a DDL string; the first column orders rows.
ALL_TYPES_DDL = ("id int not null, i int, l bigint, f float, d double, s string, b boolean, bin binary, "
                 "dec decimal(20,4), dt date, ts timestamp, ntz timestamp_ntz, arr array<bigint>, "
                 "st struct<x: bigint, y: string>, m map<string, bigint>, "
                 "nested array<struct<k: string, v: map<string, array<int>>>>")


def all_types_rows():
    """Rows for ALL_TYPES_DDL: ordinary values, extremes, empty containers, and a row of nulls."""
    import datetime as dt
    import decimal

    utc = dt.timezone.utc
    return [
        (1, 7, 2 ** 62 + 1, 0.5, 1.25, "héllo", True, b"\x00\x01\xff", decimal.Decimal("12345.6789"),
         dt.date(2024, 2, 29), dt.datetime(2024, 1, 2, 3, 4, 5, 123456, tzinfo=utc), dt.datetime(2024, 1, 2, 3, 4, 5),
         [1, None, 3], (1, "a"), {"k": 1, "z": None}, [("q", {"w": [1, None]}), None]),
        (2, -2 ** 31, -2 ** 63, -1.5, -0.0, "", False, b"", decimal.Decimal("-0.0001"),
         dt.date(1970, 1, 1), dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=utc), dt.datetime(1, 1, 1),
         [], (None, None), {}, []),
        (3, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None),
    ]


@pytest.fixture(scope="package")
def all_types_df(spark):
    """A DataFrame of every supported type, in 2 partitions."""
    return spark.createDataFrame(all_types_rows(), ALL_TYPES_DDL).repartition(2, "id")


def fresh_python(code: str) -> str:
    """What ``code`` prints when run by a new interpreter of this environment (which modules a call imports can
    only be seen in a process that had not imported them yet); fails the test if it exits with an error."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout
