"""Does fine-tuning give the same floats at 1 and at 2 intra-op threads? (issue #51's teachers)

The converged grid ran its cells two at a time at one thread each; issue #51's parts re-train the full cell
alone on two threads as the teacher. Some of those teachers score exactly as the committed full row and
some differ by a few validation pairs. This script trains the same model on the same real batches once per
thread count, and the first count again as the control, and prints how far the gradients, weights and
validation logits drift apart.

    python benchmarks/thread_determinism.py --data-dir ../shared/data/glue --out benchmarks/results/thread_determinism

It writes ``thread_determinism.json`` in OUT. The model is the packaged MiniLM unless ``--model`` names
another sequence-classification folder.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if not os.environ.get("PYTHONPATH"):  # this checkout, unless the command chose another package to measure
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402
from transformers import AutoTokenizer, DataCollatorWithPadding  # noqa: E402

from glue_sparse.common.packaged import model_identity  # noqa: E402
from glue_sparse.finetune.models import build_model, resolve_base_model, tokenize  # noqa: E402
from glue_sparse.finetune.options import FinetuneConfig  # noqa: E402
from glue_sparse_tasks.atomic import write_json_atomic  # noqa: E402
from glue_sparse_tasks.data import load_glue_split  # noqa: E402


def batches(tokenizer, config: FinetuneConfig, split: str, data_dir: str, rows: int, size: int) -> list[dict]:
    """The first ``rows`` of a split in padded batches of ``size``, through the fine-tune's own tokenising and
    collating (its text fields, tokens per example and label type)."""
    encoded = tokenize(load_glue_split(config.task, split, data_dir, limit=rows, use_hub=False), tokenizer,
                       config.task, config.max_length)
    collate = DataCollatorWithPadding(tokenizer)
    return [collate([encoded[j] for j in range(i, min(i + size, len(encoded)))]) for i in range(0, len(encoded), size)]


def train(config: FinetuneConfig, threads: int, train_batches: list[dict], eval_batch: dict, steps: int) -> dict:
    """Train ``steps`` AdamW steps from the same seed at ``threads`` threads; first gradients, weights, logits."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = build_model(config, {}, resolve_base_model(config.base_model))  # the full arm's model and head
    optimizer = torch.optim.AdamW(model.parameters(), lr=2e-5)
    first_grads = None
    for step in range(steps):
        model.train()
        model(**train_batches[step % len(train_batches)]).loss.backward()
        if first_grads is None:
            first_grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    with torch.no_grad():
        logits = model(**{k: v for k, v in eval_batch.items() if k != "labels"}).logits
    return {"grads": first_grads, "weights": {k: p.detach().clone() for k, p in model.named_parameters()},
            "logits": logits}


def drift(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict:
    differ = [k for k in a if not torch.equal(a[k], b[k])]
    return {"tensors": len(a), "differ": len(differ),
            "largest_abs_difference": max(((a[k] - b[k]).abs().max().item() for k in differ), default=0.0),
            "modules_that_differ": sorted({k.rsplit(".", 2)[-2] for k in differ})}  # e.g. LayerNorm, query


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", required=True, help="folder of the local GLUE files")
    parser.add_argument("--out", required=True)
    parser.add_argument("--model", default=None, help="sequence-classification folder (default: packaged MiniLM)")
    parser.add_argument("--task", default="rte")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--threads", type=int, nargs=2, default=[1, 2])
    args = parser.parse_args(argv)
    config = FinetuneConfig(task=args.task, method="full", base_model=args.model)
    tokenizer = AutoTokenizer.from_pretrained(resolve_base_model(config.base_model))
    train_batches = batches(tokenizer, config, "train", args.data_dir, 4 * args.batch_size, args.batch_size)
    eval_batch = batches(tokenizer, config, "validation", args.data_dir, 64, 64)[0]
    # the first thread count twice: the control that says the training is deterministic at a fixed count
    runs = [train(config, n, train_batches, eval_batch, args.steps) for n in (*args.threads, args.threads[0])]
    flips = int((runs[0]["logits"].argmax(-1) != runs[1]["logits"].argmax(-1)).sum())
    result = {
        "model": model_identity(args.model), "torch": torch.__version__, "task": args.task, "threads": args.threads,
        "steps": args.steps, "batch_size": args.batch_size,
        "first_step_gradients": drift(runs[0]["grads"], runs[1]["grads"]),
        "weights_after_steps": drift(runs[0]["weights"], runs[1]["weights"]),
        "validation_logits_largest_abs_difference": (runs[0]["logits"] - runs[1]["logits"]).abs().max().item(),
        "validation_predictions_that_differ": f"{flips} of {len(runs[0]['logits'])}",
        "control_same_threads_twice": {"weights_after_steps": drift(runs[0]["weights"], runs[2]["weights"]),
                                       "validation_logits_equal": torch.equal(runs[0]["logits"], runs[2]["logits"])},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "thread_determinism.json", result)
    for key, value in result.items():
        print(f"{key}: {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
