"""Harness overhead of ``--model hf-classifier``: lm-eval on SST-2 validation vs a plain transformers loop.

Both sides use the packaged MiniLM with the same 2-label head (saved once to a temporary folder), the
same 872 validation sentences, batch size 32 and fp32 on CPU. Each side's wall time includes loading
the model and tokenizer, tokenizing and every forward pass; lm-eval's side also builds the task,
loads the data and aggregates (its built-in task index is skipped, as in the CLI with our tasks
only). Sides alternate for ``--repeats`` rounds; medians are compared.
Target (issue #5): lm-eval throughput >= 0.8x the plain loop's.

    python benchmarks/lm_eval_model_throughput.py --data-dir ../shared/data/glue
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
import time

import torch


def plain_loop(folder: str, sentences: list[str], batch_size: int) -> float:
    """What a user writes by hand: batches in dataset order, padded to the longest in each."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    start = time.perf_counter()
    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    preds = []
    with torch.inference_mode():
        for i in range(0, len(sentences), batch_size):
            batch = tokenizer(sentences[i:i + batch_size], padding=True, truncation=True, max_length=512,
                              return_tensors="pt")
            preds.extend(model(**batch).logits.argmax(-1).tolist())
    return time.perf_counter() - start


def through_lm_eval(folder: str, data_dir: str, batch_size: int) -> tuple[float, float]:
    from lm_eval import simple_evaluate
    from lm_eval.tasks import TaskManager

    from glue_sparse.lm_eval_model.classifier_lm import HFClassifierLM
    from glue_sparse_tasks import TASKS_DIR

    start = time.perf_counter()
    lm = HFClassifierLM(pretrained=folder, batch_size=batch_size, device="cpu", results_json=f"{folder}/eval.json")
    tm = TaskManager(include_path=TASKS_DIR, include_defaults=False, metadata={"data_dir": data_dir})
    result = simple_evaluate(model=lm, tasks=["glue_sparse_sst2"], task_manager=tm, bootstrap_iters=0)
    return time.perf_counter() - start, result["results"]["glue_sparse_sst2"]["acc,none"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="../shared/data/glue")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    logging.getLogger("lm_eval").setLevel(logging.ERROR)

    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from glue_sparse.common.packaged import minilm_path
    from glue_sparse_tasks.data import load_glue_split

    sentences = list(load_glue_split("sst2", "validation", data_dir=args.data_dir)["sentence"])
    with tempfile.TemporaryDirectory() as folder:
        torch.manual_seed(0)
        AutoModelForSequenceClassification.from_pretrained(minilm_path(), num_labels=2).save_pretrained(folder)
        AutoTokenizer.from_pretrained(minilm_path()).save_pretrained(folder)
        plain, harness = [], []
        for _ in range(args.repeats):
            plain.append(plain_loop(folder, sentences, args.batch_size))
            seconds, accuracy = through_lm_eval(folder, args.data_dir, args.batch_size)
            harness.append(seconds)
    p, h = statistics.median(plain), statistics.median(harness)
    n = len(sentences)
    print(f"SST-2 validation, {n} docs, batch {args.batch_size}, threads {torch.get_num_threads()}, "
          f"{args.repeats} rounds (median)")
    print(f"plain transformers loop : {p:7.2f} s  {n / p:7.1f} docs/s")
    print(f"lm-eval --model hf-classifier: {h:7.2f} s  {n / h:7.1f} docs/s  (acc {accuracy:.3f}, random head)")
    print(f"throughput ratio lm-eval / plain = {p / h:.2f}  (target >= 0.80)")


if __name__ == "__main__":
    main()
