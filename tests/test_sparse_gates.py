"""The sparse-gates PEFT method, its accounting and physical pruning, on tiny random models."""

from __future__ import annotations

import copy
import json
import random
import time
import warnings

import peft
import pytest
import torch
from peft import LoraConfig, PeftConfig, PeftModel
from safetensors import safe_open
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification

import sparse_models
from glue_sparse_tasks.deprecations import NOT_BEFORE, REMOVED_IN
from sparse_models import (
    PrunedLinear,
    ResidualAddOutput,
    SparseGatesConfig,
    SparsePrunedForCausalLM,
    SparsePrunedForSequenceClassification,
    gates,
    parameter_accounting,
)
from sparse_models.pruned.pruned_linear import PARALLEL_GATHER_MIN
from sparse_models.sparse_gates.layout_costs import candidate_sides, choose_sides, choose_whole_model
from sparse_models.sparse_gates.pruning import Side
from tests.tiny_models import BUILDERS, MORE_ARCHITECTURES, TASK_TYPES, VOCAB, set_gate_pattern, tiny_bert

AUTO = {"SEQ_CLS": AutoModelForSequenceClassification, "CAUSAL_LM": AutoModelForCausalLM}
PRUNED_CLASS = {"SEQ_CLS": SparsePrunedForSequenceClassification, "CAUSAL_LM": SparsePrunedForCausalLM}


