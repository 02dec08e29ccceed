"""Does the batch shape the whole-model check times change which pruned layout it ranks first? (issue #15;
results/check_batch_shape/README.md)

One random closed pattern, five pruned MiniLMs (keep, per-layer, per-layer+heads, remove, remove+heads),
each chosen for the SST-2 batches' token count, timed beside dense (paired per-round ratio, 7 rounds) on:
the check's former synthetic shape (24 x 64 random ids, no padding), 32 x 49 random ids (the SST-2
batches' mean shape), the same with a padding mask, and the real SST-2 validation batches.

    python benchmarks/check_batch_shape.py [closed share, default 0.2]
"""

from __future__ import annotations

import copy
import sys

import torch
from peft import get_peft_model

from glue_sparse.experiments.packaged import minilm_path
from glue_sparse.experiments.speed import (
    calibrate_closed_fraction,
    dense_and_batches,
    mean_length,
    paired_speedup,
    prune_with_layout,
    time_rounds,
)
from sparse_models import SparseGatesConfig


def main() -> None:
    level = float(sys.argv[1]) if len(sys.argv) > 1 else 0.2
    torch.set_num_threads(2)
    dense, batches, _ = dense_and_batches(minilm_path(), "../shared/data/glue", 32, 8)
    gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
    calibrate_closed_fraction(gated, level)
    length = mean_length(batches)
    models = {layout: prune_with_layout(gated, layout, 32 * length, 16, length)
              for layout in ("keep", "per-layer", "per-layer+heads", "remove", "remove+heads")}
    generator = torch.Generator().manual_seed(0)
    ids64 = torch.randint(0, dense.config.vocab_size, (24, 64), generator=generator)
    ids = torch.randint(0, dense.config.vocab_size, (32, length), generator=generator)
    lengths = torch.randint(12, length + 1, (32,), generator=generator)
    lengths[0] = length
    padding = (torch.arange(length)[None, :] < lengths[:, None]).long()
    shapes = {
        "synthetic 24x64": [dict(input_ids=ids64, attention_mask=torch.ones_like(ids64))] * 4,
        f"synthetic 32x{length}": [dict(input_ids=ids, attention_mask=torch.ones_like(ids))] * 4,
        f"synthetic 32x{length} padded": [dict(input_ids=ids, attention_mask=padding)] * 4,
        "SST-2 batches": batches,
    }
    print(f"random {level:.0%} closed; SST-2 batch shapes {[tuple(b['input_ids'].shape) for b in batches]}")
    for name, shape_batches in shapes.items():
        samples = time_rounds([dense, *models.values()], shape_batches, 7)
        ratios = {layout: paired_speedup(samples[0], s).median for layout, s in zip(models, samples[1:])}
        print(f"{name:<26} " + " ".join(f"{layout}={x:.3f}" for layout, x in ratios.items())
              + f"  remove/keep={ratios['remove'] / ratios['keep']:.3f}", flush=True)


if __name__ == "__main__":
    main()
