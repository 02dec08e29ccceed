"""A memory-lean autograd function for ``y = (W (x * c) + b) * r`` around a frozen ``nn.Linear``.

The plain composition keeps the pre-gate output ``W (x * c) + b`` for the row-gate gradient, a new
tensor per gated layer. Here the row-gate gradient uses ``pre = y / r``, recovered from the output
``y``, which the next op often keeps anyway (GELU after FFN-in, attention after query/key/value), and
the column-gate gradient uses the layer input ``x``. On MiniLM this trims the tensors kept for
backward by about a tenth (``benchmarks/gates_saved_activations.py``); gates still keep more than
LoRA on query/value, since they need the input and output of six matrices per layer. Where ``r`` is
0 the recovered ``pre`` is 0, which is harmless: there the row gate sits at the clamp, whose
derivative is 0. In fp16 a tiny ``r`` could underflow ``y``, so there ``pre`` itself is saved.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F


class GatedFrozenLinear(torch.autograd.Function):
    """Forward as the composition; backward from ``x``, ``W``, the gates and ``y`` (or ``pre`` in fp16)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                col: torch.Tensor, row: torch.Tensor) -> torch.Tensor:
        ctx.grad_dtypes = (col.dtype, row.dtype)
        col = col.to(x.dtype)
        pre = F.linear(x * col, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))
        row = row.to(pre.dtype)
        y = pre * row
        ctx.keep_pre = pre.dtype == torch.float16
        ctx.bias_dtype = None if bias is None else bias.dtype
        ctx.save_for_backward(x, weight, col, row, pre if ctx.keep_pre else y)
        return y

    @staticmethod
    def backward(ctx: Any, grad_y: torch.Tensor):
        x, weight, col, row, saved = ctx.saved_tensors
        need_x, _, need_bias, need_col, need_row = ctx.needs_input_grad
        grad_x = grad_bias = grad_col = grad_row = None
        out_features, in_features = weight.shape
        g_pre = grad_y * row
        if need_x or need_col:
            g_in = g_pre @ weight.to(g_pre.dtype)
            if need_x:
                grad_x = g_in * col
            if need_col:
                grad_col = (g_in * x).reshape(-1, in_features).sum(0).to(ctx.grad_dtypes[0])
        if need_row:
            pre = saved if ctx.keep_pre else torch.where(row > 0, saved / row.clamp_min(torch.finfo(row.dtype).tiny), 0)
            grad_row = (grad_y * pre).reshape(-1, out_features).sum(0).to(ctx.grad_dtypes[1])
        if need_bias and ctx.bias_dtype is not None:
            grad_bias = g_pre.reshape(-1, out_features).sum(0).to(ctx.bias_dtype)
        return grad_x, None, grad_bias, grad_col, grad_row


def gated_frozen_linear(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None,
                        col: torch.Tensor, row: torch.Tensor) -> torch.Tensor:
    """``(F.linear(x * col, weight, bias)) * row`` for a weight that takes no gradient."""
    return GatedFrozenLinear.apply(x, weight, bias, col, row)
