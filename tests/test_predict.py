"""``glue-sparse predict`` (issue #50): GLUE-server submission files from a fine-tuning run (through
``hf-classifier``) and from lm-eval ``--log_samples`` output, proved by a round trip: the written files,
read back by an independent reader that knows only the server's documented format, score exactly as
lm-eval scored the same checkpoint, and as the ``glue_average`` metric scores the same predictions.
The reader is ``tests/submission_reader.py``, which knows the server's format from its documentation only.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import evaluate
import pytest

import glue_sparse_tasks
from glue_sparse.cli.main import main
from glue_sparse.lm_eval_model.classifier_lm import HFClassifierLM
from glue_sparse_tasks.data import load_glue_rows
from tests.conftest import fixture_rows, write_jsonl
from tests.lm_eval_helpers import run_tasks
from tests.submission_reader import SERVER_FORMAT, read_server_file, score_submission
from tests.tiny_models import save_tiny_classifier, save_tiny_llama_with_tokenizer

LABELS = {"cola": 2, "sst2": 2, "mrpc": 2, "qqp": 2, "stsb": 1, "mnli": 3, "qnli": 2, "rte": 2, "wnli": 2}


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory) -> Path:
    """A fine-tuning run folder: one tiny classifier per GLUE task, each with its task's label count."""
    run = tmp_path_factory.mktemp("run")
    for seed, (task, labels) in enumerate(LABELS.items()):
        save_tiny_classifier(run / task, labels, seed=seed, task=task,
                             regression_center=2.5 if task == "stsb" else None)
    return run


@pytest.fixture(scope="module")
def test_format_dir(glue_fixture_dir, tmp_path_factory) -> Path:
    """Test-format files as GLUE ships them: the fixture's validation rows without labels, in a shuffled
    ``idx`` order (so the index column must come from the file, not the row number), AX from MNLI rows,
    QQP as the original TSV with its ``id`` column; the labelled validation files stay for few-shot."""
    import shutil

    root = tmp_path_factory.mktemp("glue_test_format")
    shutil.copytree(glue_fixture_dir, root, dirs_exist_ok=True)
    for name, (task, (data_task, split, test_split), _) in SERVER_FORMAT.items():
        source = load_glue_rows("mnli" if data_task == "ax" else data_task,
                                split or "validation_matched", glue_fixture_dir, use_hub=False)[0]
        rows = [{**r, "label": -1, "idx": 1000 - 7 * i} for i, r in enumerate(source)]
        if data_task == "ax":
            rows = [{"premise": r["premise"], "hypothesis": r["hypothesis"], "label": -1, "idx": i}
                    for i, r in enumerate(rows)]
        if data_task == "qqp":
            lines = ["id\tquestion1\tquestion2"] + [f"{r['idx']}\t{r['question1']}\t{r['question2']}" for r in rows]
            (root / "QQP").mkdir(exist_ok=True)
            (root / "QQP" / "test.tsv").write_text("\n".join(lines) + "\n")
        else:
            write_jsonl(root / data_task / f"{test_split}.jsonl", rows)
    return root


def _predict(*flags: str) -> int:
    return main(["predict", "--no-hub", *flags])


