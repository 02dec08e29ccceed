"""Removal on request (issue #13): the reference regulariser to the letter, exact removal by ranking,
the removal schedule inside a real Trainer run, and the magnitude baseline at equal removal."""

from __future__ import annotations

import json
import math
from pathlib import Path

import peft
import pytest
import torch

from glue_sparse.finetune.options import FinetuneConfig, FinetuneConfigError
from glue_sparse.finetune.run import run_finetune
from sparse_models import SparseGatesConfig, parameter_accounting
from sparse_models.removal import (CLOSED_LOGIT, RemovalSchedule, close_lowest, gate_logits, magnitude_scores,
                                   random_scores, scheduled_closed)
from sparse_models.sparse_gates.layer import GATE_LOGIT_NAMES
from tests.tiny_models import BUILDERS, TASK_TYPES, save_tiny_classifier


def _reference_gate_loss(mu: torch.Tensor) -> torch.Tensor:
    """jsvir/FineGates model.py, GatesVector.sparsity_loss, written out as the paper's formula."""
    return 0.5 - 0.5 * torch.erf((-0.5 - mu) / (0.5 * math.sqrt(2)))


def _reference_model_loss(layers, keep: float, lam: float) -> torch.Tensor:
    """SparseLayer.sparsity_loss (mean of the row and column terms) averaged over layers, times lambda."""
    per_layer = []
    for layer in layers:
        rows = _reference_gate_loss(torch.tanh(layer.sparse_gates_row["default"])).mean()
        cols = _reference_gate_loss(torch.tanh(layer.sparse_gates_col["default"])).mean()
        per_layer.append((torch.stack((rows, cols)) - keep).abs().mean())
    return lam * torch.stack(per_layer).mean()


@pytest.mark.parametrize("arch", ["bert", "llama"])
def test_default_regulariser_value_and_gradient_equal_the_reference(arch):
    model = peft.get_peft_model(BUILDERS[arch](), SparseGatesConfig(task_type=TASK_TYPES[arch]))
    generator = torch.Generator().manual_seed(3)
    layers = list(model.base_model.gated_layers().values())
    with torch.no_grad():  # logits spread over closed, fractional and open gates
        for layer in layers:
            for p in (layer.sparse_gates_row["default"], layer.sparse_gates_col["default"]):
                p.copy_(torch.randn(p.shape, generator=generator) * 1.5)
    ours = model.sparsity_loss()
    ours.backward()
    our_grads = [p.grad.clone() for l in layers for p in (l.sparse_gates_row["default"], l.sparse_gates_col["default"])]
    model.zero_grad()
    theirs = _reference_model_loss(layers, keep=0.6, lam=50.0)
    theirs.backward()
    their_grads = [p.grad for l in layers for p in (l.sparse_gates_row["default"], l.sparse_gates_col["default"])]
    assert ours.item() == pytest.approx(theirs.item(), rel=1e-6)
    for a, b in zip(our_grads, their_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-9)
    # sigma 0.5 has a usable gradient at the reference initialisation (sigma 0.1 gave ~1e-35)
    fresh = peft.get_peft_model(BUILDERS[arch](), SparseGatesConfig(task_type=TASK_TYPES[arch]))
    fresh.sparsity_loss().backward()
    row = next(iter(fresh.base_model.gated_layers().values())).sparse_gates_row["default"]
    assert row.grad.abs().min() > 1e-6


@pytest.mark.parametrize("arch", ["bert", "roberta", "gpt2", "llama"])
@pytest.mark.parametrize("share", [0.1, 0.3, 0.5])
def test_close_lowest_removes_the_requested_share_and_prunes_to_equal_outputs(arch, share):
    model = peft.get_peft_model(BUILDERS[arch](), SparseGatesConfig(task_type=TASK_TYPES[arch], target_removal=share))
    with torch.no_grad():
        for p in gate_logits(model).values():
            p.add_(torch.randn(p.shape) * 0.1)
    removed = close_lowest(model, share, snap_open=True)
    accounting = parameter_accounting(model)
    assert removed == accounting.removed_share_of_gated
    assert abs(removed - share) < 0.03  # tiny layers: one row is ~1.5% of a 32x64 matrix
    evals = torch.cat([torch.clamp(torch.tanh(p) + 0.5, 0, 1) for p in gate_logits(model).values()])
    assert set(evals.unique().tolist()) == {0.0, 1.0}  # exactly binary
    model.eval()
    inputs = torch.randint(1, 100, (2, 12))
    with torch.no_grad():
        gated = model(input_ids=inputs).logits
        pruned = model.merge_and_unload()
        after = parameter_accounting(pruned)  # the layout may keep some closed weights as zeros, never more
        assert after.closed_share_of_gated == pytest.approx(removed) and after.removed_share_of_gated <= removed
        torch.testing.assert_close(pruned(input_ids=inputs).logits, gated, rtol=1e-4, atol=1e-5)


