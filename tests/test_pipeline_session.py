"""The settings every Spark session of grouplab starts with (grouplab/pipeline/session.py): no JVM needed."""

from __future__ import annotations

import pytest

from grouplab.pipeline.session import DEFAULTS, JAVA_OPTIONS_KEY, effective_conf, parse_conf


def test_a_users_setting_wins_and_local_masters_get_driver_memory() -> None:
    conf = effective_conf("local[2]", {"spark.sql.shuffle.partitions": "64"})
    assert conf["spark.sql.shuffle.partitions"] == "64" and conf["spark.driver.memory"] == "4g"
    assert conf["spark.ui.enabled"] == DEFAULTS["spark.ui.enabled"]
    assert "spark.driver.memory" not in effective_conf("spark://host:7077", {})


def test_a_users_jvm_options_come_after_the_quiet_logging_not_instead() -> None:
    (ours,) = effective_conf("local[2]", {})[JAVA_OPTIONS_KEY].split()
    assert ours.startswith("-Dlog4j.configurationFile=file:") and ours.endswith("log4j2.properties")
    assert effective_conf("local[2]", {JAVA_OPTIONS_KEY: " -Xss4m "})[JAVA_OPTIONS_KEY] == f"{ours} -Xss4m"


def test_conf_pairs_are_parsed_as_spark_submit_takes_them() -> None:
    assert parse_conf(["a.b=1", " c = x=y "]) == {"a.b": "1", "c": "x=y"}
    with pytest.raises(ValueError, match="expected --conf key=value"):
        parse_conf(["nokey"])
