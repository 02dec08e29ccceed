"""Fine-tuning: every method on a tiny random BERT and fixture data, determinism, resume, run.json."""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import TrainerCallback

from glue_sparse.finetune.elapsed import ELAPSED_FILE
from glue_sparse.finetune.models import build_model
from glue_sparse.finetune.options import DEFAULT_LR, FinetuneConfig, FinetuneConfigError
from glue_sparse.finetune.run import run_finetune
from glue_sparse.finetune.run_dir import OutputDirError, identity
from sparse_models.sparse_gates.layer import GATE_LOGIT_NAMES
from tests.tiny_models import save_tiny_classifier

RUN_FIELDS = {
    "status", "task", "method", "regime", "seed", "num_labels", "base_model", "hyperparameters",
    "model_selection", "selection_is_optimistic", "primary_metric", "data", "versions", "git", "device",
    "threads", "accounting", "saved_bytes", "train_seconds", "train_runtime_reported", "train_steps",
    "steps_this_process", "seconds_per_step", "eval_seconds_during_training", "resumed_from_step", "peak_rss_bytes",
    "rss_before_training_bytes", "epochs", "final_metrics", "final_score",
}


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    return str(save_tiny_classifier(tmp_path_factory.mktemp("base"), 2, seed=11))


def _quality(metrics: dict) -> dict:
    """Metrics without wall-clock fields (runtime, samples/s), which differ between any two runs."""
    return {k: v for k, v in metrics.items() if "runtime" not in k and "per_second" not in k}


def _config(tiny_base, **kw) -> FinetuneConfig:
    defaults = dict(task="rte", method="gates", regime="limited", seed=1, base_model=tiny_base,
                    epochs=2, batch_size=8, eval_batch_size=16, max_length=32, logging_steps=2)
    defaults.update(kw)
    return FinetuneConfig(**defaults)


@pytest.mark.parametrize("method", ["full", "lora", "gates", "gates+lora"])
def test_every_method_trains_and_writes_a_complete_run(method, tiny_base, glue_fixture_dir, tmp_path):
    config = _config(tiny_base, method=method, train_limit=24, prune=method.startswith("gates"))
    record = run_finetune(config, tmp_path, data_dir=str(glue_fixture_dir), use_hub=False)
    task_dir = tmp_path / "rte"
    on_disk = json.loads((task_dir / "run.json").read_text())
    assert on_disk == json.loads(json.dumps(record))
    assert RUN_FIELDS <= set(record)
    assert record["train_steps"] == 6  # 24 rows / batch 8 x 2 epochs
    assert [round(e["epoch"]) for e in record["epochs"]] == [1, 2]
    assert {"accuracy", "loss"} <= set(record["epochs"][0])
    assert record["data"]["train"]["rows"] == 24 and len(record["data"]["train"]["sha256"]) == 64
    assert record["hyperparameters"]["learning_rate"] == DEFAULT_LR[method]
    assert record["versions"]["torch"] and "commit" in record["git"]
    assert record["peak_rss_bytes"] > 0 and record["seconds_per_step"] > 0
    assert 0 <= record["final_score"] <= 1
    assert not (task_dir / "checkpoints").exists()
    if method == "full":
        assert (task_dir / "config.json").is_file()
        assert record["accounting"]["trainable_parameters"] == record["accounting"]["dense_parameters"]
    else:
        assert (task_dir / "adapter_config.json").is_file()
        assert record["accounting"]["trainable_parameters"] < record["accounting"]["dense_parameters"] / 10
    if method.startswith("gates"):
        assert (task_dir / "pruned" / "config.json").is_file()
        # the pruned model closes what the adapter closed; its layout may keep some as folded zeros
        pruned = record["pruned"]["accounting"]
        assert pruned["closed_parameters"] == record["accounting"]["removed_parameters"] >= pruned["removed_parameters"]


