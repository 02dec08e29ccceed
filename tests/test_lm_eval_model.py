"""The ``hf-classifier`` lm-eval model: real lm-eval runs on tiny BERT classifiers saved to disk."""

from __future__ import annotations

import json
import shutil
import subprocess

import peft
import pytest
import torch
from peft import PeftModel
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from glue_sparse.lm_eval_model.classifier_lm import HFClassifierLM, two_point_logprobs
from sparse_models.runtime.devices import resolve_device
from glue_sparse_tasks import scoring
from glue_sparse_tasks.data import load_glue_split
from glue_sparse_tasks.glue_tasks import GLUE8, GLUE_TASKS
from sparse_models import SparseGatesConfig
from sparse_models.checkpoints import CheckpointError
from tests.lm_eval_helpers import run_tasks
from tests.test_lm_eval_tasks import _cli_env
from tests.tiny_models import save_tiny_classifier, set_gate_pattern


def _direct_predictions(folder, task: str, data_dir) -> tuple[list, list]:
    """The same model called directly on the same docs, one doc at a time (no harness)."""
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    rows = load_glue_split(task, "validation", data_dir=str(data_dir))
    preds = []
    with torch.no_grad():
        for row in rows:
            enc = tokenizer(*[row[f] for f in GLUE_TASKS[task].text_fields], return_tensors="pt")
            logits = model(**enc).logits[0]
            preds.append(min(max(float(logits[0]), 0.0), 5.0) if task == "stsb" else int(logits.argmax()))
    return preds, list(rows["label"])


def test_accuracy_through_lm_eval_equals_direct_call(tmp_path, glue_fixture_dir):
    folder = save_tiny_classifier(tmp_path / "sst2", 2, seed=3, task="sst2")
    lm = HFClassifierLM(pretrained=str(folder), batch_size=5, device="cuda:0")
    result = run_tasks(lm, ["glue_sparse_sst2"], glue_fixture_dir)
    preds, gold = _direct_predictions(folder, "sst2", glue_fixture_dir)
    assert result["results"]["glue_sparse_sst2"]["acc,none"] == pytest.approx(scoring.accuracy(preds, gold))
    info = result["config"]["sparse_gated"]
    assert info["device"] == ("cuda:0" if torch.cuda.is_available() else "cpu")
    sst2 = info["tasks"]["sst2"]
    assert sst2["docs"] == 24 and sst2["docs_per_second"] > 0
    assert sst2["accounting"]["removed_parameters"] == 0
    written = json.loads((folder / "sparse_gated_eval.json").read_text())
    assert written["tasks"]["sst2"]["accounting"] == sst2["accounting"]


def test_stsb_pearson_with_regression_head_equals_direct_call(tmp_path, glue_fixture_dir):
    folder = save_tiny_classifier(tmp_path / "stsb", 1, seed=4, task="stsb", regression_center=2.5)
    result = run_tasks(HFClassifierLM(pretrained=str(folder), batch_size=7), ["glue_sparse_stsb"], glue_fixture_dir)
    preds, gold = _direct_predictions(folder, "stsb", glue_fixture_dir)
    assert len(set(round(p, 4) for p in preds)) > 5  # the head really regresses, not a clipped constant
    assert result["results"]["glue_sparse_stsb"]["pearson,none"] == pytest.approx(
        scoring.pearson(preds, gold), abs=1e-3)  # padded batches vs one doc at a time: fp32 noise


def test_two_point_distribution_has_the_score_as_expectation():
    for score in (0.0, 1.25, 3.5, 4.99, 5.0, 7.0, -1.0):
        probs = [torch.tensor(lp).exp().item() for lp in two_point_logprobs(score)]
        assert sum(probs) == pytest.approx(1.0)
        assert sum(i * p for i, p in enumerate(probs)) == pytest.approx(min(max(score, 0.0), 5.0))


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """One tiny checkpoint per GLUE task, as `glue-sparse finetune --tasks all` lays them out."""
    root = tmp_path_factory.mktemp("run")
    for seed, task in enumerate(GLUE8):
        spec = GLUE_TASKS[task]
        save_tiny_classifier(root / task, spec.num_labels, seed=seed, task=task,
                             regression_center=2.5 if spec.is_regression else None)
    return root


