"""The whole loop on a tiny network: measure, solve, export, check, time; a second run measures nothing; CLI errors."""

from __future__ import annotations

import io
import json
import shutil
from xml.etree import ElementTree

import pytest

from cost_models.measure import NodeCount, Progress
from experiments.cli import main
from experiments.progress import ProgressBar
from experiments.solving import solve_all
from experiments.tune import tune
from search.artifact import load_artifact
from search.graph import extract_graph
from search.plan import BASELINES, Plan, validate
from solvers.base import make_solver
from solvers.dp import DPSolver
from solvers.errors import SolverError
from solvers.generators import densenet
from tests.cli_helpers import one_error_line
from tests.quick_costs import QuickMeasured
from tests.search.tiny_nets import residual_concat_net

SETTINGS = {"name": "tiny", "threads": 1, "space_size": 1, "layouts": "NCHW,NCHW8c", "repeat": 2, "calibrate": 0}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two tune runs of the tiny net on the same (initially empty) cache: (out dir, summaries, printed lines)."""
    root = tmp_path_factory.mktemp("tune")
    summaries, printed = [], []
    for run in range(2):
        lines: list[str] = []
        summaries.append(tune(residual_concat_net(), root / f"run{run}", cache=root / "costs.sqlite",
                              costs=QuickMeasured(), echo=lines.append, **SETTINGS))
        printed.append(lines)
    return root / "run0", summaries, printed


@pytest.fixture
def warm_cache(runs, tmp_path):
    """A copy of the cache the two runs filled: a test of what tune does after measuring measures nothing."""
    out, _, _ = runs
    cache = tmp_path / "costs.sqlite"
    shutil.copyfile(out.parent / "costs.sqlite", cache)
    return cache


def test_tune_writes_a_checked_plan_and_its_artifact(runs):
    out, (summary, _), _ = runs
    for name in ("plan.json", "plan.svg", "problem.json", "summary.json", "artifact/model.so",
                 "artifact/manifest.json"):
        assert (out / name).is_file(), name
    plan = Plan.load(out / "plan.json")
    picture = " ".join(ElementTree.parse(out / "plan.svg").getroot().itertext())  # tessera show's, with its costs
    assert "costs from problem.json" in picture and all(name in picture for name in plan.choices)
    assert validate(plan, extract_graph(residual_concat_net())) and plan.model == "tiny"
    artifact = load_artifact(out / "artifact")
    assert artifact.plan.choices == plan.choices and artifact.manifest["numerical_check"]["passed"]
    assert json.loads((out / "summary.json").read_text()) == summary


def test_summary_has_solver_prediction_latency_and_baselines(runs):
    _, (summary, _), (lines, _) = runs
    solver, plan = summary["solver"], summary["plan"]
    assert solver["solver"] == "auto" and solver["cost"] == pytest.approx(plan["predicted_ms"])
    assert solver["gap"] is not None and plan["latency"]["median_ms"] > 0 and plan["latency"]["spread_ms"] >= 0
    assert set(summary["baselines"]) == set(BASELINES)
    for result in summary["baselines"].values():
        assert result["predicted_ms"] >= solver["cost"] - 1e-9 and result["speedup"] > 0
    assert summary["threads"] == 1 and summary["target"]["kind"] == "llvm" and summary["versions"]["tvm"]
    assert summary["measurements"]["new"] == summary["measurements"]["tasks"] > 0
    text = "\n".join(lines)
    for field in ("gap", "predicted", "measured", "spread", "speed-up", *BASELINES):
        assert field in text


def test_a_second_run_on_the_same_cache_measures_nothing(runs):
    _, (first, second), (_, lines) = runs
    assert second["measurements"]["new"] == 0 and second["measurements"]["tasks"] == first["measurements"]["tasks"]
    measured = [line for line in lines if line.startswith("measurements:")]
    assert len(measured) == 1 and " needed, 0 new, " in measured[0]
    assert second["solver"]["cost"] == pytest.approx(first["solver"]["cost"])


def test_the_summary_says_where_the_time_went(runs):
    _, (first, second), (lines, _) = runs
    spent = first["time"]
    assert set(spent["phases"]) == {"measure", "solve", "export", "latency", "report", "other"}  # calibrate 0
    assert sum(spent["phases"].values()) == pytest.approx(spent["seconds"])
    assert min(spent["phases"].values()) >= 0 and spent["phases"]["measure"] > 0 and spent["phases"]["latency"] > 0
    builds, timings = spent["measure"]["builds"], spent["measure"]["timings"]
    assert builds > 0 and timings > 0 and builds + timings <= spent["phases"]["measure"]
    assert {"builds", "timings"} <= set(second["time"]["measure"])
    assert set(second["time"]["measure"].values()) == {0.0}  # a full cache: nothing built or timed
    line = next(line for line in lines if line.startswith("time: "))
    assert "measuring" in line and "(builds " in line and "timing " in line


def test_the_summary_records_the_cross_core_wake_up_around_the_timing_and_warns_of_a_changed_machine(runs):
    import os

    from experiments.tune_summary import format_summary

    _, (first, _), (lines, _) = runs
    if len(os.sched_getaffinity(0)) < 2:
        assert "wakeup" not in first
        return
    wakeup = first["wakeup"]
    assert all(wakeup[when]["median_us"] > 0 for when in ("before_latency", "after_latency"))
    assert "changed_since_calibration" not in wakeup  # no calibration round
    assert any(line.startswith("end-to-end latency: ") and "; cross-core wake-up " in line for line in lines)
    slower = {when: {**probe, "median_us": 99.0} for when, probe in wakeup.items()}
    changed = {**first, "wakeup": {**slower, "calibration": wakeup, "changed_since_calibration": True}}
    warning = [line for line in format_summary(changed) if line.startswith("warning: one core woke another")]
    assert len(warning) == 1 and "in 99 -> 99 us in the last one" in warning[0]


@pytest.mark.parametrize("baselines", [()])
def test_tune_times_the_baselines_asked_for(baselines, tmp_path, warm_cache):
    lines: list[str] = []
    summary = tune(residual_concat_net(), tmp_path / "out", cache=warm_cache, echo=lines.append, baselines=baselines,
                   **SETTINGS)
    assert tuple(summary["baselines"]) == baselines and summary["plan"]["latency"]["median_ms"] > 0
    timing = next(line for line in lines if line.startswith("exporting and checking"))
    assert ("no baselines" in timing) == (not baselines)
    plan_line = next(line for line in lines if line.startswith("plan: "))
    assert "speed-up" not in plan_line and not any(line.startswith("baseline ") for line in lines if not baselines)


def test_several_solvers_are_timed_beside_the_baselines(tmp_path, warm_cache):
    lines: list[str] = []
    summary = tune(residual_concat_net(), tmp_path / "out", cache=warm_cache, echo=lines.append,
                   solver="greedy,dp,pbqp", **SETTINGS)
    per_solver = summary["solvers"]
    assert list(per_solver) == ["greedy", "dp", "pbqp"]
    best = min(per_solver.values(), key=lambda entry: entry["cost"])
    assert summary["solver"]["cost"] == best["cost"] == pytest.approx(per_solver["dp"]["cost"])
    assert Plan.load(tmp_path / "out" / "plan.json").choices == \
        Plan.load(tmp_path / "out" / "plans" / f"{best['solver']}.json").choices
    for name, entry in per_solver.items():
        assert entry["predicted_ms"] == pytest.approx(entry["cost"]) and entry["latency"]["median_ms"] > 0
        assert set(entry["speedup"]) == set(BASELINES)
        assert any(line.startswith(f"solver {name}: ") and "the best baseline" in line for line in lines)


def test_plans_exported_once_in_a_tune_are_not_exported_again_and_their_folder_goes_with_it(warm_cache):
    """The passes of a tune share one ``PlanExports``: a plan already exported (a baseline, a plan calibration kept)
    is timed again without a second export; the scratch folder is removed when the tune's exports close."""
    from experiments.extraction import extract
    from experiments.phases import PhaseClock
    from experiments.timing import PlanExports, time_plans, timing_line
    from search.plan import baseline_plan

    settings = {key: value for key, value in SETTINGS.items() if key not in ("repeat", "calibrate")}
    extracted = extract(residual_concat_net(), cache=warm_cache, **settings)
    plans = {name: baseline_plan(extracted.graph, name, extracted.model, extracted.args) for name in BASELINES}
    with PlanExports(extracted) as exports:
        first, again = PhaseClock(), PhaseClock()
        timed = time_plans(extracted, plans, repeat=1, clock=first, exports=exports)
        where = {name: exports.export(plan, again)[0] for name, plan in plans.items()}
        said = timing_line(plans, list(plans), 1, False, exports)
        assert f"; {len(plans)} of them exported before)" in said and "exported before" not in timing_line(
            plans, list(plans), 1, False)
        retimed = time_plans(extracted, plans, repeat=1, clock=again, exports=exports)
        assert first.seconds["export"] > 0 and "export" not in again.seconds
        assert all(path.is_dir() for path in where.values()) and len(set(where.values())) == len(plans)
        assert {label: t.relative_error for label, t in retimed.timings.items()} == \
            {label: t.relative_error for label, t in timed.timings.items()}
    assert not any(path.exists() for path in where.values())


