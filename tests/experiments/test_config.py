"""Experiment files: expansion into trials with stable ids and hashes, and one clear error per fault."""

from __future__ import annotations

import re
import time
import tracemalloc
from pathlib import Path

import pytest

from experiments.cli import main
from experiments.config import LP_BOUND, ConfigError, expand, load_config, parse_config
from solvers.generators import generate

BASE = {
    "name": "t",
    "problems": [{"generator": "chain", "nodes": 10, "seed": [0, 1], "candidates": [3, 4]}],
    "solvers": [{"name": "pbqp"}, {"name": "ilp", "workers": [1, 2]}],
}


def test_expand_is_the_grid_with_stable_ids_and_hashes():
    config = parse_config({**BASE, "repeats": 2, "time_limit": 5.0})
    trials = expand(config)
    assert len(trials) == 4 * (1 + 3 * 2)
    ids = [t.id for t in trials]
    assert ids[:3] == ["chain-n10-k3-s0/lp bound/r0", "chain-n10-k3-s0/pbqp(time_limit=5.0)/r0",
                       "chain-n10-k3-s0/pbqp(time_limit=5.0)/r1"]
    assert "chain-n10-k4-s1/ilp(workers=2,time_limit=5.0)/r1" in ids
    assert [t.config_hash for t in expand(config)] == [t.config_hash for t in trials]  # stable
    assert len({t.config_hash for t in trials}) == len(trials)
    ilp = next(t for t in trials if t.solver == "ilp")
    assert ilp.params == {"workers": 1, "time_limit": 5.0} and ilp.settings()["solver.workers"] == 1
    # A trial's hash depends on its own settings only: adding a solver leaves the others' hashes alone.
    more = parse_config({**BASE, "repeats": 2, "time_limit": 5.0, "solvers": [*BASE["solvers"], {"name": "greedy"}]})
    assert {t.id: t.config_hash for t in trials}.items() <= {t.id: t.config_hash for t in expand(more)}.items()


def test_problem_files_resolve_against_the_config_and_hash_their_content(tmp_path):
    generate("ssd", seed=0, candidates=3).save(tmp_path / "net.json")
    (tmp_path / "exp.toml").write_text('name = "f"\n[[problems]]\nfile = "net.json"\n[[solvers]]\nname = "dp"\n')
    first = expand(load_config(tmp_path / "exp.toml"))
    assert [t.id for t in first] == [f"net/{LP_BOUND}/r0", "net/dp/r0"]
    assert first[1].problem.load().num_nodes == 71
    generate("ssd", seed=1, candidates=3).save(tmp_path / "net.json")
    assert expand(load_config(tmp_path / "exp.toml"))[1].config_hash != first[1].config_hash


def test_a_cluster_address_is_where_not_what_and_is_checked():
    model = {"model": "resnet18", "image_size": 32, "space_size": 1}
    here = expand(parse_config({**BASE, "problems": [model]}))
    there = expand(parse_config({**BASE, "problems": [{**model, "address": "10.0.0.1:6379"}]}))
    assert [(t.id, t.config_hash) for t in there] == [(t.id, t.config_hash) for t in here]
    assert {t.problem.address for t in there} == {"10.0.0.1:6379"}
    from experiments.runner import _options  # its measuring actors hold the timing slots, not the trial

    assert _options(here[1])["resources"] == {"timing_slot": 1} and _options(there[1]) == {"num_cpus": 1}
    for bad, message in (("ray://10.0.0.1:10001", "Ray Client address"), ("10.0.0.1", "not HOST:PORT")):
        with pytest.raises(ConfigError, match=message):
            parse_config({**BASE, "problems": [{**model, "address": bad}]})
    with pytest.raises(ConfigError, match="address applies to the sources that measure"):
        parse_config({**BASE, "problems": [{**model, "costs": "xgboost", "cost_model": __file__,
                                            "address": "10.0.0.1:6379"}]})


def test_model_instances_are_measured_trials_with_a_grid_of_inputs_and_spaces(tmp_path):
    config = parse_config({"name": "m", "lower_bound": False, "solvers": [{"name": "pbqp"}],
                           "problems": [{"model": "resnet18", "image_size": [32, 64], "space_size": 4,
                                         "layouts": ["NCHW, NHWC", "NCHW16c"], "cache": "c.sqlite"}]},
                          base=tmp_path)
    trials = expand(config)
    assert [t.id for t in trials] == [f"resnet18-i{size}-b1-s0-n4-t1-{space}/pbqp/r0"
                                      for size in (32, 64) for space in ("NCHW+NHWC", "NCHW16c")]
    assert all(t.problem.measured and t.problem.cache == str(tmp_path / "c.sqlite") for t in trials)
    assert not expand(parse_config(BASE))[0].problem.measured
    timed = parse_config({"name": "m", "lower_bound": False, "solvers": [{"name": "pbqp"}],
                          "problems": [{"model": "resnet18", "space_size": 4, "timing": ["warm", "context"]}]},
                         base=tmp_path)
    assert [t.problem.timing for t in expand(timed)] == ["warm", "context"]
    assert [t.id.split("/")[0].rsplit("-", 1)[1] for t in expand(timed)] == ["warm", "context"]


