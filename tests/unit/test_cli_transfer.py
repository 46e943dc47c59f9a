"""``om-stream export`` / ``om-stream import``: what the command line refuses before it connects to anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from om_stream.cli import main


def test_an_import_of_no_file_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["import", str(tmp_path / "missing.jsonl")]) == 2
    assert "no export file at" in capsys.readouterr().err


def test_an_export_cut_off_is_refused_before_anything_is_written(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    cut = tmp_path / "cut.jsonl"
    cut.write_text('{"type":"header","schema":"om.export/v1"}\n{"type":"thread","thread_id":"t"}\n')
    assert main(["import", str(cut)]) == 2
    assert "does not end with an export's end line" in capsys.readouterr().err


def test_the_memory_store_cannot_be_reached_from_the_command_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("OM_MEMORY_STORE", "memory")
    assert main(["export", "--resource", "ana", "--out", str(tmp_path / "ana.jsonl")]) == 2
    assert "GET /v1/resources/{id}/export" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())  # nothing written, not even a partial file


def test_an_export_into_a_missing_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--resource", "ana", "--out", str(tmp_path / "nowhere" / "ana.jsonl")]) == 2
    assert "no folder" in capsys.readouterr().err