@pytest.mark.parametrize("new_ms, replaced_ms", [(1.0, 2.0), (2.0, 1.0)])
def test_a_calibrated_plan_replaces_the_measured_one_only_if_it_runs_faster(tmp_path, warm_cache, new_ms,
                                                                           replaced_ms):
    """After a calibration round, the new plan is timed beside the plan it would replace; where it ran slower, the
    replaced plan is the tune's plan again: its solution, ``plan.json`` and artifact, with no ``replaced`` entry."""
    from cost_models.pricing import plan_cost
    from experiments.calibrate import Round
    from experiments.extraction import extract
    from experiments.phases import PhaseClock
    from experiments.solving import make_solvers
    from experiments.timing import PlanExports, PlanTiming, TimedPlans
    from experiments.tune import REPLACED, TimedPass, _faster_of
    from experiments.tune_summary import _round_line
    from search.emit import Origin
    from search.plan import baseline_plan

    settings = {key: value for key, value in SETTINGS.items() if key not in ("repeat", "calibrate")}
    extracted = extract(residual_concat_net(), cache=warm_cache, **settings)
    solved = solve_all(extracted.problem, make_solvers("auto", None))
    new = extracted.plan(solved.solutions[solved.best])
    replaced = next(plan for name in BASELINES
                    if (plan := baseline_plan(extracted.graph, name, extracted.model, extracted.args)).choices
                    != new.choices)
    plans = {"solver:auto": new, REPLACED: replaced}
    calls = {"solver:auto": ((Origin("conv2d_0"),),), REPLACED: ((Origin("conv2d_1"),),)}  # what each one computes
    timed = TimedPlans({label: PlanTiming(plan_cost(extracted.problem, plan.choices), 0.0, {"median_ms": ms})
                        for (label, plan), ms in zip(plans.items(), (new_ms, replaced_ms))}, (0.0, 0.0), calls=calls)
    (tmp_path / "artifact").mkdir()
    with PlanExports(extracted) as exports:
        out, round_ = _faster_of(TimedPass(extracted, solved, plans, timed, None), replaced,
                                 Round(1, {}, {}, {}, plan_changed=True), tmp_path, exports, PhaseClock())
    assert REPLACED not in out.plans and REPLACED not in out.timed.timings
    assert round_.side_by_side_ms == {"new": new_ms, "replaced": replaced_ms}
    assert round_.kept_replaced == (new_ms > replaced_ms) == round_.to_dict()["kept_replaced"]
    assert out.timed.timings["solver:auto"].median_ms == min(new_ms, replaced_ms)
    assert out.timed.calls == {"solver:auto": calls[REPLACED if round_.kept_replaced else "solver:auto"]}
    if round_.kept_replaced:
        solution = out.solved.solutions["auto"]
        assert out.best_plan.choices == replaced.choices == Plan.load(tmp_path / "plan.json").choices
        assert solution.status == "feasible" and solution.cost == pytest.approx(
            plan_cost(extracted.problem, replaced.choices))
        assert Plan.load(tmp_path / "artifact" / "plan.json").choices == replaced.choices
        assert "the measured plan kept" in _round_line(round_.to_dict(), "auto")
    else:
        assert out.best_plan is new and out.solved is solved and not (tmp_path / "plan.json").exists()


