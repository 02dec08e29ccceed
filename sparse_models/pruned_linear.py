"""``PrunedLinear``: a linear layer that computes only its kept rows and reads only its kept columns."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class PrunedLinear(nn.Module):
    """y = W'[kept_out, kept_in] x[..., kept_in] + b'[kept_out], optionally scattered back to full width.

    ``gather_in``: the input arrives at full width and the kept columns are selected. Without it the
    input already has exactly ``kept_in`` features (a narrowed producer upstream).
    ``scatter_out``: the output goes back to the full width (the residual stream or an attention
    reshape needs it), closed rows reading 0. Without it the narrow output feeds a chained consumer
    directly. The scatter is done as a gather from the output with one zero column appended: on CPU a
    last-dimension ``index_copy_`` into zeros measured about twice as slow as that pad and gather.
    """

    def __init__(
        self,
        in_features: int,
        out_features: int,
        kept_in: int,
        kept_out: int,
        gather_in: bool,
        scatter_out: bool,
        bias: bool,
    ) -> None:
        super().__init__()
        self.in_features, self.out_features = in_features, out_features
        self.gather_in, self.scatter_out = gather_in, scatter_out
        self.weight = nn.Parameter(torch.zeros(kept_out, kept_in))
        self.bias = nn.Parameter(torch.zeros(kept_out)) if bias else None
        if gather_in:
            self.register_buffer("in_index", torch.zeros(kept_in, dtype=torch.long))
        if scatter_out:
            self.register_buffer("out_index", torch.zeros(kept_out, dtype=torch.long))
        # Weights come from pruning or from a checkpoint, never from a random initialiser.
        self._is_hf_initialized = True
        self._out_gather: tuple[tuple, torch.Tensor] | None = None

    def _out_gather_index(self) -> torch.Tensor:
        """For each output feature its kept row, or the appended zero column; derived from ``out_index``
        (the saved buffer) and re-derived whenever that tensor is replaced, moved or written, since a
        loader may fill buffers without any module hook running."""
        index = self.out_index
        key = (index.data_ptr(), -1 if index.is_inference() else index._version, index.device)  # no counter there
        if self._out_gather is None or self._out_gather[0] != key:
            gather = torch.full((self.out_features,), len(index), dtype=torch.long, device=index.device)
            gather[index] = torch.arange(len(index), device=index.device)
            self._out_gather = (key, gather)
        return self._out_gather[1]

    @classmethod
    def from_dense(
        cls,
        weight_out_in: torch.Tensor,
        bias: torch.Tensor | None,
        kept_in: torch.Tensor,
        kept_out: torch.Tensor,
        gather_in: bool,
        scatter_out: bool,
    ) -> "PrunedLinear":
        out_features, in_features = weight_out_in.shape
        layer = cls(in_features, out_features, len(kept_in), len(kept_out), gather_in, scatter_out, bias is not None)
        layer.to(dtype=weight_out_in.dtype, device=weight_out_in.device)
        with torch.no_grad():
            layer.weight.copy_(weight_out_in.index_select(0, kept_out).index_select(1, kept_in))
            if bias is not None:
                layer.bias.copy_(bias.index_select(0, kept_out))
            if gather_in:
                layer.in_index.copy_(kept_in)
            if scatter_out:
                layer.out_index.copy_(kept_out)
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not (self.gather_in or self.scatter_out):
            return F.linear(x, self.weight, self.bias)
        # Index work on a 2-D (tokens, features) view: on CPU a last-dimension gather of a 3-D
        # (batch, length, features) tensor measured 4-5x slower than the same gather on its 2-D view.
        lead = x.shape[:-1]
        x = x.reshape(-1, x.shape[-1])
        if self.gather_in:
            x = x.index_select(1, self.in_index)
        y = F.linear(x, self.weight, self.bias)
        if self.scatter_out:
            y = F.pad(y, (0, 1)).index_select(1, self._out_gather_index())
        return y.reshape(*lead, y.shape[-1])

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"kept_in={self.weight.shape[1]}, kept_out={self.weight.shape[0]}, "
            f"gather_in={self.gather_in}, scatter_out={self.scatter_out}, bias={self.bias is not None}"
        )
