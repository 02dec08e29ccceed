"""Bad input and faults (issue #18): one test per case; each asserts on the message, not just on a raise.

CLI cases run the real ``glue-sparse`` entry point (in-process through ``main`` or as a console
script) and check the exit code, that stderr is one line naming the culprit, and that no traceback
is printed.
"""

from __future__ import annotations

import gzip
import json
import math
import os
import signal
import subprocess
import sys
import time

import pytest

from glue_sparse.cli.main import main
from glue_sparse_tasks import scoring
from glue_sparse_tasks.data import load_glue_rows
from glue_sparse_tasks.local_formats import GlueDataError
from tests.conftest import fixture_rows, write_jsonl


def _one_line_error(capsys, code: int, argv: list[str], *needles: str) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err
    assert len(err.splitlines()) == 1, err
    for needle in needles:
        assert needle in err, err
    return err


# -- files ------------------------------------------------------------------------------------

def test_truncated_gzip_names_the_file(tmp_path):
    path = tmp_path / "sst2" / "validation.jsonl.gz"
    path.parent.mkdir()
    blob = gzip.compress("".join(json.dumps(r) + "\n" for r in fixture_rows("sst2", 200)).encode())
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(GlueDataError, match=r"validation\.jsonl\.gz: truncated or corrupt gzip file after line"):
        load_glue_rows("sst2", "validation", str(tmp_path), use_hub=False)


def test_file_that_is_not_utf8_names_the_file_and_line(tmp_path):
    path = write_jsonl(tmp_path / "rte" / "validation.jsonl", fixture_rows("rte", 3))
    path.write_bytes(path.read_bytes() + b'{"sentence1": "caf\xe9", "sentence2": "x", "label": 0, "idx": 3}\n')
    with pytest.raises(GlueDataError, match=r"rte/validation\.jsonl: not UTF-8 text at or after line \d+"):
        load_glue_rows("rte", "validation", str(tmp_path), use_hub=False)


def test_byte_order_mark_is_accepted_in_jsonl_and_tsv(tmp_path):
    path = write_jsonl(tmp_path / "rte" / "validation.jsonl", fixture_rows("rte", 4))
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    rows, _ = load_glue_rows("rte", "validation", str(tmp_path), use_hub=False)
    assert len(rows) == 4 and rows[0]["sentence1"].startswith("rte sentence1 row 0")
    tsv = tmp_path / "SST-2" / "dev.tsv"
    tsv.parent.mkdir()
    tsv.write_text("\ufeffsentence\tlabel\nfine film .\t1\nbad film .\t0\n", encoding="utf-8")
    rows, _ = load_glue_rows("sst2", "validation", str(tmp_path), use_hub=False)
    assert [r["sentence"] for r in rows] == ["fine film .", "bad film ."]


# -- scoring inputs -----------------------------------------------------------------------------

@pytest.mark.parametrize("task, predictions, message", [
    ("mnli", [0, 3, 1], "mnli: prediction row 1 is 3; expected a label id in 0..2"),
    ("stsb", [1.0, math.nan, 2.0], "stsb: prediction row 1 is nan; expected a finite number"),
    ("rte", [math.nan, 1, 0], "rte: prediction row 0 is nan; expected a finite number"),
    ("rte", ["1", 0, 1], "rte: prediction row 0 is '1' (str); expected a number"),
    ("cola", [0, 1, 0.5], "cola: prediction row 2 is 0.5; expected a label id in 0..1"),
    ("stsb", [1.0, math.inf, 2.0], "stsb: prediction row 1 is inf"),
])
def test_scorer_refuses_predictions_outside_the_task(task, predictions, message):
    references = [0.5, 2.0, 4.0] if task == "stsb" else [0, 1, 0]
    with pytest.raises(scoring.ScoringInputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        scoring.task_metrics(task, predictions, references)


def test_evaluate_metric_gets_the_same_refusal():
    import evaluate

    from glue_sparse_tasks import GLUE_AVERAGE_METRIC

    metric = evaluate.load(GLUE_AVERAGE_METRIC, "mnli_matched")
    with pytest.raises(scoring.ScoringInputError, match="mnli_matched: prediction row 0 is 3"):
        metric.compute(predictions=[3, 0], references=[0, 1])


# -- CLI boundary -------------------------------------------------------------------------------

def test_data_with_a_folder_that_does_not_exist(capsys):
    _one_line_error(capsys, 2, ["data", "--data-dir", "/does/not/exist"], "/does/not/exist", "not a directory")


def test_data_shows_a_malformed_file_as_an_error_not_missing(tmp_path, capsys):
    path = write_jsonl(tmp_path / "rte" / "validation.jsonl", fixture_rows("rte", 3))
    path.write_text(path.read_text() + "{not json\n")
    assert main(["data", "--data-dir", str(tmp_path), "--tasks", "rte", "--no-hub"]) == 2
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if l.startswith("rte    validation"))
    assert "ERROR" in line and "validation.jsonl:4: malformed JSON" in line and "MISSING" not in line