def test_a_solver_without_a_plan_is_reported_unless_it_is_the_only_one():
    problem = densenet(3, seed=1, blocks=(4,))
    too_small = DPSolver(max_table_entries=1)  # refuses every problem that needs a table
    solved = solve_all(problem, [too_small, make_solver("pbqp")])
    assert list(solved.solutions) == ["pbqp"] and solved.best == "pbqp" and solved.errors["dp"]
    with pytest.raises(SolverError):
        solve_all(problem, [too_small])


@pytest.mark.parametrize(
    "argv, message",
    [
        (["tune", "nosuchnet", "--out", "{tmp}/o"], "unknown model"),
        (["extract", "nosuchnet", "--out", "{tmp}/p.json"], "unknown model"),
        (["extract", "resnet18", "--space-size", "0", "--out", "{tmp}/p.json"], "space size"),
        (["tune", "resnet18", "--space-size", "-3", "--out", "{tmp}/o"], "space size"),
        (["extract", "resnet18", "--layouts", "NCHW,NCWH", "--out", "{tmp}/p.json"], "unknown layout"),
        (["tune", "resnet18", "--threads", "0", "--out", "{tmp}/o"], "threads"),
        (["tune", "resnet18", "--solver", "nosuch", "--out", "{tmp}/o"], "unknown solver"),
        (["tune", "resnet18", "--solver", "pbqp,,ilp", "--out", "{tmp}/o"], "no solver named"),
        (["tune", "resnet18", "--solver", "pbqp,pbqp", "--out", "{tmp}/o"], "named twice"),
        (["tune", "resnet18", "--baselines", "nchw,nhcw", "--out", "{tmp}/o"], "unknown baseline 'nhcw'"),
        (["tune", "resnet18", "--baselines", "nchw,nchw", "--out", "{tmp}/o"], "named twice"),
        (["tune", "resnet18", "--baselines", "", "--out", "{tmp}/o"], "unknown baseline ''"),
    ],
)
def test_cli_bad_input_is_one_error_line(argv, message, tmp_path, capsys):
    assert main([arg.format(tmp=tmp_path) for arg in argv]) == 2
    assert message in one_error_line(capsys)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_in_place_on_a_terminal_and_prints_lines_otherwise():
    events = [Progress(0, 2, 5, 0, 0.0, None), Progress(1, 2, 5, 1, 3.0, 3.0), Progress(2, 2, 5, 1, 6.5, 0.0)]
    log, terminal = io.StringIO(), _Terminal()
    for stream in (log, terminal):
        bar = ProgressBar(stream)
        for event in events:
            bar(event)
        bar.close()
    assert log.getvalue().splitlines() == [  # the first and the last; the one 3 s in is within LOG_SECONDS
        "measuring: 0/2 measured, 5 cached, 0 failed, 0:00 elapsed, ETA ?",
        "measuring: 2/2 measured, 5 cached, 1 failed, 0:06 elapsed, ETA 0:00",
    ]
    long_log = io.StringIO()
    bar = ProgressBar(long_log)
    for done in range(101):  # one update per second for 100 s: a line at 0, 30, 60, 90 s and the last
        bar(Progress(done, 100, 0, 0, float(done), None))
    assert [line.split(", ")[3] for line in long_log.getvalue().splitlines()] == [
        "0:00 elapsed", "0:30 elapsed", "1:00 elapsed", "1:30 elapsed", "1:40 elapsed"]
    drawn = terminal.getvalue()  # redrawn in place (one line, erased and drawn again), its last state left on screen
    assert "\x1b[2K" in drawn and drawn.count("\n") == 1
    assert "measuring" in drawn and "2/2 measured, 5 cached, 1 failed, 0:06 elapsed, ETA 0:00\n" in drawn


