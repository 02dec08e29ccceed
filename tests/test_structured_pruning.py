"""Structured pruning of Llama-style causal LMs (issue #37): the one-shot baselines and unit gates remove
whole heads and FFN channels at an exact share of block-linear weights, GQA shapes follow the config,
the compacted model equals the masked dense one (FLAP's compensation biases included) and survives
save/load, unit-gate training resumes exactly, and bad input is refused in one line."""

from __future__ import annotations

import copy
import json
import os
import random
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, TrainerCallback

from sparse_models.accounting import parameter_accounting
from sparse_models.structured import METHODS, UnitPlan, compact, decoder_units, masked_copy, one_shot_plan
from sparse_models.structured.scores import collect_statistics, select_global
from sparse_models.structured.trainer import GATES_FILE, UnitGatesTrainer, last_checkpoint
from sparse_models.structured.unit_gates import add_unit_gates, close_units, gate_plan, remove_unit_gates
from tests.conftest import REPO
from tests.tiny_models import save_tiny_llama_with_tokenizer, tiny_gpt2, write_text_corpora

WORDS = "the a cat dog sat ran on under mat tree quickly slowly big small red green house river".split()


def _docs(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(20, 120))) + "." for _ in range(n)]


def gqa_llama(seed: int = 0) -> LlamaForCausalLM:
    """6 query heads over 2 key/value heads, head_dim 16 stated in the config (hidden / heads would say 8), 3 layers."""
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=100, hidden_size=48, num_hidden_layers=3, num_attention_heads=6,
                         num_key_value_heads=2, head_dim=16, intermediate_size=64, max_position_embeddings=64)
    return LlamaForCausalLM(config).eval()


@pytest.fixture(scope="module")
def calibrated():
    model = gqa_llama()
    layers = decoder_units(model)
    ids = torch.randint(0, 100, (8, 24), generator=torch.Generator().manual_seed(1))
    return model, layers, collect_statistics(model, layers, [ids[:4], ids[4:]]), ids


def test_units_follow_the_config_not_the_hidden_size(calibrated):
    _, layers, _, _ = calibrated
    assert len(layers) == 3
    first = layers[0]
    assert (first.heads, first.kv_heads, first.head_dim, first.group, first.channels) == (6, 2, 16, 3, 64)
    # q 96x48 + k, v 32x48 + o 48x96 + 3 x 64x48
    assert layers[0].block_weights() == 96 * 48 * 2 + 32 * 48 * 2 + 3 * 64 * 48


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("share", [0.1, 0.3, 0.5])
def test_one_shot_removes_the_share_and_the_pruned_model_equals_the_masked_one(calibrated, method, share, tmp_path):
    model, layers, stats, ids = calibrated
    plan = one_shot_plan(method, model, layers, share, stats)
    unit = max(layers[0].head_cost() + layers[0].kv_cost(), layers[0].channel_cost())
    assert abs(plan.removed_weights() - share * plan.block_weights()) <= unit  # exact up to one unit
    pruned = compact(copy.deepcopy(model), plan)
    accounting = parameter_accounting(pruned)
    assert accounting.removed_share_of_gated == pytest.approx(plan.removed_share())  # one accounting
    for i, layer in enumerate(layers):  # GQA shapes: q rows per kept head, k/v rows per kept key/value head
        attn = pruned.model.model.layers[i].self_attn
        kept_heads, kept_kv = int(plan.heads[i].sum()), int(plan.kv_heads(i).sum())
        assert attn.q_proj.weight.shape == (kept_heads * 16, 48) and attn.o_proj.weight.shape == (48, kept_heads * 16)
        assert attn.k_proj.weight.shape == attn.v_proj.weight.shape == (kept_kv * 16, 48)
        assert pruned.model.model.layers[i].mlp.down_proj.weight.shape == (48, int(plan.channels[i].sum()))
    if method == "flap":
        assert plan.bias and accounting.added_parameters == 48 * len(plan.bias)
        assert all(b.abs().sum() > 0 for b in plan.bias.values())
    else:
        assert not plan.bias and accounting.added_parameters == 0
        counts = {int(h.sum()) for h in plan.heads}
        assert len(counts) == 1  # the same ratio in every layer
    with torch.no_grad():
        expected = masked_copy(model, plan)(input_ids=ids).logits
        assert torch.allclose(pruned(input_ids=ids).logits, expected, atol=1e-5)
        pruned.save_pretrained(tmp_path)
        reloaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
        assert torch.allclose(reloaded(input_ids=ids).logits, expected, atol=1e-5)
        generated = pruned.model.generate(ids[:1, :6], max_new_tokens=5, do_sample=False)  # key/value cache
        assert torch.equal(generated, masked_copy(model, plan).generate(ids[:1, :6], max_new_tokens=5, do_sample=False))


