"""Paired A/B of the fused residual add (issue #15; results/residual_add_ab/README.md).

One pruned MiniLM per random closed pattern (``remove`` layout, so every output layer with closed rows
scatters), timed three ways in one interleaved loop on SST-2 validation batches: dense, pruned with
the output layers adding their kept rows into the residual (``ResidualAddOutput``, the default), and
the same model with the stock output modules (scatter into zeros, then the add). The two pruned
variants share their weights; only the output modules' forward differs, so their per-round ratio
isolates the change from this host's swings.

    python benchmarks/residual_add_ab.py [--data-dir ../shared/data/glue] [--removed 0.4,0.6] [--rounds 15]
"""

from __future__ import annotations

import argparse
import copy
import statistics

import torch
from peft import get_peft_model

from glue_sparse.experiments.packaged import minilm_path
from glue_sparse.experiments.speed import calibrate_closed_fraction, dense_and_batches, time_rounds
from sparse_models import ResidualAddOutput, SparseGatesConfig


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", default=None)
    p.add_argument("--removed", default="0.4,0.6")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--batches", type=int, default=8)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    path = minilm_path()
    dense, batches, source = dense_and_batches(path, args.data_dir, args.batch_size, args.batches)
    print(f"{source}; batch {args.batch_size} x {args.batches}; {args.rounds} rounds; "
          f"threads {torch.get_num_threads()}")
    print(f"{'closed':>7} {'fused outputs':>13} {'dense ms':>9} {'fused ms':>9} {'scatter ms':>10} "
          f"{'dense/fused':>11} {'dense/scatter':>13} {'scatter/fused (rounds)':>24}")
    for level in (float(x) for x in args.removed.split(",")):
        gated = get_peft_model(copy.deepcopy(dense), SparseGatesConfig(task_type="SEQ_CLS"))
        calibrate_closed_fraction(gated, level)
        fused = gated.eval().merge_and_unload(layout="remove")
        stock = copy.deepcopy(fused)
        outputs = [m for m in stock.modules() if isinstance(m, ResidualAddOutput)]
        for m in outputs:
            m.__class__ = type(m).__mro__[2]  # the model's own output class: scatter into zeros, then add
        with torch.inference_mode():
            assert all(torch.equal(fused(**b).logits, stock(**b).logits) for b in batches)  # exact
        d, f, s = time_rounds([dense, fused, stock], batches, args.rounds)
        ratios = [si / fi for si, fi in zip(s, f)]
        ms = [1000 * statistics.median(x) / len(batches) for x in (d, f, s)]
        print(f"{level:>7.0%} {len(outputs):>13} {ms[0]:>9.2f} {ms[1]:>9.2f} {ms[2]:>10.2f} "
              f"{statistics.median(di / fi for di, fi in zip(d, f)):>11.2f} "
              f"{statistics.median(di / si for di, si in zip(d, s)):>13.2f} "
              f"{statistics.median(ratios):>10.3f} ({min(ratios):.3f}-{max(ratios):.3f})", flush=True)


if __name__ == "__main__":
    main()