def test_progress_names_each_cluster_node_with_its_records_and_state():
    nodes = (NodeCount("a1b2c3", 12, 0, "measuring"), NodeCount("d4e5f6", 3, 1, "lost", "stopped answering"))
    log = io.StringIO()
    bar = ProgressBar(log)
    bar(Progress(15, 40, 0, 1, 0.0, None, nodes))
    assert log.getvalue().rstrip("\n").endswith("; nodes: a1b2c3 12 measuring, d4e5f6 3 lost (stopped answering)")


def test_calibration_profiles_the_plans_and_converges_on_a_tiny_network(tmp_path, warm_cache):
    from cost_models.cache import CostCache
    from cost_models.calibration import NETWORK, NETWORK_CHOSEN
    from experiments.tracking import client, log_tune

    lines: list[str] = []
    summary = tune(residual_concat_net(), tmp_path / "out", cache=warm_cache, echo=lines.append,
                   **{**SETTINGS, "repeat": 2, "calibrate": 2})
    if summary["calibration"]["skipped"]:  # the drift check saw a disturbed machine twice: its own tests cover that
        pytest.skip(f"the machine was disturbed: {summary['calibration']['skipped']}")
    rounds = summary["calibration"]["rounds"]
    assert 1 <= len(rounds) <= 2 and summary["calibration"]["converged"] == (not rounds[-1]["plan_changed"])
    assert all(not r["plan_changed"] for r in rounds[-1:]) or len(rounds) == 2 or rounds[-1]["kept_replaced"]
    assert all((r["side_by_side_ms"] is None) != r["plan_changed"] for r in rounds)
    first = rounds[0]
    assert set(first["measured_ms"]) == {"solver:auto", *BASELINES} == set(first["predicted_ms"])
    assert first["calibration"]["in_network"] > 0 and "conv2d" in first["calibration"]["factors"]
    assert first["drift"] > 0 and summary["calibration"]["skipped"] is None and summary["drift"]["kernels"] > 0
    assert all(value > 0 for value in first["measured_ms"].values())
    assert all(r["measured"] == 0 for r in rounds)  # the first pricing measured every task
    cache = CostCache(tmp_path / "costs.sqlite")
    rows = cache._connect().execute("SELECT COUNT(*) FROM costs WHERE context LIKE ?", [f'%"{NETWORK}"%'])
    assert rows.fetchone()[0] > 0  # in-network records, under their own context
    chosen = {key for (key,) in cache._connect().execute("SELECT key FROM costs WHERE context LIKE ?",
                                                         [f'%"{NETWORK_CHOSEN}"%'])}
    network = {key for (key,) in cache._connect().execute("SELECT key FROM costs WHERE context LIKE ?",
                                                          [f'%"{NETWORK}"%'])}
    assert chosen and chosen <= network  # the solver's plans' in-network times, kept a second time
    plan = summary["plan"]
    # the last calibrated cost plus the plan's unpriced time as that round's profiles price it, fixed before the
    # final timing, then carried to the speed of the machine in that timing (exactly 1 when the rounds converged: no
    # timing after the last round, and the round's own offset of the plan)
    assert plan["predicted_calibration_window_ms"] == pytest.approx(summary["solver"]["cost"] + plan["unpriced_ms"])
    assert plan["predicted_ms"] == pytest.approx(plan["predicted_calibration_window_ms"] * plan["window"])
    if summary["calibration"]["converged"]:
        assert plan["window"] == 1.0 and all(b["window"] == 1.0 for b in summary["baselines"].values())
        assert plan["unpriced_ms"] == pytest.approx(rounds[-1]["offset_ms"]["solver:auto"])
    else:
        assert plan["window"] > 0
    assert plan["predicted_isolated_ms"] > 0 and any("(isolated timings: " in line for line in lines)
    assert any(line.startswith("calibration round 1: predicted vs measured") for line in lines)

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = client(uri).get_run(log_tune(summary, uri))
    assert run.data.params["calibrate.rounds"] == str(len(rounds))
    history = client(uri).get_metric_history(run.info.run_id, "measured_ms.solver.auto")
    assert [m.step for m in history] == [r["index"] for r in rounds]
    assert [m.value for m in history] == [r["measured_ms"]["solver:auto"] for r in rounds]
    assert run.data.metrics["plan.predicted_ms"] == pytest.approx(plan["predicted_ms"])
    assert run.data.metrics["seconds.calibration"] == pytest.approx(summary["time"]["phases"]["calibration"])
    assert {"profile", "drift_check", "calibration"} <= set(summary["time"]["phases"])