def test_flap_compensation_keeps_the_mean_output_of_the_first_attention(calibrated):
    """Layer 0's kept heads see unchanged inputs, so the compensated o_proj's mean output over the
    calibration tokens equals the dense one: the bias adds back what the removed heads gave on average."""
    model, layers, stats, ids = calibrated
    plan = one_shot_plan("flap", model, layers, 0.5, stats)
    name = layers[0].module("o_proj")
    assert not bool(plan.heads[0].all()), "the test needs a head removed in layer 0"
    outputs = {}
    for key, candidate in (("dense", model), ("masked", masked_copy(model, plan))):
        handle = candidate.get_submodule(name).register_forward_hook(
            lambda m, a, out, key=key: outputs.__setitem__(key, out.detach().reshape(-1, out.shape[-1]).mean(0)))
        with torch.no_grad():
            candidate(input_ids=ids)
        handle.remove()
    assert torch.allclose(outputs["masked"], outputs["dense"], atol=1e-5)
    uncompensated = masked_copy(model, UnitPlan(plan.layers, plan.heads, plan.channels))  # same units, no bias
    handle = uncompensated.get_submodule(name).register_forward_hook(
        lambda m, a, out: outputs.__setitem__("plain", out.detach().reshape(-1, out.shape[-1]).mean(0)))
    with torch.no_grad():
        uncompensated(input_ids=ids)
    handle.remove()
    assert not torch.allclose(outputs["plain"], outputs["dense"], atol=1e-5)  # the bias is what keeps it


def test_a_layer_without_heads_or_channels_still_runs(calibrated):
    model, layers, _, ids = calibrated
    plan = UnitPlan.dense(layers)
    plan.heads[1][:] = False
    plan.channels[2][:] = False
    pruned = compact(copy.deepcopy(model), plan)
    with torch.no_grad():
        assert torch.allclose(pruned(input_ids=ids).logits, masked_copy(model, plan)(input_ids=ids).logits, atol=1e-5)
    assert pruned.model.model.layers[1].self_attn.q_proj.weight.shape[0] == 0


def test_unit_gates_prune_to_exactly_the_gated_model(calibrated):
    model, layers, _, ids = calibrated
    gated = add_unit_gates(copy.deepcopy(model), layers)
    assert {n.rpartition(".")[2] for n, p in gated.named_parameters() if p.requires_grad} == {"unit_gate_logits"}
    with torch.no_grad():
        assert torch.allclose(gated.eval()(input_ids=ids).logits, model(input_ids=ids).logits)  # edge init: open
    generator = torch.Generator().manual_seed(3)
    scores = ([torch.rand(6, generator=generator) for _ in layers],
              [torch.rand(64, generator=generator) for _ in layers])
    share = close_units(gated, layers, 0.3, scores)
    plan = gate_plan(gated, layers)
    assert share == pytest.approx(plan.removed_share()) and abs(share - 0.3) < 0.03
    with torch.no_grad():
        expected = gated(input_ids=ids).logits
        pruned = compact(remove_unit_gates(gated), plan)
        assert torch.allclose(pruned(input_ids=ids).logits, expected, atol=1e-5)


def test_global_selection_keeps_the_nearer_count(calibrated):
    _, layers, _, _ = calibrated
    heads = [torch.full((6,), 100.0) for _ in layers]
    channels = [torch.arange(64, dtype=torch.float) for _ in layers]
    plan = select_global(layers, heads, channels, 0.1)
    assert bool(all(h.all() for h in plan.heads))  # only channels score low
    assert abs(plan.removed_weights() - 0.1 * plan.block_weights()) <= layers[0].channel_cost() / 2


class _StopAt(TrainerCallback):
    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_save, control.should_training_stop = True, True


@pytest.fixture(scope="module")
def tiny_llama_dir(tmp_path_factory):
    return save_tiny_llama_with_tokenizer(tmp_path_factory.mktemp("llama"), _docs(200))


