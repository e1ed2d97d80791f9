"""Files that are not text where text is expected (an image, a binary, a corrupt manifest): each reader raises its
own user-facing error naming the file, never a decoding traceback."""

from __future__ import annotations

import pytest

from experiments.config import ExperimentError, load_config
from search.artifact import load_artifact, time_artifact
from search.errors import SearchError
from search.plan import Plan
from solvers.problem import Problem, ProblemError

BINARY = b"\x89PNG\r\n\x1a\n\xff\xfe\x00"


def test_binary_problem_plan_and_config_files_are_named_errors(tmp_path):
    for name, read, error in (("p.json", Problem.load, ProblemError), ("plan.json", Plan.load, SearchError),
                              ("grid.toml", load_config, ExperimentError)):
        path = tmp_path / name
        path.write_bytes(BINARY)
        with pytest.raises(error, match="not UTF-8"):
            read(path)


@pytest.mark.parametrize("manifest", [BINARY, b"{not json", b"[1, 2]"])
def test_a_corrupt_artifact_manifest_is_a_search_error(tmp_path, manifest):
    (tmp_path / "manifest.json").write_bytes(manifest)
    (tmp_path / "plan.json").write_text("{}")
    with pytest.raises(SearchError, match="manifest.json is corrupt"):
        load_artifact(tmp_path)


def test_a_truncated_library_is_a_search_error_and_timing_arguments_are_checked_first(tmp_path):
    (tmp_path / "manifest.json").write_text('{"input_shapes": {"data": [1, 3, 32, 32]}}')
    (tmp_path / "plan.json").write_text('{"choices": {}}')
    (tmp_path / "model.so").write_bytes(b"\x7fELF\x02\x01")
    with pytest.raises(SearchError, match="model.so is corrupt .*file too short.*export the artifact again"):
        load_artifact(tmp_path)
    for repeat, threads, message in ((0, None, "repeat must be"), (10**12, None, "repeat must be"),
                                     (3, 0, "threads must be"), (3, 10**6, "threads must be")):
        with pytest.raises(SearchError, match=message):
            time_artifact(tmp_path, repeat=repeat, threads=threads)