def _inputs(batch: int = 3, length: int = 9, seed: int = 0) -> dict:
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, VOCAB, (batch, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, length - 3:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _gated(arch: str, lora: LoraConfig | None = None, **config):
    return peft.get_peft_model(BUILDERS[arch](), SparseGatesConfig(task_type=TASK_TYPES[arch], lora_config=lora,
                                                                   **config))


def _mixed_layout(model, seed: int = 3) -> dict[str, Side]:
    """A random remove/keep choice for every side that needs index work: a layout the cost model could pick."""
    generator = random.Random(seed)
    plans = sparse_models.plan_pruning(model).modules
    return {name: generator.choice(candidate_sides(plan)) for name, plan in plans.items()}


@pytest.mark.parametrize("layout,align,heads", [("remove", 1, False), ("keep", 16, False), ("mixed", 4, False),
                                                ("auto", 16, False), ("remove", 1, True), ("mixed", 4, True),
                                                ("auto", 4, None), ("per-layer", 16, False)])
@pytest.mark.parametrize("arch", ["bert", "roberta", "gpt2", "llama", *MORE_ARCHITECTURES])
def test_pruned_model_matches_gated_eval_outputs_and_round_trips(arch, layout, align, heads, tmp_path):
    model = _gated(arch)
    set_gate_pattern(model)
    model.eval()
    inputs = _inputs()
    with torch.no_grad():
        gated_logits = model(**inputs).logits
    before = parameter_accounting(model)
    chosen = _mixed_layout(model) if layout == "mixed" else layout
    pruned = model.merge_and_unload(layout=chosen, align=align, narrow_heads=heads)
    narrowed = pruned.config.attention_head_sizes
    if heads is None and narrowed:  # `auto` chose the candidate with heads narrowed: check it as such
        heads = True
    if heads and arch in ("bert", "roberta"):  # every layer's heads narrowed, below the full head size of 8
        assert len(narrowed) == 2 and all(0 < size["query_key"] < 8 and 0 < size["value"] <= 8
                                          for size in narrowed.values())
    else:
        assert narrowed == {}
    assert isinstance(pruned, PRUNED_CLASS[TASK_TYPES[arch]])
    with torch.no_grad():
        pruned_logits = pruned(**inputs).logits
    assert (pruned_logits - gated_logits).abs().max() <= 1e-4  # every layout is exact
    after = parameter_accounting(pruned)
    # The parameters really went, exactly as the pruned model's accounting says; what the gates closed
    # does not depend on the layout.
    assert sum(p.numel() for p in pruned.parameters()) == after.remaining_parameters
    assert after.closed_gated_weights == before.closed_gated_weights and before.closed_share_of_gated > 0.4
    assert after.removed_gated_weights <= after.closed_gated_weights
    if layout == "remove" and not heads:
        assert after == before and any(isinstance(m, PrunedLinear) for m in pruned.modules())
    for m in pruned.modules():
        if isinstance(m, PrunedLinear) and not narrowed:  # kept counts padded with closed ones to the alignment
            assert all(n % align == 0 or n == full for n, full in zip(m.weight.shape, (m.out_features, m.in_features)))
    if layout == "keep":  # chains still narrow (no index work), nothing else is removed
        assert all(not (m.gather_in or m.scatter_out) for m in pruned.modules() if isinstance(m, PrunedLinear))
        assert after.removed_gated_weights < before.removed_gated_weights

    pruned.save_pretrained(tmp_path)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "sparse_gated"
    reloaded = AUTO[TASK_TYPES[arch]].from_pretrained(tmp_path).eval()
    assert type(reloaded) is type(pruned) and parameter_accounting(reloaded) == after
    with torch.no_grad():
        assert (reloaded(**inputs).logits - gated_logits).abs().max() <= 1e-4


@pytest.mark.parametrize("narrow", ["query_key", "value"])
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
@pytest.mark.parametrize("arch", ["bert", "roberta"])
def test_heads_narrow_query_key_apart_from_value(arch, attention, narrow, tmp_path):
    """The pattern trained gates leave (most query/key dimensions closed, values open), and its mirror:
    the closed side's heads narrow to the largest open count while the other stays at full width,
    outputs are unchanged under either attention kernel (SDPA runs on the narrower side zero-padded),
    and the reloaded checkpoint (sizes from its config) gives them again. A config from before the two
    sizes could differ (one int) still loads."""
    model = _gated(arch)
    model.base_model.model.config._attn_implementation = attention
    set_gate_pattern(model, closed=0.0, fractional=0.2)
    generator = torch.Generator().manual_seed(5)
    closing = ("attention.self.query", "attention.self.key") if narrow == "query_key" else ("attention.self.value",)
    wide = "value" if narrow == "query_key" else "query_key"
    with torch.no_grad():
        for name, layer in model.base_model.gated_layers().items():
            if name.endswith(closing):
                rows = layer.sparse_gates_row["default"]
                rows[torch.rand(rows.shape, generator=generator) < 0.7] = -3.0
    model.eval()
    inputs = _inputs()
    with torch.no_grad():
        gated_logits = model(**inputs).logits
    pruned = model.merge_and_unload(layout="keep", align=1, narrow_heads=True)
    sizes = pruned.config.attention_head_sizes
    assert len(sizes) == 2 and all(0 < s[narrow] < 8 and s[wide] == 8 for s in sizes.values())
    narrowed = [m for m in pruned.modules() if isinstance(m, sparse_models.QueryKeyNarrowedAttention)]
    assert len(narrowed) == 2
    with torch.no_grad():
        assert (pruned(**inputs).logits - gated_logits).abs().max() <= 1e-4
    pruned.save_pretrained(tmp_path)
    reloaded = AUTO["SEQ_CLS"].from_pretrained(tmp_path, attn_implementation=attention).eval()
    assert reloaded.config.attention_head_sizes == sizes
    with torch.no_grad():
        assert (reloaded(**inputs).logits - gated_logits).abs().max() <= 1e-4

    shared = _gated(arch)  # query, key and value closed alike: equal sizes, stored as one int before
    set_gate_pattern(shared, closed=0.0, fractional=0.2)
    with torch.no_grad():
        for name, layer in shared.base_model.gated_layers().items():
            if ".attention.self." in name:
                rows = layer.sparse_gates_row["default"]
                rows[torch.rand(rows.shape, generator=torch.Generator().manual_seed(6)) < 0.5] = -3.0
    shared.eval()
    with torch.no_grad():
        shared_logits = shared(**inputs).logits
    shared.merge_and_unload(layout="keep", align=1, narrow_heads=True).save_pretrained(tmp_path / "old")
    config = json.loads((tmp_path / "old" / "config.json").read_text())
    sizes = config["attention_head_sizes"]
    assert sizes and all(s["query_key"] == s["value"] < 8 for s in sizes.values())
    config["attention_head_sizes"] = {name: s["value"] for name, s in sizes.items()}
    (tmp_path / "old" / "config.json").write_text(json.dumps(config))
    with torch.no_grad():
        assert (AUTO["SEQ_CLS"].from_pretrained(tmp_path / "old").eval()(**inputs).logits
                - shared_logits).abs().max() <= 1e-4


def test_checkpoints_saved_under_the_old_class_names_still_load(tmp_path):
    """Before the rename the pruned classes were ``SparseGated*``: a config naming them loads into the
    ``SparsePruned*`` class with the same outputs, and the old names still import."""
    import sparse_models

    model = _gated("bert")
    set_gate_pattern(model)
    pruned = model.eval().merge_and_unload()
    pruned.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    config["architectures"] = ["SparseGatedForSequenceClassification"]  # what older checkpoints hold
    (tmp_path / "config.json").write_text(json.dumps(config))
    reloaded = AUTO["SEQ_CLS"].from_pretrained(tmp_path).eval()
    assert type(reloaded) is sparse_models.SparsePrunedForSequenceClassification
    with pytest.warns(DeprecationWarning, match=f"goes in glue-sparse {REMOVED_IN} \\(not before {NOT_BEFORE}\\)"):
        assert sparse_models.SparseGatedForSequenceClassification is sparse_models.SparsePrunedForSequenceClassification
    assert "SparseGatedConfig" not in sparse_models.__all__
    inputs = _inputs()
    with torch.no_grad():
        assert torch.equal(reloaded(**inputs).logits, pruned(**inputs).logits)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("tokens", [3, 640])
def test_pruned_linear_reads_kept_columns_alike_with_either_gather_kernel(tokens, threads):
    """A column-pruned layer reads its kept inputs with ``index_select`` or, from ``PARALLEL_GATHER_MIN``
    values on several threads, ``torch.gather``: both give exactly the layer's output on the kept
    columns (640 tokens x 320 columns is past the threshold, so the second kernel runs on 2 threads)."""
    generator = torch.Generator().manual_seed(0)
    weight, bias = torch.randn(96, 384, generator=generator), torch.randn(96, generator=generator)
    kept_in = torch.randperm(384, generator=generator)[:320].sort().values
    kept_out = torch.randperm(96, generator=generator)[:80].sort().values
    layer = PrunedLinear.from_dense(weight, bias, kept_in, kept_out, gather_in=True, scatter_out=True)
    x = torch.randn(1, tokens, 384, generator=generator)
    expected = torch.zeros(1, tokens, 96)
    expected[..., kept_out] = torch.nn.functional.linear(x[..., kept_in], weight[kept_out][:, kept_in], bias[kept_out])
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        assert torch.equal(layer(x), expected)
    finally:
        torch.set_num_threads(before)
    assert (tokens * 320 >= PARALLEL_GATHER_MIN) == (tokens == 640)


@pytest.mark.parametrize("arch", ["bert", "roberta", "gpt2"])
def test_output_layers_add_kept_rows_into_the_residual(arch, tmp_path):
    """BERT-family output layers whose closed rows are removed add their kept rows straight into the
    residual (no scatter into zeros first): bit-for-bit the scatter's outputs, installed again when the
    checkpoint loads, the stock forward while training with dropout, and timed with that add by the
    cost model. GPT-2 adds in its block's forward and keeps the scatter."""
    model = _gated(arch)
    set_gate_pattern(model)
    model.eval()
    plan = sparse_models.plan_pruning(model)
    pruned = model.merge_and_unload(layout="remove", align=1)
    fused = [m for m in pruned.modules() if isinstance(m, ResidualAddOutput)]
    scattering = [n for n, m in pruned.named_modules() if isinstance(m, PrunedLinear) and m.scatter_out]
    if arch == "gpt2":
        assert not fused and scattering
        return
    assert len(fused) == 4 and all(m.dense.scatter_out for m in fused)  # 2 layers x (attention, FFN) output
    inputs = _inputs()
    with torch.no_grad():
        fused_logits = pruned(**inputs).logits
    fused_class = {m: type(m) for m in fused}
    for m in fused:  # back to the stock class: (ResidualAdd<cls>, ResidualAddOutput, <cls>, ...)
        m.__class__ = type(m).__mro__[2]
    with torch.no_grad():
        assert torch.equal(pruned(**inputs).logits, fused_logits)
        pruned.train()
        torch.manual_seed(0)
        stock_train = pruned(**inputs).logits
    for m, cls in fused_class.items():
        m.__class__ = cls
    with torch.no_grad():
        torch.manual_seed(0)
        assert torch.equal(pruned(**inputs).logits, stock_train)
    pruned.eval().save_pretrained(tmp_path)
    reloaded = AUTO["SEQ_CLS"].from_pretrained(tmp_path).eval()
    assert sum(isinstance(m, ResidualAddOutput) for m in reloaded.modules()) == 4
    with torch.no_grad():
        assert torch.equal(reloaded(**inputs).logits, fused_logits)

    output_rows = [p for n, p in plan.modules.items() if n.endswith("output.dense") and p.scatter_out]
    assert output_rows and all(p.residual_add for p in output_rows)
    assert not any(p.residual_add for n, p in plan.modules.items() if not n.endswith("output.dense"))
    chosen = choose_sides(plan, tokens=64, cache=tmp_path / "timings.json")
    assert all(p.name in chosen for p in output_rows)  # remove vs keep rows, each timed with its residual add


def test_pruning_removes_ffn_and_value_output_chains():
    model = _gated("bert", target_modules=["intermediate.dense", "attention.self.value"])
    layer0 = "base_model.model.bert.encoder.layer.0."
    with torch.no_grad():
        model.get_submodule(layer0 + "intermediate.dense").sparse_gates_row["default"][:10] = -3.0
        model.get_submodule(layer0 + "attention.self.value").sparse_gates_row["default"][:4] = -3.0
    plan = sparse_models.plan_pruning(model)
    ffn_out = plan.modules["bert.encoder.layer.0.output.dense"]
    assert not ffn_out.gated and len(ffn_out.kept_in) == 64 - 10 and not ffn_out.gather_in  # narrow input
    assert not plan.modules["bert.encoder.layer.0.intermediate.dense"].scatter_out
    attn_out = plan.modules["bert.encoder.layer.0.attention.output.dense"]
    assert len(attn_out.kept_in) == 32 - 4 and attn_out.gather_in
    assert plan.modules["bert.encoder.layer.0.attention.self.value"].scatter_out  # heads need full width


def test_query_key_pairing_drops_dead_score_dimensions():
    model = _gated("bert", target_modules=["attention.self.query", "attention.self.key"])
    layer0 = "base_model.model.bert.encoder.layer.0.attention.self."
    with torch.no_grad():
        model.get_submodule(layer0 + "query").sparse_gates_row["default"][:3] = -3.0
        model.get_submodule(layer0 + "key").sparse_gates_row["default"][3:5] = -3.0
    plan = sparse_models.plan_pruning(model)
    for name in ("query", "key"):
        assert plan.modules["bert.encoder.layer.0.attention.self." + name].kept_out.tolist() == list(range(5, 32))


def test_accounting_by_hand():
    model = _gated("bert", target_modules=["bert.encoder.layer.0.intermediate.dense",
                                           "bert.encoder.layer.1.attention.self.query"])
    with torch.no_grad():
        ffn = model.get_submodule("base_model.model.bert.encoder.layer.0.intermediate.dense")
        ffn.sparse_gates_row["default"][:16] = -3.0  # 16 of 64 rows closed
        ffn.sparse_gates_col["default"][:8] = -3.0  # 8 of 32 columns closed
        query = model.get_submodule("base_model.model.bert.encoder.layer.1.attention.self.query")
        query.sparse_gates_row["default"][:4] = -3.0  # 4 of 32 rows
        query.sparse_gates_row["default"][4:8] = -0.2  # fractional: stays
    accounting = parameter_accounting(model)
    dense = sum(p.numel() for p in tiny_bert().parameters())
    assert accounting.dense_parameters == dense
    assert accounting.gated_modules == 2
    assert accounting.gated_weights == 64 * 32 + 32 * 32
    removed_ffn_in = 64 * 32 - 48 * 24
    removed_query = 32 * 32 - 28 * 32
    removed_ffn_out = 32 * 64 - 32 * 48  # chain: the closed FFN rows take output.dense columns along
    removed_key = 4 * 32  # chain: a query dimension that is closed makes the same key dimension dead
    assert accounting.removed_gated_weights == removed_ffn_in + removed_query
    assert accounting.removed_weights == removed_ffn_in + removed_query + removed_ffn_out + removed_key
    assert accounting.removed_parameters == accounting.removed_weights + 16 + 4 + 4  # biases of closed rows
    assert accounting.remaining_parameters == dense - accounting.removed_parameters
    assert accounting.closed_rows == 20 and accounting.total_rows == 64 + 32
    assert accounting.closed_cols == 8 and accounting.total_cols == 32 + 32
    assert accounting.closed_row_fraction == pytest.approx(20 / 96)
    assert accounting.removed_share_of_gated == pytest.approx((removed_ffn_in + removed_query) / (64 * 32 + 32 * 32))
    assert accounting.removed_share_of_total == pytest.approx(accounting.removed_parameters / dense)
    trainable = 64 + 32 + 32 + 32 + 64 + 32 + 32 * 2 + 2  # gates, gated biases, classifier
    assert accounting.trainable_parameters == trainable
    assert accounting.to_dict()["removed_share_of_gated"] == accounting.removed_share_of_gated


def test_plain_model_accounting_removes_nothing():
    model = tiny_bert()
    accounting = parameter_accounting(model)
    assert accounting.removed_parameters == 0 and accounting.gated_weights == 0
    assert accounting.dense_parameters == accounting.trainable_parameters == sum(p.numel() for p in model.parameters())


def test_fully_closed_layers_stay_valid():
    model = _gated("bert")
    set_gate_pattern(model, closed=0.3)
    with torch.no_grad():
        layer0 = "base_model.model.bert.encoder.layer.0."
        model.get_submodule(layer0 + "intermediate.dense").sparse_gates_row["default"][:] = -3.0
        model.get_submodule(layer0 + "attention.self.query").sparse_gates_col["default"][:] = -3.0
    model.eval()
    inputs = _inputs()
    with torch.no_grad():
        expected = model(**inputs).logits
    pruned = model.merge_and_unload()
    ffn = pruned.get_submodule("model.bert.encoder.layer.0.intermediate.dense")
    assert ffn.weight.shape[0] == 0
    with torch.no_grad():
        got = pruned(**inputs).logits
    assert torch.isfinite(got).all()
    assert (got - expected).abs().max() <= 1e-4


def test_merge_in_training_mode_warns_and_uses_eval_gates():
    model = _gated("bert")
    set_gate_pattern(model)
    model.eval()
    inputs = _inputs()
    with torch.no_grad():
        expected = model(**inputs).logits
    model.train()
    with pytest.warns(UserWarning, match="evaluation gates"):
        pruned = model.merge_and_unload()
    with torch.no_grad():
        assert (pruned(**inputs).logits - expected).abs().max() <= 1e-4


def test_no_noise_in_eval_mode_and_noise_in_training():
    model = _gated("bert")
    with torch.no_grad():
        for layer in model.base_model.gated_layers().values():
            layer.sparse_gates_row["default"].zero_()  # mu = 0: gate 0.5 +- noise, never clamped flat
    inputs = _inputs()
    model.eval()
    with torch.no_grad():
        first, second = model(**inputs).logits, model(**inputs).logits
    assert torch.equal(first, second)
    layer = next(iter(model.base_model.gated_layers().values()))
    _, row = layer.eval_gates()
    assert torch.allclose(row, torch.full_like(row, 0.5))
    model.train()
    torch.manual_seed(0)
    noisy = model(**inputs).logits
    assert not torch.allclose(noisy, first)


def test_regulariser_gradient_points_toward_target():
    logits = torch.atanh(torch.tensor(-0.45)).expand(50).clone()  # mu + 0.5 = 0.05: P(open) = Phi(0.5) ~ 0.69
    for keep, direction in ((0.6, +1), (0.9, -1)):  # too many open -> push logits down, and the reverse
        row = logits.clone().requires_grad_(True)
        col = logits.clone().requires_grad_(True)
        gates.keep_penalty(row, col, keep=keep, sigma=0.1).backward()
        # gradient descent moves logits by -grad: down (closing) when P(open) > keep
        assert (direction * row.grad > 0).all() and (direction * col.grad > 0).all()
    model = _gated("bert", target_sparsity=0.4, sparsity_lambda=50.0)
    with torch.no_grad():
        for layer in model.base_model.gated_layers().values():
            layer.sparse_gates_row["default"].fill_(0.0)  # mu = 0: P(open) = Phi(1) ~ 0.84 > keep 0.6
            layer.sparse_gates_col["default"].fill_(0.0)
    loss = model.sparsity_loss()
    p_open = float(gates.open_probability(torch.zeros(1), 0.5))  # the config default sigma, as the reference
    assert loss.item() == pytest.approx(50.0 * abs(p_open - 0.6), rel=1e-5)  # mean of the row and column terms
    loss.backward()
    assert all((layer.sparse_gates_row["default"].grad > 0).all()
               for layer in model.base_model.gated_layers().values())


def test_gates_train_only_gates_biases_and_head():
    model = _gated("bert")
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable
    for name in trainable:
        assert ("sparse_gates_" in name or name.endswith("base_layer.bias")
                or ".classifier.modules_to_save." in name), name
    assert any("sparse_gates_row" in n for n in trainable) and any("classifier" in n for n in trainable)


def test_adapter_saves_only_trained_tensors_and_restores_exactly(tmp_path):
    base_dir = tmp_path / "base"
    tiny_bert(num_labels=3).save_pretrained(base_dir)
    model = peft.get_peft_model(AutoModelForSequenceClassification.from_pretrained(base_dir),
                                SparseGatesConfig(task_type="SEQ_CLS"))
    set_gate_pattern(model)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "sparse_gates_bias" in name:
                p.add_(0.5)  # "trained" bias deltas must travel with the adapter
    model.eval()
    inputs = _inputs()
    with torch.no_grad():
        expected = model(**inputs).logits
    model.save_pretrained(tmp_path / "adapter")
    with safe_open(str(tmp_path / "adapter" / "adapter_model.safetensors"), "pt") as f:
        keys = list(f.keys())
    assert keys and all("sparse_gates_" in k or k.endswith("bias") or "classifier" in k for k in keys)
    assert not any(k.endswith("dense.weight") and "classifier" not in k for k in keys)
    config = PeftConfig.from_pretrained(tmp_path / "adapter")
    assert isinstance(config, SparseGatesConfig) and config.target_sparsity == 0.4
    restored = PeftModel.from_pretrained(AutoModelForSequenceClassification.from_pretrained(base_dir),
                                         tmp_path / "adapter").eval()
    with torch.no_grad():
        assert torch.equal(restored(**inputs).logits, expected)


def test_gates_plus_lora_train_save_and_prune(tmp_path):
    base_dir = tmp_path / "base"
    tiny_bert().save_pretrained(base_dir)
    model = peft.get_peft_model(AutoModelForSequenceClassification.from_pretrained(base_dir),
                                SparseGatesConfig(task_type="SEQ_CLS", lora_config=LoraConfig(r=4, lora_alpha=8)))
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert any("lora_A" in n for n in trainable) and any("sparse_gates_col" in n for n in trainable)
    assert any("sparse_gates_bias" in n for n in trainable)  # the gated biases, as one delta per adapter
    set_gate_pattern(model)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.2)
    model.eval()
    inputs = _inputs()
    with torch.no_grad():
        expected = model(**inputs).logits
    model.save_pretrained(tmp_path / "adapter")
    restored = PeftModel.from_pretrained(AutoModelForSequenceClassification.from_pretrained(base_dir),
                                         tmp_path / "adapter").eval()
    with torch.no_grad():
        assert torch.equal(restored(**inputs).logits, expected)
    pruned = restored.merge_and_unload()
    with torch.no_grad():
        assert (pruned(**inputs).logits - expected).abs().max() <= 1e-4


