"""The lists that mirror a registry are generated from it: the cost sources' flags and experiment-file keys, and
``tessera compare``'s solvers."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from cost_models.sources import COST_SOURCES, HybridSource, SelectiveSource, source_parameters
from experiments.cli import build_parser
from experiments.compare import compare_settings
from experiments.config import ConfigError, ProblemSpec, expand, parse_config
from experiments.config_problems import SOURCE_KEYS, ModelProblem, cost_source_of
from solvers import SOLVERS

HYBRID = {"model": "resnet18", "space_size": 1, "costs": "hybrid", "cost_model": __file__}
BASE = {"name": "x", "lower_bound": False, "solvers": [{"name": "dp"}]}


def _flags(command: str) -> set[str]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return {flag for action in sub.choices[command]._actions for flag in action.option_strings}


@pytest.mark.parametrize("command", ["extract", "tune"])
def test_every_source_parameter_is_a_flag_and_an_experiment_file_key(command):
    spec_fields = {f.name for f in dataclasses.fields(ProblemSpec)}
    for name, param in source_parameters().items():
        assert param.declared.flag in _flags(command)
        assert param.declared.key in ModelProblem.model_fields and param.declared.key in spec_fields
        assert SOURCE_KEYS[param.declared.key] == name
        assert set(param.sources) == {source for source, cls in COST_SOURCES.items() if name in cls.parameters()}


def test_hybrid_rounds_is_a_key_that_reaches_the_source_and_is_checked():
    trials = expand(parse_config({**BASE, "problems": [{**HYBRID, "hybrid_rounds": [1, 3]}]}))
    assert [t.problem.hybrid_rounds for t in trials] == [1, 3]
    assert trials[0].id != trials[1].id and trials[0].config_hash != trials[1].config_hash
    assert cost_source_of(trials[1].problem.settings()) == HybridSource(model=__file__, fraction=0.2, rounds=3)
    plain = expand(parse_config({**BASE, "problems": [HYBRID]}))[0].problem
    assert plain.hybrid_rounds is None and "-r" not in plain.label.split("-hybrid")[1]
    with pytest.raises(ConfigError, match="hybrid_rounds must be an integer >= 1"):
        parse_config({**BASE, "problems": [{**HYBRID, "hybrid_rounds": 0}]})


def test_the_pick_settings_are_keys_that_reach_the_selective_source_and_are_checked():
    selective = {"model": "resnet18", "costs": "selective", "cost_model": __file__}
    trials = expand(parse_config({**BASE, "problems": [{**selective, "initial_picks": 1, "pick_margin": [0, 0.2]}]}))
    assert [(t.problem.initial_picks, t.problem.pick_margin) for t in trials] == [(1, 0.0), (1, 0.2)]
    assert trials[0].config_hash != trials[1].config_hash and trials[0].problem.label.endswith("-p1-m0")
    assert cost_source_of(trials[0].problem.settings()) == SelectiveSource(model=__file__, initial=1, margin=0.0)
    with pytest.raises(ConfigError, match="pick_margin must be a number in \\[0, 1\\]"):
        parse_config({**BASE, "problems": [{**selective, "pick_margin": 1.5}]})


def test_compare_runs_every_registered_solver_and_limits_those_that_search():
    settings = compare_settings(7.0)
    assert set(settings) == set(SOLVERS)
    assert {name for name, params in settings.items() if params} == {
        name for name, cls in SOLVERS.items() if cls.searches_to_optimality} == {"auto", "ilp", "toulbar2"}
    assert all(params in ({}, {"time_limit": 7.0}) for params in settings.values())