def test_calibration_keeps_no_profile_of_a_machine_slower_than_its_records(tmp_path, warm_cache):
    """Records three times faster than the machine runs now: the drift check sees a disturbed window, the plans are
    timed and profiled twice, and no in-network time is kept."""
    from cost_models.cache import CostCache
    from cost_models.calibration import NETWORK

    connection = CostCache(warm_cache)._connect()
    with connection:
        connection.execute("UPDATE costs SET median_ms = median_ms / 3 WHERE median_ms IS NOT NULL")
    lines: list[str] = []
    summary = tune(residual_concat_net(), tmp_path / "out", cache=warm_cache, echo=lines.append,
                   baselines=("nchw",), **{**SETTINGS, "calibrate": 1})  # one baseline: fewer plans to time twice
    assert summary["calibration"]["rounds"] == [] and not summary["calibration"]["converged"]
    assert "ran x" in summary["calibration"]["skipped"]
    assert sum("timing and profiling the plans again" in line for line in lines) == 1
    assert any(line.startswith("calibration stopped:") for line in lines)
    assert summary["drift"]["disturbed"] and any("the machine was disturbed" in line for line in lines)
    rows = connection.execute("SELECT COUNT(*) FROM costs WHERE context LIKE ?", [f'%"{NETWORK}"%'])
    assert rows.fetchone()[0] == 0


