"""A pruned encoder rewritten as the stock architecture with narrower matrices, for graph runtimes.

In eager PyTorch a ``PrunedLinear`` that gathers its kept input columns from the residual stream, or
scatters (index-adds) its kept rows back into it, is cheaper than the full matrix. Exported to ONNX the same
index work becomes Shape / Gather / Concat / ScatterElements chains around every such layer, and those break
the fusions a runtime lives on: ONNX Runtime's transformer optimizer fuses 12 SkipLayerNormalization in
dense MiniLM and 0-1 in the magnitude-pruned ones (benchmarks/results/onnx_speed/graph_census.md). ``regular_form`` therefore keeps what is
regular, a narrower FFN and narrower attention heads, as narrower plain ``nn.Linear`` layers, and folds the
closed residual-stream rows and columns back in as zeros, so each block is the stock block: a plain
residual ``Add`` before each LayerNorm, no gathers, no scatters. Outputs are the same up to float rounding
(closed rows are exact zeros, closed columns read zeros).

Attention narrowed to different query/key and value head sizes (``QueryKeyNarrowedAttention``) is padded
to one head size per layer (zero query/key dimensions add nothing to a score; zero value dimensions meet
zero columns of the attention output), so the stock attention runs it.
"""

from __future__ import annotations

import copy

import torch
from torch import nn

from glue_sparse_tasks.errors import UserInputError
from sparse_models.architectures import ENCODER_LAYOUTS
from sparse_models.pruned.modeling_sparse_pruned import QueryKeyNarrowedAttention, replace_module
from sparse_models.pruned.pruned_attention import HeadPrunedAttention
from sparse_models.pruned.pruned_linear import PrunedLinear
from sparse_models.pruned.residual_add import ResidualAddOutput

__all__ = ["plain_linear", "regular_form"]


def plain_linear(layer: PrunedLinear) -> nn.Linear:
    """The ``nn.Linear`` equal to ``layer``: full width on a side it gathers from or scatters into (the closed
    rows and columns as zeros), its kept width on a side chained to a narrowed neighbour."""
    kept_out, kept_in = layer.weight.shape
    out_width = layer.out_features if layer.scatter_out else kept_out
    in_width = layer.in_features if layer.gather_in else kept_in
    rows = layer.out_index if layer.scatter_out else torch.arange(kept_out, device=layer.weight.device)
    cols = layer.in_index if layer.gather_in else torch.arange(kept_in, device=layer.weight.device)
    linear = nn.Linear(in_width, out_width, bias=layer.bias is not None, device=layer.weight.device,
                       dtype=layer.weight.dtype)
    with torch.no_grad():
        linear.weight.zero_()
        linear.weight[rows.unsqueeze(1), cols.unsqueeze(0)] = layer.weight
        if layer.bias is not None:
            linear.bias.zero_()
            linear.bias[rows] = layer.bias
    return linear


def _pad_heads(weight: torch.Tensor, heads: int, size: int, width: int, dim: int) -> torch.Tensor:
    """``weight`` with each head's ``size`` slots along ``dim`` placed at the start of ``width`` zero slots."""
    shape = list(weight.shape)
    shape[dim:dim + 1] = [heads, size]
    padded = list(shape)
    padded[dim + 1] = width
    out = weight.new_zeros(padded)
    index = [slice(None)] * len(padded)
    index[dim + 1] = slice(0, size)
    out[tuple(index)] = weight.reshape(shape)
    return out.flatten(dim, dim + 1)


def _even_heads(model: nn.Module, name: str, attention: QueryKeyNarrowedAttention, model_type: str) -> None:
    """Pad the query/key or value heads of ``attention`` (named ``name``) to one head size and make it the
    stock attention again; its output projection gets zero columns where value heads were padded."""
    layout = ENCODER_LAYOUTS[model_type]
    own = layout.query.rpartition(".")[0]  # the attention module inside a layer ("attention.self")
    layer = name.removesuffix(own)
    output = model.get_submodule(layer + layout.attention_output)
    heads, query_key, value = attention.num_attention_heads, attention.query_key_head_size, attention.attention_head_size
    size = max(query_key, value)
    with torch.no_grad():
        for projection, own_size in ((attention.query, query_key), (attention.key, query_key), (attention.value, value)):
            if own_size < size:
                projection.weight = nn.Parameter(_pad_heads(projection.weight, heads, own_size, size, 0))
                if projection.bias is not None:
                    projection.bias = nn.Parameter(_pad_heads(projection.bias, heads, own_size, size, 0))
                projection.out_features = heads * size
        if value < size:
            output.weight = nn.Parameter(_pad_heads(output.weight, heads, value, size, 1))
            output.in_features = heads * size
    attention.__class__ = attention.stock_class
    attention.attention_head_size = size
    attention.all_head_size = heads * size


def regular_form(model: nn.Module) -> nn.Module:
    """A copy of a pruned (or dense) encoder in which every layer is a stock transformers module: plain
    ``nn.Linear`` layers (``plain_linear``), the stock output modules (their residual add in place of the
    index-add) and the stock attention (heads padded to one size per layer). Inner model of a
    ``SparsePruned*`` wrapper, or the model itself when it is no wrapper. (Keeping the FFN input's removed
    columns removed behind one gather instead ran slower in ONNX Runtime: benchmarks/results/onnx_speed.)"""
    model = copy.deepcopy(model).eval()
    inner = model.model if hasattr(model, "model") and hasattr(model.config, "inner_config") else model
    model_type = inner.config.model_type
    for name, module in list(inner.named_modules()):
        if isinstance(module, HeadPrunedAttention):
            raise UserInputError(f"{name}: attention with whole query heads removed (decoders) has no regular form "
                                 "here; ONNX export covers encoders")
        if isinstance(module, PrunedLinear):
            replace_module(inner, name, plain_linear(module))
    for name, module in list(inner.named_modules()):
        if isinstance(module, ResidualAddOutput):
            module.__class__ = next(b for b in type(module).__bases__ if not issubclass(b, ResidualAddOutput))
        elif isinstance(module, QueryKeyNarrowedAttention):
            _even_heads(inner, name, module, model_type)
    return inner