def test_bad_input_errors(tmp_path):
    from peft.tuners.tuners_utils import NoMatchingPeftModuleError

    with pytest.raises(NoMatchingPeftModuleError, match="nothing_here"):
        peft.get_peft_model(tiny_bert(), SparseGatesConfig(target_modules=["nothing_here"]))
    with pytest.raises(ValueError, match="target_sparsity"):
        SparseGatesConfig(target_sparsity=1.0)
    with pytest.raises(ValueError, match="bias"):
        SparseGatesConfig(bias="lora_only")
    with pytest.raises(ValueError, match="model_type 'xlnet'"):
        sparse_models.architectures.default_target_modules("xlnet")
    model = peft.get_peft_model(tiny_bert(), SparseGatesConfig(task_type="SEQ_CLS"))
    model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match=r"module 'bert\.encoder\.layer\.0\..*' .* shape \(48"):
        PeftModel.from_pretrained(tiny_bert(hidden=48), tmp_path)


def test_registration_with_peft_and_auto_classes():
    from peft.mapping import PEFT_TYPE_TO_CONFIG_MAPPING
    from transformers import AutoConfig

    assert PEFT_TYPE_TO_CONFIG_MAPPING["SPARSE_GATES"] is SparseGatesConfig
    assert AutoConfig.for_model("sparse_gated").__class__.__name__ == "SparsePrunedConfig"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        import importlib

        importlib.reload(sparse_models.sparse_gates)  # registering twice is harmless