@pytest.mark.parametrize("train_pooler", [True, False])
def test_gates_run_trains_only_gates_biases_and_head(train_pooler, tiny_base, glue_fixture_dir, tmp_path):
    seen: dict[str, set[str]] = {}

    class Capture(TrainerCallback):
        def on_train_begin(self, args, state, control, model=None, optimizer=None, **kwargs):
            seen["names"] = {n for n, p in model.named_parameters() if p.requires_grad}
            gate_ids = {id(p) for n, p in model.named_parameters() if any(g in n for g in GATE_LOGIT_NAMES)}
            seen["groups"] = [(g.get("initial_lr", g["lr"]), {id(p) in gate_ids for p in g["params"]})
                              for g in optimizer.param_groups]

    run_finetune(_config(tiny_base, train_limit=8, epochs=1, gate_learning_rate=0.05, train_pooler=train_pooler),
                 tmp_path, data_dir=str(glue_fixture_dir), callbacks=[Capture()], use_hub=False)
    # the gate logits, and only they, train at their own learning rate
    assert any(lr == 0.05 and kinds == {True} for lr, kinds in seen["groups"])
    assert all(kinds == {False} for lr, kinds in seen["groups"] if lr != 0.05)
    names = seen["names"]
    assert any("sparse_gates_row" in n for n in names) and any("classifier" in n for n in names)
    head = ((".classifier.modules_to_save.", ".pooler.modules_to_save.") if train_pooler
            else (".classifier.modules_to_save.",))
    assert all("sparse_gates_" in n or any(h in n for h in head) for n in names), sorted(names)
    assert any("sparse_gates_bias" in n for n in names)  # the gated biases train as per-adapter deltas
    assert any(".pooler.modules_to_save." in n for n in names) == train_pooler


def test_lora_trains_the_pooler_with_the_head_and_full_runs_keep_their_identity(tiny_base):
    """The pooler belongs to the head for every adapter method; methods that train every weight leave
    the option out of their identity, so finished full and magnitude runs are not re-keyed."""
    lora = _config(tiny_base, method="lora")
    model = build_model(lora, lora.resolved(), str(tiny_base))
    assert any(".pooler.modules_to_save." in n and p.requires_grad for n, p in model.named_parameters())
    assert not any(".pooler.dense" in n and "modules_to_save" not in n and p.requires_grad
                   for n, p in model.named_parameters())
    full = _config(tiny_base, method="full")
    assert "train_pooler" not in identity(full) and identity(lora)["train_pooler"] is True


