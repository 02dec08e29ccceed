"""PEFT's generic tuner contract for sparse gates (issue #38, causes 1-7): ``adapter_names`` is honoured
when merging and pruning, unmerge after several merges restores the weights, ``safe_merge`` uses PEFT's
wording, layers gated on an eval-mode model start in eval mode, a model without a transformers config
merges per matrix as LoRA does, each adapter owns its bias delta, ``init_weights=False`` starts gates
fractional, and what PEFT's generic tests (``test_peft_generic``) cannot check for gates with LoRA inside."""

from __future__ import annotations

import copy

import peft
import pytest
import torch
from torch import nn

from sparse_models import SparseGatesConfig
from sparse_models.sparse_gates import SparseGatesLayer
from tests.tiny_models import VOCAB, tiny_bert, tiny_gpt2, tiny_llama


def _randomise(model, adapter: str, seed: int) -> None:
    """Logits around the clamp edge: some gates closed, some fractional, some open."""
    g = torch.Generator().manual_seed(seed)
    for layer in model.modules():
        if isinstance(layer, SparseGatesLayer):
            for table in (layer.sparse_gates_row, layer.sparse_gates_col):
                p = table[adapter]
                p.data = torch.rand(p.shape, generator=g) * 2.4 - 1.2


def _two_adapter_model():
    """A tiny Llama (no classifier head: PEFT's head copies allow one active adapter) with two adapters."""
    config = dict(task_type="CAUSAL_LM", target_removal=0.3, bias="none")
    model = peft.get_peft_model(tiny_llama(seed=3), SparseGatesConfig(**config))
    model.add_adapter("other", SparseGatesConfig(**config))
    _randomise(model, "default", 1)
    _randomise(model, "other", 2)
    return model.eval()