def test_layout_timings_are_cached_by_machine_and_shape(tmp_path):
    model = _gated("bert")
    set_gate_pattern(model)
    plan = sparse_models.plan_pruning(model)
    cache = tmp_path / "layout_timings.json"
    first = choose_sides(plan, tokens=64, cache=cache)
    timings = json.loads(cache.read_text())
    # one timing per candidate layout of every layer that has a choice (same shapes share an entry)
    assert first and 0 < len(timings) <= sum(len(candidate_sides(p)) for p in plan.modules.values())
    assert all(side in candidate_sides(plan.modules[name]) for name, side in first.items())
    stamp = cache.stat().st_mtime_ns
    assert choose_sides(plan, tokens=64, cache=cache) == first  # read back, not timed again
    assert cache.stat().st_mtime_ns == stamp
    choose_sides(plan, tokens=128, cache=cache)  # another token count is another key
    assert len(json.loads(cache.read_text())) > len(timings)


def test_whole_model_check_keeps_index_work_only_when_it_pays(tmp_path, monkeypatch):
    """`auto` returns the per-layer choice or `remove` (each with or without heads narrowed) or `keep` (no
    index work), whichever the whole model runs fastest; candidates are timed once, together, and cached,
    and index work must win by the margin."""
    monkeypatch.setenv("GLUE_SPARSE_CACHE", str(tmp_path))
    model = _gated("bert")
    set_gate_pattern(model)
    model.eval()
    keep = copy.deepcopy(model).merge_and_unload(layout="keep")
    remove = copy.deepcopy(model).merge_and_unload(layout="remove")
    assert keep.config.pruned_modules != remove.config.pruned_modules
    cache = tmp_path / "layout_timings.json"
    chosen = choose_whole_model({"keep": keep, "remove": remove}, tokens=256, cache=cache)
    assert chosen in ("keep", "remove")
    timings = json.loads(cache.read_text())
    ((key, seconds),) = timings.items()
    assert len(seconds) == 2 and all(s > 0 for s in seconds)
    stamp = cache.stat().st_mtime_ns
    assert choose_whole_model({"keep": keep, "remove": remove}, tokens=256, cache=cache) == chosen
    assert cache.stat().st_mtime_ns == stamp  # read back, not timed again
    choose_whole_model({"keep": keep, "remove": remove}, tokens=256, cache=cache, length=16)
    assert len(json.loads(cache.read_text())) == 2  # another batch shape (16 x 16, not 4 x 64) is timed afresh
    for stored, expected in (([1.0, 0.995], "keep"), ([1.0, 0.975], "keep"), ([1.0, 0.9], "remove"),
                             ([0.9, 1.0], "keep")):
        cache.write_text(json.dumps({key: stored}))
        assert choose_whole_model({"keep": keep, "remove": remove}, tokens=256, cache=cache) == expected

    plan = sparse_models.plan_pruning(model).aligned(16)
    per_layer = plan.with_layout(choose_sides(plan, 256))
    heads = sparse_models.plan_pruning(model).with_narrow_heads(model).aligned(16)
    per_layer_heads = heads.with_layout(choose_sides(heads, 256))
    remove_heads = copy.deepcopy(model).merge_and_unload(layout="remove", narrow_heads=True)
    pruned = copy.deepcopy(model).merge_and_unload(layout_tokens=256)
    assert [pruned.config.pruned_modules, pruned.config.attention_head_sizes] in (
        [{n: p.record() for n, p in per_layer.modules.items()}, {}], [keep.config.pruned_modules, {}],
        [{n: p.record() for n, p in per_layer_heads.modules.items()}, per_layer_heads.attention_head_sizes],
        [remove.config.pruned_modules, {}],
        [remove_heads.config.pruned_modules, remove_heads.config.attention_head_sizes])
    assert per_layer_heads.attention_head_sizes  # the pattern narrows heads: a third candidate was timed
    # this model's candidates were timed whole (a list of timings; per-layer entries are single numbers)
    assert any(isinstance(v, list) for k, v in json.loads(cache.read_text()).items() if k != key)