@pytest.mark.parametrize("method", ["gates+lora", "gates+full"])  # gates+full: the backbone must resume too
def test_same_seed_same_metrics_and_resume_equals_uninterrupted(method, tiny_base, glue_fixture_dir, tmp_path):
    kw = dict(train_limit=40, epochs=2, save_steps=4, task="stsb", method=method)
    data = str(glue_fixture_dir)
    first = run_finetune(_config(tiny_base, **kw), tmp_path / "a", data_dir=data, use_hub=False)
    second = run_finetune(_config(tiny_base, **kw), tmp_path / "b", data_dir=data, use_hub=False)
    assert _quality(first["final_metrics"]) == _quality(second["final_metrics"])
    assert [_quality(e) for e in first["epochs"]] == [_quality(e) for e in second["epochs"]]

    class StopAt(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 4:
                control.should_training_stop = True

    stopped = run_finetune(_config(tiny_base, **kw), tmp_path / "c", data_dir=data, callbacks=[StopAt()],
                           use_hub=False)
    assert stopped["status"] == "interrupted" and stopped["global_step"] == 4
    assert not (tmp_path / "c" / "stsb" / "run.json").exists()
    with pytest.raises(OutputDirError, match="--resume"):
        run_finetune(_config(tiny_base, **kw), tmp_path / "c", data_dir=data, use_hub=False)
    checkpoint = tmp_path / "c" / "stsb" / "checkpoints" / "checkpoint-4"
    before = json.loads((checkpoint / ELAPSED_FILE).read_text())["train_seconds"]
    shutil.copytree(tmp_path / "c", tmp_path / "d")
    (tmp_path / "d" / "stsb" / "checkpoints" / "checkpoint-4" / ELAPSED_FILE).unlink()  # as an older version left it
    resumed = run_finetune(_config(tiny_base, **kw), tmp_path / "c", data_dir=data, resume=True, use_hub=False)
    assert resumed["resumed_from_step"] == 4
    # train time counts the stopped process's share too, not only this one's
    assert before > 0 and resumed["train_seconds"] == pytest.approx(before + resumed["train_seconds_this_process"])
    unknown = run_finetune(_config(tiny_base, **kw), tmp_path / "d", data_dir=data, resume=True, use_hub=False)
    assert unknown["train_seconds"] is None and unknown["train_seconds_this_process"] > 0
    assert _quality(resumed["final_metrics"]) == _quality(first["final_metrics"])
    assert [e["pearson"] for e in resumed["epochs"]] == [e["pearson"] for e in first["epochs"]]


def test_bad_input_fails_before_training(tiny_base, glue_fixture_dir, tmp_path):
    with pytest.raises(FinetuneConfigError, match="unknown task 'sst3'"):
        _config(tiny_base, task="sst3")
    with pytest.raises(FinetuneConfigError, match="unknown method 'prefix'"):
        _config(tiny_base, method="prefix")
    with pytest.raises(FinetuneConfigError, match="positive number of rows, got 0"):
        _config(tiny_base, train_limit=0)
    with pytest.raises(FinetuneConfigError, match=r"LoRA options \['lora_r'\] .* method 'full'"):
        _config(tiny_base, method="full", lora_r=4)
    with pytest.raises(FinetuneConfigError, match="does not exist"):
        _config(tiny_base, base_model=str(tmp_path / "missing"))
    data = str(glue_fixture_dir)
    run_finetune(_config(tiny_base, train_limit=8, epochs=1), tmp_path, data_dir=data, use_hub=False)
    again = run_finetune(_config(tiny_base, train_limit=8, epochs=1), tmp_path, data_dir=data, use_hub=False)
    assert again["status"] == "complete"  # identical finished run: returned, not repeated
    with pytest.raises(OutputDirError, match="different run .*seed: 1 there vs 2 now"):
        run_finetune(_config(tiny_base, train_limit=8, epochs=1, seed=2), tmp_path, data_dir=data, use_hub=False)
    replaced = run_finetune(_config(tiny_base, train_limit=8, epochs=1, seed=2), tmp_path, data_dir=data,
                            overwrite=True, use_hub=False)
    assert replaced["seed"] == 2


KILL_RUN = dict(train_limit=16, epochs=2, batch_size=4, save_steps=2, logging_steps=1)  # 4 steps an epoch


@pytest.fixture(scope="module")
def uninterrupted(tiny_base, glue_fixture_dir, tmp_path_factory):
    """One uninterrupted run per method, shared by the kill cases."""
    runs: dict[str, Path] = {}

    def run(method: str, **kw) -> Path:
        key = json.dumps([method, kw], sort_keys=True)
        if key not in runs:
            out = tmp_path_factory.mktemp("uninterrupted")
            run_finetune(_config(tiny_base, method=method, **{**KILL_RUN, **kw}), out, data_dir=str(glue_fixture_dir),
                         use_hub=False)
            runs[key] = out / "rte"
        return runs[key]
    return run


@pytest.mark.parametrize("method, kill_at, resume_from, kw", [
    # killed in epoch 2 before any of its checkpoints: the newest is at epoch 1's last step (the issue's case)
    ("gates", 5, 4, {}),
    ("gates+lora", 5, 4, {"removal_score": "taylor"}),  # the Taylor sums must survive the kill too
    ("full", 5, 4, {}),
    # killed in epoch 2 after a mid-epoch checkpoint
    ("gates", 7, 6, {}),
    ("gates+lora", 7, 6, {"removal_score": "taylor"}),
    ("full", 7, 6, {}),
    ("gates", 7, 4, {"save_steps": None}),  # checkpoints at epoch ends only
])
def test_killed_in_a_later_epoch_and_resumed_equals_uninterrupted(method, kill_at, resume_from, kw, uninterrupted,
                                                                 tiny_base, glue_fixture_dir, tmp_path):
    """A process killed with SIGKILL inside epoch 2 and resumed ends with the uninterrupted run's weights
    (to 1e-6) and every one of its evaluations in run.json."""
    import subprocess
    import sys

    from safetensors.torch import load_file

    from tests.conftest import REPO

    data = str(glue_fixture_dir)
    config = _config(tiny_base, method=method, **{**KILL_RUN, **kw})
    command = [sys.executable, "-m", "tests.kill_at_step", json.dumps(dataclasses.asdict(config)), str(tmp_path), data,
               str(kill_at)]
    killed = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert killed.returncode == -9, killed.stderr[-2000:]
    task_dir = tmp_path / "rte"
    assert not (task_dir / "run.json").exists()
    assert sorted(p.name for p in (task_dir / "checkpoints").iterdir())[-1] == f"checkpoint-{resume_from}"
    resumed = run_finetune(config, tmp_path, data_dir=data, resume=True, use_hub=False)
    assert resumed["resumed_from_step"] == resume_from
    reference = uninterrupted(method, **kw)
    expected = json.loads((reference / "run.json").read_text())
    assert [round(e["epoch"]) for e in resumed["epochs"]] == [1, 2]
    assert [_quality(e) for e in resumed["epochs"]] == [_quality(e) for e in expected["epochs"]]
    assert _quality(resumed["final_metrics"]) == _quality(expected["final_metrics"])
    weights = sorted(p.name for p in reference.glob("*.safetensors"))
    assert weights and weights == sorted(p.name for p in task_dir.glob("*.safetensors"))
    for name in weights:
        a, b = load_file(str(reference / name)), load_file(str(task_dir / name))
        assert a.keys() == b.keys()
        for key in a:
            torch.testing.assert_close(b[key], a[key], rtol=0, atol=1e-6, msg=f"{name}: {key}")