def test_the_drift_check_probes_the_solvers_plan_not_a_baseline_whose_records_are_off(tmp_path, warm_cache):
    """The machine three times slower than every record, except the NHWC kernels only the baseline runs, recorded
    three times slower than they run (so the longest): probed, they would hide the slow window."""
    from cost_models.cache import CostCache

    connection = CostCache(warm_cache)._connect()
    with connection:
        connection.execute("UPDATE costs SET median_ms = median_ms / 3 WHERE median_ms IS NOT NULL")
        connection.execute("UPDATE costs SET median_ms = median_ms * 9 WHERE key LIKE '%\"in_layout\":\"NHWC\"%'")
    summary = tune(residual_concat_net(), tmp_path / "out", cache=warm_cache, echo=lambda line: None,
                   baselines=("nhwc",), **{**SETTINGS, "calibrate": 1})  # the plan: NCHW and NCHW8c only
    probes = summary["drift"]["probes"]
    assert summary["drift"]["disturbed"] and probes and not any('"NHWC"' in probe["key"] for probe in probes)
    assert all(probe["now_ms"] > probe["recorded_ms"] for probe in probes)


def test_an_output_a_failed_tune_created_is_removed_and_an_earlier_one_loses_its_summary(tmp_path):
    from experiments.tune import _complete_or_absent

    with pytest.raises(SolverError), _complete_or_absent(tmp_path / "out") as directory:
        (directory / "problem.json").write_text("{}")
        raise SolverError("no plan")
    assert not (tmp_path / "out").exists()
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    for name in ("plan.json", "summary.json"):
        (earlier / name).write_text("{}")
    with pytest.raises(KeyboardInterrupt), _complete_or_absent(earlier):
        raise KeyboardInterrupt
    assert [path.name for path in earlier.iterdir()] == ["plan.json"]  # no summary: not a complete output


