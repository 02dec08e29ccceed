"""Sparse-gate post-training of a causal LM on plain text (gates only), with the fine-tuning Trainer, and
the experiment around it: dense vs (gated and) pruned perplexity on held-out documents, with speed."""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any, Sequence

import torch

from glue_sparse.common.causal_lm import corpus_texts, doc_range, load_causal_lm, model_device, pack_blocks
from glue_sparse.perplexity.options import PerplexityError
from glue_sparse.perplexity.protocols import score_protocols
from glue_sparse.posttrain.options import REFERENCE_GATE_LR, PosttrainOptions
from glue_sparse_tasks.method_defaults import REFERENCE_LAMBDA, REFERENCE_SIGMA
from glue_sparse_tasks.atomic import check_writable, write_json_atomic, write_text_atomic
from glue_sparse_tasks.data import content_dataset
from sparse_models.accounting import parameter_accounting
from sparse_models.runtime.devices import resolve_device, trainer_arguments
from sparse_models.removal import RemovalSchedule, removal_gate_learning_rate
from sparse_models.sparse_gates import SparseGatesConfig
from sparse_models.runtime.timing import time_forwards
from sparse_models.trainer import SparseGatesTrainer


def posttrain_gates(
    model: Any,
    tokenizer: Any,
    train_texts: Sequence[str],
    output_dir: str,
    target_sparsity: float | None = None,
    steps: int = 100,
    seqlen: int = 256,
    batch_size: int = 4,
    learning_rate: float | None = REFERENCE_GATE_LR,
    sparsity_lambda: float = REFERENCE_LAMBDA,
    reg_sigma: float | None = None,
    seed: int = 0,
    target_removal: float | None = None,
    device: str = "auto",
    precision: str = "auto",
) -> tuple[Any, dict[str, Any]]:
    """Inject gates into ``model`` (a copy is not made), train only the gates; return (peft model, info).

    ``target_removal`` (instead of ``target_sparsity``) removes that share of gated weights exactly, on
    the removal schedule; ``learning_rate`` None then means the removal recipe's, sized to the removal steps.
    """
    import peft
    from transformers import DataCollatorForLanguageModeling, TrainingArguments, set_seed


    set_seed(seed)
    blocks = pack_blocks(tokenizer, train_texts, seqlen, steps * batch_size)
    if not blocks:
        raise ValueError(f"the training texts give no full block of {seqlen} tokens")
    if (target_sparsity is None) == (target_removal is None):
        raise ValueError("give exactly one of target_sparsity (reference regulariser) and target_removal")
    # only gates train here, so nothing is left to recover after the removal: make it final at the end
    options = {"target_removal": target_removal, "removal_end": 1.0} if target_removal is not None else \
        {"target_sparsity": target_sparsity}
    gates_config = SparseGatesConfig(task_type="CAUSAL_LM", sparsity_lambda=sparsity_lambda, reg_sigma=reg_sigma,
                                     **options)
    gated = peft.get_peft_model(model, gates_config)
    if learning_rate is None:
        learning_rate = removal_gate_learning_rate(RemovalSchedule(target_removal or 0.0, steps,
                                                                   end=gates_config.removal_end))
    if tokenizer.pad_token is None:
        tokenizer = copy.copy(tokenizer)
        tokenizer.pad_token = tokenizer.eos_token
    args = TrainingArguments(output_dir=output_dir, max_steps=steps, per_device_train_batch_size=batch_size,
                             learning_rate=learning_rate, warmup_steps=0.06, logging_steps=max(1, steps // 10),
                             save_strategy="no", report_to="none", seed=seed, dataloader_num_workers=0,
                             **trainer_arguments(device, precision))
    trainer = SparseGatesTrainer(model=gated, args=args,
                                 train_dataset=content_dataset({"input_ids": blocks}),
                                 data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    gated.eval()
    info = {"steps": steps, "seqlen": seqlen, "batch_size": batch_size, "train_blocks": len(blocks),
            "train_tokens": len(blocks) * seqlen, "learning_rate": learning_rate, "target_sparsity": target_sparsity,
            "target_removal": target_removal,
            "sparsity_lambda": sparsity_lambda, "reg_sigma": reg_sigma, "seed": seed, "train_seconds": seconds,
            "seconds_per_step": seconds / steps, "accounting": parameter_accounting(gated).to_dict(),
            "loss_log": [e for e in trainer.state.log_history if "loss" in e]}
    return gated, info


@torch.inference_mode()
def tokens_per_second(models: Sequence[Any], tokenizer: Any, texts: Sequence[str], seqlen: int = 256,
                      batch_size: int = 4, rounds: int = 3) -> list[float]:
    """Forward tokens/s of each model on the same packed batches (interleaved, median), on their device."""

    blocks = pack_blocks(tokenizer, texts, seqlen, batch_size * 2)
    device = model_device(models[0])  # every model on one device (the command's --device)
    batches = [{"input_ids": torch.tensor(blocks[i:i + batch_size], device=device)}
               for i in range(0, len(blocks), batch_size)]
    seconds = time_forwards(models, batches, rounds)
    tokens = sum(b["input_ids"].numel() for b in batches)
    return [tokens / s for s in seconds]


def _disjoint(a: slice, b: slice, n: int) -> bool:
    return not set(range(n)[a]) & set(range(n)[b])


def run_posttrain(options: PosttrainOptions) -> dict[str, Any]:
    """Post-train gates at every target, score dense and pruned (and gated) on held-out documents, time
    them; write results.json (after each target) and results.md into ``out_dir``."""
    log = logging.getLogger("glue_sparse").info
    options = dataclasses.replace(  # the method's defaults, recorded as numbers
        options, reg_sigma=REFERENCE_SIGMA if options.reg_sigma is None else options.reg_sigma,
        sparsity_lambda=REFERENCE_LAMBDA if options.sparsity_lambda is None else options.sparsity_lambda)
    protocols = options.protocol_list()
    trainer_arguments(options.device, options.precision)  # a device or precision not here: one line, first
    device = str(resolve_device(options.device))
    texts, prov = corpus_texts(options)
    train_docs, eval_docs = doc_range(options.train_docs, "--train-docs"), doc_range(options.eval_docs)
    if not _disjoint(train_docs, eval_docs, len(texts)):
        raise PerplexityError("--train-docs and --eval-docs overlap; post-training must be scored on held-out "
                              "documents")
    train, held_out = texts[train_docs], texts[eval_docs]
    out_dir = Path(options.out_dir)
    check_writable(out_dir, "--output")  # before any model loads
    removal = options.target_removal is not None
    try:
        targets = [float(t) for t in (options.target_removal if removal else options.targets).split(",") if t]
    except ValueError:
        raise PerplexityError(f"--targets/--target-removal take comma-separated numbers, got "
                              f"{options.target_removal if removal else options.targets!r}") from None
    note = (f"Trained on {prov.corpus} documents {train_docs.start}:{train_docs.stop} and scored on "
            f"disjoint documents {eval_docs.start}:{eval_docs.stop} of {prov.source}.")
    log(note)
    dense, tokenizer, name = load_causal_lm(options.model, device)
    results: dict[str, Any] = {"model": name, "note": note, "data": prov.to_dict(),
                               "dense": score_protocols(dense, tokenizer, held_out, prov, options, "dense")}
    info: dict[str, Any] = {}
    for target in targets:
        model, _, _ = load_causal_lm(options.model, device)
        goal = {"target_removal": target} if removal else {"target_sparsity": target}
        lr = options.lr if options.lr is not None else (None if removal else REFERENCE_GATE_LR)
        gated, info = posttrain_gates(model, tokenizer, train, str(out_dir / f"target-{target}"),
                                      steps=options.steps, seqlen=options.train_seqlen,
                                      batch_size=options.train_batch_size, learning_rate=lr,
                                      sparsity_lambda=options.sparsity_lambda, reg_sigma=options.reg_sigma,
                                      seed=options.seed, device=options.device, precision=options.precision,
                                      **goal)
        gated.save_pretrained(str(out_dir / f"target-{target}" / "adapter"))
        gated_scores = (score_protocols(gated, tokenizer, held_out, prov, options, f"gated target {target}")
                        if options.score_gated else None)
        pruned = gated.merge_and_unload()
        pruned_scores = score_protocols(pruned, tokenizer, held_out, prov, options, f"pruned target {target}")
        dense_tps, pruned_tps = tokens_per_second([dense, pruned], tokenizer, held_out)
        results[f"target-{target}"] = {"posttrain": info, "gated": gated_scores, "pruned": pruned_scores,
                                       "dense_tokens_per_second": dense_tps, "pruned_tokens_per_second": pruned_tps,
                                       "speedup": pruned_tps / dense_tps}
        write_json_atomic(out_dir / "results.json", results)
    lines = [f"# Sparse-gate post-training of {name}", "", note, "",
             f"Post-training: {options.steps} steps x {options.train_batch_size} x {options.train_seqlen} tokens per "
             f"target, gate lr {info.get('learning_rate', 0):.4g}, lambda {options.sparsity_lambda}, reg sigma "
             f"{options.reg_sigma}, " + ("target = share of gated weights removed (removal recipe)." if removal else
                                         "target = target sparsity (reference regulariser)."), "",
             "| model | " + " | ".join(f"{p} ppl" for p in protocols) +
             " | removed % total | removed % gated | tokens/s (pruned / dense) |",
             "|---|" + "---:|" * (len(protocols) + 3),
             "| dense | " + " | ".join(f"{results['dense'][p]['perplexity']:.3f}" for p in protocols)
             + " | 0 | 0 | 1.00 |"]
    for key, r in results.items():
        if key.startswith("target-"):
            accounting = r["posttrain"]["accounting"]
            lines.append(f"| gates {key[7:]} (pruned) | " + " | ".join(f"{r['pruned'][p]['perplexity']:.3f}"
                                                                   for p in protocols)
                         + f" | {accounting['removed_share_of_total']:.1%} | "
                           f"{accounting['removed_share_of_gated']:.1%} | {r['speedup']:.2f} |")
    write_text_atomic(out_dir / "results.md", "\n".join(lines) + "\n")
    print("\n".join(lines))
    log(f"results: {out_dir / 'results.json'}")
    return results
