"""The test session's Spark settings: tests/conftest.py's `spark` fixture says why each. Also
passed with --conf to the `grouplab` commands the tests start Spark in (tests/test_cli_errors.py),
and measured against grouplab's defaults by scripts/bench_spark_settings.py."""

TEST_SPARK_CONF = {"spark.sql.shuffle.partitions": "1", "spark.sql.adaptive.enabled": "false",
                   "spark.sql.codegen.wholeStage": "false", "spark.sql.codegen.factoryMode": "NO_CODEGEN",
                   "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC -XX:ReservedCodeCacheSize=256m"}
