"""Experiment files: expansion into trials with stable ids and hashes, and one clear error per fault."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.cli import main
from experiments.config import LP_BOUND, expand, load_config, parse_config
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


FAULTS = [
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
    path.write_text(text)
    assert main(["ablate", str(path), "--tracking-uri", f"sqlite:///{tmp_path / 'never.db'}"]) == 2
    captured = capsys.readouterr()
    assert captured.err.startswith(f"error: {path}: ") and captured.err.count("\n") == 1
    assert message in captured.err
    assert not (tmp_path / "never.db").exists()  # nothing ran


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
