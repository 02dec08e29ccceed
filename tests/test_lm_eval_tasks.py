"""The glue_sparse task suite through real lm-eval runs (CPU, offline)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from lm_eval_helpers import OracleLM, answer, run_tasks
from scipy.stats import pearsonr, spearmanr
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from glue_sparse_tasks import TASKS_DIR
from glue_sparse_tasks.glue_tasks import GLUE8
from glue_sparse_tasks.tasks.utils import TASK_METRICS

GROUP = list(GLUE8)
EXTRA = ["mnli_matched", "mnli_mismatched", "wnli"]
ALL_TASKS = ["glue_sparse"] + [f"glue_sparse_{t}" for t in EXTRA]


def _metrics(result: dict, task: str) -> dict:
    return {k.split(",")[0]: v for k, v in result["results"][f"glue_sparse_{task}"].items()
            if k.endswith(",none") and "_stderr" not in k}


def test_yaml_metric_lists_match_process_results():
    import yaml

    def config(name: str) -> dict:  # a task YAML with its include: chain followed, as lm-eval merges it
        cfg = yaml.safe_load(Path(TASKS_DIR, name).read_text().replace("!function", ""))
        return {**config(cfg.pop("include")), **cfg} if "include" in cfg else cfg

    for task, names in TASK_METRICS.items():
        listed = [m["metric"] for m in config(f"glue_sparse_{task}.yaml")["metric_list"]]
        assert tuple(listed) == names, task
    group = yaml.safe_load(Path(TASKS_DIR, "glue_sparse.yaml").read_text())
    assert group["task"] == [f"glue_sparse_{t}" for t in GLUE8]


def test_oracle_scores_one_everywhere(glue_fixture_dir):
    result = run_tasks(OracleLM(), ALL_TASKS, glue_fixture_dir)
    for task in GROUP + EXTRA:
        metrics = _metrics(result, task)
        assert set(metrics) == set(TASK_METRICS[task]), task
        for name, value in metrics.items():
            assert value == pytest.approx(1.0), (task, name)
    assert result["results"]["glue_sparse"]["glue_score,none"] == pytest.approx(1.0)
    assert result["results"]["glue_sparse_sst2"]["acc_stderr,none"] == pytest.approx(0.0)


def test_flipped_answers_match_sklearn_and_scipy(glue_fixture_dir):
    result = run_tasks(OracleLM(flip=True), ALL_TASKS, glue_fixture_dir)
    primary = {}
    for task in GROUP + EXTRA:
        samples = result["samples"][f"glue_sparse_{task}"]
        docs = [(s["doc"], s["doc_id"]) for s in samples]
        gold = [d["label"] for d, _ in docs]
        pred = [answer(d, i, flip=True) for d, i in docs]
        m = _metrics(result, task)
        if task == "stsb":
            expected = {"pearson": pearsonr(pred, gold)[0], "spearman": spearmanr(pred, gold)[0]}
            expected["glue_score"] = expected["pearson"]
        else:
            accuracy = accuracy_score(gold, pred)
            expected = {"acc": accuracy, "glue_score": accuracy}
            if task == "cola":
                expected["mcc"] = expected["glue_score"] = matthews_corrcoef(gold, pred)
            if task in ("mrpc", "qqp"):
                expected["f1"] = f1_score(gold, pred)
            if task == "mnli":
                for part in ("matched", "mismatched"):
                    sel = [i for i, (d, _) in enumerate(docs) if d["mnli_source"] == part]
                    expected[f"acc_{part}"] = accuracy_score([gold[i] for i in sel],
                                                             [pred[i] for i in sel])
        assert set(m) == set(expected), task
        for name, value in expected.items():
            assert m[name] == pytest.approx(value), (task, name)
        assert m["glue_score"] < 1.0  # the flips really changed something
        primary[task] = expected["glue_score"]
    group = result["results"]["glue_sparse"]["glue_score,none"]
    assert group == pytest.approx(np.mean([primary[t] for t in GROUP]))


@pytest.fixture(scope="module")
def tiny_gpt2(tmp_path_factory) -> Path:
    """A random 2-layer GPT-2 saved to disk, with a byte-level BPE tokenizer trained here."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import GPT2Config, GPT2LMHeadModel, PreTrainedTokenizerFast

    bpe = ByteLevelBPETokenizer()
    corpus = ["Question: Answer: True False Neither yes no positive negative 0 1 2 3 4 5",
              "Sentence 1: Sentence 2: how similar are the two sentences? alpha beta gamma row"]
    bpe.train_from_iterator(corpus * 10, vocab_size=400, special_tokens=["<|endoftext|>"])
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|endoftext|>",
                                  eos_token="<|endoftext|>")
    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_positions=1024, n_embd=32,
                                       n_layer=2, n_head=2, initializer_range=0.5,
                                       bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id))
    path = tmp_path_factory.mktemp("tiny_gpt2")
    model.save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_tiny_gpt2_runs_every_task_through_hf(tiny_gpt2, glue_fixture_dir):
    from lm_eval.models.huggingface import HFLM

    lm = HFLM(pretrained=str(tiny_gpt2), device="cpu", batch_size=8)
    result = run_tasks(lm, ALL_TASKS, glue_fixture_dir, limit=6)
    for task in GROUP + EXTRA:
        metrics = _metrics(result, task)
        assert set(metrics) == set(TASK_METRICS[task]), task
        assert len(result["samples"][f"glue_sparse_{task}"]) == 6
    assert 0.0 <= result["results"]["glue_sparse_sst2"]["acc,none"] <= 1.0
    assert -1.0 <= result["results"]["glue_sparse"]["glue_score,none"] <= 1.0