@pytest.mark.parametrize("unsteady_timings", [1, 2])
def test_an_unsteady_timing_is_timed_again_and_an_unsteady_last_one_is_flagged(tmp_path, warm_cache, monkeypatch,
                                                                                unsteady_timings):
    """The plans' timing spread their rounds by half their mean (a machine switching speed within the rounds): it is
    timed once more; where that one is unsteady too, the summary says so and warns."""
    import experiments.tune as tune_module
    from experiments.timing import UNSTEADY

    timings = []

    def time_plans(*args, **kwargs):
        timed = real(*args, **kwargs)
        share = 0.5 if len(timings) < unsteady_timings else 0.0  # the figures of an unsteady or a steady host
        for timing in timed.timings.values():
            timing.latency.update(mean_ms=timing.latency["median_ms"], stdev_ms=share * timing.latency["median_ms"])
        timings.append(timed)
        return timed

    real = tune_module.time_plans
    monkeypatch.setattr(tune_module, "time_plans", time_plans)
    lines: list[str] = []
    summary = tune(residual_concat_net(), tmp_path / "out", cache=warm_cache, costs=QuickMeasured(), echo=lines.append,
                   **SETTINGS)
    assert len(timings) == 2 and any("is unsteady) for" in line and "timing the plans again" in line for line in lines)
    assert summary["plan"]["latency"]["median_ms"] == timings[1].timings["solver:auto"].median_ms
    if unsteady_timings == 1:
        assert "unsteady" not in summary and not any("changed speed" in line for line in lines)
    else:
        assert set(summary["unsteady"]) == set(timings[1].timings) and min(summary["unsteady"].values()) >= UNSTEADY
        assert any(line.startswith("warning: in the timing above") for line in lines)


def test_unsteady_shares_flag_rounds_spread_by_a_tenth_of_their_mean():
    from experiments.timing import unsteady_shares

    steady = {"mean_ms": 10.0, "stdev_ms": 0.3}  # a quiet host: rounds within a few percent
    switching = {"mean_ms": 12.0, "stdev_ms": 6.0}  # a host switching between two speeds within the rounds
    assert unsteady_shares({"plan": steady, "nchw": steady}) == {}
    assert unsteady_shares({"plan": steady, "nchw": switching}) == {"nchw": 0.5}
    assert unsteady_shares({"plan": {"median_ms": 3.0}}) == {}  # a summary from before the deviation was recorded


@pytest.mark.parametrize("windows, warned", [((0.98, 1.02, 1.05), False), ((0.87, 0.89, 0.86), True),
                                             ((1.02, 1.88, 1.68), True)])
def test_a_last_timing_at_another_speed_than_the_calibration_round_is_flagged(runs, windows, warned):
    """The windows of two hosts' last timings: one within the drift check's tolerance of the calibration round's
    speed, and machines that ran 11-14% faster or up to 88% slower by then."""
    import copy

    from experiments.tune_summary import format_summary

    _, summaries, _ = runs
    s = copy.deepcopy(summaries[0])
    results = [s["plan"], *s["baselines"].values()]
    for result, window in zip(results, windows * len(results)):
        result.update(window=window, predicted_calibration_window_ms=result["predicted_ms"])
    lines = [line for line in format_summary(s) if "the calibration round's time in the timing above" in line]
    assert bool(lines) == warned
    if warned:
        assert f"x{min(windows[:len(results)]):.2f}-{max(windows[:len(results)]):.2f}" in lines[0]
