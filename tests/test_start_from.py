"""Gate methods on the same footing as magnitude and mask search (issue #61): ``--start-from full`` starts
from the full fine-tune's weights and head, ``--start-from mask-search`` also starts with the units mask
search would remove closed, and a ``--from`` run of another model, task or label count is refused."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from transformers import TrainerCallback

from glue_sparse.finetune.options import FinetuneConfig, FinetuneConfigError
from glue_sparse.finetune.run import run_finetune
from sparse_models.gates import eval_gate_values
from sparse_models.mask_search import unit_gates
from sparse_models.removal import gate_logits
from tiny_models import save_tiny_classifier

COMMON = dict(task="rte", train_limit=24, epochs=1, batch_size=8, eval_batch_size=16, max_length=32)
PROBE = torch.randint(1, 100, (3, 12), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    return str(save_tiny_classifier(tmp_path_factory.mktemp("start_base"), 2, seed=31))


@pytest.fixture(scope="module")
def full_run(tiny_base, glue_fixture_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("start_full")
    record = run_finetune(FinetuneConfig(method="full", base_model=tiny_base, **COMMON), out,
                          data_dir=str(glue_fixture_dir), use_hub=False)
    assert record["status"] == "complete"
    return out


class AtStart(TrainerCallback):
    """What the model is before its first optimiser step: evaluation logits on PROBE, and its gates."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        was_training = model.training
        model.eval()
        with torch.no_grad():
            self.logits = model(input_ids=PROBE).logits.clone()
        self.gates = {k: eval_gate_values(p.detach()).clone() for k, p in gate_logits(model).items()}
        model.train(was_training)


def _start(config: FinetuneConfig, out, glue_fixture_dir) -> tuple[dict, AtStart]:
    probe = AtStart()
    record = run_finetune(config, out, data_dir=str(glue_fixture_dir), use_hub=False, callbacks=[probe])
    assert record["status"] == "complete"
    return record, probe


def test_a_gated_run_from_a_full_run_starts_from_its_weights(tiny_base, full_run, glue_fixture_dir, tmp_path):
    from transformers import AutoModelForSequenceClassification

    full = AutoModelForSequenceClassification.from_pretrained(str(full_run / "rte")).eval()
    with torch.no_grad():
        expected = full(input_ids=PROBE).logits
    for method in ("gates+full", "gates"):
        config = FinetuneConfig(method=method, base_model=tiny_base, target_removal=0.3, start_from="full",
                                from_run=str(full_run), prune=True, **COMMON)
        record, probe = _start(config, tmp_path / method, glue_fixture_dir)
        torch.testing.assert_close(probe.logits, expected, rtol=0, atol=1e-6)  # the full run's model, gates open
        assert all(bool((g == 1).all()) for g in probe.gates.values())
        assert record["start"]["from"] == "full" and (tmp_path / method / "rte" / record["start"]["source"]).resolve() \
            == (full_run / "rte").resolve()
        assert abs(record["accounting"]["removed_share_of_gated"] - 0.3) <= 0.03
        task_dir = tmp_path / method / "rte"  # saved whole: no adapter pointing at the full run's folder
        assert (task_dir / "config.json").is_file() and not (task_dir / "adapter_config.json").exists()
    # a run from the pre-trained model keeps the identity (and finished runs) it had
    assert "start_from" not in FinetuneConfig(method="gates", **COMMON).resolved()
    # and trains the same parameters: gates, head and pooler (counted so although the start saves it whole)
    plain = run_finetune(FinetuneConfig(method="gates", base_model=tiny_base, target_removal=0.3, **COMMON),
                         tmp_path / "plain", data_dir=str(glue_fixture_dir), use_hub=False)
    assert record["accounting"]["trainable_parameters"] == plain["accounting"]["trainable_parameters"]


def test_a_gated_run_from_a_mask_starts_with_exactly_those_units_closed(tiny_base, full_run, glue_fixture_dir,
                                                                         tmp_path):
    searched = run_finetune(FinetuneConfig(method="mask-search", base_model=tiny_base, target_removal=0.3,
                                           from_run=str(full_run), **COMMON),
                            tmp_path / "ms", data_dir=str(glue_fixture_dir), use_hub=False)["mask_search"]
    config = FinetuneConfig(method="gates+full", base_model=tiny_base, target_removal=0.3, start_from="mask-search",
                            from_run=str(full_run), distill=True, teacher=str(full_run / "rte"), **COMMON)
    record, probe = _start(config, tmp_path / "gm", glue_fixture_dir)
    mask = record["start"]["mask"]
    # the same seeded sample and source: the units the mask-search run removes
    assert (mask["heads"], mask["channels"]) == (searched["heads"], searched["channels"])
    assert sum(map(len, mask["heads"])) + sum(map(len, mask["channels"])) > 0
    chosen = unit_gates(_gated_like(tiny_base), mask["heads"], mask["channels"])
    for key, gates in probe.gates.items():
        closed = torch.zeros_like(gates, dtype=torch.bool)
        if key in chosen:
            closed[chosen[key]] = True
        assert torch.equal(gates == 0, closed), key  # exactly the mask's gates closed, every other open
        assert bool((gates[~closed] == 1).all()), key
    assert mask["removed_share"] == pytest.approx(0.3, abs=0.05)
    assert 0 < mask["start_gates_still_closed"] <= 1 and abs(record["accounting"]["removed_share_of_gated"] - 0.3) <= 0.03


def _gated_like(base: str):
    """A gated model of ``base``'s architecture, for the names and shapes of its gates."""
    import peft
    from transformers import AutoModelForSequenceClassification

    from sparse_models.sparse_gates import SparseGatesConfig

    return peft.get_peft_model(AutoModelForSequenceClassification.from_pretrained(base),
                               SparseGatesConfig(task_type="SEQ_CLS", target_removal=0.3))