def _cli_env(**extra) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("GLUE_SPARSE_NO_HOOK", "GLUE_SPARSE_DATA_DIR")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TOKENIZERS_PARALLELISM="false", **extra)
    return env


def test_literal_lm_eval_cli_finds_group_and_writes_results(tiny_gpt2, glue_fixture_dir, tmp_path):
    lm_eval = shutil.which("lm_eval")
    assert lm_eval, "the lm_eval console script is not installed"
    out = tmp_path / "out"
    proc = subprocess.run(
        [lm_eval, "run", "--model", "hf", "--model_args", f"pretrained={tiny_gpt2}",
         "--tasks", "glue_sparse", "--limit", "3", "--batch_size", "4",
         "--metadata", json.dumps({"data_dir": str(glue_fixture_dir)}), "--output_path", str(out)],
        capture_output=True, text=True, env=_cli_env(), timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    assert "glue_score,none" in results["results"]["glue_sparse"]
    assert set(results["results"]) == {"glue_sparse", *(f"glue_sparse_{t}" for t in GROUP)}


def test_missing_data_error_names_task_and_places(tiny_gpt2, tmp_path):
    """Through lm-eval itself the error comes from task loading (after the model is built)."""
    proc = subprocess.run(
        [sys.executable, "-m", "lm_eval", "run", "--model", "hf", "--model_args",
         f"pretrained={tiny_gpt2}", "--tasks", "glue_sparse_qqp", "--limit", "2",
         "--metadata", json.dumps({"data_dir": str(tmp_path)})],
        capture_output=True, text=True, env=_cli_env(), timeout=600,
    )
    assert proc.returncode != 0
    assert "lm-eval task glue_sparse_qqp: GLUE split qqp/validation was not found" in proc.stderr
    assert f"data_dir: {tmp_path}/QQP/dev.tsv" in proc.stderr


def test_glue_sparse_eval_checks_data_before_the_model(tmp_path):
    """`glue-sparse eval` fails in the pre-check: the bogus model path is never touched."""
    proc = subprocess.run(
        ["glue-sparse", "eval", "--model", "hf", "--model_args", "pretrained=/does/not/exist",
         "--tasks", "glue_sparse", "--metadata", json.dumps({"data_dir": str(tmp_path)})],
        capture_output=True, text=True, env=_cli_env(), timeout=120,
    )
    assert proc.returncode == 2
    assert "task glue_sparse_cola: GLUE split cola/validation was not found" in proc.stderr
    assert "/does/not/exist" not in proc.stderr


def test_glue_sparse_eval_runs_lm_eval(tiny_gpt2, glue_fixture_dir, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        ["glue-sparse", "eval", "--model", "hf", "--model_args", f"pretrained={tiny_gpt2}",
         "--tasks", "glue_sparse_rte,glue_sparse_stsb", "--limit", "4", "--output_path", str(out),
         "--metadata", json.dumps({"data_dir": str(glue_fixture_dir)})],
        capture_output=True, text=True, env=_cli_env(GLUE_SPARSE_NO_HOOK="1"), timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())["results"]
    assert {"glue_sparse_rte", "glue_sparse_stsb"} <= set(results)