def test_validation_round_trip_equals_lm_eval_and_the_glue_average_metric(tiny_run, glue_fixture_dir, tmp_path):
    out = tmp_path / "submission"
    assert _predict("--run", str(tiny_run), "--split", "validation", "--data-dir", str(glue_fixture_dir),
                    "--output", str(out)) == 0
    record = json.loads((out / "predict.json").read_text())
    assert sorted(p.name for p in out.glob("*.tsv")) == sorted(n for n in SERVER_FORMAT if n != "AX.tsv")
    assert record["missing"] == [] and record["split"] == "validation"
    read_back = score_submission(out, glue_fixture_dir)

    tasks = [f"glue_sparse_{t}" for t in ("cola", "sst2", "mrpc", "qqp", "stsb", "mnli", "mnli_matched",
                                           "mnli_mismatched", "qnli", "rte", "wnli")]
    lm_eval = run_tasks(HFClassifierLM(pretrained=str(tiny_run), batch_size=8), tasks, glue_fixture_dir)["results"]
    names = {"accuracy": "acc,none", "f1": "f1,none", "mcc": "mcc,none", "pearson": "pearson,none",
             "spearman": "spearman,none"}
    for task, metrics in read_back.items():
        for metric, value in metrics.items():
            assert value == lm_eval[f"glue_sparse_{task}"][names[metric]], (task, metric)  # to the last digit
    matched, mismatched = read_server_file(out / "MNLI-m.tsv"), read_server_file(out / "MNLI-mm.tsv")
    pooled = lm_eval["glue_sparse_mnli"]["acc,none"]
    assert record["scores"]["metrics"]["mnli_accuracy"] == pooled and len(matched) + len(mismatched) == 51

    # the glue_average metric over the predictions read back gives predict.json's GLUE average
    preds, refs, names_ = [], [], []
    for name, (task, (data_task, split, _), _) in SERVER_FORMAT.items():
        if split:
            gold = {r["idx"]: r["label"] for r in load_glue_rows(data_task, split, glue_fixture_dir, use_hub=False)[0]}
            for index, value in read_server_file(out / name):
                preds.append(value), refs.append(gold[index]), names_.append(task)
    metric = evaluate.load(glue_sparse_tasks.GLUE_AVERAGE_METRIC)
    assert metric.compute(predictions=preds, references=refs, tasks=names_)["glue_average"] == \
        record["scores"]["glue_average"]


def test_test_split_writes_eleven_files_in_the_test_files_order(tiny_run, test_format_dir, tmp_path):
    out = tmp_path / "submission"
    assert _predict("--run", str(tiny_run), "--data-dir", str(test_format_dir), "--output", str(out)) == 0
    record = json.loads((out / "predict.json").read_text())
    assert record["complete"] and record["missing"] == [] and "scores" not in record
    with zipfile.ZipFile(out / "submission.zip") as archive:
        assert sorted(archive.namelist()) == sorted(SERVER_FORMAT)  # flat: no folder inside
        for name in SERVER_FORMAT:
            assert archive.read(name).decode() == (out / name).read_text()
    for name, (_, (data_task, _, test_split), mapping) in SERVER_FORMAT.items():
        rows = read_server_file(out / name)
        inputs = load_glue_rows(data_task, test_split, test_format_dir, use_hub=False)[0]
        assert [i for i, _ in rows] == [r["idx"] for r in inputs], name  # the index column, in input order
        assert record["files"][name]["rows"] == len(inputs)
        if mapping is float:
            assert all(0.0 <= v <= 5.0 for _, v in rows)
    assert read_server_file(out / "QQP.tsv")[0][0] == 1000  # from the TSV's id column


def test_lm_eval_samples_of_a_causal_lm_round_trip(glue_fixture_dir, test_format_dir, tmp_path):
    """`lm_eval --log_samples` of a stock HF causal LM on SST-2, RTE, MRPC and STS-B -> files that score as
    lm-eval scored them; the _test variants under --predict_only -> files in the test files' order."""
    model = save_tiny_llama_with_tokenizer(tmp_path / "llama", ["a b c yes no True False Neither 0 1 2 3 4 5"] * 20)
    tasks = ("sst2", "rte", "mrpc", "stsb")
    lm_out = tmp_path / "lm_eval"
    command = [sys.executable, "-m", "glue_sparse.cli.main", "eval", "--model", "hf", "--model_args",
               f"pretrained={model}", "--tasks", ",".join(f"glue_sparse_{t}" for t in tasks), "--log_samples",
               "--output_path", str(lm_out), "--metadata", json.dumps({"data_dir": str(glue_fixture_dir)})]
    subprocess.run(command, check=True, capture_output=True, text=True)
    out = tmp_path / "submission"
    assert _predict("--samples", str(lm_out), "--split", "validation", "--output", str(out)) == 0
    results = json.loads(next(lm_out.rglob("results_*.json")).read_text())["results"]
    read_back = score_submission(out, glue_fixture_dir)
    assert read_back["sst2"]["accuracy"] == results["glue_sparse_sst2"]["acc,none"]
    assert read_back["rte"]["accuracy"] == results["glue_sparse_rte"]["acc,none"]
    assert read_back["mrpc"]["f1"] == results["glue_sparse_mrpc"]["f1,none"]
    assert read_back["stsb"]["pearson"] == results["glue_sparse_stsb"]["pearson,none"]
    record = json.loads((out / "predict.json").read_text())
    assert all(" (model.safetensors sha256 " in s["pretrained"] for s in record["samples"].values())

    test_out = tmp_path / "lm_eval_test"
    command[command.index("--tasks") + 1] = "glue_sparse_rte_test,glue_sparse_ax_test"
    command[command.index("--log_samples")] = "--predict_only"
    command[command.index("--output_path") + 1] = str(test_out)
    command[-1] = json.dumps({"data_dir": str(test_format_dir)})
    subprocess.run(command, check=True, capture_output=True, text=True)
    assert _predict("--samples", str(test_out), "--output", str(tmp_path / "test_submission")) == 0
    rte = read_server_file(tmp_path / "test_submission" / "RTE.tsv")
    assert [i for i, _ in rte] == [r["idx"] for r in load_glue_rows("rte", "test", test_format_dir, use_hub=False)[0]]
    assert len(read_server_file(tmp_path / "test_submission" / "AX.tsv")) == 24


