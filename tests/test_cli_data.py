"""`glue-sparse data`: per-split rows, labels, source and fingerprint; missing splits marked."""

from __future__ import annotations

import json
import os
import subprocess

from glue_sparse.cli.main import main


def test_data_command_marks_missing(glue_fixture_dir, capsys):
    assert main(["data", "--data-dir", str(glue_fixture_dir), "--no-hub", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    by_key = {(r["task"], r["split"]): r for r in records}
    assert by_key[("qqp", "validation")]["rows"] == 24
    assert by_key[("qqp", "train")]["missing"] is True
    assert by_key[("mnli", "validation")]["rows"] == 51
    assert by_key[("cola", "train")]["labels"] == "0:20 1:20"
    assert len(by_key[("rte", "validation")]["sha256"]) == 64


def test_console_script_on_real_data(shared_glue_dir):
    out = subprocess.run(["glue-sparse", "data", "--data-dir", str(shared_glue_dir)],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "HF_HUB_OFFLINE": "1"}).stdout
    lines = {tuple(line.split()[:2]): line for line in out.splitlines() if line.strip()}
    assert lines[("qqp", "validation")].split()[2] == "MISSING"
    assert lines[("qqp", "train")].split()[2] == "MISSING"
    assert lines[("sst2", "train")].split()[2] == "67349"
    assert lines[("mnli", "validation")].split()[2] == "19647"
    assert "16 splits found" in out


def test_unknown_task(capsys):
    assert main(["data", "--tasks", "glue"]) == 2
    assert "valid tasks are" in capsys.readouterr().err


def test_no_local_folder_given_says_how_to_give_one(monkeypatch, capsys):
    monkeypatch.delenv("GLUE_SPARSE_DATA_DIR", raising=False)
    assert main(["data", "--tasks", "rte", "--no-hub"]) == 0
    out = capsys.readouterr().out
    assert "0 splits found, 2 missing" in out
    assert "No local folder was given: pass --data-dir or set $GLUE_SPARSE_DATA_DIR" in out


def test_no_hint_when_a_folder_was_given(glue_fixture_dir, capsys):
    assert main(["data", "--data-dir", str(glue_fixture_dir), "--tasks", "qqp", "--no-hub"]) == 0
    assert "No local folder was given" not in capsys.readouterr().out