def test_close_lowest_keeps_already_closed_gates_closed_and_ranks_by_score():
    model = peft.get_peft_model(BUILDERS["bert"](), SparseGatesConfig(task_type="SEQ_CLS", target_removal=0.4))
    first = close_lowest(model, 0.15)
    closed_before = {k: (torch.tanh(p) + 0.5 <= 0).clone() for k, p in gate_logits(model).items()}
    second = close_lowest(model, 0.4)
    assert first < second
    for key, p in gate_logits(model).items():
        assert (torch.tanh(p) + 0.5 <= 0)[closed_before[key]].all()
    scores = magnitude_scores(model)
    assert set(scores) == set(gate_logits(model))
    assert all(s.mean().item() == pytest.approx(1.0, rel=1e-5) for s in scores.values())


def test_random_ranking_is_fixed_by_its_seed_and_spreads_the_closings_over_every_matrix():
    def closed_rows(seed: int) -> dict[str, float]:
        torch.manual_seed(0)
        model = peft.get_peft_model(BUILDERS["bert"](), SparseGatesConfig(task_type="SEQ_CLS", target_removal=0.4))
        removed = close_lowest(model, 0.4, random_scores(model, seed))
        assert abs(removed - 0.4) <= 0.03
        return {k: (torch.tanh(p) + 0.5 <= 0).float().mean().item() for k, p in gate_logits(model).items()}

    first, again, other = closed_rows(7), closed_rows(7), closed_rows(8)
    assert first == again and first != other
    assert all(0 < share < 0.6 for share in first.values())  # no matrix spared, none emptied


def test_schedule_is_a_cubic_ramp_that_ends_exactly_at_the_target():
    schedule = RemovalSchedule(target=0.3, total_steps=50, end=0.8, events=10)
    steps = schedule.event_steps()
    assert steps[-1] == schedule.final_step == 40 and len(steps) == 10
    shares = [schedule.share_at(s) for s in steps]
    assert shares == sorted(shares) and shares[-1] == 0.3
    assert shares[0] == pytest.approx(0.3 * (1 - 0.9 ** 3))  # front-loaded: most removal early
    assert RemovalSchedule(0.3, total_steps=3).event_steps() == [1, 2]  # never more events than steps


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    return str(save_tiny_classifier(tmp_path_factory.mktemp("base"), 2, seed=11))


def _gate_evals(task_dir):
    from safetensors.torch import load_file

    tensors = load_file(str(task_dir / "adapter_model.safetensors"))
    return torch.cat([torch.clamp(torch.tanh(t) + 0.5, 0, 1).flatten() for k, t in tensors.items()
                      if any(g in k for g in GATE_LOGIT_NAMES)])


@pytest.mark.parametrize("method, score", [("gates", None), ("gates+lora", None), ("gates", "taylor"),
                                           ("gates", "random")])
def test_finetune_with_target_removal_ends_at_that_share_with_binary_gates(method, score, tiny_base,
                                                                           glue_fixture_dir, tmp_path):
    config = FinetuneConfig(task="rte", method=method, base_model=tiny_base, target_removal=0.3, train_limit=40,
                            epochs=1, batch_size=1, eval_batch_size=16, max_length=32, logging_steps=10, prune=True,
                            removal_score=score)
    record = run_finetune(config, tmp_path, data_dir=str(glue_fixture_dir), use_hub=False)
    assert record["train_steps"] == 40  # the smallest budget
    assert abs(record["accounting"]["removed_share_of_gated"] - 0.3) <= 0.03
    assert record["hyperparameters"]["recipe"] == "removal"
    assert record["hyperparameters"]["removal_score"] == (score or "logit")  # frozen backbone: logit by default
    assert record["hyperparameters"]["sparsity_lambda"] == 0.0  # no pull: the schedule alone closes gates
    assert record["gate_learning_rate"] == pytest.approx(1.0 / 32)  # travel 1.0 over the 32 removal steps
    assert set(_gate_evals(tmp_path / "rte").unique().tolist()) == {0.0, 1.0}
    assert record["pruned"]["accounting"]["closed_share_of_gated"] == record["accounting"]["removed_share_of_gated"]