def test_bad_input_is_one_line_before_any_model_loads(tiny_run, glue_fixture_dir, test_format_dir, tmp_path,
                                                      capsys):
    def refused(*flags: str) -> str:
        capsys.readouterr()  # what earlier runs printed
        assert _predict(*flags) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err, err
        return err

    data = ("--data-dir", str(test_format_dir))
    out = str(tmp_path / "out")
    # a run folder without the task asked for
    only_sst2 = tmp_path / "only_sst2"
    save_tiny_classifier(only_sst2 / "sst2", 2, task="sst2")
    assert "has no checkpoint for rte" in refused("--run", str(only_sst2), "--tasks", "rte", "--output", out, *data)
    # a checkpoint whose label count does not fit its task
    wrong = tmp_path / "wrong"
    save_tiny_classifier(wrong / "rte", 3, task="rte")
    assert "has 3 label(s) but glue_sparse_rte needs 2" in refused("--run", str(wrong), "--output", out, *data)
    # a test file whose rows carry labels
    labelled = tmp_path / "labelled"
    write_jsonl(labelled / "rte" / "test.jsonl", fixture_rows("rte", 5))
    err = refused("--run", str(tiny_run), "--tasks", "rte", "--data-dir", str(labelled), "--output", out)
    assert "rte/test.jsonl" in err and "has label 0" in err and "a test split has no labels" in err
    assert not Path(out).exists()  # nothing half-written
    # an output folder holding another submission: refused, then replaced whole with --overwrite
    first = ("--run", str(only_sst2), "--output", out, *data)
    assert _predict(*first) == 0
    (Path(out) / "stale.txt").write_text("from before")
    assert "holds another submission; pass --overwrite" in refused(*first)
    capsys.readouterr()
    assert _predict(*first, "--overwrite") == 0
    assert not (Path(out) / "stale.txt").exists() and (Path(out) / "SST-2.tsv").exists()
    assert not list(tmp_path.glob(".out.*"))  # no staging folder left behind
    # a missing task is said in one line and the zip holds the tasks present
    printed = capsys.readouterr().out
    assert "missing: CoLA.tsv, MRPC.tsv" in printed and "the GLUE server needs all 11 files" in printed
    with zipfile.ZipFile(Path(out) / "submission.zip") as archive:
        assert archive.namelist() == ["SST-2.tsv"]
    # neither or both sources; a validation task's samples for --split test
    assert "exactly one of --run" in refused("--output", str(tmp_path / "o2"))