IDS = torch.randint(1, VOCAB, (3, 12), generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("prune", [False, True])
def test_merging_named_adapters_folds_those_adapters_not_the_active_one(prune):
    model = _two_adapter_model()
    model.base_model.set_adapter(["default", "other"])
    with torch.no_grad():
        both = model(input_ids=IDS).logits
    model.base_model.set_adapter("default")
    with torch.no_grad():
        only_default = model(input_ids=IDS).logits
    assert not torch.allclose(both, only_default, atol=1e-4)  # the two adapters do differ
    merged = model.merge_and_unload(adapter_names=["other", "default"], prune=prune, layout="remove")
    with torch.no_grad():
        torch.testing.assert_close(merged(input_ids=IDS).logits, both, rtol=1e-4, atol=1e-5)


def test_unmerge_after_two_merges_restores_the_base_weights_exactly():
    model = _two_adapter_model()
    layer = next(m for m in model.modules() if isinstance(m, SparseGatesLayer))
    before = layer.get_base_layer().weight.detach().clone()
    layer.merge(adapter_names=["default"])
    layer.merge(adapter_names=["other"])
    assert layer.merged_adapters == ["default", "other"]
    assert not torch.equal(layer.get_base_layer().weight, before)
    layer.unmerge()
    assert not layer.merged and torch.equal(layer.get_base_layer().weight, before)


def test_safe_merge_refuses_nan_gates_in_peft_wording():
    model = _two_adapter_model()
    layer = next(m for m in model.modules() if isinstance(m, SparseGatesLayer))
    layer.sparse_gates_row["other"].data[0] = float("nan")
    with pytest.raises(ValueError, match="NaNs detected in the merged weights. The adapter other seems to be broken"):
        layer.merge(safe_merge=True, adapter_names=["other"])


def test_layers_gated_on_an_eval_mode_model_start_in_eval_mode():
    model = peft.get_peft_model(tiny_bert(seed=1).eval(), SparseGatesConfig(task_type="SEQ_CLS"))  # head: no gates
    gated = [m for m in model.modules() if isinstance(m, SparseGatesLayer)]
    assert gated and not any(m.training for m in gated)
    with torch.no_grad():  # eval gates are deterministic: two forwards agree
        torch.testing.assert_close(model(input_ids=IDS).logits, model(input_ids=IDS).logits, rtol=0, atol=0)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin0, self.lin1 = nn.Linear(10, 20), nn.Linear(20, 2)

    def forward(self, x):
        return self.lin1(torch.relu(self.lin0(x)))


def test_a_model_without_a_transformers_config_merges_per_matrix_as_lora_does():
    torch.manual_seed(0)
    model = peft.get_peft_model(MLP(), SparseGatesConfig(target_modules=["lin0", "lin1"]))
    _randomise(model, "default", 4)
    model.eval()
    x = torch.randn(4, 10)
    with torch.no_grad():
        gated = model(x)
    with pytest.warns(UserWarning, match="MLP is no transformers PreTrainedModel"):
        merged = model.merge_and_unload()
    assert isinstance(merged, MLP) and isinstance(merged.lin0, nn.Linear)
    with torch.no_grad():
        torch.testing.assert_close(merged(x), gated, rtol=1e-5, atol=1e-6)
    lora = peft.get_peft_model(copy.deepcopy(MLP()), peft.LoraConfig(target_modules=["lin0"]))
    assert isinstance(lora.merge_and_unload(), MLP)  # the behaviour it mirrors


def test_init_weights_false_starts_gates_fractional_so_one_step_moves_every_adapter():
    """Cause 7: the reference init (logits ~ N(1, 0.1)) sits on the clamp's flat part, where the task loss
    gives almost no gate a gradient (kept: it is the reference's behaviour); init_weights=False, as PEFT's own
    switch, starts them fractional, so the generic 'training changes the adapter' checks see them move."""
    base = tiny_llama(seed=5)
    with torch.no_grad():
        base_logits = base(input_ids=IDS).logits
    for init_weights in (True, False):
        model = peft.get_peft_model(copy.deepcopy(base), SparseGatesConfig(task_type="CAUSAL_LM", bias="none",
                                                                           init_weights=init_weights))
        model.eval()
        with torch.no_grad():
            same = torch.allclose(model(input_ids=IDS).logits, base_logits, atol=1e-6)
        assert same is init_weights  # the recipe's init is the identity; init_weights=False is not
        model.train()
        logits = {n: p.detach().clone() for n, p in model.named_parameters() if "sparse_gates_" in n}
        loss = model(input_ids=IDS, labels=IDS).loss  # no sparsity penalty: the task loss alone
        loss.backward()
        torch.optim.SGD([p for n, p in model.named_parameters() if "sparse_gates_" in n], lr=1.0).step()
        moved = [float((p.detach() != logits[n]).float().mean()) for n, p in model.named_parameters() if n in logits]
        if init_weights:  # only gates that the noise pulls below 1 get a gradient: a few per cent
            assert sum(moved) / len(moved) < 0.05, moved
        else:  # a few gates start, or are pushed by the noise, past the clamp edge: nearly all move
            assert min(moved) > 0.5 and sum(moved) / len(moved) > 0.9, moved


@pytest.mark.parametrize("model_id", ["gpt2", "MLP"])
def test_gates_with_lora_inside_train_both_and_nothing_else(model_id):
    """PEFT's generic training check, for an adapter whose tensors carry two prefixes (sparse_gates_ and
    lora_): every trainable adapter tensor gets a gradient, no base weight does."""
    from tests.peft_generic.local_models import TASK_TYPES, LocalModels

    targets = ["lin0", "lin1"] if model_id == "MLP" else None
    config = SparseGatesConfig(init_weights=False, target_modules=targets, task_type=TASK_TYPES[model_id],
                               lora_config={"r": 4, "init_lora_weights": False})
    model = peft.get_peft_model(LocalModels.from_pretrained(model_id), config)
    model.add_adapter("other", config)  # an inactive adapter must stay without gradients
    inputs = {"X": torch.arange(90).view(9, 10)} if model_id == "MLP" else {"input_ids": IDS}
    model(**inputs)[0].sum().backward()
    kinds = set()
    for name, param in model.named_parameters():
        adapter = ("sparse_gates_" in name or "lora_" in name) and ".default" in name
        assert (param.grad is not None) == (adapter and param.requires_grad), name
        if param.grad is not None:
            kinds.add("lora" if "lora_" in name else "gates")
    assert kinds == {"lora", "gates"}


def _two_adapters_with_bias_deltas():
    """A tiny GPT-2 (every gated Conv1D has a bias) with two adapters whose gates and bias deltas differ."""
    base = tiny_gpt2(seed=2)
    model = peft.get_peft_model(copy.deepcopy(base), SparseGatesConfig(task_type="CAUSAL_LM", target_removal=0.3))
    model.add_adapter("other", SparseGatesConfig(task_type="CAUSAL_LM", target_removal=0.3))
    g = torch.Generator().manual_seed(7)
    for adapter, seed in (("default", 1), ("other", 2)):
        _randomise(model, adapter, seed)
        for layer in model.modules():
            if isinstance(layer, SparseGatesLayer):
                delta = layer.sparse_gates_bias[adapter]
                delta.data = torch.randn(delta.shape, generator=g)  # as if trained
    return base, model.eval()


def test_each_adapter_owns_its_bias_delta_so_adapters_stay_independent():
    """Cause 6: the default trains a zero-initialised bias delta per adapter (bias_delta), not the wrapped
    layers' own biases, so a second adapter is allowed, disable_adapter() gives the base model exactly, and
    the wrapped biases never change."""
    base, model = _two_adapters_with_bias_deltas()
    config = model.peft_config["default"]
    assert config.bias == "none" and config.bias_delta is True
    wrapped = {n: p.detach().clone() for n, p in model.named_parameters() if n.endswith("base_layer.bias")}
    assert wrapped and not any(p.requires_grad for n, p in model.named_parameters() if n.endswith("base_layer.bias"))
    with torch.no_grad():
        base_logits = base(input_ids=IDS).logits
        with model.disable_adapter():
            torch.testing.assert_close(model(input_ids=IDS).logits, base_logits, rtol=0, atol=0)
        default = model(input_ids=IDS).logits
        model.base_model.set_adapter("other")
        other = model(input_ids=IDS).logits
    assert not torch.allclose(default, other, atol=1e-4)
    assert all(torch.equal(p, wrapped[n]) for n, p in model.named_parameters() if n in wrapped)


@pytest.mark.parametrize("layout", ["keep", "remove"])
def test_bias_deltas_fold_into_merged_and_pruned_models(layout):
    base, model = _two_adapters_with_bias_deltas()
    for adapters in (["default"], ["other", "default"]):
        model.base_model.set_adapter(adapters)
        with torch.no_grad():
            gated = model(input_ids=IDS).logits
        for prune in (False, True):
            merged = copy.deepcopy(model).merge_and_unload(adapter_names=adapters, prune=prune, layout=layout)
            with torch.no_grad():
                torch.testing.assert_close(merged(input_ids=IDS).logits, gated, rtol=1e-4, atol=1e-5)


def test_bias_delta_is_an_adapter_tensor_saved_loaded_and_frozen_for_inference(tmp_path):
    base, model = _two_adapters_with_bias_deltas()
    model.base_model.set_adapter("default")
    with torch.no_grad():
        expected = model(input_ids=IDS).logits
    model.save_pretrained(str(tmp_path))
    loaded = peft.PeftModel.from_pretrained(copy.deepcopy(base), str(tmp_path)).eval()  # inference mode
    assert not any(p.requires_grad for p in loaded.parameters())
    assert any("sparse_gates_bias" in n for n, _ in loaded.named_parameters())
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=IDS).logits, expected, rtol=0, atol=0)


def test_the_reference_in_place_bias_rule_stays_possible_with_one_adapter():
    """bias='sparse_gates_only' trains the wrapped biases in place, as the FineGates reference does; as
    PEFT's 'lora_only', that allows one adapter, and PEFT refuses a second in one line."""
    model = peft.get_peft_model(tiny_gpt2(seed=2), SparseGatesConfig(task_type="CAUSAL_LM", bias="sparse_gates_only"))
    assert model.peft_config["default"].bias_delta is False
    assert all(p.requires_grad for n, p in model.named_parameters() if n.endswith("base_layer.bias"))
    assert not any("sparse_gates_bias" in n for n, _ in model.named_parameters())
    with pytest.raises(ValueError, match="supports only 1 adapter with bias"):
        model.add_adapter("other", SparseGatesConfig(task_type="CAUSAL_LM", bias="sparse_gates_only"))
    with pytest.raises(ValueError, match="bias_delta=True and bias='sparse_gates_only' would both train"):
        SparseGatesConfig(bias="sparse_gates_only", bias_delta=True)