def test_whole_model_timing_takes_fewer_rounds_when_a_forward_is_slow():
    """A whole causal LM forward on CPU takes seconds: the check's budget cuts its rounds (never under
    the minimum); the per-layer timings keep every round."""
    from sparse_models.sparse_gates import layout_costs

    calls: list[int] = []

    def slow(_):
        calls.append(1)
        time.sleep(0.01)

    cpu = torch.device("cpu")
    assert len(layout_costs._fastest_of_rounds([(slow, None)], cpu, budget_s=0.001)) == 1
    assert len(calls) == 1 + layout_costs._MIN_ROUNDS  # the warm-up round, then the minimum
    calls.clear()
    layout_costs._fastest_of_rounds([(slow, None), (slow, None)], cpu)
    assert len(calls) == 2 * (1 + layout_costs._ROUNDS)


def test_a_layer_whose_every_input_is_closed_still_runs_and_adds_only_its_bias():
    """A fully closed input (every FFN channel of a layer closed, say) reaches the next matrix as zero columns:
    its pruned layer takes a (tokens, 0) input and outputs its bias, scattered or added into the residual (a
    full run's Taylor ranking closed one such layer at 50%; the layout timing crashed on it)."""
    from sparse_models.pruned.pruned_linear import PrunedLinear

    weight, bias = torch.randn(6, 4), torch.randn(6)
    layer = PrunedLinear.from_dense(weight, bias, torch.tensor([], dtype=torch.long), torch.tensor([0, 2, 5]),
                                    gather_in=False, scatter_out=True)
    x, residual = torch.randn(2, 3, 0), torch.randn(2, 3, 6)
    expected = torch.zeros(6)
    expected[[0, 2, 5]] = bias[[0, 2, 5]]
    torch.testing.assert_close(layer(x), expected.expand(2, 3, 6))
    torch.testing.assert_close(layer.add_to(x, residual), residual + expected)
