"""The Fisher information of the head and channel masks (Kwon et al. 2022, Sec. 4.1), from per-example
gradients: each example gets its own copy of every mask (shape ``[batch, units]``), so the gradient of
the summed loss with respect to row ``b`` is example ``b``'s own gradient, in one backward pass per
batch. The gradients are returned whole, so the search can use the diagonal and the rearrangement the
per-layer blocks of ``I = E[g g^T]``."""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

import torch
from torch import nn

from glue_sparse_tasks.console import progress
from sparse_models.mask_search.units import EncoderLayer

__all__ = ["MaskGradients", "masked", "mask_gradients"]


def _scale_heads(context: torch.Tensor, mask: torch.Tensor, heads: int) -> torch.Tensor:
    shape = context.shape
    per_head = context.reshape(*shape[:-1], heads, shape[-1] // heads)
    factor = mask[:, None, :, None] if mask.dim() == 2 else mask[None, None, :, None]
    return (per_head * factor.to(per_head.dtype)).reshape(shape)


def _scale_channels(activations: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    factor = mask[:, None, :] if mask.dim() == 2 else mask[None, None, :]
    return activations * factor.to(activations.dtype)


@contextmanager
def masked(model: nn.Module, layers: list[EncoderLayer], head_masks: list[torch.Tensor],
           channel_masks: list[torch.Tensor]) -> Iterator[None]:
    """Multiply each layer's head context and FFN activations by its masks (``[units]`` for every example,
    or ``[batch, units]`` per example) while the block runs."""
    handles = []
    for layer, heads, channels in zip(layers, head_masks, channel_masks):
        def on_context(_, args, heads=heads, count=layer.heads):
            return (_scale_heads(args[0], heads, count), *args[1:])

        def on_activations(_, args, channels=channels):
            return (_scale_channels(args[0], channels), *args[1:])

        handles.append(model.get_submodule(layer.attention_output).register_forward_pre_hook(on_context))
        handles.append(model.get_submodule(layer.ffn_output).register_forward_pre_hook(on_activations))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@dataclass
class MaskGradients:
    """Per-example gradients of the loss with respect to every mask: ``heads[l]`` is ``[examples,
    heads]``, ``channels[l]`` is ``[examples, channels]`` for layer ``l``."""

    heads: list[torch.Tensor]
    channels: list[torch.Tensor]

    def head_importance(self) -> torch.Tensor:
        """The Fisher diagonal of every head, ``[layers, heads]``: the expected loss rise of removing it."""
        return torch.stack([(g.double() ** 2).mean(0) for g in self.heads])

    def channel_importance(self) -> torch.Tensor:
        return torch.stack([(g.double() ** 2).mean(0) for g in self.channels])


def mask_gradients(model: nn.Module, layers: list[EncoderLayer], batches: Iterable[dict[str, Any]]) -> MaskGradients:
    """The gradients of each example's task loss (labels in the batch) with respect to all-one masks; the
    model's weights are read, never changed, and it runs in evaluation mode (no dropout)."""
    model.eval()
    device = next(model.parameters()).device
    heads: list[list[torch.Tensor]] = [[] for _ in layers]
    channels: list[list[torch.Tensor]] = [[] for _ in layers]
    for batch in progress(batches, desc="mask search: Fisher", unit="batch"):
        batch = {k: v.to(device) for k, v in batch.items()}
        rows = batch["input_ids"].shape[0]
        head_masks = [torch.ones(rows, layer.heads, device=device, requires_grad=True) for layer in layers]
        channel_masks = [torch.ones(rows, layer.channels, device=device, requires_grad=True) for layer in layers]
        with masked(model, layers, head_masks, channel_masks):
            loss = model(**batch).loss * rows  # the models average over the batch: the sum of example losses
        grads = torch.autograd.grad(loss, head_masks + channel_masks)
        for index in range(len(layers)):
            heads[index].append(grads[index].detach().float().cpu())
            channels[index].append(grads[len(layers) + index].detach().float().cpu())
    return MaskGradients([torch.cat(g) for g in heads], [torch.cat(g) for g in channels])
