"""``tessera show``: a plan's picture on a tiny network (every node, layouts, transforms and their costs), SVG and PNG,
the problem found beside a plan or an artifact, and bad input as one error line."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ElementTree

import pytest

from cost_models.cache import CostRecord
from cost_models.pricing import build_problem, plan_cost
from cost_models.tasks import KernelTask, TransformTask
from experiments.cli import main
from experiments.plan_view import plan_view
from experiments.show import TRANSFORM_RED, draw_plan
from search.errors import SearchError
from search.graph import extract_graph
from search.plan import Plan, baseline_plan
from search.space import tuning_space
from search.zoo import load_model
from tests.cli_helpers import one_error_line
from tests.search.tiny_nets import residual_concat_net

TRANSFORM_MS, KERNEL_MS, CHAIN_MS = 0.125, 0.5, 0.0625


def _made_up_costs(tasks) -> list[CostRecord]:
    return [CostRecord(TRANSFORM_MS if isinstance(task, TransformTask) else KERNEL_MS if isinstance(task, KernelTask)
                       else CHAIN_MS, 0.0, 3) for task in tasks]


@pytest.fixture(scope="module")
def graph():
    return extract_graph(residual_concat_net())


@pytest.fixture(scope="module")
def space(graph):
    return tuning_space(graph, layouts=("NCHW", "NCHW8c"), space_size=2)


@pytest.fixture(scope="module")
def plan(graph, space):
    """NCHW throughout but conv2d_1 writing NCHW8c (its residual and the pooled value read twice are converted) and
    concat_0 in NCHW8c (its inputs and its reader are converted)."""
    choices = dict(baseline_plan(graph, "nchw").choices)
    choices["conv2d_1"] = next(c.name for c in space["conv2d_1"] if (c.in_layout, c.out_layout) == ("NCHW", "NCHW8c"))
    choices["concat_0"] = "NCHW8c"
    return Plan(choices, "tiny")


@pytest.fixture(scope="module")
def problem(graph, space):
    return build_problem(graph, space, _made_up_costs, meta={"model": "tiny"})


def test_the_view_has_every_node_and_marks_and_prices_each_transform(graph, plan, problem):
    view = plan_view(graph, plan, problem, costs_from="problem.json")
    names = [node.name for node in view.nodes]
    assert names == ["data", *(op.name for op in graph.ops if op.role != "follower"), "output"]
    marked = {(edge.src, edge.dst, edge.source_layout, edge.target_layout, edge.shared_by) for edge in view.transforms}
    assert marked == {("conv2d_0", "conv2d_1", "NCHW", "NCHW8c", 1),  # the residual arrives in the output layout
                      ("conv2d_1", "conv2d_2", "NCHW8c", "NCHW", 2), ("conv2d_1", "conv2d_3", "NCHW8c", "NCHW", 2),
                      ("conv2d_2", "concat_0", "NCHW", "NCHW8c", 1), ("conv2d_3", "concat_0", "NCHW", "NCHW8c", 1),
                      ("concat_0", "conv2d_4", "NCHW8c", "NCHW", 1)}
    assert view.conversions == 5  # the pooled value is converted once for its two readers
    assert all(edge.cost_ms == pytest.approx(TRANSFORM_MS) for edge in view.transforms)
    priced = {node.name: node.cost_ms for node in view.nodes if node.role == "tunable"}
    assert priced == {name: pytest.approx(problem.nodes[problem.index(name)].costs[
        problem.nodes[problem.index(name)].candidates.index(choice)]) for name, choice in plan.choices.items()}
    assert view.total_ms == pytest.approx(plan_cost(problem, plan.choices)) and view.costs_from == "problem.json"


def test_without_a_problem_the_view_has_layouts_and_knobs_only(graph, plan):
    view = plan_view(graph, plan)
    assert view.total_ms is None and not view.costs_from and len(view.transforms) == 6
    assert all(node.cost_ms is None for node in view.nodes) and all(e.cost_ms is None for e in view.edges)
    assert next(node for node in view.nodes if node.name == "conv2d_1").out_layout == "NCHW8c"


def test_a_problem_that_does_not_price_the_plan_is_refused(graph, plan, space):
    nchw_only = build_problem(graph, {name: [c for c in candidates if c.out_layout in ("NCHW", "NC")]
                                      for name, candidates in space.items()}, _made_up_costs)
    with pytest.raises(SearchError, match="does not price this plan: node conv2d_1 has no candidate"):
        plan_view(graph, plan, nchw_only, costs_from="other.json")


def test_svg_names_every_node_and_marks_transforms_with_the_problem_beside(graph, plan, problem, tmp_path):
    plan.save(tmp_path / "plan.json")
    problem.save(tmp_path / "problem.json")
    drawing = draw_plan(tmp_path / "plan.json", tmp_path / "plan.svg", graph=graph)
    assert drawing.problem == tmp_path / "problem.json" and drawing.conversions == 5 and not drawing.note
    root = ElementTree.parse(tmp_path / "plan.svg").getroot()
    text = " ".join(root.itertext())
    assert root.tag.endswith("svg") and "costs from problem.json" in text
    for node in plan_view(graph, plan).nodes:
        assert node.name in text
    assert f"NCHW>NCHW8c {TRANSFORM_MS:.3g} ms" in text and "NCHW8c>NCHW" in text and "x2 reads" in text
    assert TRANSFORM_RED in (tmp_path / "plan.svg").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plan.json", "plan.svg", "problem.json"]


def test_an_artifact_is_drawn_as_png_with_the_problem_of_the_directory_above(graph, plan, problem, tmp_path):
    artifact = tmp_path / "tuned" / "artifact"
    artifact.mkdir(parents=True)
    plan.save(artifact / "plan.json")
    (artifact / "manifest.json").write_text("{}")
    problem.save(tmp_path / "tuned" / "problem.json")
    drawing = draw_plan(artifact, tmp_path / "plan.png", graph=graph)
    assert drawing.problem == tmp_path / "tuned" / "problem.json"
    assert (tmp_path / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_problem_beside_that_does_not_price_the_plan_is_left_out_with_a_note(graph, plan, tmp_path):
    plan.save(tmp_path / "plan.json")
    other = build_problem(graph, tuning_space(graph, layouts=("NCHW",), space_size=1), _made_up_costs)
    other.save(tmp_path / "problem.json")
    drawing = draw_plan(tmp_path / "plan.json", tmp_path / "plan.svg", graph=graph)
    assert drawing.problem is None and "problem.json not used" in drawing.note
    with pytest.raises(SearchError, match="does not price this plan"):
        draw_plan(tmp_path / "plan.json", tmp_path / "plan.svg", tmp_path / "problem.json", graph=graph)


@pytest.fixture(scope="module")
def resnet_plan(tmp_path_factory):
    """A zoo model's plan file, which the command line reloads by name."""
    graph = extract_graph(load_model("resnet18", image_size=32))
    path = tmp_path_factory.mktemp("resnet") / "plan.json"
    baseline_plan(graph, "nchw16c", "resnet18", {"batch": 1, "image_size": 32, "seed": 0}).save(path)
    return path