def test_literal_cli_evaluates_the_group_from_a_run_directory(run_dir, glue_fixture_dir, tmp_path):
    lm_eval = shutil.which("lm_eval")
    assert lm_eval
    out = tmp_path / "out"
    proc = subprocess.run(
        [lm_eval, "run", "--model", "hf-classifier", "--model_args", f"pretrained={run_dir}",
         "--tasks", "glue_sparse", "--batch_size", "auto",
         "--metadata", json.dumps({"data_dir": str(glue_fixture_dir)}), "--output_path", str(out)],
        capture_output=True, text=True, env=_cli_env(), timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(next(out.rglob("results_*.json")).read_text())
    per_task = {t: results["results"][f"glue_sparse_{t}"]["glue_score,none"] for t in GLUE8}
    assert results["results"]["glue_sparse"]["glue_score,none"] == pytest.approx(sum(per_task.values()) / 8)
    assert set(results["config"]["sparse_gated"]["tasks"]) == set(GLUE8)
    assert (run_dir / "sparse_gated_eval.json").is_file()


def test_gated_adapter_and_its_pruned_model_give_the_same_metrics(tmp_path, glue_fixture_dir):
    base = save_tiny_classifier(tmp_path / "base", 3, seed=5)
    model = peft.get_peft_model(AutoModelForSequenceClassification.from_pretrained(base),
                                SparseGatesConfig(task_type="SEQ_CLS"))
    set_gate_pattern(model, closed=0.3)
    model.save_pretrained(tmp_path / "adapter")
    AutoTokenizer.from_pretrained(base).save_pretrained(tmp_path / "adapter")
    pruned = PeftModel.from_pretrained(AutoModelForSequenceClassification.from_pretrained(base),
                                       tmp_path / "adapter").merge_and_unload()
    pruned.save_pretrained(tmp_path / "pruned")
    AutoTokenizer.from_pretrained(base).save_pretrained(tmp_path / "pruned")

    results = {}
    for name, kwargs in (("adapter", {}), ("pruned", {}), ("adapter_pruned_on_load", {"prune": "true"})):
        path = tmp_path / ("pruned" if name == "pruned" else "adapter")
        lm = HFClassifierLM(pretrained=str(path), batch_size=4, results_json=str(tmp_path / f"{name}.json"), **kwargs)
        results[name] = run_tasks(lm, ["glue_sparse_mnli"], glue_fixture_dir)
    metrics = [{k: v for k, v in r["results"]["glue_sparse_mnli"].items() if "stderr" not in k}
               for r in results.values()]
    assert metrics[0] == metrics[1] == metrics[2]
    accounting = [json.loads((tmp_path / f"{n}.json").read_text())["tasks"]["mnli"]["accounting"] for n in results]
    assert accounting[0]["closed_parameters"] == accounting[1]["closed_parameters"] > 0  # the layout may keep some
    assert accounting[0]["trainable_parameters"] == accounting[1]["trainable_parameters"] > 0


def test_errors_before_any_scoring(tmp_path, glue_fixture_dir, run_dir):
    two_labels = save_tiny_classifier(tmp_path / "two", 2)
    with pytest.raises(CheckpointError, match="has 2 label.* glue_sparse_mnli needs 3"):
        run_tasks(HFClassifierLM(pretrained=str(two_labels)), ["glue_sparse_mnli"], glue_fixture_dir)
    partial = tmp_path / "partial"
    shutil.copytree(run_dir / "sst2", partial / "sst2")
    with pytest.raises(CheckpointError, match="no checkpoint for rte .* it has: sst2"):
        run_tasks(HFClassifierLM(pretrained=str(partial)), ["glue_sparse_sst2", "glue_sparse_rte"], glue_fixture_dir)
    assert not (partial / "sparse_gated_eval.json").exists()  # nothing scored, nothing written
    with pytest.raises(CheckpointError, match="trained on sst2"):
        run_tasks(HFClassifierLM(pretrained=str(run_dir / "sst2")), ["glue_sparse_mrpc"], glue_fixture_dir)
    with pytest.raises(CheckpointError, match="holds no checkpoint"):
        HFClassifierLM(pretrained=str(tmp_path))
    with pytest.raises(CheckpointError, match="no such folder"):
        HFClassifierLM(pretrained=str(tmp_path / "nope"))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU fallback")
def test_cuda_default_falls_back_to_cpu():
    assert str(resolve_device("cuda:0", lenient=True)) == "cpu"  # lm-eval's default, without a GPU
    assert str(resolve_device(None, lenient=True)) == "cpu"


def test_the_old_model_name_sparse_gated_still_evaluates_and_warns(tmp_path, glue_fixture_dir):
    from lm_eval.api.registry import get_model

    from glue_sparse_tasks.deprecations import NOT_BEFORE, REMOVED_IN
    from glue_sparse.lm_eval_model.classifier_lm import SparseGatedLM

    assert get_model("hf-classifier") is HFClassifierLM
    old = get_model("sparse-gated")
    assert old is SparseGatedLM and issubclass(old, HFClassifierLM)
    folder = save_tiny_classifier(tmp_path / "rte", 2, seed=5, task="rte")
    with pytest.warns(DeprecationWarning, match=f"'hf-classifier'.*{REMOVED_IN} \\(not before {NOT_BEFORE}\\)"):
        lm = old(pretrained=str(folder), batch_size=8)
    new = run_tasks(HFClassifierLM(pretrained=str(folder), batch_size=8), ["glue_sparse_rte"], glue_fixture_dir)
    assert run_tasks(lm, ["glue_sparse_rte"], glue_fixture_dir)["results"] == new["results"]
