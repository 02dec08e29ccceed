"""``glue-sparse perplexity`` and ``glue-sparse posttrain``: causal-LM perplexity under named protocols,
and sparse-gate post-training measured dense vs gated vs pruned (default model: packaged SmolLM2)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from glue_sparse_tasks.atomic import check_writable, write_json_atomic, write_text_atomic


def _doc_range(text: str) -> slice:
    try:
        lo, hi = (int(x) if x else None for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected START:END document indices, got {text!r}") from None
    return slice(lo, hi)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", help="causal LM folder or Hub name (default: packaged SmolLM2-135M)")
    p.add_argument("--corpus", default="c4", choices=("c4", "wikitext2"))
    p.add_argument("--c4-path", help="one C4 JSONL / JSON.gz file")
    p.add_argument("--data-dir", help="folder holding c4/ and wikitext2/ (default: $GLUE_SPARSE_DATA_DIR)")
    p.add_argument("--no-hub", dest="hub", action="store_false")
    p.add_argument("--protocols", default="sparsegpt,galore", help="comma-separated: sparsegpt, galore")
    p.add_argument("--n-samples", type=int, default=256, help="sparsegpt windows (published: 256)")
    p.add_argument("--seqlen", type=int, default=2048, help="sparsegpt window length (published: 2048)")
    p.add_argument("--docs", type=int, default=1100, help="sparsegpt: first documents joined (published: 1100)")
    p.add_argument("--max-length", type=int, default=256, help="galore: tokens kept per document")
    p.add_argument("--token-budget", type=int, default=10_000_000, help="galore: non-pad tokens to score")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--output", help="write the results as JSON here (atomically)")


def add_perplexity_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--adapter", help="a sparse-gates (or any PEFT) adapter to apply to --model")
    p.add_argument("--prune", action="store_true", help="prune the adapter before scoring")
    p.add_argument("--eval-docs", type=_doc_range, default=slice(None),
                   help="START:END slice of the corpus documents to score (default: all)")


def _texts(args: argparse.Namespace):
    from glue_sparse_tasks.text_corpora import load_c4_texts, load_wikitext2_pages

    if args.corpus == "c4":
        return load_c4_texts(args.data_dir, args.c4_path, use_hub=args.hub)
    return load_wikitext2_pages(args.data_dir, use_hub=args.hub)


def _load(model_name: str | None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import sparse_models  # noqa: F401  (registers sparse_gated)
    from sparse_models.packaged import smollm2_path

    path = model_name or smollm2_path()
    return AutoModelForCausalLM.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path), path


def _score(model, tokenizer, texts, prov, args, name: str) -> dict:
    from glue_sparse_tasks.data import fingerprint
    from sparse_models.perplexity import perplexity

    data = {**prov.to_dict(), "docs_in_range": len(texts), "range_sha256": fingerprint({"text": t} for t in texts)}
    out = {}
    for protocol in [p for p in args.protocols.split(",") if p]:
        kwargs = ({"n_samples": args.n_samples, "seqlen": args.seqlen, "docs": args.docs}
                  if protocol == "sparsegpt" else
                  {"max_length": args.max_length, "token_budget": args.token_budget, "batch_size": args.batch_size})
        result = perplexity(protocol, model, tokenizer, texts, data=data, model_name=name, **kwargs)
        out[protocol] = result.to_dict()
        print(f"{name:<40} {protocol:<10} ppl {result.perplexity:10.3f}  tokens {result.tokens_scored:>9,}  "
              f"{result.tokens_per_second:8.0f} tok/s", flush=True)
    return out


def run_perplexity(args: argparse.Namespace) -> int:
    from glue_sparse_tasks.local_formats import GlueDataError
    from sparse_models.checkpoints import CheckpointError
    from sparse_models.perplexity import PerplexityError

    try:
        texts, prov = _texts(args)
        if args.output:
            check_writable(Path(args.output).parent, "--output")
        if args.adapter:
            from sparse_models.checkpoints import check_complete

            check_complete(args.adapter)  # before the model loads
        model, tokenizer, path = _load(args.model)
        name = path
        if args.adapter:
            from peft import PeftModel

            model = PeftModel.from_pretrained(model, args.adapter).eval()
            name = f"{path} + {args.adapter}"
            if args.prune:
                model = model.merge_and_unload()
                name += " (pruned)"
        results = _score(model, tokenizer, texts[args.eval_docs], prov, args, name)
    except (GlueDataError, PerplexityError, CheckpointError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.output:
        write_json_atomic(args.output, results)
    return 0


def add_posttrain_arguments(p: argparse.ArgumentParser) -> None:
    _common(p)
    p.add_argument("--targets", default="0.1,0.2,0.3", help="comma-separated target sparsities (reference "
                                                            "regulariser; ignored with --target-removal)")
    p.add_argument("--target-removal", help="comma-separated shares of gated weights to remove, e.g. 0.1,0.2,0.3 "
                                            "(removal recipe: exact, binary gates)")
    p.add_argument("--steps", type=int, default=100, help="post-training optimiser steps per target")
    p.add_argument("--train-seqlen", type=int, default=256)
    p.add_argument("--train-batch-size", type=int, default=4)
    p.add_argument("--lr", type=float, help="gate learning rate (default 1e-3; with --target-removal, 1.0 / "
                                            "removal steps)")
    p.add_argument("--sparsity-lambda", type=float, default=50.0)
    p.add_argument("--reg-sigma", type=float, default=0.5, help="sigma of P(open) (default 0.5, as the reference)")
    p.add_argument("--train-docs", type=_doc_range, default=slice(0, 1000), help="START:END training documents")
    p.add_argument("--eval-docs", type=_doc_range, default=slice(1000, None), help="START:END held-out documents")
    p.add_argument("--out-dir", required=True, help="folder for results.json, results.md and adapters")
    p.add_argument("--score-gated", action="store_true",
                   help="also score the gated (unpruned) model; it equals the pruned one, so off by default")


def _disjoint(a: slice, b: slice, n: int) -> bool:
    ra, rb = range(n)[a], range(n)[b]
    return not set(ra) & set(rb)


def run_posttrain(args: argparse.Namespace) -> int:
    from sparse_models.posttrain import posttrain_gates, tokens_per_second

    texts, prov = _texts(args)
    if not _disjoint(args.train_docs, args.eval_docs, len(texts)):
        print("error: --train-docs and --eval-docs overlap; post-training must be scored on held-out "
              "documents", file=sys.stderr)
        return 2
    train, held_out = texts[args.train_docs], texts[args.eval_docs]
    out_dir = Path(args.out_dir)
    check_writable(out_dir, "--out-dir")  # before any model loads
    note = (f"Trained on {prov.corpus} documents {args.train_docs.start}:{args.train_docs.stop} and scored on "
            f"disjoint documents {args.eval_docs.start}:{args.eval_docs.stop} of {prov.source}.")
    print(note, flush=True)
    dense, tokenizer, path = _load(args.model)
    results = {"model": path, "note": note, "data": prov.to_dict(), "dense": _score(dense, tokenizer, held_out,
                                                                                      prov, args, "dense")}
    removal = args.target_removal is not None
    targets = [float(t) for t in (args.target_removal if removal else args.targets).split(",") if t]
    for target in targets:
        model, _, _ = _load(args.model)
        goal = {"target_removal": target} if removal else {"target_sparsity": target}
        lr = args.lr if args.lr is not None else (None if removal else 1e-3)
        gated, info = posttrain_gates(model, tokenizer, train, str(out_dir / f"target-{target}"),
                                      steps=args.steps, seqlen=args.train_seqlen, batch_size=args.train_batch_size,
                                      learning_rate=lr, sparsity_lambda=args.sparsity_lambda,
                                      reg_sigma=args.reg_sigma, **goal)
        gated.save_pretrained(str(out_dir / f"target-{target}" / "adapter"))
        gated_scores = (_score(gated, tokenizer, held_out, prov, args, f"gated target {target}")
                        if args.score_gated else None)
        pruned = gated.merge_and_unload()
        pruned_scores = _score(pruned, tokenizer, held_out, prov, args, f"pruned target {target}")
        dense_tps, pruned_tps = tokens_per_second([dense, pruned], tokenizer, held_out)
        results[f"target-{target}"] = {"posttrain": info, "gated": gated_scores, "pruned": pruned_scores,
                                       "dense_tokens_per_second": dense_tps, "pruned_tokens_per_second": pruned_tps,
                                       "speedup": pruned_tps / dense_tps}
        write_json_atomic(out_dir / "results.json", results)
    lines = [f"# Sparse-gate post-training of {Path(path).name}", "", note, "",
             f"Post-training: {args.steps} steps x {args.train_batch_size} x {args.train_seqlen} tokens per target, "
             f"gate lr {info['learning_rate']:.4g}, lambda {args.sparsity_lambda}, reg sigma {args.reg_sigma}, "
             + ("target = share of gated weights removed (removal recipe)." if removal else
                "target = target sparsity (reference regulariser)."), "",
             "| model | " + " | ".join(f"{p} ppl" for p in args.protocols.split(",")) +
             " | removed % total | removed % gated | tokens/s (pruned / dense) |",
             "|---|" + "---:|" * (len(args.protocols.split(",")) + 3)]
    lines.append("| dense | " + " | ".join(f"{results['dense'][p]['perplexity']:.3f}" for p in args.protocols.split(","))
                 + " | 0 | 0 | 1.00 |")
    for key, r in results.items():
        if key.startswith("target-"):
            acc = r["posttrain"]["accounting"]
            lines.append(f"| gates {key[7:]} (pruned) | "
                         + " | ".join(f"{r['pruned'][p]['perplexity']:.3f}" for p in args.protocols.split(","))
                         + f" | {acc['removed_share_of_total']:.1%} | {acc['removed_share_of_gated']:.1%} | "
                           f"{r['speedup']:.2f} |")
    write_text_atomic(out_dir / "results.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    print(json.dumps({"results": str(out_dir / "results.json")}))
    return 0
