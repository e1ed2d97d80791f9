"""Every ``tessera`` subcommand walked through a table of bad inputs.

Each row is a command line and the input files it needs (created in an empty directory, the working directory of the
call). Every row must end in exactly one ``error: ...`` line on stderr (naming what is wrong) and exit code 2, or 1
for a valid problem proven infeasible (4 where a heuristic finds no assignment and proves nothing), with no traceback
and no warning, nothing on stdout but standard JSON, every input byte-identical afterwards and no file left behind (no
temporary file, no half-written output). Bad input is refused before anything is measured or compiled, so no row
builds a kernel.
"""

from __future__ import annotations

import json
import os
import shlex
import sqlite3
import stat
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import pytest

import cost_models.cache
from experiments.cli import build_parser, main
from solvers.input_files import MAX_TEXT_BYTES

BINARY = b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01"


def _problem(costs_a: list, pair: list | None = None) -> bytes:
    nodes = [{"name": "a", "candidates": ["x", "y"], "costs": costs_a},
             {"name": "b", "candidates": ["x", "y"], "costs": [1, 2]}]
    edges = [{"src": "a", "dst": "b", "costs": pair or [[0, 1], [1, 0]]}]
    return json.dumps({"nodes": nodes, "edges": edges}).encode()


def _sqlite_file(create: Callable[[Path], object]) -> bytes:
    """The bytes of the sqlite file ``create(path)`` makes (and closes)."""
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "file.sqlite"
        create(path)
        return path.read_bytes()


def _empty_cost_cache(path: Path) -> None:
    cache = cost_models.cache.CostCache(path)
    len(cache)  # connects: creates the table
    cache.close()


def _other_database(path: Path) -> None:
    """An sqlite file of another program: a table that is not a cost table."""
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE runs (id INTEGER)")
    conn.commit()
    conn.close()


def _zero(path: Path) -> None:
    """A name for ``/dev/zero``: a file without end."""
    path.symlink_to("/dev/zero")


def _fifo(path: Path) -> None:
    """A named pipe nobody writes: reading it waits forever."""
    os.mkfifo(path)


def _sparse(path: Path) -> None:
    """A file a byte larger than any text input may be, written in no time (sparse)."""
    with path.open("wb") as handle:
        handle.truncate(MAX_TEXT_BYTES + 1)


def _relu_onnx(shape: list[int]) -> Callable[[Path], None]:
    """An ONNX model that is one ReLU of an input of ``shape`` ([]: a scalar): nothing to plan."""
    def write(path: Path) -> None:
        import onnx
        from onnx import TensorProto, helper

        graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))

    return write