def test_input_shape_is_a_grid_axis_in_place_of_batch_and_image_size(tmp_path):
    config = parse_config({"name": "m", "lower_bound": False, "solvers": [{"name": "pbqp"}],
                           "problems": [{"model": "resnet18", "input_shape": ["1,3,32,32", "data=2,3,64,64"],
                                         "space_size": 4, "layouts": "NCHW"}]}, base=tmp_path)
    problems = [t.problem for t in expand(config)]
    assert [(p.input_shape, p.batch, p.image_size) for p in problems] == [("1,3,32,32", None, None),
                                                                          ("data=2,3,64,64", None, None)]
    assert [p.label for p in problems] == ["resnet18-1x3x32x32-s0-n4-t1-NCHW", "resnet18-data=2x3x64x64-s0-n4-t1-NCHW"]


def grid(top: str = "", problem: str = 'generator = "chain"\nseed = 0', solver: str = 'name = "dp"') -> str:
    """An experiment file with one problem and one solver table."""
    return f'name = "x"\n{top}\n[[problems]]\n{problem}\n[[solvers]]\n{solver}\n'


TOP_KEYS = "description, lower_bound, metrics, name, num_cpus, problems, repeats, solvers, time_limit, trial_timeout"
MODEL_KEYS = ("address, batch, cache, calibration_data, cost_model, costs, hybrid_rounds, image_size, initial_picks, "
              "input_shape, layouts, max_error, measure_fraction, model, pick_margin, precision, seed, space_size, "
              "threads, timing, transforms")
HUGE_TABLE = grid(problem=f'generator = "chain"\nseed = {list(range(1000))}\ncandidates = {list(range(1, 1001))}')
HUGE_SOLVER = grid(solver=f'name = "pbqp"\nbranch = {list(range(1000))}\nperturbations = {list(range(1000))}')
HUGE_GRID = grid("repeats = 2", f'generator = "chain"\nseed = {list(range(500))}\ncandidates = {list(range(1, 101))}')

