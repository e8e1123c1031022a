"""`grouplab sweep`: Spark runs the same simulations `run_seed` runs, the summary's maths matches
plain Python over the same rows, a failing simulation becomes a row, and the command writes its
tables and report. One small sweep (crash-storm at 3 and 4 members, 3 seeds) serves most tests."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from grouplab.cli import main
from grouplab.pipeline import sweep as sweep_mod
from grouplab.pipeline.sweep import (EXCEPTION, SEED_SCHEMA, job_progress, make_cases, replay_command, run_case,
                                     summarize, sweep, write_report, write_seeds)
from grouplab.sim.runner import percentile, result_row, run_seed
from grouplab.sim.scenario import ScenarioError, load_scenario, resolve_scenario

ASSIGNORS = ["range", "cooperative-sticky"]
BOGUS = "no-such-assignor"  # the CLI refuses it; sweep() does not, so its simulations raise in the workers
SIZES = [3, 4]
SEEDS = [1, 2, 3]


@pytest.fixture(scope="module")
def crash_storm() -> Path:
    return resolve_scenario("crash-storm")


@pytest.fixture(scope="module")
def swept(spark, crash_storm: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sweep written to Parquet and read back, as the command does; rows and summary collected."""
    out = tmp_path_factory.mktemp("sweep") / "seeds"
    df = sweep(spark, crash_storm.read_text(), [*ASSIGNORS, BOGUS], SIZES, SEEDS, scenario_name="crash-storm")
    write_seeds(df, out)
    written = spark.read.parquet(str(out))
    return {"rows": [r.asDict() for r in written.collect()],
            "summary": [r.asDict() for r in summarize(written).collect()]}


def by_case(rows: list[dict[str, Any]]) -> dict[tuple[str, int, int], dict[str, Any]]:
    return {(r["assignor"], r["members"], r["seed"]): r for r in rows}


# ----------------------------------------------------------------------------- no Spark needed


def test_resolve_scenario_file_wins_then_builtin_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = resolve_scenario("crash-storm")
    assert builtin.name == "crash-storm.toml" and builtin.is_file()
    assert resolve_scenario("crash-storm.toml") == builtin
    monkeypatch.chdir(tmp_path)
    (tmp_path / "crash-storm").write_text('name = "local"\n')
    assert resolve_scenario("crash-storm") == Path("crash-storm")  # a file in the way wins over the name
    with pytest.raises(ScenarioError, match=r"'nope'.*built-in: .*crash-storm"):
        resolve_scenario("nope")


def test_seed_schema_has_every_result_row_field(crash_storm: Path) -> None:
    row = result_row(run_seed(load_scenario(crash_storm).with_members(3), 1))
    names = [f.name for f in SEED_SCHEMA.fields]
    assert set(row) <= set(names)
    assert {"assignor", "members", "rebalance_durations_ms"} <= set(names)


