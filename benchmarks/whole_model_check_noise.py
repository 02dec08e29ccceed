"""How finely ``auto``'s whole-model check can tell pruned candidates apart on this host (issue #15).

The check (``layout_costs.choose_whole_model``) times each candidate whole, fastest of its rounds, and
keeps index work only where it wins by ``WHOLE_MODEL_MARGIN``. Here it times identical copies of the dense MiniLM: any
difference between them is the check's own noise, the smallest real difference it can resolve.

    python benchmarks/whole_model_check_noise.py [--rounds 7,20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import copy
import statistics

import torch
from transformers import AutoModelForSequenceClassification

from glue_sparse.experiments.packaged import minilm_path
from glue_sparse.experiments.speed import paired_speedup
from sparse_models.sparse_gates import layout_costs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", default="7,20", help="rounds per check to compare (20 is the check's own)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--copies", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    dense = AutoModelForSequenceClassification.from_pretrained(minilm_path(), num_labels=2).eval()
    # the check's own synthetic batch: 2,048 tokens as 32 x 64 random ids
    ids = torch.randint(0, dense.config.vocab_size, (32, 64), generator=torch.Generator().manual_seed(0))
    models = [dense, *(copy.deepcopy(dense) for _ in range(args.copies - 1))]
    calls = [(lambda inp, m=m: m(input_ids=inp, attention_mask=torch.ones_like(inp)), ids) for m in models]
    for rounds in (int(x) for x in args.rounds.split(",")):
        spreads: dict[str, list[float]] = {"fastest round": [], "paired median": []}
        with torch.inference_mode():
            for _ in range(args.repeats):
                samples = layout_costs._timed_rounds(calls, torch.device("cpu"), max_rounds=rounds)
                for statistic, values in (("fastest round", [min(s) for s in samples]),
                                          # each copy's median over rounds of its time / the first copy's
                                          ("paired median", [paired_speedup(s, samples[0]).median for s in samples])):
                    spreads[statistic].append(max(values) / min(values))
        for statistic, values in spreads.items():
            print(f"{rounds:>3} rounds, {statistic}: slowest / fastest of {args.copies} identical copies per check: "
                  + ", ".join(f"{x:.3f}" for x in values) + f"; median {statistics.median(values):.3f}", flush=True)


if __name__ == "__main__":
    main()
