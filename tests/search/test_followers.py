"""Follower kinds: each registered one passes its conformance suite, a broken one is named, and a follower registered
by a test is extracted, priced and exported with no other module touched."""

from __future__ import annotations

import numpy as np
import pytest
from tvm import relax, te

from cost_models.cache import CostRecord
from cost_models.pricing import build_problem
from search.export import export
from search.followers import FOLLOWERS, ActivationKind, FollowerKind, FollowerMatch, check_follower, get_follower
from search.followers.fast_math import const
from search.followers.forms import Form, Step
from search.followers.pooling import MaxPool2D
from search.graph import extract_graph
from search.host import make_target
from search.plan import baseline_plan
from search.space import tuning_space
from solvers import solve
from tests.search.tiny_nets import build

TARGET = make_target(1)


class Negate(FollowerKind):
    name = "toy_negate"

    def match(self, bindings, index, shape):
        return FollowerMatch() if bindings.op_name(index) == "relax.negative" else None

    def emit(self, op, x, stored):
        return relax.op.negative(x)

    def example(self, shape, rng):
        return FollowerMatch()


@pytest.fixture
def toy_follower(monkeypatch):
    monkeypatch.setitem(FOLLOWERS, Negate.name, Negate())
    return FOLLOWERS[Negate.name]


def negate_net():
    return build((1, 8, 8, 8), lambda net, x: net.conv(net.bb.emit(relax.op.negative(net.conv(x, 16))), 16))


@pytest.mark.parametrize("name", sorted(FOLLOWERS))
def test_every_registered_follower_passes_its_conformance_suite(name):
    check_follower(get_follower(name), target=TARGET)


def test_a_follower_registered_by_a_test_is_extracted_priced_and_exported(toy_follower):
    check_follower(toy_follower, target=TARGET)
    graph = extract_graph(negate_net())
    assert graph.op("toy_negate_0").role == "follower" and [op.kind for op in graph.tunable] == ["conv2d", "conv2d"]
    space = tuning_space(graph, layouts=("NCHW", "NCHW16c"), space_size=2)
    problem = build_problem(graph, space, lambda tasks: [CostRecord(1.0, 0.0, 3) for _ in tasks])
    plan = baseline_plan(graph, "nchw16c")
    assert set(plan.choices) == {node.name for node in problem.nodes} - set(problem.meta["auxiliary"])
    assert solve(problem).assignment
    compiled = export(graph, plan, target=TARGET, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4


class SquaredReLU(ActivationKind):
    name = "toy_squared_relu"
    forms = (Form(Step("relax.nn.relu"), Step("relax.power", 2.0)),)

    def tir(self, x, attrs):
        positive = te.max(x, const(0.0, x))
        return positive * positive

    def numpy(self, x, attrs):
        return np.maximum(x, 0) ** 2


def test_a_toy_activation_registered_by_a_test_fuses_into_the_kernel_before_it(monkeypatch):
    monkeypatch.setitem(FOLLOWERS, SquaredReLU.name, SquaredReLU())
    check_follower(FOLLOWERS[SquaredReLU.name], target=TARGET)

    def body(net, x):
        squared = net.bb.emit(relax.op.power(net.conv(x, 16), relax.const(2.0, "float32")))
        return net.conv(squared, 16)

    graph = extract_graph(build((1, 8, 8, 8), body))
    assert [(op.kind, op.attrs["activation"]) for op in graph.ops] == [("conv2d", SquaredReLU.name),
                                                                       ("conv2d", "relu")]
    compiled = export(graph, baseline_plan(graph, "nchw16c"), target=TARGET, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4


def test_without_it_the_operator_is_a_fixed_op():
    assert extract_graph(negate_net()).op("negative_0").role == "fixed"


class NCHWOnlyPool(MaxPool2D):
    name = "nchw_only_pool"

    def emit(self, op, x, stored):  # ignores the layout its input is stored in
        return super().emit(op, x, "NCHW")


class ForgetfulClip(FollowerKind):
    name = "forgetful_clip"

    def match(self, bindings, index, shape):
        return FollowerMatch({"min": 0.0}) if bindings.op_name(index) == "relax.clip" else None

    def emit(self, op, x, stored):
        return relax.op.clip(x, op.attrs["min"], op.attrs.get("max", 6.0))

    def example(self, shape, rng):
        return FollowerMatch({"min": 0.0, "max": 6.0})


@pytest.mark.parametrize("kind, check", [(NCHWOnlyPool(), "the same in every layout"),
                                         (ForgetfulClip(), "recognised as emitted")])
def test_a_follower_breaking_a_check_is_named_with_it(kind, check):
    with pytest.raises(AssertionError, match=f"{kind.name}: check {check} failed"):
        check_follower(kind, target=TARGET)


def silu_net(form: str):
    """conv -> SiLU in ``form`` (``x*sigmoid(x)``, ``sigmoid(x)*x``, or a sigmoid read twice) -> conv."""

    def body(net, x):
        y = net.conv(x, 16, act=None)
        s = net.bb.emit(relax.op.sigmoid(y))
        product = net.bb.emit(relax.op.multiply(y, s) if form == "x*sigmoid(x)" else relax.op.multiply(s, y))
        if form == "sigmoid read twice":
            product = net.bb.emit(relax.op.add(product, s))
        return net.conv(product, 16)

    return build((1, 8, 8, 8), body)


@pytest.mark.parametrize("form", ["x*sigmoid(x)", "sigmoid(x)*x"])
def test_silu_in_either_operand_order_fuses_into_the_convolution(form):
    graph = extract_graph(silu_net(form))
    assert [op.kind for op in graph.ops] == ["conv2d", "conv2d"] and graph.op("conv2d_0").attrs["activation"] == "silu"
    compiled = export(graph, baseline_plan(graph, "nchw16c"), target=TARGET, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4


def test_an_activation_no_kernel_absorbs_is_one_vectorised_pass():
    """SiLU after a concat (which fuses nothing): one follower, emitted as one elementwise PrimFunc."""

    def body(net, x):
        both = net.bb.emit(relax.op.concat([net.conv(x, 8), net.conv(x, 8)], axis=1))
        product = net.bb.emit(relax.op.multiply(both, net.bb.emit(relax.op.sigmoid(both))))
        return net.conv(product, 16)

    graph = extract_graph(build((1, 8, 8, 8), body))
    assert [(op.kind, op.role) for op in graph.ops if op.role != "tunable"] == [("silu", "follower")]
    compiled = export(graph, baseline_plan(graph, "nchw16c"), target=TARGET, threads=1)
    assert compiled.manifest["numerical_check"]["relative_error"] <= 1e-4
    computing = [call for call in compiled.manifest["calls"]  # the silu itself, not a conversion of its value
                 if any(c["op"] == "silu_0" and not c["dst"] for c in call["computes"])]
    assert len(computing) == 1


def test_a_sigmoid_read_elsewhere_too_stays_a_sigmoid():
    graph = extract_graph(silu_net("sigmoid read twice"))
    assert [op.kind for op in graph.ops if op.role == "follower"] == ["sigmoid"]
    assert "multiply" in [op.kind for op in graph.ops if op.role == "fixed"]