def test_run_case_turns_an_exception_into_a_row(crash_storm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def explode(scenario: Any, seed: int) -> Any:
        raise RuntimeError(f"boom at seed {seed}")

    monkeypatch.setattr("grouplab.sim.runner.run_seed", explode)
    row = run_case(load_scenario(crash_storm), "range", 3, 7)
    assert row["violation"] == EXCEPTION and row["ok"] is False and row["seed"] == 7
    assert row["violation_detail"].startswith("RuntimeError: boom at seed 7")
    assert row.get("rebalances") is None


def test_cases_put_the_largest_groups_first_and_tasks_follow_seeds_per_task(spark, crash_storm: Path) -> None:
    assert make_cases(["a", "b"], [3, 10], [1, 2])[:4] == [("a", 10, 1), ("a", 10, 2), ("b", 10, 1), ("b", 10, 2)]
    text = crash_storm.read_text()
    assert sweep(spark, text, ASSIGNORS, SIZES, SEEDS).rdd.getNumPartitions() == 12  # one case per task
    assert sweep(spark, text, ASSIGNORS, SIZES, SEEDS, seeds_per_task=5).rdd.getNumPartitions() == 3
    with pytest.raises(ValueError):
        sweep(spark, text, ASSIGNORS, SIZES, SEEDS, seeds_per_task=0)


# ----------------------------------------------------------------------------- the sweep against run_seed


def test_rows_equal_run_seed_for_every_case(swept: dict[str, Any], crash_storm: Path) -> None:
    rows = by_case(swept["rows"])
    assert len(swept["rows"]) == 3 * len(SIZES) * len(SEEDS)
    scenario = load_scenario(crash_storm)
    for assignor in ASSIGNORS:
        for members in SIZES:
            for seed in SEEDS:
                result = run_seed(scenario.with_members(members).with_assignors([assignor]), seed)
                expected = result_row(result)
                got = rows[(assignor, members, seed)]
                for key, value in expected.items():
                    assert got[key] == value, (assignor, members, seed, key)
                assert got["rebalance_durations_ms"] == result.stats.rebalance_durations_ms
    assert len({rows[(a, m, s)]["partitions_moved"] for a in ASSIGNORS for m in SIZES for s in SEEDS}) > 1


def test_a_raising_simulation_is_an_exception_row_and_the_sweep_goes_on(swept: dict[str, Any]) -> None:
    rows = by_case(swept["rows"])
    for members in SIZES:
        for seed in SEEDS:
            bad = rows[(BOGUS, members, seed)]
            assert bad["violation"] == EXCEPTION and bad["ok"] is False
            assert f"unknown assignor '{BOGUS}'" in bad["violation_detail"]
            assert bad["rebalances"] is None and bad["rebalance_durations_ms"] is None
            assert rows[("range", members, seed)]["violation"] is None


def expected_summary(rows: list[dict[str, Any]]) -> dict[tuple[str, int], dict[str, Any]]:
    """The summary's maths in plain Python, over the same rows (means over seeds that have metrics)."""
    cells: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["assignor"], r["members"]), []).append(r)

    def total(rs: list[dict[str, Any]], key: str) -> Any:
        values = [r[key] for r in rs if r[key] is not None]
        return sum(values) if values else None

    def mean(rs: list[dict[str, Any]], key: str) -> Any:
        values = [r[key] for r in rs if r[key] is not None]
        return sum(values) / len(values) if values else None

    out = {}
    for cell, rs in cells.items():
        durations = [d for r in rs for d in (r["rebalance_durations_ms"] or [])]
        imbalances = [r["imbalance"] for r in rs if r["imbalance"] is not None]
        out[cell] = {
            "seeds": len(rs),
            **{k: total(rs, k) for k in ("rebalances", "partitions_moved", "unowned_partition_s", "events")},
            **{f"{k}_per_seed": mean(rs, k) for k in ("rebalances", "partitions_moved", "unowned_partition_s")},
            "imbalance_mean": mean(rs, "imbalance"), "imbalance_max": max(imbalances) if imbalances else None,
            "violations": sum(r["violation"] is not None for r in rs),
            "violating_seeds": sorted(r["seed"] for r in rs if r["violation"] is not None),
            "rebalance_p50_ms": percentile(durations, 0.5), "rebalance_p99_ms": percentile(durations, 0.99),
        }
    return out


def test_summary_equals_the_same_maths_in_python(swept: dict[str, Any]) -> None:
    expected = expected_summary(swept["rows"])
    got = {(r["assignor"], r["members"]): r for r in swept["summary"]}
    assert set(got) == set(expected) and len(got) == 3 * len(SIZES)
    for cell, want in expected.items():
        for key, value in want.items():
            assert got[cell][key] == (pytest.approx(value) if isinstance(value, float) else value), (cell, key)
    assert got[(BOGUS, 3)]["violating_seeds"] == SEEDS and got[("range", 3)]["violations"] == 0
    assert got[("range", 3)]["rebalance_p99_ms"] > got[("range", 3)]["rebalance_p50_ms"] > 0


# ----------------------------------------------------------------------------- progress and report


def test_job_progress_reports_the_tasks_and_stops_its_thread(spark) -> None:
    updates: list[tuple[int, int]] = []
    with job_progress(spark, lambda done, total: updates.append((done, total)), expected_tasks=4, interval_s=0.05):
        assert spark.sparkContext.parallelize(range(8), 4).map(lambda x: x * 2).sum() == 56
    assert updates[-1] == (4, 4)
    with pytest.raises(RuntimeError, match="mid-job"):
        with job_progress(spark, lambda done, total: None, interval_s=0.05):
            raise RuntimeError("mid-job")
    assert not any(t.name == "grouplab-sweep-progress" for t in threading.enumerate())
    assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") is None


def test_report_escapes_text_and_offers_a_replay_command(tmp_path: Path) -> None:
    summary = [{"assignor": "range", "members": 3, "seeds": 2, "rebalances_per_seed": 4.0, "violations": 1,
                "violating_seeds": [2], "imbalance_mean": 0.5, "rebalance_p50_ms": None}]
    failed = [{"assignor": "range", "members": 3, "seed": 2, "violation": "<single_owner>",
               "violation_detail": "t0-1 owned by <a> & <b>"}]
    report = tmp_path / "report.html"
    write_report(report, summary, failed, scenario_name="s<1>", scenario_arg="my scenarios/s.toml",
                 assignors=["range"], sizes=[3], seeds=[1, 2])
    page = report.read_text()
    assert "&lt;single_owner&gt;" in page and "owned by &lt;a&gt; &amp; &lt;b&gt;" in page
    assert "<single_owner>" not in page and "s<1>" not in page and "<script" not in page
    assert page.count("<svg") == len(sweep_mod.CHART_METRICS)
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert ids and len(ids) == len(set(ids))  # charts share one page: no id twice
    refs = [a or b for a, b in re.findall(r'url\(#([^)]+)\)|href="#([^"]+)"', page)]
    assert refs and set(refs) <= set(ids)
    assert replay_command("my scenarios/s.toml", "range", 3, 2, "s") == (
        "grouplab simulate --scenario 'my scenarios/s.toml' --members 3 --assignor range --seed 2 "
        "--run-dir runs/s-range-3-seed-2")


