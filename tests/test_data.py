"""The data layer: every local format, pooled MNLI, limits, fingerprints and every error message."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import fixture_rows, write_jsonl, write_qqp_tsv

from glue_sparse_tasks.data import (
    DATA_DIR_ENV,
    LIMITED_TRAIN_ROWS,
    fingerprint,
    load_glue_rows,
    load_glue_split,
    provenance,
)
from glue_sparse_tasks.local_formats import GlueDataError, GlueSplitNotFound


def test_jsonl_and_gz_give_same_rows_and_fingerprint(tmp_path):
    rows = fixture_rows("rte", 10)
    write_jsonl(tmp_path / "a" / "rte" / "validation.jsonl", rows)
    gz = tmp_path / "b" / "rte" / "validation.jsonl.gz"
    gz.parent.mkdir(parents=True)
    with gzip.open(gz, "wt") as fh:
        fh.writelines(json.dumps(r) + "\n" for r in rows)
    a = load_glue_split("rte", "validation", data_dir=tmp_path / "a", use_hub=False)
    b = load_glue_split("rte", "validation", data_dir=tmp_path / "b", use_hub=False)
    assert a.to_list() == rows == b.to_list()
    assert provenance(a).sha256 == provenance(b).sha256 == fingerprint(rows)
    # recorded relative to the GLUE folder: a provenance record never holds this machine's path
    assert provenance(b).source == "local:rte/validation.jsonl.gz"
    assert a.features["label"].names == ["entailment", "not_entailment"]


def test_parquet_export_layout(tmp_path):
    rows = fixture_rows("stsb", 12)
    folder = tmp_path / "stsb"
    folder.mkdir()
    pq.write_table(pa.Table.from_pylist(rows), folder / "validation-00000-of-00001.parquet")
    ds = load_glue_split("stsb", "validation", data_dir=tmp_path, use_hub=False)
    assert ds.to_list() == rows
    assert provenance(ds).source.endswith(".parquet")


def test_cola_tsv_has_no_header(tmp_path):
    path = tmp_path / "CoLA" / "dev.tsv"
    path.parent.mkdir()
    path.write_text("gj04\t1\t\tThe sailors rode the breeze clear of the rocks.\n"
                    "gj04\t0\t*\tThe more we study verbs, the crazier they get get.\n")
    ds = load_glue_split("cola", "validation", data_dir=tmp_path, use_hub=False)
    assert ds["sentence"][0] == "The sailors rode the breeze clear of the rocks."
    assert ds["label"] == [1, 0] and ds["idx"] == [0, 1]


def test_mnli_tsv_dev_files_and_label_names(tmp_path):
    header = ("index\tpromptID\tpairID\tgenre\tsentence1_binary_parse\tsentence2_binary_parse\t"
              "sentence1_parse\tsentence2_parse\tsentence1\tsentence2\tlabel1\tgold_label")
    for name, label in (("dev_matched.tsv", "neutral"), ("dev_mismatched.tsv", "contradiction")):
        path = tmp_path / "MNLI" / name
        path.parent.mkdir(exist_ok=True)
        path.write_text(f"{header}\n0\t1\t2\tfiction\t(x)\t(y)\t(X)\t(Y)\tA premise.\tA hypothesis.\t"
                        f"{label}\t{label}\n")
    ds = load_glue_split("mnli", "validation", data_dir=tmp_path, use_hub=False)
    assert ds["label"] == [1, 2]
    assert ds["mnli_source"] == ["matched", "mismatched"]
    assert ds["premise"] == ["A premise.", "A premise."]


def test_qqp_tsv_keeps_quotes_with_quote_none(glue_fixture_dir):
    ds = load_glue_split("qqp", "validation", data_dir=glue_fixture_dir, use_hub=False)
    assert ds["question1"][0] == '"Why are "quoted" words kept?"'
    assert len(ds) == 24 and set(ds["label"]) == {0, 1}


def test_pooled_mnli_is_matched_then_mismatched(glue_fixture_dir):
    ds = load_glue_split("mnli", "validation", data_dir=glue_fixture_dir, use_hub=False)
    assert ds["mnli_source"] == ["matched"] * 24 + ["mismatched"] * 27
    matched = load_glue_split("mnli", "validation_matched", data_dir=glue_fixture_dir, use_hub=False)
    assert ds.select(range(24))["premise"] == matched["premise"]


def test_limit_keeps_first_rows_in_stored_order(glue_fixture_dir):
    rows, prov = load_glue_rows("rte", "train", data_dir=glue_fixture_dir, limit=7, use_hub=False)
    all_rows, full = load_glue_rows("rte", "train", data_dir=glue_fixture_dir, use_hub=False)
    assert rows == all_rows[:7] and prov.rows == 7 and prov.limit == 7
    assert prov.sha256 != full.sha256
    assert LIMITED_TRAIN_ROWS == 10_000
    with pytest.raises(ValueError, match="limit must be a positive number of rows, got 0"):
        load_glue_rows("rte", "train", data_dir=glue_fixture_dir, limit=0)


def test_env_dir_is_used_after_explicit_dir(glue_fixture_dir, tmp_path, monkeypatch):
    monkeypatch.setenv(DATA_DIR_ENV, str(glue_fixture_dir))
    ds = load_glue_split("sst2", "validation", use_hub=False)
    assert len(ds) == 24
    write_jsonl(tmp_path / "sst2" / "validation.jsonl", fixture_rows("sst2", 5))
    assert len(load_glue_split("sst2", "validation", data_dir=tmp_path, use_hub=False)) == 5


def test_parent_folder_with_glue_subfolder_is_accepted(glue_fixture_dir):
    ds = load_glue_split("cola", "validation", data_dir=glue_fixture_dir.parent / glue_fixture_dir.name,
                         use_hub=False)
    assert len(ds) == 24


# -- errors ----------------------------------------------------------------------------------

def test_missing_split_lists_every_place_looked(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(GlueDataError) as err:
        load_glue_split("qqp", "validation", data_dir=tmp_path)
    msg = str(err.value)
    assert "qqp/validation was not found" in msg
    for place in ("qqp/validation.jsonl", "qqp/validation.jsonl.gz",
                  "qqp/validation-00000-of-00001.parquet", "QQP/dev.tsv", "Hub nyu-mll/glue"):
        assert place in msg
    assert "--data-dir" in msg and DATA_DIR_ENV in msg


def test_malformed_json_names_file_and_line(tmp_path):
    path = tmp_path / "rte" / "validation.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps(fixture_rows("rte", 1)[0]) + "\n{not json\n")
    with pytest.raises(GlueDataError, match=rf"{path}:2: malformed JSON"):
        load_glue_split("rte", "validation", data_dir=tmp_path, use_hub=False)


def test_missing_column_is_named(tmp_path):
    row = fixture_rows("mrpc", 1)[0]
    del row["sentence2"]
    write_jsonl(tmp_path / "mrpc" / "validation.jsonl", [row])
    with pytest.raises(GlueDataError, match=r"validation.jsonl:1: missing column\(s\) \['sentence2'\]"):
        load_glue_split("mrpc", "validation", data_dir=tmp_path, use_hub=False)


@pytest.mark.parametrize("task,label,expected", [
    ("stsb", 5.5, r"expected a number in \[0, 5\]"),
    ("stsb", -0.1, r"expected a number in \[0, 5\]"),
    ("mnli", 3, r"expected an integer in 0..2"),
    ("sst2", "1", r"expected an integer in 0..1"),
])
def test_label_out_of_range(tmp_path, task, label, expected):
    rows = fixture_rows(task, 3)
    rows[2]["label"] = label
    split = "validation_matched" if task == "mnli" else "validation"
    write_jsonl(tmp_path / task / f"{split}.jsonl", rows)
    with pytest.raises(GlueDataError, match=rf"{split}.jsonl:3: label .* out of range for {task}; {expected}"):
        load_glue_split(task, split, data_dir=tmp_path, use_hub=False)


def test_empty_split(tmp_path):
    (tmp_path / "rte").mkdir()
    (tmp_path / "rte" / "validation.jsonl").write_text("\n")
    with pytest.raises(GlueDataError, match="split rte/validation is empty"):
        load_glue_split("rte", "validation", data_dir=tmp_path, use_hub=False)


def test_unknown_task_lists_valid_ones():
    with pytest.raises(ValueError, match="unknown GLUE task 'sts'; valid tasks are: cola, sst2, mrpc"):
        load_glue_split("sts", "validation")
    with pytest.raises(ValueError, match="unknown split 'dev' for GLUE task 'rte'"):
        load_glue_split("rte", "dev")


def test_qqp_tsv_wrong_field_count(tmp_path):
    path = write_qqp_tsv(tmp_path, "dev.tsv", fixture_rows("qqp", 2))
    path.write_text(path.read_text() + "broken\trow\n")
    with pytest.raises(GlueDataError, match=r"dev.tsv:4: expected 6 tab-separated fields, got 2"):
        load_glue_split("qqp", "validation", data_dir=tmp_path, use_hub=False)


# -- the real offline data -------------------------------------------------------------------

OFFICIAL_ROWS = {
    ("cola", "train"): 8551, ("cola", "validation"): 1043, ("sst2", "train"): 67349,
    ("sst2", "validation"): 872, ("mrpc", "train"): 3668, ("mrpc", "validation"): 408,
    ("stsb", "train"): 5749, ("stsb", "validation"): 1500, ("qnli", "validation"): 5463,
    ("rte", "train"): 2490, ("rte", "validation"): 277, ("wnli", "train"): 635,
    ("wnli", "validation"): 71, ("mnli", "validation_matched"): 9815,
    ("mnli", "validation_mismatched"): 9832, ("mnli", "validation"): 19647,
}


@pytest.mark.parametrize("task,split", sorted(OFFICIAL_ROWS))
def test_real_data_row_counts(shared_glue_dir, task, split):
    rows, prov = load_glue_rows(task, split, data_dir=shared_glue_dir, use_hub=False)
    assert prov.rows == len(rows) == OFFICIAL_ROWS[(task, split)]


def test_real_sst2_limited_regime(shared_glue_dir):
    rows, prov = load_glue_rows("sst2", "train", data_dir=shared_glue_dir, limit=LIMITED_TRAIN_ROWS,
                                use_hub=False)
    assert prov.rows == 10_000 and rows[0]["idx"] == 0 and rows[-1]["idx"] == 9_999


def test_a_missing_split_names_the_given_folder_on_its_first_line(tmp_path):
    (tmp_path / "rte").mkdir()
    (tmp_path / "rte" / "validation.jsonl").write_text("")
    with pytest.raises(GlueSplitNotFound) as info:
        load_glue_rows("rte", "train", str(tmp_path), use_hub=False)
    first = str(info.value).splitlines()[0]
    assert "rte/train was not found" in first and str(tmp_path) in first, first