def test_partial_or_mismatched_samples_are_refused(glue_fixture_dir, tmp_path, capsys):
    from tests.lm_eval_helpers import OracleLM

    out = run_tasks(OracleLM(), ["glue_sparse_rte"], glue_fixture_dir)
    folder = tmp_path / "samples" / "model"
    folder.mkdir(parents=True)
    (folder / "samples_glue_sparse_rte_2026-01-01T00-00-00.000000.jsonl").write_text(
        "".join(json.dumps(s, default=str) + "\n" for s in out["samples"]["glue_sparse_rte"]))
    assert _predict("--samples", str(tmp_path / "samples"), "--output", str(tmp_path / "o")) == 2
    assert "predicts the validation split, not --split test" in capsys.readouterr().err
    assert _predict("--samples", str(tmp_path / "samples"), "--split", "validation", "--output",
                    str(tmp_path / "o")) == 0
    rows = read_server_file(tmp_path / "o" / "RTE.tsv")
    gold = {r["idx"]: r["label"] for r in load_glue_rows("rte", "validation", glue_fixture_dir, use_hub=False)[0]}
    assert [v for _, v in rows] == [gold[i] for i, _ in rows]  # the oracle answers gold: read back exactly
    (folder / "samples_glue_sparse_rte_2026-01-01T00-00-00.000000.jsonl").write_text("{not json\n")
    assert _predict("--samples", str(tmp_path / "samples"), "--split", "validation", "--output",
                    str(tmp_path / "o2")) == 2
    assert ".jsonl:1: malformed JSON" in capsys.readouterr().err


def test_file_formats_match_the_server_for_every_task():
    """Every file's name, header and label strings, per the server's documented format."""
    from glue_sparse_tasks.submission import HEADER, SUBMISSION_FILES

    assert [f.name for f in SUBMISSION_FILES] == list(SERVER_FORMAT) and HEADER == ("index", "prediction")
    for spec in SUBMISSION_FILES:
        mapping = SERVER_FORMAT[spec.name][2]
        if mapping is float:
            assert float(spec.text(3.1415926535)) == 3.1415926535 and spec.text(0) == "0.0"
        else:
            assert {spec.text(i): i for i in range(len(mapping))} == mapping, spec.name


def test_original_glue_test_tsvs_are_read_with_their_index_column(tmp_path):
    """GLUE's own test.tsv numbers its rows in an ``index`` column, which becomes ``idx`` (the submission's
    index); the diagnostic set ships as diagnostic/diagnostic.tsv."""
    from glue_sparse_tasks.local_formats import GlueDataError

    (tmp_path / "RTE").mkdir()
    (tmp_path / "RTE" / "test.tsv").write_text("index\tsentence1\tsentence2\n5\ta b\tc\n9\td\te f\n")
    (tmp_path / "diagnostic").mkdir()
    (tmp_path / "diagnostic" / "diagnostic.tsv").write_text("index\tsentence1\tsentence2\n0\tp\th\n")
    rows, prov = load_glue_rows("rte", "test", tmp_path, use_hub=False)
    assert [(r["idx"], r["label"], r["sentence2"]) for r in rows] == [(5, -1, "c"), (9, -1, "e f")]
    assert prov.source == "local:RTE/test.tsv"
    ax, _ = load_glue_rows("ax", "test", tmp_path, use_hub=False)
    assert ax == [{"premise": "p", "hypothesis": "h", "label": -1, "idx": 0}]
    (tmp_path / "RTE" / "test.tsv").write_text("index\tsentence1\tsentence2\nx\ta\tb\n")
    with pytest.raises(GlueDataError, match=r"test.tsv:2: index 'x' is not an integer"):
        load_glue_rows("rte", "test", tmp_path, use_hub=False)


def test_the_test_group_runs_every_test_task_under_predict_only(test_format_dir):
    """`--tasks glue_sparse_test --predict_only`: every _test variant (AX included) runs in real lm-eval and
    its samples fill every submission file."""
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from glue_sparse.predict.samples import predictions_from_samples
    from glue_sparse_tasks.submission import BY_GLUE_TASK
    from glue_sparse_tasks.tasks.utils import TEST_SOURCES
    from tests.lm_eval_helpers import OracleLM

    manager = TaskManager(include_path=glue_sparse_tasks.TASKS_DIR, include_defaults=False,
                          metadata={"data_dir": str(test_format_dir)})
    out = simple_evaluate(model=OracleLM(), tasks=["glue_sparse_test"], task_manager=manager, predict_only=True)
    assert set(out["samples"]) == {f"glue_sparse_{g}_test" for g in TEST_SOURCES}
    files = {}
    for task, samples in out["samples"].items():
        files.update(predictions_from_samples(task, samples, task, "test"))
    assert set(files) == set(BY_GLUE_TASK) and len(files["ax"].indices) == 24
