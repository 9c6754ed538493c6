"""atoll.interop.spark_session: one reusable Spark-on-Ray session, Java 17 options, the Java check."""
from __future__ import annotations

import os
import stat
import sys

import pytest

from atoll.interop import spark_session
from atoll.interop.errors import SparkSetupError
from atoll.interop.spark_session import JAVA17_OPTIONS, JAVA_OPTION_KEYS, check_java, java_options


def test_session_is_reused(spark):
    assert spark_session.session() is spark
    assert spark_session.session(app_name="another-name", num_executors=2) is spark
    assert spark_session.active_session() is spark


def test_java17_options_reach_driver_executors_and_app_master(spark):
    conf = spark.sparkContext.getConf()
    for key in JAVA_OPTION_KEYS:
        options = conf.get(key).split()
        for option in JAVA17_OPTIONS:
            assert option in options, (key, option)


def test_spark_python_workers_run_this_interpreter(spark):
    assert spark.sparkContext.pythonExec == sys.executable
    assert os.environ["PYSPARK_DRIVER_PYTHON"] == sys.executable
    ran_in = spark.sparkContext.parallelize([0], 1).map(lambda _: __import__("sys").executable).collect()
    assert ran_in == [sys.executable]


def test_session_validates_arguments():
    with pytest.raises(ValueError, match="num_executors"):
        spark_session.session(num_executors=0)
    with pytest.raises(ValueError, match="executor_cores"):
        spark_session.session(executor_cores=True)
    with pytest.raises(ValueError, match="app_name"):
        spark_session.session(app_name="")
    with pytest.raises(TypeError, match="configs"):
        spark_session.session(configs=[("a", "b")])


def test_java_options_put_the_users_last_without_repeats():
    merged = java_options("-Xss4m --add-opens=java.base/java.lang=ALL-UNNAMED")
    parts = merged.split()
    assert parts[-2:] == ["-Xss4m", "--add-opens=java.base/java.lang=ALL-UNNAMED"]
    assert parts.count("--add-opens=java.base/java.lang=ALL-UNNAMED") == 1
    assert set(JAVA17_OPTIONS) <= set(parts)
    assert java_options(None).split() == list(JAVA17_OPTIONS)


def test_merged_configs_cover_all_three_jvms_and_keep_other_settings():
    merged = spark_session._merged_configs({"spark.executor.extraJavaOptions": "-Dx=1", "spark.foo": 3})
    assert merged["spark.foo"] == "3"
    assert merged["spark.executor.extraJavaOptions"].endswith(" -Dx=1")
    for key in JAVA_OPTION_KEYS:
        assert merged[key].startswith("-XX:+IgnoreUnrecognizedVMOptions --add-opens=java.base/java.lang=")


def fake_java(directory, version_line: str):
    """A `java` executable that prints ``version_line`` the way `java -version` does (to stderr)."""
    bin_dir = directory / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\necho '{version_line}' >&2\necho 'Fake Runtime Environment' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return bin_dir


def test_check_java_accepts_the_installed_java():
    assert check_java() >= 17


def test_check_java_without_java_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkSetupError) as info:
        check_java()
    message = str(info.value)
    assert "no `java` was found" in message
    assert "install a Java 17" in message and "openjdk-17" in message and "JAVA_HOME" in message


@pytest.mark.parametrize("version_line, major", [
    ('openjdk version "11.0.22" 2024-01-16', 11),
    ('java version "1.8.0_392"', 8),
])
def test_check_java_too_old_says_what_to_install(tmp_path, monkeypatch, version_line, major):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(fake_java(tmp_path, version_line)))
    with pytest.raises(SparkSetupError) as info:
        check_java()
    message = str(info.value)
    assert f"is Java {major} ({version_line})" in message
    assert "needs Java 17+" in message and "openjdk-17" in message


def test_check_java_honours_java_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(fake_java(tmp_path / "jdk17", 'openjdk version "17.0.15" 2025-04-15')))
    old_home = tmp_path / "jdk11"
    fake_java(old_home, 'openjdk version "11.0.2" 2019-01-15')
    monkeypatch.setenv("JAVA_HOME", str(old_home))
    with pytest.raises(SparkSetupError) as info:
        check_java()
    assert "from JAVA_HOME" in str(info.value) and "is Java 11" in str(info.value)

    new_home = tmp_path / "jdk21"
    fake_java(new_home, 'openjdk version "21.0.1" 2023-10-17')
    monkeypatch.setenv("JAVA_HOME", str(new_home))
    assert check_java() == 17  # the oldest of JAVA_HOME's (21) and PATH's (17)

    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(SparkSetupError, match="is not an executable"):
        check_java()


def test_check_java_unreadable_version(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(fake_java(tmp_path, "something else entirely")))
    with pytest.raises(SparkSetupError, match="printed no version"):
        check_java()
