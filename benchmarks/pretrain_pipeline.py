"""Pre-training's input pipeline, old vs new in one run: tokenising while training (``--no-token-cache``)
against blocks cut from cached token files (the default), on the same documents, tokenizer and blocks.

Prints and writes (``--out``) three measurements:
1. the one-time build of the token cache (tokens/s of the batch tokenizer);
2. the pipeline alone: blocks drawn from ``PackedBlocks`` through a DataLoader, tokens/s, and the ratio;
3. the training step: a plain loop (forward, backward, AdamW step) of ``--model-config`` over that
   DataLoader, with the share of each step spent waiting for the next batch, and the step time, old vs new.

    python benchmarks/pretrain_pipeline.py --data-dir ../shared/data --out pipeline.json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from glue_sparse.common.cache_root import file_sha256  # noqa: E402
from glue_sparse.pretrain.data import PackedBlocks, lane_sources, load_tokenizer, train_source  # noqa: E402
from glue_sparse.pretrain.options import PretrainOptions
from glue_sparse.pretrain.run import build_model
from glue_sparse_tasks.atomic import write_json_atomic  # noqa: E402


def synthetic_corpus(folder: Path, docs: int) -> Path:
    """A C4-format file of ``docs`` documents (for the smoke run, where no C4 sample is at hand)."""
    rng = random.Random(0)
    words = "the a cat dog sat ran on under mat tree quickly slowly big small red green house river".split()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "c4-train.00000-of-00001.json"
    path.write_text("".join(json.dumps({"text": " ".join(rng.choice(words) for _ in range(rng.randint(50, 400)))})
                            + "\n" for _ in range(docs)))
    return path


def blocks_per_second(blocks: PackedBlocks, batch_size: int, batches: int) -> float:
    loader = iter(torch.utils.data.DataLoader(blocks, batch_size=batch_size))
    next(loader)  # first batch: opens the files (and builds nothing: the cache is warm)
    started = time.perf_counter()
    for _ in range(batches):
        next(loader)
    return batches * batch_size / (time.perf_counter() - started)


def training_steps(blocks: PackedBlocks, options: PretrainOptions, tokenizer, steps: int) -> dict:
    """Median step time and the share of it spent waiting for data (the first step, a warm-up, dropped)."""
    model = build_model(options, tokenizer)
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = iter(torch.utils.data.DataLoader(blocks, batch_size=options.batch_size))
    waits, totals = [], []
    for _ in range(steps + 1):
        started = time.perf_counter()
        batch = next(loader)
        waited = time.perf_counter() - started
        loss = model(**batch).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        waits.append(waited)
        totals.append(time.perf_counter() - started)
    waits, totals = waits[1:], totals[1:]
    return {"step_seconds_median": statistics.median(totals), "data_wait_share": sum(waits) / sum(totals),
            "data_wait_seconds_median": statistics.median(waits)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", help="folder holding c4/validation_sample.jsonl (the training text)")
    parser.add_argument("--train-data", help="training file, folder of shards or glob (default: the C4 sample)")
    parser.add_argument("--train-docs", default=":", help="START:END training documents")
    parser.add_argument("--synthetic-docs", type=int, help="write a synthetic corpus of this many documents instead")
    parser.add_argument("--tokenizer", default="bpe:1024")
    parser.add_argument("--model-config", default="llama_9m")
    parser.add_argument("--seqlen", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--batches", type=int, default=200, help="pipeline batches timed per path")
    parser.add_argument("--steps", type=int, default=10, help="training steps timed per path")
    parser.add_argument("--out", help="write the measurements here as JSON")
    args = parser.parse_args(argv)

    scratch = Path(tempfile.mkdtemp(prefix="pipeline_"))
    os.environ["GLUE_SPARSE_CACHE"] = str(scratch / "cache")  # a cold cache: the build is measured
    train = str(synthetic_corpus(scratch, args.synthetic_docs)) if args.synthetic_docs else args.train_data
    source = train_source(train, args.data_dir, args.train_docs)
    tokenizer, record = load_tokenizer(args.tokenizer, source)
    lanes = lane_sources(source, 1)
    old = PackedBlocks(lanes, tokenizer, args.seqlen, token_cache=False)
    new = PackedBlocks(lanes, tokenizer, args.seqlen)
    started = time.perf_counter()
    next(iter(new))  # builds the cache of every shard
    build_seconds = time.perf_counter() - started
    cache = [json.loads(p.read_text()) for p in (scratch / "cache" / "tokens").glob("*/meta.json")]
    cached_tokens = sum(m["tokens"] for m in cache)

    torch.manual_seed(0)
    pipeline = {name: blocks_per_second(blocks, args.batch_size, args.batches) * args.seqlen
                for name, blocks in (("tokenise while training", old), ("token cache", new))}
    options = PretrainOptions(out_dir=str(scratch / "unused"), model_config=args.model_config, seqlen=args.seqlen,
                              batch_size=args.batch_size)
    steps = {name: training_steps(blocks, options, tokenizer, args.steps)
             for name, blocks in (("tokenise while training", old), ("token cache", new))}
    result = {
        "documents": {"files": [f"{Path(f).name} sha256 {file_sha256(f)}" for f in source.files],
                      "docs": args.train_docs},  # named by content, not by the path on this machine
        "tokenizer": record, "seqlen": args.seqlen, "batch_size": args.batch_size,
        "model_config": args.model_config, "threads": torch.get_num_threads(),
        "cache_build": {"tokens": cached_tokens, "seconds": build_seconds,
                        "tokens_per_second": cached_tokens / build_seconds},
        "pipeline_tokens_per_second": pipeline,
        "pipeline_ratio": pipeline["token cache"] / pipeline["tokenise while training"],
        "training": steps,
        "step_time_ratio_old_over_new": (steps["tokenise while training"]["step_seconds_median"]
                                         / steps["token cache"]["step_seconds_median"]),
    }
    print(f"token cache build: {cached_tokens:,} tokens in {build_seconds:.2f} s "
          f"({result['cache_build']['tokens_per_second']:,.0f} tokens/s, once per shard and tokenizer)")
    print(f"{'path':<26}{'pipeline tok/s':>16}{'step s':>10}{'waiting for data':>18}")
    for name in pipeline:
        print(f"{name:<26}{pipeline[name]:>16,.0f}{steps[name]['step_seconds_median']:>10.3f}"
              f"{steps[name]['data_wait_share']:>18.1%}")
    print(f"pipeline: token cache {result['pipeline_ratio']:.1f}x the tokens/s of tokenising while training "
          f"(target >= 10x); step time old/new {result['step_time_ratio_old_over_new']:.2f} (target >= 1.0 within "
          f"noise), {args.model_config}, batch {args.batch_size} x {args.seqlen}, {result['threads']} threads")
    if args.out:
        write_json_atomic(Path(args.out), result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