@pytest.mark.parametrize("score", ["logit", "taylor"])
def test_removal_stays_exact_when_a_high_gate_lr_pushes_gates_shut_early(score, tiny_base, glue_fixture_dir,
                                                                         tmp_path):
    """Issue #51: at gate lr 1.0 training itself drives gates shut before the schedule asks. Before the fix
    this run removed 0.574 (logit) and 0.621 (taylor) of gated weights where 0.3 was asked; now 0.299 and
    0.300. Gates shut by training count against the share, and the ones the schedule does not choose reopen."""
    config = FinetuneConfig(task="rte", method="gates", base_model=tiny_base, target_removal=0.3, train_limit=24,
                            epochs=4, batch_size=8, eval_batch_size=16, max_length=32, logging_steps=4,
                            gate_learning_rate=1.0, removal_score=score)
    record = run_finetune(config, tmp_path, data_dir=str(glue_fixture_dir), use_hub=False)
    assert abs(record["accounting"]["removed_share_of_gated"] - 0.3) <= 0.01
    assert set(_gate_evals(tmp_path / "rte").unique().tolist()) == {0.0, 1.0}


def test_close_lowest_with_a_schedule_closed_set_counts_gates_shut_by_training_against_the_share():
    torch.manual_seed(0)
    model = peft.get_peft_model(BUILDERS["bert"](), SparseGatesConfig(task_type="SEQ_CLS"))
    params = gate_logits(model)
    with torch.no_grad():
        for p in params.values():
            p[: p.numel() // 2] = -1.0  # half of every gate vector shut by training (evaluation value 0)
    assert parameter_accounting(model).removed_share_of_gated > 0.5
    nothing = {k: torch.zeros_like(p, dtype=torch.bool) for k, p in params.items()}
    removed = close_lowest(model, 0.2, snap_open=True, closed=nothing)
    assert abs(removed - 0.2) <= 0.02  # without the schedule's set: every shut gate would stay shut
    closed = scheduled_closed(model)
    assert sum(int(v.sum()) for v in closed.values()) > 0
    assert all(torch.equal(closed[k], gate_logits(model)[k] == CLOSED_LOGIT) for k in closed)


def test_the_removal_scores_close_different_gates(tiny_base, glue_fixture_dir, tmp_path):
    """Same base, data and seed: only the ranking differs, so each score must close its own set of gates
    (a score silently falling back to another would close the same set)."""
    closed = {}
    for score in ("logit", "taylor", "random"):
        config = FinetuneConfig(task="rte", method="gates", base_model=tiny_base, target_removal=0.3, train_limit=40,
                                epochs=1, batch_size=1, eval_batch_size=16, max_length=32, removal_score=score)
        record = run_finetune(config, tmp_path / score, data_dir=str(glue_fixture_dir), use_hub=False)
        assert record["hyperparameters"]["removal_score"] == score
        closed[score] = _gate_evals(tmp_path / score / "rte") == 0.0
    for a, b in (("logit", "taylor"), ("logit", "random"), ("taylor", "random")):
        assert not torch.equal(closed[a], closed[b]), f"{a} and {b} closed the same gates"


def test_reference_recipe_runs_the_finegates_settings(tiny_base, glue_fixture_dir, tmp_path):
    config = FinetuneConfig(task="rte", method="gates", recipe="reference", base_model=tiny_base, train_limit=32,
                            epochs=1, eval_batch_size=16, max_length=32)
    record = run_finetune(config, tmp_path, data_dir=str(glue_fixture_dir), use_hub=False)
    hp = record["hyperparameters"]
    assert (hp["batch_size"], hp["learning_rate"], hp["weight_decay"], hp["lr_scheduler"], hp["warmup_ratio"],
            hp["max_grad_norm"], hp["target_sparsity"], hp["sparsity_lambda"], hp["reg_sigma"]) == \
        (16, 1e-3, 0.0, "constant", 0.0, 0.0, 0.4, 50.0, 0.5)
    assert record["train_steps"] == 2 and hp["target_removal"] is None
    adapter = json.loads((tmp_path / "rte" / "adapter_config.json").read_text())
    assert adapter["target_removal"] is None and adapter["reg_sigma"] == 0.5 and adapter["init_mean"] == 1.0


def test_magnitude_prunes_a_full_run_to_the_share_and_refinetunes_with_masks_held(tiny_base, glue_fixture_dir,
                                                                                 tmp_path):
    common = dict(task="rte", base_model=tiny_base, train_limit=24, epochs=1, batch_size=8, eval_batch_size=16,
                  max_length=32)
    full = run_finetune(FinetuneConfig(method="full", **common), tmp_path / "full", data_dir=str(glue_fixture_dir),
                        use_hub=False)
    assert full["status"] == "complete"
    config = FinetuneConfig(method="magnitude", target_removal=0.3, from_run=str(tmp_path / "full"), prune=True,
                            **common)
    record = run_finetune(config, tmp_path / "mag", data_dir=str(glue_fixture_dir), use_hub=False)
    assert abs(record["accounting"]["removed_share_of_gated"] - 0.3) <= 0.03
    assert record["magnitude"]["refinetune_steps"] == record["train_steps"] == 3
    accounting = record["accounting"]  # every weight re-trains (the gates are frozen masks)
    assert accounting["trainable_parameters"] > 0.9 * accounting["dense_parameters"]
    assert 0 <= record["magnitude"]["one_shot_metrics"]["accuracy"] <= 1
    from transformers import AutoModelForSequenceClassification

    import sparse_models  # noqa: F401  (registers the pruned classes with the Auto classes)

    dense = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "mag" / "rte")).eval()
    pruned = AutoModelForSequenceClassification.from_pretrained(str(tmp_path / "mag" / "rte" / "pruned")).eval()
    inputs = torch.randint(1, 100, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(pruned(input_ids=inputs).logits, dense(input_ids=inputs).logits,
                                   rtol=1e-4, atol=1e-5)
    assert parameter_accounting(pruned).closed_share_of_gated == pytest.approx(
        record["accounting"]["removed_share_of_gated"])
    # a magnitude run asked to prune something that is not a full fine-tune is refused before training
    bad = FinetuneConfig(method="magnitude", target_removal=0.3, from_run=str(tmp_path / "mag"), **common)
    with pytest.raises(FinetuneConfigError, match="needs full fine-tuned weights"):
        run_finetune(bad, tmp_path / "bad", data_dir=str(glue_fixture_dir), use_hub=False)


def test_gates_full_removes_the_share_while_every_weight_trains_and_saves_a_plain_model(tiny_base, glue_fixture_dir,
                                                                                         tmp_path):
    from safetensors.torch import load_file
    from transformers import AutoModelForSequenceClassification

    import sparse_models  # noqa: F401  (registers the pruned classes with the Auto classes)

    config = FinetuneConfig(task="rte", method="gates+full", base_model=tiny_base, target_removal=0.3, train_limit=24,
                            epochs=2, batch_size=4, eval_batch_size=16, max_length=32, prune=True)
    record = run_finetune(config, tmp_path, data_dir=str(glue_fixture_dir), use_hub=False)
    assert abs(record["accounting"]["removed_share_of_gated"] - 0.3) <= 0.03
    accounting = record["accounting"]
    assert accounting["trainable_parameters"] > 0.9 * accounting["dense_parameters"]
    task_dir = tmp_path / "rte"
    assert (task_dir / "config.json").is_file() and not (task_dir / "adapter_config.json").exists()
    before = load_file(str(Path(tiny_base) / "model.safetensors"))
    after = load_file(str(task_dir / "model.safetensors"))
    name = "bert.embeddings.word_embeddings.weight"  # ungated: changed only if the backbone trained
    assert not torch.equal(before[name], after[name])
    dense = AutoModelForSequenceClassification.from_pretrained(str(task_dir)).eval()
    pruned = AutoModelForSequenceClassification.from_pretrained(str(task_dir / "pruned")).eval()
    inputs = torch.randint(1, 100, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(pruned(input_ids=inputs).logits, dense(input_ids=inputs).logits,
                                   rtol=1e-4, atol=1e-5)
    assert parameter_accounting(pruned).closed_share_of_gated == pytest.approx(accounting["removed_share_of_gated"])


@pytest.mark.parametrize("options, message", [
    ({"target_removal": 1.0}, "must be in \\(0, 1\\)"),
    ({"target_removal": 0.0}, "must be in \\(0, 1\\)"),
    ({"recipe": "reference", "target_removal": 0.3}, "reference recipe cannot honour --target-removal"),
    ({"target_sparsity": 0.4, "target_removal": 0.3}, "removal recipe is steered by --target-removal alone"),
    ({"method": "lora", "target_removal": 0.3}, "applies to gates, gates\\+lora, gates\\+full, magnitude"),
    ({"method": "full", "from_run": "x"}, "--from applies to methods magnitude, mask-search"),
    ({"recipe": "fast"}, "unknown recipe 'fast'"),
    ({"removal_score": "gradient"}, "unknown removal score 'gradient'; valid scores are: taylor, logit, random"),
])
def test_bad_sparsity_options_fail_before_training(options, message):
    with pytest.raises(FinetuneConfigError, match=message):
        FinetuneConfig(task="rte", **{"method": "gates", **options})


@pytest.mark.parametrize("method, given, expected", [
    ("gates", None, "logit"), ("gates+lora", None, "logit"), ("gates+full", None, "taylor"),
    ("gates+full", "logit", "logit"), ("magnitude", None, None),
])
def test_removal_ranking_defaults_per_method_and_a_given_one_wins(method, given, expected):
    # logit where the backbone is frozen, Taylor where every weight retrains (benchmarks/results/gates_ranking_probe)
    assert FinetuneConfig(task="rte", method=method, removal_score=given).resolved()["removal_score"] == expected
