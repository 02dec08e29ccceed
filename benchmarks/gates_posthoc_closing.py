"""Why gates alone lose CoLA at 30% removed: close gates after training, with and without bias compensation.

Takes a trained gates adapter that removed almost nothing (e.g. the ``gates r0.01`` run of
``benchmarks/results/gates_cola_probe/``), closes a share of gated weights after training (structured
magnitude or the gate logits as the ranking), and scores the validation set three ways: as trained,
closed, and closed with *mean compensation*: every input column of a gated layer that the closing
zeroes (its own column gate, or a producer row through a chain) has its mean contribution
``W[:, j] * mean(x_j * c_j)`` over training tokens folded into the layer's bias, the usual first-order
fix of retraining-free structured pruning. Prints MCC (or the task's metric), the share predicted
positive and the mean cross-entropy.

    python benchmarks/gates_posthoc_closing.py --adapter RUN/cola --data-dir ../shared/data/glue \
        [--shares 0.1,0.3] [--score magnitude|logit] [--train-rows 1024]
"""

from __future__ import annotations

import argparse

import peft
import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

import sparse_models  # noqa: F401  (registers the sparse-gates PEFT method)
from glue_sparse.experiments.packaged import minilm_path
from glue_sparse_tasks import load_glue_split
from glue_sparse_tasks.console import configure_console
from glue_sparse_tasks.glue_tasks import GLUE_TASKS
from glue_sparse_tasks.scoring import primary_metric, task_metrics
from sparse_models.removal import close_lowest, magnitude_scores
from sparse_models.sparse_gates.layer import SparseGatesLayer


def encoded_batches(tokenizer, task: str, rows, batch_size: int = 64):
    fields = [f for f in GLUE_TASKS[task].text_fields if f]
    for i in range(0, len(rows), batch_size):
        chunk = rows[i:i + batch_size]
        texts = [[r[f] for r in chunk] for f in fields]
        yield tokenizer(*texts, padding=True, truncation=True, max_length=128, return_tensors="pt"), chunk


@torch.no_grad()
def score(model, tokenizer, task: str, rows) -> str:
    predictions, labels, loss = [], [], 0.0
    for encoded, chunk in encoded_batches(tokenizer, task, rows):
        logits = model(**encoded).logits
        target = torch.tensor([r["label"] for r in chunk])
        loss += torch.nn.functional.cross_entropy(logits, target, reduction="sum").item()
        predictions += logits.argmax(-1).tolist()
        labels += target.tolist()
    metric = task_metrics(task, predictions, labels)[primary_metric(task)]
    positive = sum(predictions) / len(predictions)
    return f"{primary_metric(task)} {metric:.4f}, predicted positive {positive:.3f}, loss {loss / len(labels):.4f}"


@torch.no_grad()
def gated_input_stats(model, tokenizer, task: str, rows) -> tuple[dict, dict]:
    """Per gated layer: the mean gated input ``x * c`` over real tokens, and which columns are ever non-zero."""
    layers = {n: m for n, m in model.named_modules() if isinstance(m, SparseGatesLayer)}
    sums: dict[str, torch.Tensor] = {}
    counts: dict[str, int] = {}
    alive: dict[str, torch.Tensor] = {}
    mask: dict[str, torch.Tensor] = {}

    def hook(module, args, name):
        col, _ = module.gate_vectors(training=False)
        u = (args[0] * col)[mask["tokens"]]
        sums[name] = sums.get(name, 0) + u.sum(0)
        counts[name] = counts.get(name, 0) + u.shape[0]
        alive[name] = alive.get(name, torch.zeros(u.shape[1], dtype=torch.bool)) | (u != 0).any(0)

    hooks = [m.register_forward_pre_hook(lambda mod, args, name=n: hook(mod, args, name)) for n, m in layers.items()]
    for encoded, _ in encoded_batches(tokenizer, task, rows):
        mask["tokens"] = encoded["attention_mask"].bool()
        model(**encoded)
    for h in hooks:
        h.remove()
    return {n: sums[n] / counts[n] for n in sums}, alive


@torch.no_grad()
def compensate(model, means: dict, alive_before: dict, alive_after: dict) -> int:
    """Fold the mean contribution of every newly zeroed input column into its layer's bias."""
    columns = 0
    for name, layer in model.named_modules():
        inner = layer.get_base_layer() if isinstance(layer, SparseGatesLayer) else None
        if inner is None or inner.bias is None:
            continue
        dead = alive_before[name] & ~alive_after[name]
        inner.bias += inner.weight[:, dead] @ means[name][dead]
        columns += int(dead.sum())
    return columns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--adapter", required=True, help="a gates run's task folder (adapter + tokenizer)")
    parser.add_argument("--task", default="cola")
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--shares", default="0.1,0.3")
    parser.add_argument("--score", choices=("magnitude", "logit"), default="magnitude")
    parser.add_argument("--train-rows", type=int, default=1024, help="training rows the input means are taken over")
    args = parser.parse_args()
    configure_console()
    torch.set_num_threads(1)
    tokenizer = AutoTokenizer.from_pretrained(args.adapter)
    validation = list(load_glue_split(args.task, "validation", data_dir=args.data_dir))
    train = list(load_glue_split(args.task, "train", data_dir=args.data_dir, limit=args.train_rows))
    for i, share in enumerate(float(s) for s in args.shares.split(",")):
        base = AutoModelForSequenceClassification.from_pretrained(minilm_path(), num_labels=2)
        model = peft.PeftModel.from_pretrained(base, args.adapter).eval()  # afresh: closing changes it
        if i == 0:
            print(f"as trained: {score(model, tokenizer, args.task, validation)}")
        means, alive_before = gated_input_stats(model, tokenizer, args.task, train)
        removed = close_lowest(model, share, magnitude_scores(model) if args.score == "magnitude" else None)
        metrics = score(model, tokenizer, args.task, validation)
        print(f"closed {removed:.3f} of gated weights by {args.score}: {metrics}")
        _, alive_after = gated_input_stats(model, tokenizer, args.task, train)
        columns = compensate(model, means, alive_before, alive_after)
        print(f"  + mean compensation ({columns} zeroed input columns): "
              f"{score(model, tokenizer, args.task, validation)}")


if __name__ == "__main__":
    main()