@pytest.mark.parametrize("objective", ["lm", "distill"])
def test_unit_gate_training_resumes_exactly(tiny_llama_dir, tmp_path, objective):
    """Stopped after step 4 (a checkpoint) and resumed, the run closes the same units with the same
    logits as the uninterrupted one, and removes the requested share."""
    import datasets
    from transformers import AutoTokenizer, DataCollatorForLanguageModeling, TrainingArguments

    from glue_sparse.common.causal_lm import pack_blocks

    tokenizer = AutoTokenizer.from_pretrained(tiny_llama_dir)
    tokenizer.pad_token = tokenizer.eos_token
    blocks = pack_blocks(tokenizer, _docs(60, 2), 32, 40)

    def run(folder, stop=None, resume=None):
        model = AutoModelForCausalLM.from_pretrained(tiny_llama_dir)
        layers = decoder_units(model)
        add_unit_gates(model, layers)
        args = TrainingArguments(output_dir=str(folder), max_steps=10, per_device_train_batch_size=4, learning_rate=0.1,
                                 lr_scheduler_type="constant", save_strategy="steps", save_steps=4, report_to="none",
                                 seed=0, dataloader_num_workers=0, logging_steps=1, dataloader_pin_memory=False)
        trainer = UnitGatesTrainer(model=model, args=args, layers=layers, target_removal=0.4, objective=objective,
                                   train_dataset=datasets.Dataset.from_dict({"input_ids": blocks}),
                                   data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False),
                                   callbacks=[_StopAt(stop)] if stop else None)
        trainer.train(resume_from_checkpoint=resume)
        return model, layers

    whole, layers = run(tmp_path / "whole")
    run(tmp_path / "parts", stop=4)
    assert last_checkpoint(tmp_path / "parts").endswith("checkpoint-4")
    assert (tmp_path / "parts" / "checkpoint-4" / GATES_FILE).is_file()
    assert not (tmp_path / "parts" / "checkpoint-4" / "model.safetensors").exists()  # gates only, not the model
    resumed, _ = run(tmp_path / "parts", resume=last_checkpoint(tmp_path / "parts"))
    for (name, a), (_, b) in zip(whole.named_parameters(), resumed.named_parameters()):
        if a.requires_grad:
            assert torch.allclose(a, b, atol=1e-6), name
    plan = gate_plan(whole, layers)
    assert abs(plan.removed_share() - 0.4) < 0.05 and plan.removed_share() == gate_plan(resumed, layers).removed_share()


@pytest.fixture(scope="module")
def corpus_dir(tmp_path_factory):
    wikitext = " \n = First = \n " + " ".join(_docs(15, 3)) + " \n = Second = \n " + " ".join(_docs(15, 4)) + " \n"
    return write_text_corpora(tmp_path_factory.mktemp("corpora"), _docs(60, 1), wikitext)


def _posttrain_args(model, data, out, *extra):
    return ["posttrain", "--model", str(model), "--data-dir", str(data), "--no-hub", "--train-docs", "0:40",
            "--eval-docs", "40:60", "--calibration-samples", "8", "--calibration-seqlen", "32", "--n-samples", "2",
            "--seqlen", "64", "--train-seqlen", "32", "--train-batch-size", "4", "--tokens", "1024",
            "--output", str(out), *extra]


