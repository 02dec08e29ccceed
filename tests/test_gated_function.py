"""The memory-lean gated linear: same values and gradients as the plain composition, fewer saved bytes."""

from __future__ import annotations

import pytest
import torch
from peft import get_peft_model
from tiny_models import set_gate_pattern, tiny_bert

from sparse_models import SparseGatesConfig
from sparse_models.sparse_gates.functional import gated_frozen_linear


def _inputs(dtype=torch.float32, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 5, 8, generator=g, dtype=dtype, requires_grad=True)
    weight = torch.randn(6, 8, generator=g, dtype=dtype)
    b = torch.randn(6, generator=g, dtype=dtype, requires_grad=True) if bias else None
    # raw gate values; the clamp (as in the layer) makes exact zeros, fractions and ones
    col = torch.tensor([-0.5, 0.3, 1.4, 1.0, 0.7, -0.1, 1.2, 0.05]).requires_grad_()
    row = torch.tensor([1.3, -0.2, 0.4, 1.0, 0.9, 1e-6]).requires_grad_()
    return x, weight, b, col, row


def _grads(fn, x, weight, b, col, row):
    y = fn(x, weight, b, col.clamp(0, 1), row.clamp(0, 1))
    (y * torch.linspace(-1, 1, y.shape[-1], dtype=y.dtype)).sum().backward()
    out = [y.detach(), x.grad, col.grad, row.grad] + ([b.grad] if b is not None else [])
    return [t.clone() for t in out]


def _composition(x, weight, b, col, row):
    """The layer's plain path, casts included."""
    pre = torch.nn.functional.linear(x * col.to(x.dtype), weight, b)
    return pre * row.to(pre.dtype)


@pytest.mark.parametrize("bias", [True, False])
def test_values_and_gradients_equal_the_composition(bias):
    fused = _grads(gated_frozen_linear, *_inputs(bias=bias))
    plain = _grads(_composition, *_inputs(bias=bias))
    for a, b in zip(fused, plain):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_gradients_under_bf16_autocast_match_the_composition():
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused = _grads(gated_frozen_linear, *_inputs())
    with torch.autocast("cpu", dtype=torch.bfloat16):
        plain = _grads(_composition, *_inputs())
    for a, b in zip(fused, plain):
        assert a.dtype == b.dtype
        torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2)


def _saved_activation_bytes(model, batch) -> int:
    """Bytes of distinct non-parameter tensors autograd keeps for backward during one forward."""
    params = {p.data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        if t.data_ptr() not in params and t.numel() > 64:
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(**batch).logits.sum().backward()
    return sum(seen.values())


def test_gated_training_saves_fewer_activations_and_same_gradients():
    batch = {"input_ids": torch.randint(5, 90, (4, 24)), "attention_mask": torch.ones(4, 24, dtype=torch.long)}

    def build():
        peft_model = get_peft_model(tiny_bert(hidden=64), SparseGatesConfig(init_mean=0.3, init_std=0.5))
        set_gate_pattern(peft_model, closed=0.3, fractional=0.4)
        peft_model.train()
        return peft_model

    torch.manual_seed(0)
    fused = build()
    torch.manual_seed(0)
    plain = build()
    for module in plain.modules():
        if hasattr(module, "lean_backward"):
            module.lean_backward = False  # the plain composition

    torch.manual_seed(5)
    fused_bytes = _saved_activation_bytes(fused, batch)
    torch.manual_seed(5)
    plain_bytes = _saved_activation_bytes(plain, batch)
    # at least the FFN-in pre-activation of every layer is no longer a tensor of its own (GELU keeps y)
    cfg = fused.config
    ffn_in_bytes = cfg.num_hidden_layers * 4 * 24 * cfg.intermediate_size * 4
    assert plain_bytes - fused_bytes >= ffn_in_bytes, (fused_bytes, plain_bytes)
    fused_grads = {n: p.grad for n, p in fused.named_parameters() if "sparse_gates_" in n}
    plain_grads = {n: p.grad for n, p in plain.named_parameters() if "sparse_gates_" in n}
    assert fused_grads and fused_grads.keys() == plain_grads.keys()
    assert any(g.abs().sum() > 0 for g in fused_grads.values())
    for name in fused_grads:
        torch.testing.assert_close(fused_grads[name], plain_grads[name], rtol=1e-4, atol=1e-6, msg=name)
