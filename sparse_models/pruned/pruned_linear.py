"""``PrunedLinear``: a linear layer that computes only its kept rows and reads only its kept columns."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

#: Gathered values (tokens x kept columns) from which a CPU column gather runs ``torch.gather`` with the
#: index broadcast over the tokens instead of ``index_select``: ``index_select`` along the features runs
#: on one thread, ``gather`` splits the tokens over threads (1,568 x 320 of 384 on 2 threads: 0.19-0.20
#: against 0.24-0.26 ms). At 32 tokens x 320 ``index_select`` was faster (gather 0.58-0.71x), from 256 x 320
#: ``gather`` in both runs; the threshold sits above that, and one thread keeps ``index_select`` (gather
#: 0.7x there; benchmarks/results/gather_kernel_ab).
PARALLEL_GATHER_MIN = 1 << 17


class PrunedLinear(nn.Module):
    """y = W'[kept_out, kept_in] x[..., kept_in] + b'[kept_out], optionally scattered back to full width.

    ``gather_in``: the input arrives at full width and the kept columns are selected. Without it the
    input already has exactly ``kept_in`` features (a narrowed producer upstream).
    ``scatter_out``: the output is written into zeros of the full width (the residual stream or an
    attention reshape needs it), or added straight into the residual (``add_to``) where the block's
    own output module does that add (``sparse_models.pruned.residual_add``). Without it the narrow output
    feeds a chained consumer directly.
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
        lead = x.shape[:-1]
        y = self._kept_rows(x)
        if self.scatter_out:  # ``scatter_`` with the index broadcast over the tokens: the same tensor as
            # ``index_copy_`` along the features, ~2x faster on CPU (benchmarks/results/scatter_kernel_ab)
            y = y.new_zeros(y.shape[0], self.out_features).scatter_(1, self.out_index.expand(y.shape[0], -1), y)
        return y.reshape(*lead, y.shape[-1])

    def add_to(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        """``self(x) + residual`` without building the full-width output: kept rows are added straight
        into (a copy of) the residual, which saves the scatter into zeros and is exact (each sum is the
        same ``y + r``; rows not kept are ``r``)."""
        if not self.scatter_out:
            return self(x) + residual
        y = self._kept_rows(x)
        return residual.reshape(-1, self.out_features).index_add(1, self.out_index, y).view(residual.shape)

    def _kept_rows(self, x: torch.Tensor) -> torch.Tensor:
        """The (tokens, kept_out) output. Index work runs on a 2-D (tokens, features) view: on CPU a
        last-dimension gather of a 3-D (batch, length, features) tensor measured 4-5x slower than the
        same gather on its 2-D view."""
        x = x.flatten(end_dim=-2)  # not reshape(-1, n): a layer whose every input column is closed gets n = 0
        if self.gather_in:
            x = self._gathered(x)
        return F.linear(x, self.weight, self.bias)

    def _gathered(self, x: torch.Tensor) -> torch.Tensor:
        """The kept columns of a 2-D ``x``, by the kernel that is faster for its size and thread count."""
        tokens = x.shape[0]
        if x.is_cpu and tokens * len(self.in_index) >= PARALLEL_GATHER_MIN and torch.get_num_threads() > 1:
            return torch.gather(x, 1, self.in_index.expand(tokens, -1))
        return x.index_select(1, self.in_index)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"kept_in={self.weight.shape[1]}, kept_out={self.weight.shape[0]}, "
            f"gather_in={self.gather_in}, scatter_out={self.scatter_out}, bias={self.bias is not None}"
        )