def test_posttrain_table_runs_in_parts_and_scores_like_perplexity(tiny_llama_dir, corpus_dir, tmp_path):
    from glue_sparse.cli.main import main

    out = tmp_path / "table"
    assert main(_posttrain_args(tiny_llama_dir, corpus_dir, out, "--method", "flap", "--target-removal", "0.25")) == 0
    first = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["cell"] for r in first] == ["dense", "flap@0.25"]
    assert main(_posttrain_args(tiny_llama_dir, corpus_dir, out, "--method", "flap,magnitude-sp,wanda-sp,gates",
                                "--target-removal", "0.25")) == 0
    rows = {r["cell"]: r for r in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert rows["flap@0.25"] == first[1]  # kept, not rerun
    assert set(rows) == {"dense", "flap@0.25", "magnitude-sp@0.25", "wanda-sp@0.25", "gates@0.25"}
    for key, row in rows.items():
        removed = row["accounting"]["removed_share_of_gated"]
        assert removed == 0 if key == "dense" else abs(removed - 0.25) < 0.05
        assert row["perplexity"]["c4"] > 1 and row["perplexity"]["wikitext2"] > 1
        assert row["scores"]["c4"]["tokens_scored"] == 2 * 63
    assert rows["gates@0.25"]["train"]["train_tokens"] == 1024
    assert rows["flap@0.25"]["calibration_tokens"] == 8 * 32 and rows["magnitude-sp@0.25"]["calibration_tokens"] == 0
    table = (out / "results.md").read_text()
    assert "| flap | 25% |" in table and "| dense | - |" in table


@pytest.mark.parametrize("args, message", [
    (["--method", "flap,obs"], "--method: unknown obs"),
    (["--method", "flap", "--target-removal", "0.2,1.0"], "must be in (0, 1)"),
    (["--method", "wanda-sp", "--calibration-samples", "5000"], "calibration: documents 0:40 give"),
    (["--method", "gates", "--tokens", "10000000"], "gate training: documents 0:40 give"),
])
def test_posttrain_bad_input_is_one_line(tiny_llama_dir, corpus_dir, tmp_path, capsys, args, message):
    from glue_sparse.cli.main import main

    assert main(_posttrain_args(tiny_llama_dir, corpus_dir, tmp_path / "bad", *args)) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err, err
    assert not (tmp_path / "bad" / "results.jsonl").exists()


def test_a_model_without_llama_heads_is_refused_for_head_methods(corpus_dir, tmp_path, capsys):
    from glue_sparse.cli.main import main

    gpt2 = tmp_path / "gpt2"
    tiny_gpt2().save_pretrained(gpt2)
    assert main(_posttrain_args(gpt2, corpus_dir, tmp_path / "out", "--method", "flap")) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "needs Llama-style layers" in err, err


@pytest.mark.parametrize("launcher", ["torchrun", "accelerate"])
def test_posttrain_under_two_processes(launcher, tiny_llama_dir, corpus_dir, tmp_path):
    """Two gloo processes (torchrun, or accelerate launch with docs/accelerate/ddp.yaml on CPU processes)
    train unit gates at a global batch split over them: one results file, the exact share removed, and the
    same units closed on both ranks (they rank on all-reduced importance)."""
    import socket

    import yaml

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = tmp_path / "two"
    if launcher == "torchrun":
        launch = ["torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port)]
    else:
        settings = yaml.safe_load((REPO / "docs" / "accelerate" / "ddp.yaml").read_text())
        settings.update(use_cpu=True, mixed_precision="no", num_processes=2, main_process_port=port)
        (tmp_path / "launch.yaml").write_text(yaml.safe_dump(settings))
        launch = ["accelerate.commands.launch", "--config_file", str(tmp_path / "launch.yaml")]
    cmd = [sys.executable, "-m", *launch, "-m", "glue_sparse.cli.main",
           *_posttrain_args(tiny_llama_dir, corpus_dir, out, "--method", "gates", "--target-removal", "0.3")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [r["cell"] for r in rows] == ["dense", "gates@0.3"]
    gates = rows[1]
    assert gates["train"]["world_size"] == 2 and gates["train"]["train_tokens"] == 1024
    assert abs(gates["accounting"]["removed_share_of_gated"] - 0.3) < 0.05
    assert len(set(gates["train"]["plan_fingerprint_by_rank"])) == 1


def test_speed_causal_times_dense_pruned_and_ideal(tiny_llama_dir, corpus_dir, tmp_path):
    from glue_sparse.cli.main import main

    out = tmp_path / "speed.json"
    assert main(["speed", "--causal", "--model", str(tiny_llama_dir), "--target-removal", "0.3", "--batch-sizes", "2",
                 "--batches", "2", "--rounds", "1", "--causal-seqlen", "32", "--causal-method", "flap",
                 "--data-dir", str(corpus_dir), "--output", str(out)]) == 0
    record = json.loads(out.read_text())
    (row,) = record["rows"]
    assert record["method"] == "flap" and abs(row["removed_share_of_gated"] - 0.3) < 0.05
    assert row["index_ops"] == 0 and row["dense_ms"] > 0 and row["pruned_ms"] > 0 and row["ideal_ms"] > 0
    assert row["tokens"] == 2 * 2 * 32
    assert ">= 1.15x at 20%" not in out.with_suffix(".md").read_text()  # no 20% row, no verdict on it
    assert "never slower" in out.with_suffix(".md").read_text()


def test_speed_causal_refuses_an_unknown_method_before_loading(tmp_path, capsys):
    from glue_sparse.cli.main import main

    assert main(["speed", "--causal", "--causal-method", "obs", "--model", str(tmp_path / "missing")]) == 2
    assert "--causal-method 'obs'" in capsys.readouterr().err


@pytest.mark.parametrize("model_type", ["qwen2", "qwen3", "mistral"])
def test_other_llama_style_decoders_prune_to_the_masked_model(model_type):
    """Qwen2 (q/k/v biases), Qwen3 (per-head q/k norms) and Mistral (a sliding window shorter than the
    input): layer 0 keeps 1 and 2 query heads of its two groups (uneven), layer 1 loses a whole group."""
    from transformers import AutoConfig

    config = AutoConfig.for_model(model_type, vocab_size=100, hidden_size=48, num_hidden_layers=2,
                                  num_attention_heads=6, num_key_value_heads=2, head_dim=16, intermediate_size=64,
                                  max_position_embeddings=64, sliding_window=8)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    layers = decoder_units(model)
    plan = UnitPlan.dense(layers)
    plan.heads[0][torch.tensor([0, 1, 3])] = False
    plan.heads[1][torch.tensor([3, 4, 5])] = False
    plan.channels[1][:10] = False
    ids = torch.randint(0, 100, (2, 20), generator=torch.Generator().manual_seed(0))
    pruned = compact(copy.deepcopy(model), plan)
    attention = [layer.self_attn for layer in pruned.model.model.layers]
    assert attention[0].kv_for_query == (0, 1, 1) and attention[1].k_proj.weight.shape[0] == 16
    with torch.no_grad():
        assert torch.allclose(pruned(input_ids=ids).logits, masked_copy(model, plan)(input_ids=ids).logits, atol=1e-5)