FAULTS = [
    # unknown keys, with the allowed ones
    (grid("seed = 1"), f": unknown key 'seed'; allowed: {TOP_KEYS}\n"),
    (grid(problem='generator = "chain"\nseed = 0\nsize = 3'),
     "problems[0]: unknown key 'size'; allowed: candidates, generator, nodes, seed\n"),
    (grid(problem='file = "p.json"\nseed = 0'), "problems[0]: unknown key 'seed'; allowed: file\n"),
    (grid(problem='model = "resnet18"\nimage = 32'), f"problems[0]: unknown key 'image'; allowed: {MODEL_KEYS}\n"),
    (grid(solver='name = "ilp"\nthreads = 2'), "solvers[0]: ilp: unknown parameter(s) threads; it takes backend, "
     "dominance, hint, lp_first, presolve, scale, seed, time_limit, workers\n"),
    # wrong types
    (grid('repeats = "2"'), ": repeats must be a positive integer, got '2'\n"),
    (grid("lower_bound = 1"), ": lower_bound must be true or false, got 1\n"),
    (grid('metrics = "solver"'), ": metrics must be a list of metric groups, got 'solver'\n"),
    (grid(problem='generator = "chain"\nseed = 1.5'),
     "problems[0].seed must be an integer >= 0 or a non-empty list of distinct ones, got 1.5\n"),
    (grid(problem='model = "resnet18"\ncache = 3'), "problems[0].cache must be a path string, got 3\n"),
    (grid(problem='model = "resnet18"\ntiming = [1]'),
     "problems[0].timing must be a timing method or a list of distinct ones, got [1]\n"),
    (grid(solver="name = 7"), "solvers[0].name must be a solver name, got 7\n"),
    ('name = "x"\nproblems = 3\n[[solvers]]\nname = "dp"\n',
     ": problems must be a non-empty array of tables ([[problems]] entries), got 3\n"),
    (grid(solver='name = "pbqp"\nbranch = "two"'),
     "solvers[0]: pbqp: branch must be a non-negative integer, got 'two'\n"),
    # out of range
    (grid("num_cpus = 0"), ": num_cpus must be a positive integer, got 0\n"),
    (grid("trial_timeout = inf"), ": trial_timeout must be a positive number of seconds, got inf\n"),
    (grid("time_limit = -2.5"), ": time_limit must be a positive number of seconds, got -2.5\n"),
    (grid(problem='generator = "chain"\nseed = 0\ncandidates = [4, 0]'),
     "problems[0].candidates must be an integer >= 1 or a non-empty list of distinct ones, got [4, 0]\n"),
    (grid(problem='generator = "chain"\nseed = [1, 1]'), "problems[0].seed must be an integer >= 0 or a non-empty "
     "list of distinct ones, got [1, 1]\n"),
    (grid(problem='model = "resnet18"\nmeasure_fraction = 1.5'),
     "problems[0].measure_fraction must be a number in (0, 1] or a list of them, got 1.5\n"),
    (grid(solver='name = "ilp"\nworkers = []'), "solvers[0].workers must be a value or a non-empty list of values"),
    (grid(problem='model = "resnet18"\ncosts = "simulated"'),
     "problems[0].costs: unknown cost source 'simulated'; choose from measured, xgboost, hybrid, calibrated, "
     "selective\n"),
    (grid(problem='model = "resnet18"\ntransforms = "both"'),
     "problems[0].transforms: unknown layout-transform pricing 'both'; choose from shared, pairwise\n"),
    (grid(problem='model = "resnet18"\nprecision = ["fp32", "fp16"]'),
     "problems[0].precision: unknown precision 'fp16'; choose from fp32, bf16, int8, auto\n"),
    (grid(problem='model = "resnet18"\nmax_error = 0'), "problems[0].max_error must be a positive number"),
    # files that are no experiment file
    (b"\x89PNG\r\n\x1a\n\xff\xfe\x00", "not UTF-8 text (byte 0); is it an experiment file?\n"),
    ('name = "x"\n[[problems]\n', "not valid TOML"),
    # grids too large to expand
    (HUGE_TABLE, "problems[0]: its axes give 1000000 instances, more than the 100000 trials an experiment may have"),
    (HUGE_SOLVER, "solvers[0]: its axes give 1000000 settings, more than the 100000 trials"),
    (HUGE_GRID, ": the grid has 150000 trials (50000 instances x 3 each), more than the 100000 trials"),
    ('name = "x"\n[[problems]]\nmodel = "resnet18"\ninput_shape = "1,3,32,32"\nbatch = 2\n[[solvers]]\nname = "dp"\n',
     "problems[0]: input_shape replaces batch and image_size"),
    ('name = "x"\n[[problems]]\nmodel = "resnet18"\ninput_shape = "1,3,x"\n[[solvers]]\nname = "dp"\n',
     "problems[0].input_shape: input shape '1,3,x' is not a list of dimensions"),
    ('name = "x"\nseeds = 1\n', "unknown key 'seeds'"),
    ('name = "x"\n[[problems]]\ngenerator = "resnet"\nseed = 0\n[[solvers]]\nname = "dp"\n',
     "problems[0]: unknown generator 'resnet'"),
    ('name = "x"\n[[problems]]\ngenerator = "chain"\nseed = 0\n[[solvers]]\nname = "simplex"\n',
     "solvers[0]: unknown solver 'simplex'"),
    ('name = "x"\n[[problems]]\ngenerator = "chain"\nseed = "zero"\n[[solvers]]\nname = "dp"\n',
     "problems[0].seed must be an integer >= 0"),
    ('name = "x"\n[[problems]]\ngenerator = "densenet"\nseed = 0\nnodes = 5\n[[solvers]]\nname = "dp"\n',
     "nodes applies to chain and random only"),
    ('name = "x"\n[[problems]]\ngenerator = "chain"\nseed = 0\n[[solvers]]\nname = "dp"\ndepth = 3\n',
     "solvers[0]: dp: unknown parameter(s) depth"),
    ('name = "x"\n[[problems]]\ngenerator = "chain"\nseed = 0\n[[solvers]]\nname = "ilp"\ntime_limit = -1\n',
     "time_limit must be a positive number"),
    ('name = "x"\nrepeats = 0\n[[problems]]\ngenerator = "chain"\nseed = 0\n[[solvers]]\nname = "dp"\n',
     "repeats must be a positive integer"),
    ('name = "x"\nmetrics = ["latency"]\n[[problems]]\ngenerator = "chain"\nseed = 0\n[[solvers]]\nname = "dp"\n',
     "latency applies to model problems only"),
    ('name = "x"\nmetrics = ["energy"]\n[[problems]]\ngenerator = "chain"\nseed = 0\n[[solvers]]\nname = "dp"\n',
     "unknown metric group 'energy'"),
    ('name = "x"\n[[problems]]\ngenerator = "chain"\nseed = 0\n', "missing required key 'solvers'"),
    ('name = "x"\n[[problems]]\nfile = "missing.json"\n[[solvers]]\nname = "dp"\n', "problems[0]: cannot read"),
    ('name = "x"\n[[problems]]\ngenerator = "chain"\nseed = 0\n[[solvers]]\nname = "dp"\n[[solvers]]\nname = "dp"\n',
     "appears twice"),
    ('name = "x\n', "not valid TOML"),
    ('name = "x"\n[[problems]]\nmodel = "resnet999"\n[[solvers]]\nname = "dp"\n',
     "problems[0]: unknown zoo model 'resnet999'"),
    ('name = "x"\n[[problems]]\nmodel = "resnet18"\nlayouts = "NCHW,NCHW7q"\n[[solvers]]\nname = "dp"\n',
     "problems[0].layouts: "),
    ('name = "x"\n[[problems]]\nmodel = "resnet18"\ngenerator = "chain"\n[[solvers]]\nname = "dp"\n',
     "problems[0]: give exactly one of 'generator', 'file', 'model'"),
    ('name = "x"\n[[problems]]\nmodel = "resnet18"\ntiming = "hot"\n[[solvers]]\nname = "dp"\n',
     "unknown timing method 'hot'"),
    ('name = "x"\n[[problems]]\nmodel = "resnet18"\ncosts = "xgboost"\ncost_model = "bad.toml"\ntiming = "cold"\n'
     '[[solvers]]\nname = "dp"\n', "timing applies to the sources that measure"),
]