def _control_flow_onnx(path: Path) -> None:
    """An ONNX model that branches on its input's sum (an ``If`` node named "branch")."""
    import onnx
    from onnx import TensorProto, helper

    def branch(name: str, op: str):
        return helper.make_graph([helper.make_node(op, ["x"], [name])], name, [],
                                 [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, 4])])

    nodes = [helper.make_node("ReduceSum", ["x"], ["sum"], keepdims=0),
             helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("zero", TensorProto.FLOAT, [], [0.0])),
             helper.make_node("Greater", ["sum", "zero"], ["positive"]),
             helper.make_node("If", ["positive"], ["y"], name="branch", then_branch=branch("then", "Relu"),
                              else_branch=branch("else", "Neg"))]
    graph = helper.make_graph(nodes, "branching", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def _manifest(**fields) -> bytes:
    return json.dumps({"library": "model.so", "input_shapes": {"data": [1, 3, 32, 32]}, "threads": 1,
                       **fields}).encode()


MANIFEST = _manifest()
PLAN = json.dumps({"model": "resnet18", "args": {"batch": 1, "image_size": 32}, "choices": {}}).encode()
RECORD = {"context": {"target": "llvm", "cpu": "cpu", "threads": 2, "tvm_version": "0.27", "template_version": "1",
                      "timing": "warm"},
          "key": {"kind": "conv2d"}, "median_ms": 1.0, "spread_ms": 0.1, "repeats": 5, "error": None,
          "measured_at": 1.0}
RECORDS = (json.dumps(RECORD) + "\n").encode()
GRID = b'name = "grid"\n[[problems]]\ngenerator = "chain"\nnodes = 10\nseed = 0\n[[solvers]]\nname = "greedy"\n'

INPUTS: dict[str, bytes | Callable[[Path], None] | None] = {
    "p.json": _problem([1, 2]),
    "binary.json": BINARY,
    "binary.wcsp": BINARY,
    "binary.onnx": BINARY,
    "binary.toml": BINARY,
    "empty.json": b"",
    "empty.onnx": b"",
    "empty.toml": b"",
    "empty.db": b"",
    "deep.json": b"[" * 100_000,
    "deep.toml": b"a = " + b"[" * 100_000,
    "truncated.json": b'{"nodes": [{"name": "a", ',
    "truncated.toml": b"name = [",
    "nan.json": _problem([1, 2]).replace(b"[1, 2]", b"[NaN, 2]", 1),
    "negative.json": _problem([-1, 2]),
    "overflow.json": _problem([1e308, 1e308], [[1e308, 1e308], [1e308, 1e308]]),  # sums overflow a float
    "huge.json": _problem([1, 2]).replace(b"[1, 2]", b"[1e400, 2]", 1),  # too large for a float
    "costly.json": _problem([800, 1]),  # a cost .uai cannot hold
    "infeasible.json": _problem([1, 2], [[None, None], [None, None]]),
    "wide.wcsp": b"wide 1 1000000000 0 10\n1000000000\n",  # a domain of 1e9 values
    "dir": None,
    "folder.json": None,  # a directory with a file's name
    "plan.json": PLAN,
    "args-plan.json": PLAN.replace(b'{"batch": 1, "image_size": 32}', b"[1, 2]"),
    "unknown-node-plan.json": PLAN.replace(b'"choices": {}', b'"choices": {"nosuch": "NCHW"}'),
    "out/plan.json": PLAN,
    "artifact/model.so": b"\x7fELF\x02\x01\x01",  # truncated
    "artifact/manifest.json": MANIFEST,
    "artifact/plan.json": PLAN,
    "no-manifest/model.so": b"\x7fELF\x02\x01\x01",
    "no-manifest/plan.json": PLAN,
    "bad-manifest/model.so": b"\x7fELF\x02\x01\x01",
    "bad-manifest/manifest.json": BINARY,
    "bad-manifest/plan.json": PLAN,
    "corrupt.sqlite": b"this is not an sqlite database; " * 8,
    "cache.sqlite": _sqlite_file(_empty_cost_cache),
    "other.sqlite": _sqlite_file(_other_database),
    "records.jsonl": RECORDS,
    "half-records.jsonl": RECORDS + b'{"context": {"target": "llvm"},\n',
    "nan-records.jsonl": RECORDS.replace(b'"median_ms": 1.0', b'"median_ms": NaN'),
    "date-records.jsonl": RECORDS.replace(b'"measured_at": 1.0', b'"measured_at": "yesterday"'),
    "corrupt.jsonl.gz": b"\x1f\x8b\x08\x00" + b"\x00" * 12 + b"garbage",
    "grid.toml": GRID,
    "huge-grid.toml": GRID.replace(b'name = "grid"\n', b'name = "grid"\nrepeats = 200000\n'),
    "nodes-grid.toml": GRID.replace(b"nodes = 10", b"nodes = 1000000000"),
    **{f"zero.{suffix}": _zero for suffix in ("json", "wcsp.gz", "onnx", "toml", "jsonl", "db")},
    "fifo.json": _fifo,
    "scalar.onnx": _relu_onnx([]),
    "relu.onnx": _relu_onnx([1, 4]),
    "branch.onnx": _control_flow_onnx,
    "big.json": _sparse,
    **{f"{name}-manifest/{file}": content for name, manifest in (
        ("huge", _manifest(input_shapes={"data": [1, 3, 100000, 200000]})),  # 224 GiB
        ("dtype", _manifest(input_dtypes={"data": "complex64"})),
        ("shape", _manifest(input_shapes={"data": [1, 3, -32, 32]})),
        ("threads", _manifest(threads=10**9)))
       for file, content in (("manifest.json", manifest), ("plan.json", PLAN), ("model.so", b"\x7fELF\x02\x01\x01"))},
}
"""Input files by name (None: a directory; a function: makes a special file at its path); a row names the ones it
needs (a directory name brings its files)."""


def row(argv: str, message: str, *files: str, code: int = 2):
    """A table row: the command line, a part of the error line, the input files and the exit code."""
    return pytest.param(argv, message, files, code, id=argv)


ROWS = [
    # ---------------------------------------------------------------------------------------------- solve
    row("solve missing.json", "cannot read missing.json"),
    row("solve folder.json", "Is a directory", "folder.json"),
    row("solve dir", "unknown format", "dir"),
    row("solve binary.json", "not UTF-8", "binary.json"),
    row("solve binary.wcsp", "binary.wcsp", "binary.wcsp"),
    row("solve empty.json", "not valid JSON", "empty.json"),
    row("solve truncated.json", "not valid JSON", "truncated.json"),
    row("solve nan.json", "NaN", "nan.json"),
    row("solve negative.json", "non-negative", "negative.json"),
    row("solve overflow.json", "costs too large", "overflow.json"),
    row("solve huge.json", "too large for a float", "huge.json"),
    row("solve wide.wcsp", "entries", "wide.wcsp"),
    row("solve p.json --solver simplex", "unknown solver 'simplex'", "p.json"),
    row("solve p.json --time-limit -1", "time_limit", "p.json"),
    row("solve p.json --time-limit 0", "time_limit", "p.json"),
    row("solve p.json --time-limit nan", "time_limit", "p.json"),
    row("solve p.json --time-limit 1e400", "time_limit", "p.json"),
    row("solve p.json --time-limit soon", "invalid float value", "p.json"),
    row("solve p.json --out dir", "is a directory", "p.json", "dir"),
    row("solve p.json --out p.json", "is the problem file", "p.json"),
    *(row(f"solve infeasible.json --solver {solver} --bound", "no finite-cost assignment", "infeasible.json", code=1)
      for solver in ("auto", "dp", "pbqp", "ilp", "toulbar2")),
    row("solve infeasible.json --solver greedy", "proved none impossible", "infeasible.json", code=4),
    row("solve", "the following arguments are required: problem"),
    row(f"solve {'x' * 300}.json", "File name too long"),
    row("solve deep.json", "nested too deeply", "deep.json"),
    row("solve zero.json", "not a regular file", "zero.json"),
    row("solve zero.wcsp.gz", "not a regular file", "zero.wcsp.gz"),
    row("solve fifo.json", "not a regular file", "fifo.json"),
    row("solve big.json", "1 GiB an input may have", "big.json"),
    row(f"solve p.json --out {'x' * 300}.json", "File name too long", "p.json"),
    # ---------------------------------------------------------------------------------------------- convert
    row("convert missing.json out.wcsp", "cannot read missing.json"),
    row("convert folder.json out.wcsp", "Is a directory", "folder.json"),
    row("convert binary.json out.wcsp", "not UTF-8", "binary.json"),
    row("convert empty.json out.cfn", "not valid JSON", "empty.json"),
    row("convert huge.json out.cfn", "too large for a float", "huge.json"),
    row("convert wide.wcsp out.json", "entries", "wide.wcsp"),
    row("convert p.json out.txt", "unknown format '.txt'", "p.json"),
    row("convert p.json p.json", "is the input file", "p.json"),
    row("convert p.json folder.json", "is a directory", "p.json", "folder.json"),
    row("convert costly.json out.uai", "underflows", "costly.json"),
    # ---------------------------------------------------------------------------------------------- models
    row("models nosuch", "unknown model 'nosuch'"),
    row("models missing.onnx", "missing.onnx"),
    row("models binary.onnx", "binary.onnx", "binary.onnx"),
    row("models empty.onnx", "empty.onnx", "empty.onnx"),
    row("models zero.onnx", "not a regular file", "zero.onnx"),
    row("models scalar.onnx", "input 'x' is a scalar", "scalar.onnx"),
    row("models branch.onnx", "operator If (branch) is control flow", "branch.onnx"),
    row("extract branch.onnx --out q.json", "operator If (branch) is control flow", "branch.onnx"),
    row("extract relu.onnx --out q.json", "relu.onnx: nothing to tune", "relu.onnx"),
    row("tune relu.onnx --out tuned", "relu.onnx: nothing to tune", "relu.onnx"),
    row("models resnet18 --input-shape 1,3,-1,5", "dimension below 1"),
    row("models resnet18 --input-shape 1,3,x,5", "not a list of dimensions"),
    row("models resnet18 --input-shape 1,3,100000,100000", "elements"),
    row("models resnet18 --input-shape 1,3,16,16", "image_size must be an integer >= 32"),
    # ---------------------------------------------------------------------------------------------- export
    row("export nosuch --plan nchw --out built", "unknown model 'nosuch'"),
    row("export resnet18 --plan missing.json --out built", "missing.json"),
    row("export resnet18 --plan binary.json --out built", "not UTF-8", "binary.json"),
    row("export resnet18 --plan empty.json --out built", "not valid JSON", "empty.json"),
    row("export resnet18 --plan folder.json --out built", "Is a directory", "folder.json"),
    row("export resnet18 --plan zero.json --out built", "not a regular file", "zero.json"),
    row("export resnet18 --plan args-plan.json --out built", "args", "args-plan.json"),
    row("export resnet18 --plan unknown-node-plan.json --out built", "unknown node", "unknown-node-plan.json"),
    row("export resnet18 --plan nchw --out built --spin-us -1", "spin_us must be an integer from 0 to 100000"),
    row("export resnet18 --plan nchw --out built --chunks-per-thread 0",
        "chunks_per_thread must be an integer from 1 to 64"),
    row("export resnet18 --plan nchw --out built --seed -1", "seed must be"),
    row("export resnet18 --plan nchw --out built --threads 0", "--threads must be"),
    row("export resnet18 --plan nchw --out built --batch 0", "batch must be a positive integer"),
    row("export resnet18 --plan nchw --out built --image-size 100000", "elements"),
    row("export resnet18 --plan nchw --out built --batch 1000000000", "elements"),
    row("export resnet18 --plan nchw --out p.json", "is a file", "p.json"),
    row("export resnet18 --plan out/plan.json --out out", "would overwrite", "out"),
    row("export binary.onnx --plan nchw --out built", "binary.onnx", "binary.onnx"),
    # ---------------------------------------------------------------------------------------------- run
    row("run missing", "not a tessera artifact"),
    row("run dir", "not a tessera artifact", "dir"),
    row("run p.json", "not a tessera artifact", "p.json"),
    row("run no-manifest", "missing manifest.json", "no-manifest"),
    row("run bad-manifest", "manifest.json is corrupt", "bad-manifest"),
    row("run artifact", "model.so is corrupt", "artifact"),
    row("run artifact --repeat 0", "repeat must be", "artifact"),
    row("run artifact --repeat 100000000000", "repeat must be", "artifact"),
    row("run artifact --threads 0", "threads must be", "artifact"),
    row("run artifact --threads 100000", "threads must be", "artifact"),
    row("run artifact --spin-us 1000000", "spin_us must be an integer from 0 to 100000", "artifact"),
    row("run artifact --chunks-per-thread 65", "chunks_per_thread must be an integer from 1 to 64", "artifact"),
    row("run huge-manifest", "more than this machine's", "huge-manifest"),
    row("run dtype-manifest", "'complex64', not one of float32", "dtype-manifest"),
    row("run shape-manifest", "not a list of positive integers", "shape-manifest"),
    row("run threads-manifest", "thread count 1000000000", "threads-manifest"),
    # ---------------------------------------------------------------------------------------------- show
    row("show missing.json --out plan.svg", "missing.json"),
    row("show binary.json --out plan.svg", "not UTF-8", "binary.json"),
    row("show dir --out plan.svg", "plan.json", "dir"),
    row("show plan.json --out plan.txt", ".svg or .png", "plan.json"),
    row("show plan.json --out folder.json", "folder.json", "plan.json", "folder.json"),
    # ---------------------------------------------------------------------------------------------- extract
    row("extract nosuch --out q.json", "unknown model 'nosuch'"),
    row("extract binary.onnx --out q.json", "binary.onnx", "binary.onnx"),
    row("extract resnet18 --out q.json --seed -1", "seed must be"),
    row("extract resnet18 --out q.json --seed 1000000000000000000000000000000", "seed must be"),
    row("extract resnet18 --out q.json --batch nan", "invalid int value"),
    row("extract resnet18 --out q.json --threads 0", "threads must be"),
    row("extract resnet18 --out q.json --threads 100000", "threads must be"),
    row("extract resnet18 --out q.json --space-size 0", "space size must be"),
    row("extract resnet18 --out q.json --layouts NCHW99c", "unknown layout"),
    row("extract resnet18 --out q.json --batch 0", "batch must be"),
    row("extract resnet18 --out q.json --image-size 10", "image_size must be"),
    row("extract resnet18 --out q.json --image-size 1000000", "elements"),
    row("extract resnet18 --out q.json --costs guessed", "invalid choice"),
    row("extract resnet18 --out q.json --costs measured --cost-model m.json", "take a cost-model file"),
    row("extract resnet18 --out q.json --costs selective --cost-model m.json", "m.json: not a readable cost-model"),
    row("extract resnet18 --out q.json --costs xgboost --cost-model binary.json", "cost-model file", "binary.json"),
    row("extract resnet18 --out q.json --costs hybrid --cost-model missing.json", "missing.json"),
    row("extract resnet18 --out q.json --costs hybrid --cost-model binary.json --measure-fraction nan", "fraction",
        "binary.json"),
    row("extract resnet18 --out q.json --costs hybrid --cost-model binary.json --hybrid-rounds 0", "rounds",
        "binary.json"),
    row("extract resnet18 --out q.json --costs selective --pick-margin 2", "pick margin"),
    row("extract resnet18 --out q.json --costs selective --initial-picks 0", "initial picks"),
    row("extract resnet18 --out q.json --costs measured --initial-picks 1",
        "takes best-predicted candidates measured first"),
    row("extract resnet18 --out q.json --cache corrupt.sqlite", "not a usable cost cache", "corrupt.sqlite"),
    row("extract resnet18 --out q.json --cache other.sqlite", "not a tessera cost cache", "other.sqlite"),
    row("extract resnet18 --out q.json --cache dir", "not a usable cost cache", "dir"),
    row("extract resnet18 --out q.json --address 127.0.0.1:1", "needs the token its nodes were started with"),
    row("extract resnet18 --out q.json --address 127.0.0.1:\u00b2", "is not HOST:PORT"),
    row("extract resnet18 --out q.json --address ray://127.0.0.1:10001", "Ray Client address"),
    row("extract resnet18 --out q.json --address localhost", "is not HOST:PORT"),
    row("extract resnet18 --out q.json --key-by-node", "give its address"),
    row("extract resnet18 --out q.json --costs xgboost --cost-model binary.json --address 127.0.0.1:1",
        "xgboost costs measure nothing", "binary.json"),
    row("extract resnet18 --out dir", "is a directory", "dir"),
    row("extract resnet18 --out cache.sqlite --cache cache.sqlite", "is the cost cache", "cache.sqlite"),
    # ---------------------------------------------------------------------------------------------- tune
    row("tune resnet18 --out tuned --repeat 0", "repeat must be"),
    row("tune resnet18 --out tuned --repeat 1000000000000", "repeat must be"),
    row("tune resnet18 --out tuned --calibrate -1", "calibrate must be"),
    row("tune resnet18 --out tuned --solver simplex", "unknown solver 'simplex'"),
    row("tune resnet18 --out tuned --solver pbqp,pbqp", "named twice"),
    row("tune resnet18 --out tuned --time-limit -1", "time_limit"),
    row("tune resnet18 --out tuned --time-limit nan", "time_limit"),
    row("tune resnet18 --out tuned --seed -1", "seed must be"),
    row("tune resnet18 --out tuned --cache corrupt.sqlite", "not a usable cost cache", "corrupt.sqlite"),
    row("tune resnet18 --out tuned --address 127.0.0.1:1", "needs the token its nodes were started with"),
    row("tune resnet18 --out p.json", "is a file", "p.json"),
    row("tune resnet18 --out out --cost-model out/plan.json --costs xgboost", "would overwrite", "out"),
    row("tune resnet18 --out tuned --tracking-uri bogus://store", "bogus://store"),
    row("tune resnet18 --out tuned --repeat 0 --tracking-uri sqlite:///runs.db", "repeat must be"),
    row("tune resnet18 --out tuned --tracking-uri http://127.0.0.1:1", "127.0.0.1:1"),
    # ---------------------------------------------------------------------------------------------- costmodel
    row("costmodel train --models resnet18 --out m.json --cache missing.sqlite", "no such cost cache"),
    row("costmodel train --models resnet18 --out m.json --cache corrupt.sqlite", "not a usable cost cache",
        "corrupt.sqlite"),
    row("costmodel train --models nosuch --out m.json --cache cache.sqlite", "unknown model 'nosuch'",
        "cache.sqlite"),
    row("costmodel train --models resnet18 --out m.json --cache cache.sqlite --seed -1", "--seed must be",
        "cache.sqlite"),
    row("costmodel train --models resnet18 --out dir --cache cache.sqlite", "is a directory", "cache.sqlite",
        "dir"),
    row("costmodel train --models resnet18 --out cache.sqlite --cache cache.sqlite", "is the cost cache",
        "cache.sqlite"),
    row("costmodel train --models binary.onnx --out binary.onnx --cache cache.sqlite", "is the model file",
        "binary.onnx", "cache.sqlite"),
    row("costmodel train --models resnet18 --out m.json --cache cache.sqlite --threads 0", "threads must be",
        "cache.sqlite"),
    row("costmodel eval --models resnet18 --model binary.json --cache cache.sqlite", "not a readable cost-model",
        "binary.json", "cache.sqlite"),
    row("costmodel eval --models resnet18 --model missing.json --cache cache.sqlite", "missing.json",
        "cache.sqlite"),
    row("costmodel eval --models resnet18 --model binary.json --cache missing.sqlite", "no such cost cache",
        "binary.json"),
    row("costmodel fit --models resnet18", "invalid choice"),
    # ---------------------------------------------------------------------------------------------- cache
    row("cache stats --cache missing.sqlite", "no such cost cache"),
    row("cache stats --cache corrupt.sqlite", "not a usable cost cache", "corrupt.sqlite"),
    row("cache export dir --cache cache.sqlite", "is a directory", "dir", "cache.sqlite"),
    row("cache export cache.sqlite --cache cache.sqlite", "cache itself", "cache.sqlite"),
    row("cache import binary.json --cache fresh.sqlite", "binary.json", "binary.json"),
    row("cache merge corrupt.sqlite --cache fresh.sqlite", "corrupt.sqlite", "corrupt.sqlite"),
    row("cache import half-records.jsonl --cache fresh.sqlite", "half-records.jsonl:2", "half-records.jsonl"),
    row("cache import nan-records.jsonl --cache fresh.sqlite", "median_ms", "nan-records.jsonl"),
    row("cache import date-records.jsonl --cache fresh.sqlite", "measured_at", "date-records.jsonl"),
    row("cache import corrupt.jsonl.gz --cache fresh.sqlite", "not a cost record file", "corrupt.jsonl.gz"),
    row("cache import zero.jsonl --cache fresh.sqlite", "not a regular file", "zero.jsonl"),
    # ---------------------------------------------------------------------------------------------- generate
    row("generate resnet --seed 0 --out q.json", "invalid choice"),
    row("generate chain --seed -1 --out q.json", "seed must be a non-negative integer"),
    row("generate chain --seed x --out q.json", "invalid int value"),
    row("generate chain --seed 0 --nodes 0 --out q.json", "nodes must be a positive integer"),
    row("generate random --seed 0 --nodes 1000000000 --out q.json", "nodes must be at most 100,000"),
    row("generate chain --seed 0 --candidates 0 --out q.json", "candidates must be a positive integer"),
    row("generate chain --seed 0 --candidates 1000000 --out q.json", "candidates must be at most 1,000"),
    row("generate chain --seed 0 --candidates 1000 --out q.json", "limit of 10,000,000"),
    row("generate densenet --seed 0 --candidates 1000 --out q.json", "limit of 10,000,000"),
    row("generate densenet --seed 0 --nodes 5 --out q.json", "the number of nodes is fixed"),
    row("generate chain --seed 0 --nodes 3 --out dir", "is a directory", "dir"),
    # ---------------------------------------------------------------------------------------------- demo, compare
    row("demo --time-limit -1", "unrecognized arguments"),
    row("compare --time-limit -1", "time_limit"),
    row("compare --time-limit later", "invalid float value"),
    # ---------------------------------------------------------------------------------------------- ablate
    row("ablate missing.toml", "missing.toml"),
    row("ablate dir", "dir", "dir"),
    row("ablate binary.toml", "not UTF-8", "binary.toml"),
    row("ablate empty.toml", "name", "empty.toml"),
    row("ablate truncated.toml", "not valid TOML", "truncated.toml"),
    row("ablate zero.toml", "not a regular file", "zero.toml"),
    row("ablate grid.toml --serial --tracking-uri sqlite:///zero.db", "not a regular file", "grid.toml", "zero.db"),
    row("ablate huge-grid.toml", "more than the 100000 trials", "huge-grid.toml"),
    row("ablate nodes-grid.toml --serial", "nodes must be at most", "nodes-grid.toml"),
    row("ablate grid.toml --address 127.0.0.1:1", "needs the token its nodes were started with", "grid.toml"),
    row("ablate grid.toml --serial --tracking-uri bogus://store", "bogus://store", "grid.toml"),
    row("ablate grid.toml --serial --tracking-uri http://127.0.0.1:1", "127.0.0.1:1", "grid.toml"),
    # ---------------------------------------------------------------------------------------------- report
    row("report nosuch", "no MLflow store"),
    row("report nosuch --tracking-uri sqlite:///missing.db", "no MLflow store"),
    row("report nosuch --tracking-uri sqlite:///empty.db", "no MLflow store", "empty.db"),
    row("report nosuch --tracking-uri sqlite:///other.sqlite", "not an MLflow store", "other.sqlite"),
    row("ablate deep.toml --serial", "nested too deeply", "deep.toml"),
    row("ablate grid.toml --serial --tracking-uri sqlite:///other.sqlite", "not an MLflow store", "grid.toml",
        "other.sqlite"),
    row("tune resnet18 --out tuned --tracking-uri sqlite:///other.sqlite", "not an MLflow store", "other.sqlite"),
    row("report nosuch --tracking-uri bogus://store", "bogus://store"),
    row("report nosuch --tracking-uri http://127.0.0.1:1", "127.0.0.1:1"),
    # ---------------------------------------------------------------------------------------------- no command
    row("frobnicate", "invalid choice: 'frobnicate'"),
]


def _create(root: Path, names: tuple[str, ...]) -> None:
    """Write the ``INPUTS`` named (and every input under a named directory) into ``root``."""
    for key, content in INPUTS.items():
        if not any(key == name or key.startswith(f"{name}/") for name in names):
            continue
        path = root / key
        if content is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, bytes):
                path.write_bytes(content)
            else:
                content(path)


