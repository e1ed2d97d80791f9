"""Input files are checked before they are read: special files and files over the limit are refused, and a
decompressing or line-by-line reader stops at its limit instead of reading without end."""

from __future__ import annotations

import gzip
import os

import pytest

from solvers.input_files import InputFileError, checked_input, read_limited, read_line, read_text


def test_a_regular_file_within_the_limit_is_read(tmp_path):
    path = tmp_path / "p.json"
    path.write_text("{}")
    assert read_text(path, limit=2) == "{}"
    with pytest.raises(InputFileError, match="more than"):
        read_text(path, limit=1)


@pytest.mark.parametrize("make", [os.mkfifo, lambda path: path.symlink_to("/dev/zero")], ids=["fifo", "device"])
def test_special_files_are_refused_without_being_opened(make, tmp_path):
    path = tmp_path / "input"
    make(path)
    with pytest.raises(InputFileError, match="not a regular file"):
        checked_input(path)


def test_a_directory_or_a_missing_file_is_the_os_error_opening_it_would_be(tmp_path):
    with pytest.raises(IsADirectoryError):
        checked_input(tmp_path)
    with pytest.raises(FileNotFoundError):
        checked_input(tmp_path / "missing.json")


def test_decompressing_stops_at_the_limit(tmp_path):
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb") as out:
        out.write(b"0" * 100_000)  # a few hundred bytes compressed
    with gzip.open(checked_input(path), "rb") as stream, pytest.raises(InputFileError, match="decompressed"):
        read_limited(stream, path, limit=1000)
    with gzip.open(path, "rb") as stream:
        assert len(read_limited(stream, path, limit=100_000)) == 100_000


def test_lines_are_read_up_to_their_limit(tmp_path):
    path = tmp_path / "records.jsonl"
    path.write_text("short\n" + "x" * 50 + "\n")
    with path.open() as stream:
        assert read_line(stream, path, limit=10) == "short\n"
        with pytest.raises(InputFileError, match="a line longer than"):
            read_line(stream, path, limit=10)
