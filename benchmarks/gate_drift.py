"""Where the open gates sit during a removal-recipe run: the median eval gate over training, with and
without the pull (issue #14's finding that a lambda-50 pull sinks every open gate before the final snap).

    python benchmarks/gate_drift.py --data-dir ../shared/data/glue [--task cola] [--method gates]
        [--lambdas 50,0] [--steps 200]

Prints, per lambda, the median and mean eval gate and the closed share every 20 steps and around the
final closing (at 80% of the steps).
"""

from __future__ import annotations

import argparse
import tempfile

import torch
from transformers import TrainerCallback

from glue_sparse.experiments.finetune import run_finetune
from glue_sparse.experiments.finetune_config import FinetuneConfig
from sparse_models.removal import gate_logits


class GateDrift(TrainerCallback):
    """Prints the deterministic (eval) gate values' median, mean and closed share at chosen steps."""

    def __init__(self, steps: set[int]) -> None:
        self.steps = steps

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if state.global_step in self.steps:
            z = torch.cat([torch.clamp(torch.tanh(p.detach()) + 0.5, 0, 1).flatten()
                           for p in gate_logits(model).values()])
            print(f"  step {state.global_step:>4}: median gate {z.median():.3f}, mean {z.mean():.3f}, "
                  f"closed {(z == 0).float().mean():.3f}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--task", default="cola")
    parser.add_argument("--method", default="gates")
    parser.add_argument("--lambdas", default="50,0")
    parser.add_argument("--steps", type=int, default=200)
    args = parser.parse_args()
    final = int(0.8 * args.steps)
    shown = set(range(20, args.steps + 1, 20)) | {final - 1, final, final + 1}
    for lam in (float(x) for x in args.lambdas.split(",")):
        print(f"{args.task}, {args.method}, target removal 0.3, lambda {lam:g}, {args.steps} steps:", flush=True)
        config = FinetuneConfig(task=args.task, method=args.method, target_removal=0.3, max_steps=args.steps,
                                sparsity_lambda=lam)
        with tempfile.TemporaryDirectory() as out:
            run_finetune(config, out, data_dir=args.data_dir, use_hub=False, callbacks=[GateDrift(shown)])


if __name__ == "__main__":
    main()