def test_eval_with_malformed_metadata_json(capsys):
    _one_line_error(capsys, 2, ["eval", "--model", "hf", "--tasks", "glue_sparse_rte",
                                "--metadata", '{"data_dir": "x"'], "--metadata", "not valid JSON")


def test_eval_with_an_unknown_task_lists_ours(capsys):
    _one_line_error(capsys, 2, ["eval", "--model", "hf", "--tasks", "glue_sparse_colaa"],
                    "unknown task 'glue_sparse_colaa'", "glue_sparse_cola,", "glue_sparse_c4")


def test_report_into_an_unwritable_folder(tmp_path, capsys):
    results = tmp_path / "results.jsonl"
    results.write_text("")
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    err = _one_line_error(capsys, 2, ["report", "--results", str(results), "--output", str(blocker / "report")])
    assert "error" in err


def test_finetune_into_an_unwritable_folder_fails_before_training(glue_fixture_dir, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    _one_line_error(capsys, 2, ["finetune", "--tasks", "rte", "--output", str(blocker / "out"), "--data-dir",
                                str(glue_fixture_dir), "--no-hub"], "--output", "is not a directory")


def test_finetune_without_a_train_split_fails_before_any_folder_is_made(glue_fixture_dir, tmp_path, capsys):
    out = tmp_path / "runs"
    assert main(["finetune", "--tasks", "qqp", "--output", str(out), "--data-dir", str(glue_fixture_dir),
                 "--no-hub"]) == 2
    err = capsys.readouterr().err
    assert "qqp has no usable training data" in err and "Traceback" not in err
    assert not out.exists()


def test_finetune_with_a_bad_target_removal_is_one_line(glue_fixture_dir, tmp_path, capsys):
    _one_line_error(capsys, 2, ["finetune", "--tasks", "rte", "--method", "gates", "--target-removal", "1.2",
                                "--output", str(tmp_path), "--data-dir", str(glue_fixture_dir), "--no-hub"],
                    "--target-removal must be in (0, 1)", "1.2")


def test_speed_with_an_unknown_layout_names_it_and_the_valid_ones(tmp_path, capsys):
    # no model at that path: the layout is refused before any model would load
    _one_line_error(capsys, 2, ["speed", "--model", str(tmp_path / "no-model"), "--layouts", "auto,fastest"],
                    "--layouts", "'fastest'", "per-layer", "+heads")


def test_speed_with_a_folder_that_is_no_adapter_names_it_before_any_model_loads(tmp_path, capsys):
    from tests.tiny_models import save_tiny_classifier

    classifier = save_tiny_classifier(tmp_path / "classifier", 2)
    _one_line_error(capsys, 2, ["speed", "--model", str(tmp_path / "no-model"), "--adapter", str(classifier)],
                    f"--adapter {classifier}", "not a sparse-gates adapter")
    _one_line_error(capsys, 2, ["speed", "--model", str(tmp_path / "no-model"), "--adapter", str(tmp_path / "none")],
                    str(tmp_path / "none"), "not a checkpoint folder")


@pytest.mark.parametrize("flag,value,needles", [
    ("--precision", "float16", ("--precision 'float16'", "auto, fp32, bf16, fp16")),
    ("--device", "tpu", ("--device 'tpu'", "cpu, cuda or cuda:N")),
    ("--device", "cuda:7", ("--device cuda:7", "no such CUDA device")),
])
def test_speed_with_an_unknown_dtype_or_device_names_it_before_any_model_loads(tmp_path, capsys, flag, value,
                                                                               needles):
    _one_line_error(capsys, 2, ["speed", "--model", str(tmp_path / "no-model"), flag, value], *needles)


def test_ctrl_c_exits_130_without_a_traceback(glue_fixture_dir, tmp_path):
    from tests.tiny_models import save_tiny_classifier

    base = save_tiny_classifier(tmp_path / "base", 2, seed=3)
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "glue_sparse.cli.main", "finetune", "--tasks", "rte", "--output",
         str(tmp_path / "o"), "--data-dir", str(glue_fixture_dir), "--no-hub", "--model", str(base),
         "--epochs", "200", "--batch-size", "2", "--max-length", "16"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"},
        # a suite started in the background without job control inherits SIGINT ignored: give the child
        # the terminal's default, as a user pressing Ctrl-C has
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    for line in proc.stderr:  # wait until training has begun (status lines go to stderr, via logging)
        if line.startswith("== rte"):
            break
    time.sleep(4)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted (Ctrl-C)" in err and "--resume" in err and "Traceback" not in err


# -- checkpoints, perplexity, lengths ----------------------------------------------------------

def test_adapter_folder_without_weights(tmp_path):
    from sparse_models.checkpoints import CheckpointError, describe_checkpoint

    (tmp_path / "adapter_config.json").write_text(json.dumps({"peft_type": "SPARSE_GATES"}))
    with pytest.raises(CheckpointError, match=r"adapter_config\.json is there but no adapter weights"):
        describe_checkpoint(tmp_path)


def test_perplexity_with_an_incomplete_adapter_is_one_line(tmp_path, capsys):
    c4 = write_jsonl(tmp_path / "c4" / "validation_sample.jsonl", [{"text": f"doc {i} words here."} for i in range(4)])
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    assert main(["perplexity", "--data-dir", str(tmp_path), "--no-hub", "--adapter", str(adapter)]) == 2
    err = capsys.readouterr().err
    assert "no adapter weights" in err and str(adapter) in err and "Traceback" not in err
    assert c4.is_file()


def test_galore_perplexity_of_empty_documents_is_a_clear_error(tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from glue_sparse.perplexity.options import PerplexityError
    from glue_sparse.perplexity.protocols import galore_perplexity
    from tests.tiny_models import save_tiny_llama_with_tokenizer

    folder = save_tiny_llama_with_tokenizer(tmp_path / "llama", ["some text for a vocabulary"] * 4)
    model = AutoModelForCausalLM.from_pretrained(str(folder)).eval()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    with pytest.raises(PerplexityError, match=r"no document gave a token to score \(3 documents, 3 of them empty"):
        galore_perplexity(model, tokenizer, ["", " ", ""], max_length=16, batch_size=2)


def test_max_length_never_exceeds_the_position_table():
    from transformers import BertConfig, RobertaConfig

    from glue_sparse_tasks.errors import UserInputError
    from sparse_models.architectures import max_input_length

    class NoLimit:
        model_max_length = int(1e30)  # what a tokenizer without a stated limit reports

    assert max_input_length(BertConfig(max_position_embeddings=64), NoLimit()) == 64
    assert max_input_length(RobertaConfig(max_position_embeddings=66, pad_token_id=1), NoLimit()) == 64
    assert max_input_length(BertConfig(max_position_embeddings=512), NoLimit(), 128) == 128
    with pytest.raises(UserInputError, match="max_length 100 exceeds the 64 positions of this bert model"):
        max_input_length(BertConfig(max_position_embeddings=64), NoLimit(), 100)


def test_wikitext_that_is_not_utf8_names_the_file(tmp_path):
    from glue_sparse_tasks.text_corpora import load_wikitext2_pages

    path = tmp_path / "wikitext2" / "test.txt"
    path.parent.mkdir()
    path.write_bytes(b" = Title = \n some text \n caf\xe9 \n")
    with pytest.raises(GlueDataError, match=r"wikitext2/test\.txt: not UTF-8 text"):
        load_wikitext2_pages(str(tmp_path), use_hub=False)


def test_posttrain_into_an_unwritable_folder_fails_before_the_model_loads(tmp_path, capsys):
    write_jsonl(tmp_path / "c4" / "validation_sample.jsonl", [{"text": f"doc {i} words here."} for i in range(6)])
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    _one_line_error(capsys, 2, ["posttrain", "--data-dir", str(tmp_path), "--no-hub", "--train-docs", "0:3",
                                "--eval-docs", "3:6", "--output", str(blocker / "out")],
                    "--output", "is not a directory")