def _snapshot(root: Path) -> dict[str, object]:
    """Every file and directory under ``root``, hidden ones included: a directory as None, a symbolic link as its
    target, a special or large file as its kind, size and modification time, any other file as its bytes."""
    def state(path: Path) -> object:
        if path.is_symlink():
            return os.readlink(path)
        if path.is_dir():
            return None
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > 1 << 20:
            return info.st_mode, info.st_size, info.st_mtime_ns
        return path.read_bytes()

    return {str(path.relative_to(root)): state(path) for path in root.rglob("*")}


def _refuse_constant(name: str) -> None:
    raise AssertionError(f"stdout holds {name}, which is not standard JSON")


@pytest.mark.parametrize(("argv", "message", "files", "code"), ROWS)
def test_bad_input_is_one_error_line(argv, message, files, code, tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TVM_NUM_THREADS", os.environ.get("TVM_NUM_THREADS", "1"))  # restored after the row
    monkeypatch.setattr(cost_models.cache, "DEFAULT_CACHE", tmp_path / "default-cache" / "costs.sqlite")
    monkeypatch.delenv("RAY_AUTH_MODE", raising=False)  # as in a new process (an embedded Ray sets it); restored
    for name in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))  # no ~/.ray/auth_token
    _create(tmp_path, files)
    before = _snapshot(tmp_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            status = main(shlex.split(argv))
        except SystemExit as exc:  # argparse
            status = exc.code
    out, err = capfd.readouterr()
    lines = err.splitlines() + [f"warning: {w.message}" for w in caught]
    assert "Traceback" not in out + err
    assert len(lines) == 1 and lines[0].startswith("error: "), lines
    assert message in lines[0]
    assert status == code
    if out.strip():
        json.loads(out, parse_constant=_refuse_constant)
    assert _snapshot(tmp_path) == before


def _commands(parser, prefix: str = "") -> list[str]:
    """Every (sub)command path of ``parser``: ``solve``, ..., ``costmodel train``."""
    found = []
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, command in action.choices.items():
                inner = _commands(command, f"{prefix}{name} ")
                found += inner or [f"{prefix}{name}"]
    return found


def test_the_table_covers_every_subcommand():
    covered = {param.values[0] for param in ROWS}
    missing = [command for command in _commands(build_parser())
               if not any(argv == command or argv.startswith(f"{command} ") for argv in covered)]
    assert not missing, f"no bad-input row for: {', '.join(missing)}"
