"""Paired A/B of attention narrowed per head with query/key and value at different sizes (issue #15;
results/narrowed_attention_ab/README.md).

``QueryKeyNarrowedAttention`` hands the attention kernel query/key heads of one size and value heads of
another. Under SDPA (transformers' default) torch then cannot use its fused CPU kernel and falls back to
a slower composite; zero-padding the narrower side to the wider one keeps the fused kernel. This script
times, in one interleaved loop on SST-2 validation batches: dense, and one pruned MiniLM (``remove``
layout, heads narrowed) run with A = the two sizes handed over as they are, and B = the narrower side
zero-padded (what ``QueryKeyNarrowedAttention`` does). The two share their weights; their per-round
ratio isolates the attention call from this host's swings.

    python benchmarks/narrowed_attention_ab.py [--data-dir ../shared/data/glue] [--removed 0.4,0.6] [--adapter DIR]
"""

from __future__ import annotations

import argparse
import copy
import sys
from typing import Any

import torch
from paired_ab import HEADER, paired_line, setup, swapped  # benchmarks/paired_ab.py
from peft import get_peft_model
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

from glue_sparse.experiments.packaged import minilm_path
from glue_sparse.experiments.speed import calibrate_closed_fraction
from sparse_models import QueryKeyNarrowedAttention, SparseGatesConfig
from sparse_models.checkpoints import describe_checkpoint, load_classifier


def unpadded_forward(self: Any, hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None,
                     **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Query/key and value heads handed to the kernel at their own sizes (the forward before padding)."""
    lead = hidden_states.shape[:-1]
    query = self.query(hidden_states).view(*lead, -1, self.query_key_head_size).transpose(1, 2)
    key = self.key(hidden_states).view(*lead, -1, self.query_key_head_size).transpose(1, 2)
    value = self.value(hidden_states).view(*lead, -1, self.attention_head_size).transpose(1, 2)
    eager = sys.modules[self.stock_class.__module__].eager_attention_forward
    attend = ALL_ATTENTION_FUNCTIONS.get_interface(self.config._attn_implementation, eager)
    output, weights = attend(self, query, key, value, attention_mask, dropout=0.0, scaling=self.scaling, **kwargs)
    return output.reshape(*lead, -1).contiguous(), weights


def main() -> None:
    def adapters(p: argparse.ArgumentParser) -> None:
        p.add_argument("--adapter", action="append", default=[], help="trained adapter folder (repeatable)")

    args, dense, batches = setup(__doc__.splitlines()[0], removed="0.4,0.6", extra=adapters)
    print("A = two head sizes handed over, B = narrower side zero-padded; 'swapped' = attention modules whose "
          "query/key and value sizes differ")
    print(HEADER)
    patterns = []
    for level in (float(x) for x in args.removed.split(",")):
        gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
        calibrate_closed_fraction(gated, level)
        patterns.append((f"random {level:.0%}", gated))
    for adapter in args.adapter:
        patterns.append((f"trained {adapter}", load_classifier(describe_checkpoint(adapter), torch.float32, "cpu",
                                                               base=minilm_path())[0]))
    for label, gated in patterns:
        pruned = gated.eval().merge_and_unload(layout="remove", narrow_heads=True)
        sizes = [(s["query_key"], s["value"]) for s in pruned.config.attention_head_sizes.values()]
        narrowed = next((type(m) for m in pruned.modules() if isinstance(m, QueryKeyNarrowedAttention)), None)
        if narrowed is None:
            print(f"{label:<46} query/key and value sizes equal in every layer {sizes}: nothing to compare")
            continue
        unpadded = type(f"Unpadded{narrowed.__name__}", (narrowed,), {"forward": unpadded_forward})
        old, count = swapped(pruned, lambda m: isinstance(m, QueryKeyNarrowedAttention), unpadded)
        print(paired_line(label, count, dense, old, pruned, batches, args.rounds, atol=1e-4), flush=True)
        print(f"{'':<46} (query/key, value) head sizes by layer: {sizes}", flush=True)


if __name__ == "__main__":
    main()
