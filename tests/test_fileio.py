"""Size-limited reads, atomic writes and the check that outputs stay apart from inputs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from themis_opt.errors import InputError
from themis_opt.fileio import LIMIT_ENV, atomic_writer, check_apart, read_text, write_text


def test_a_failed_write_leaves_the_earlier_file_whole_and_no_temporary_file(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("the earlier result\n")
    with pytest.raises(RuntimeError), atomic_writer(path) as handle:
        handle.write("half of a new one")
        raise RuntimeError("the disk filled")
    assert path.read_text() == "the earlier result\n"
    assert [p.name for p in tmp_path.iterdir()] == ["r.json"]


def test_a_write_keeps_the_file_s_permissions_and_its_link(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text("old")
    path.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(path)
    write_text(link, "new")
    assert link.is_symlink() and path.read_text() == "new"
    assert path.stat().st_mode & 0o777 == 0o640


def test_a_device_is_written_in_place_and_a_full_one_is_one_error() -> None:
    write_text("/dev/null", "nothing")  # not replaced by a regular file
    assert Path("/dev/null").is_char_device()
    if not Path("/dev/full").exists():  # pragma: no cover - not Linux
        pytest.skip("no /dev/full")
    with pytest.raises(InputError, match="/dev/full: cannot be written"):
        write_text("/dev/full", "x" * 100_000)


def test_an_endless_input_is_refused_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    if not Path("/dev/zero").exists():  # pragma: no cover - not Linux
        pytest.skip("no /dev/zero")
    monkeypatch.setenv(LIMIT_ENV, str(2**20))
    with pytest.raises(InputError, match=f"/dev/zero: holds more than 1,048,576 bytes.*{LIMIT_ENV}"):
        read_text("/dev/zero")


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.json"
    path.write_text("[" + "0," * 100 + "0]")
    assert read_text(path, limit=1000).startswith("[0,")
    monkeypatch.setenv(LIMIT_ENV, "100")
    with pytest.raises(InputError, match="holds more than 100 bytes"):
        read_text(path)
    monkeypatch.setenv(LIMIT_ENV, "lots")
    with pytest.raises(InputError, match=f"{LIMIT_ENV}: must be a whole number"):
        read_text(path)


def test_outputs_apart_from_inputs_and_each_other(tmp_path: Path) -> None:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text("{}")
    check_apart([("--out", b)], [a])
    with pytest.raises(InputError, match="an input file too"):
        check_apart([("--out", tmp_path / "." / "a.json")], [a])
    with pytest.raises(InputError, match=r"--csv: writes .* which --out writes too"):
        check_apart([("--out", b), ("--csv", b)], [a])
    os.symlink(a, tmp_path / "alias.json")
    with pytest.raises(InputError, match="an input file too"):
        check_apart([("--out", tmp_path / "alias.json")], [a])


def test_a_folder_is_written_whole_or_not_at_all(tmp_path: Path) -> None:
    from themis_opt.fileio import atomic_folder

    out = tmp_path / "out"
    with pytest.raises(RuntimeError), atomic_folder(out) as folder:
        (folder / "a.txt").write_text("first")
        raise RuntimeError("the second file fails")
    assert list(tmp_path.iterdir()) == []  # neither the folder nor a temporary one
    with atomic_folder(out) as folder:
        (folder / "a.txt").write_text("whole")
    assert (out / "a.txt").read_text() == "whole"
    with pytest.raises(InputError, match="is a folder that is not empty"), atomic_folder(out):
        pass
    with atomic_folder(out, force=True) as folder:
        (folder / "b.txt").write_text("new")
    assert sorted(p.name for p in out.iterdir()) == ["b.txt"] and sorted(p.name for p in tmp_path.iterdir()) == ["out"]