def test_a_from_run_of_another_model_task_or_label_count_is_refused_in_one_line(tiny_base, full_run,
                                                                                 glue_fixture_dir, tmp_path):
    def refused(config: FinetuneConfig, pattern: str) -> None:
        with pytest.raises(FinetuneConfigError, match=pattern) as caught:
            run_finetune(config, tmp_path / "out", data_dir=str(glue_fixture_dir), use_hub=False)
        assert "\n" not in str(caught.value)
        assert not (tmp_path / "out").exists()  # refused before the run folder is made

    gated = dict(method="gates+full", target_removal=0.3, start_from="full", from_run=str(full_run))
    refused(FinetuneConfig(base_model=tiny_base, **{**COMMON, "task": "mrpc"}, **gated), "no finished run for task")
    other = shutil.copytree(full_run / "rte", tmp_path / "other" / "mrpc")  # a run that says it is RTE's
    refused(FinetuneConfig(base_model=tiny_base, **{**COMMON, "task": "mrpc", **gated, "from_run": str(other.parent)}),
            "needs full fine-tuned weights for 'mrpc'")
    three = shutil.copytree(full_run / "rte", tmp_path / "three" / "rte")
    record = json.loads((three / "run.json").read_text())
    (three / "run.json").write_text(json.dumps({**record, "num_labels": 3}))
    refused(FinetuneConfig(base_model=tiny_base, **COMMON, **{**gated, "from_run": str(three.parent)}),
            "3 label\\(s\\), but rte needs 2")
    another = str(save_tiny_classifier(tmp_path / "another", 2, seed=99))
    refused(FinetuneConfig(base_model=another, **COMMON, **gated), "pass the same --model")
    with pytest.raises(FinetuneConfigError, match="starting from the pre-trained model"):
        FinetuneConfig(method="gates", from_run=str(full_run), **COMMON)
    with pytest.raises(FinetuneConfigError, match="--start-from full applies to methods gates"):
        FinetuneConfig(method="lora", start_from="full", **COMMON)
    with pytest.raises(FinetuneConfigError, match="use --recipe removal"):
        FinetuneConfig(method="gates", recipe="reference", start_from="mask-search", **COMMON)


def test_a_bench_starts_its_gated_arms_from_the_full_arms_own_run(tiny_base, glue_fixture_dir, tmp_path):
    from glue_sparse.bench.options import BenchConfig
    from glue_sparse.bench.grid import run_bench
    from glue_sparse.bench.store import read_store

    bench = BenchConfig.from_dict({
        "tasks": ["rte"], "seeds": [1], "base_model": tiny_base, "data_dir": str(glue_fixture_dir), "use_hub": False,
        "methods": [{"method": "gates+full", "label": "gm", "target_removal": 0.3, "start_from": "mask-search",
                     "distill": True}, "full"],
        "finetune": {"max_steps": 2, "batch_size": 8, "max_length": 32, "train_limit": 16},
        "latency_docs": 8, "latency_batch_size": 8, "latency_rounds": 1})
    assert [run["label"] for run in bench.runs()] == ["full", "gm"]  # the full arm's run first: gm builds on it
    rows = {row["label"]: row for row in read_store(run_bench(bench, tmp_path, log=lambda *_: None))}
    record = json.loads((tmp_path / rows["gm"]["run_dir"] / "run.json").read_text())
    source = (tmp_path / rows["gm"]["run_dir"] / record["start"]["source"]).resolve()
    assert source == (tmp_path / rows["full"]["run_dir"]).resolve()  # the full arm's cell, trained once
    assert record["start"]["mask"]["removed_share"] > 0 and rows["gm"]["latency"]["removed_share_of_gated"] > 0


@pytest.mark.parametrize("left", ["identity only", "mask written"])
def test_a_from_mask_run_stopped_before_its_first_checkpoint_starts_again_with_its_mask(
        left, tiny_base, full_run, glue_fixture_dir, tmp_path):
    """A run stopped before its first checkpoint, inside its start's mask search (only its identity written)
    or after it, resumes from the top: the searched units closed again and recorded (it once trained from
    the full run with every gate open and then failed for want of start_mask.json)."""
    config = FinetuneConfig(method="gates+full", base_model=tiny_base, target_removal=0.3, start_from="mask-search",
                            from_run=str(full_run), save_steps=1000, **COMMON)
    whole, whole_probe = _start(config, tmp_path / "whole", glue_fixture_dir)

    class StopAtFirstStep(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            control.should_training_stop = True

    stopped = run_finetune(config, tmp_path / "cut", data_dir=str(glue_fixture_dir), use_hub=False,
                           callbacks=[StopAtFirstStep()])
    task_dir = tmp_path / "cut" / "rte"
    assert stopped["status"] == "interrupted" and not list(task_dir.glob("checkpoints/checkpoint-*"))
    if left == "identity only":
        (task_dir / "start_mask.json").unlink()
    probe = AtStart()
    resumed = run_finetune(config, tmp_path / "cut", data_dir=str(glue_fixture_dir), use_hub=False, resume=True,
                           callbacks=[probe])
    assert resumed["status"] == "complete" and resumed["start"]["mask"] == whole["start"]["mask"]
    assert all(torch.equal(probe.gates[k], whole_probe.gates[k]) for k in whole_probe.gates)
    assert any(bool((g == 0).any()) for g in probe.gates.values())  # started with the mask's units closed
    assert resumed["final_metrics"]["accuracy"] == whole["final_metrics"]["accuracy"]
    assert resumed["final_metrics"]["loss"] == pytest.approx(whole["final_metrics"]["loss"], abs=1e-6)