@pytest.mark.parametrize(("text", "message"), FAULTS)
def test_each_fault_is_one_clear_error(tmp_path, capsys, text, message):
    path = tmp_path / "bad.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    assert main(["ablate", str(path), "--tracking-uri", f"sqlite:///{tmp_path / 'never.db'}"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {path}: ") and captured.err.count("\n") == 1
    assert message in captured.err
    assert not (tmp_path / "never.db").exists()  # nothing ran


@pytest.mark.parametrize("text", [HUGE_TABLE, HUGE_SOLVER, HUGE_GRID])
def test_a_huge_grid_is_refused_before_it_is_expanded(tmp_path, text):
    path = tmp_path / "huge.toml"
    path.write_text(text)
    tracemalloc.start()
    start = time.perf_counter()
    try:
        with pytest.raises(ConfigError, match="more than the 100000 trials an experiment may have"):
            load_config(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert time.perf_counter() - start < 5 and peak < 10e6  # expanded, the grid would take hundreds of MB


def test_the_module_docstring_documents_every_key():
    import experiments.config
    from experiments.config_problems import PROBLEM_TABLES
    from experiments.config_schema import ExperimentFile

    documented = set(re.findall(r"^ {4}(?:# )?(\w+) = ", experiments.config.__doc__, re.MULTILINE))
    keys = {key for table in (ExperimentFile, *PROBLEM_TABLES.values()) for key in table.model_fields}
    assert documented == keys - {"problems", "solvers"} | {"workers"}  # [[tables]]; workers: a solver parameter


def test_the_shipped_configs_are_valid(tmp_path):
    import shutil

    from cost_models import KernelTask
    from cost_models.xgb_model import XGBCostModel
    from experiments.config import expand, load_config
    from search.templates import Conv2DWorkload, KernelSpec

    shipped = Path(__file__).resolve().parents[2] / "experiments" / "configs"
    for path in shipped.glob("*.toml"):
        shutil.copy(path, tmp_path / path.name)
    keys = [KernelTask(KernelSpec(Conv2DWorkload(1, 8, 8, 8, c, (3, 3), (1, 1), (1, 1, 1, 1)), "NCHW", "NCHW8c")).key
            for c in (8, 16, 24)]
    XGBCostModel(n_estimators=2).fit(keys, [1.0, 2.0, 3.0]).save(tmp_path / "costmodel.json")
    names = set()
    for path in sorted(tmp_path.glob("*.toml")):
        config = load_config(path)
        assert config.name == path.stem and expand(config)
        names.add(config.name)
    assert {"solvers_synthetic", "solvers_ssd_densenet", "layout_space", "cost_sources"} <= names