# ----------------------------------------------------------------------------- the command


def test_cli_sweep_writes_tables_and_report(spark, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    rc = main(["sweep", "--scenario", "crash-storm", "--assignors", "range,sticky", "--members", "3",
               "--seeds", "1-2", "--out", str(out), "--master", "local[2]", "--seeds-per-task", "2",
               "--conf", "spark.sql.shuffle.partitions=2"])
    assert rc == 0
    # Issue 25: its size and a guess at its time, said before Spark starts.
    said = " ".join(capsys.readouterr().err.split())
    assert re.search(r"range, sticky × 3 members × 2 seeds = 4 simulations · at most about \d+ s on \d+ cores "
                     r"\(one 3-member simulation took [\d.]+ s here\)", said), said
    assert said.index("4 simulations") < said.index("Spark local[2] started")
    seeds = spark.read.parquet(str(out / "seeds"))
    assert sorted((r.assignor, r.members, r.seed) for r in seeds.select("assignor", "members", "seed").collect()) == [
        ("range", 3, 1), ("range", 3, 2), ("sticky", 3, 1), ("sticky", 3, 2)]
    summary = spark.read.parquet(str(out / "summary")).collect()
    assert sorted((r.assignor, r.seeds, r.violations) for r in summary) == [("range", 2, 0), ("sticky", 2, 0)]
    page = (out / "report.html").read_text()
    assert "grouplab sweep: crash-storm" in page and "sticky" in page and "<svg" in page


def test_cli_sweep_exits_1_when_a_case_failed(spark, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = sweep_mod.run_sweep

    def with_a_bogus_assignor(spark: Any, text: str, name: str, arg: str, assignors: list[str], *rest: Any,
                              **kw: Any) -> Any:
        return real(spark, text, name, arg, [*assignors, BOGUS], *rest, **kw)

    monkeypatch.setattr(sweep_mod, "run_sweep", with_a_bogus_assignor)
    out = tmp_path / "out"
    assert main(["sweep", "--scenario", "crash-storm", "--assignors", "range", "--members", "3", "--seeds", "1",
                 "--out", str(out), "--conf", "spark.sql.shuffle.partitions=2"]) == 1
    page = (out / "report.html").read_text()
    assert f"--assignor {BOGUS} --seed 1" in page and "unknown assignor" in page


@pytest.mark.parametrize("argv, message", [
    (["--seeds", "5-1"], "expected seeds"),
    (["--assignors", "range,nope"], "unknown assignor 'nope'"),
    (["--scenario", "no-such-scenario"], "built-in: "),
    (["--members", "10,0"], "--members takes member counts >= 1"),
    (["--seeds-per-task", "0"], "--seeds-per-task must be >= 1"),
    (["--conf", "nokey"], "expected --conf key=value"),
])
def test_cli_sweep_usage_errors_exit_2(argv: list[str], message: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    base = {"--scenario": "crash-storm", "--seeds": "1-2", "--members": "3", "--assignors": "range"}
    base.update(dict(zip(argv[::2], argv[1::2])))
    args = ["sweep", "--out", str(tmp_path / "out")] + [x for kv in base.items() for x in kv]
    assert main(args) == 2
    assert message in " ".join(capsys.readouterr().err.split())
    assert not (tmp_path / "out").exists()


def test_cli_sweep_out_that_cannot_be_a_directory_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("")
    assert main(["sweep", "--scenario", "crash-storm", "--seeds", "1", "--members", "3",
                 "--out", str(tmp_path / "file" / "out")]) == 2
    assert "cannot create --out" in " ".join(capsys.readouterr().err.split())


@pytest.mark.parametrize("command", ["sweep", "analyze"])
def test_cli_out_must_be_a_filesystem_path(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The driver writes the report with plain file I/O: --out is a path (a shared mount on a
    cluster), and a URI is refused before Spark starts."""
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "coordinator.jsonl").write_text("")
    args = (["sweep", "--scenario", "crash-storm", "--seeds", "1", "--members", "3"] if command == "sweep"
            else ["analyze", str(tmp_path / "run")])
    assert main([*args, "--out", "s3a://bucket/out"]) == 2
    assert "--out must be a filesystem path" in " ".join(capsys.readouterr().err.split())