def test_cli_draws_a_zoo_plan(resnet_plan, tmp_path, capsys):
    assert main(["show", str(resnet_plan), "--out", str(tmp_path / "r.png")]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith(f"wrote {tmp_path / 'r.png'}: ") and "no costs" in printed
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG" and [p.name for p in tmp_path.iterdir()] == ["r.png"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["{tmp}/nosuch.json", "--out", "{tmp}/p.svg"], "no such plan file or artifact directory"),
        (["{plan}", "--out", "{tmp}/p.pdf"], "must end in .svg or .png"),
        (["{tmp}", "--out", "{tmp}/p.svg"], "holds no plan.json"),
        (["{plan}", "--out", "{tmp}/folder.svg"], "is a directory"),
        (["{plan}", "--out", "{tmp}/p.svg", "--problem", "{tmp}/nosuch.json"], "cannot read"),
        (["{tmp}/folder.svg/bad.json", "--out", "{tmp}/p.svg"], "not valid JSON"),
        (["{tmp}/folder.svg/nameless.json", "--out", "{tmp}/p.svg"], "names no model"),
    ],
)
def test_cli_bad_input_is_one_error_line_and_leaves_no_file(argv, message, resnet_plan, tmp_path, capsys):
    folder = tmp_path / "folder.svg"
    folder.mkdir()
    (folder / "bad.json").write_text("{")
    (folder / "nameless.json").write_text(json.dumps({"choices": {}}))
    before = sorted(tmp_path.rglob("*"))
    assert main(["show", *(arg.format(tmp=tmp_path, plan=resnet_plan) for arg in argv)]) == 2
    assert message in one_error_line(capsys)
    assert sorted(tmp_path.rglob("*")) == before
