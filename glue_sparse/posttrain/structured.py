"""Structured post-training of a causal LM, method beside method at equal removal: dense, the one-shot
baselines (magnitude-sp, wanda-sp, FLAP) and unit gates (LM loss or distillation), each compacted into a
``SparsePrunedForCausalLM`` and scored by C4 and WikiText-2 perplexity on documents disjoint from the
calibration and training ones, with pruned tokens/s against dense.

Every (method, removal) cell is appended to ``results.jsonl`` when it is complete, and a rerun skips the
cells already there, so the table runs in parts; gate training inside a cell resumes from its last
Trainer checkpoint.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import os
import time
from pathlib import Path
from typing import Any, Sequence

import torch
from transformers import AutoTokenizer, DataCollatorForLanguageModeling, TrainingArguments

from glue_sparse.common.packaged import smollm2_path
from glue_sparse.perplexity.options import PerplexityError
from glue_sparse.common.causal_lm import corpus_texts, doc_range, load_causal_lm, model_device, pack_blocks
from glue_sparse.perplexity.protocols import perplexity
from glue_sparse.posttrain.options import PosttrainOptions
from glue_sparse.posttrain.report import FIGURE, plot_structured, structured_markdown
from glue_sparse.posttrain.run import tokens_per_second
from glue_sparse_tasks.atomic import check_writable, write_text_atomic
from glue_sparse_tasks.data import content_dataset, fingerprint
from sparse_models.accounting import parameter_accounting
from sparse_models.runtime.devices import autocast, resolve_device, resolve_precision, trainer_arguments
from sparse_models.removal import RemovalSchedule, removal_gate_learning_rate
from sparse_models.checkpoints import check_model
from sparse_models.structured import check_llama_heads, compact, decoder_units, one_shot_plan
from sparse_models.structured.scores import METHODS as ONE_SHOT
from sparse_models.structured.scores import collect_statistics
from sparse_models.structured.trainer import UnitGatesTrainer, last_checkpoint
from sparse_models.structured.unit_gates import add_unit_gates, gate_plan, remove_unit_gates

__all__ = ["STRUCTURED_METHODS", "run_structured_posttrain"]

#: ``gates`` trains unit gates on the LM loss, ``gates-distill`` on KL to the dense model.
#: unit-gate methods and what their gates learn from (the LM loss, or distillation from the dense model)
UNIT_GATE_OBJECTIVES = {"gates": "lm", "gates-distill": "distill"}
STRUCTURED_METHODS = ("dense", *ONE_SHOT, *UNIT_GATE_OBJECTIVES)
RESULTS = "results.jsonl"


def _methods(options: PosttrainOptions) -> list[str]:
    methods = [m for m in options.method.split(",") if m]
    if bad := [m for m in methods if m not in STRUCTURED_METHODS]:
        raise PerplexityError(f"--method: unknown {', '.join(bad)}; known: {', '.join(STRUCTURED_METHODS)} "
                              "(or gates-rowcol alone, the row/column PEFT gates)")
    return methods


def _shares(options: PosttrainOptions) -> list[float]:
    text = options.target_removal or "0.1,0.2,0.3"
    try:
        shares = [float(x) for x in text.split(",") if x]
    except ValueError:
        raise PerplexityError(f"--target-removal takes comma-separated shares, got {text!r}") from None
    if not shares or any(not 0 < s < 1 for s in shares):
        raise PerplexityError(f"--target-removal shares must be in (0, 1) (of decoder-block linear weights), got "
                              f"{text!r}")
    return shares


def _train_steps(options: PosttrainOptions) -> int:
    per_step = options.train_batch_size * options.train_seqlen
    return max(1, options.tokens // per_step) if options.tokens else options.steps


def _cell_key(method: str, share: float | None) -> str:
    return "dense" if method == "dense" else f"{method}@{share:g}"


def _load_done(path: Path) -> dict[str, dict[str, Any]]:
    if not path.is_file():
        return {}
    done = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise PerplexityError(f"{path}:{number}: not a JSON line ({exc.msg}); delete the line to rerun "
                                      "that cell") from None
            done[row["cell"]] = row
    return done


def _append(path: Path, row: dict[str, Any], done: dict[str, dict[str, Any]]) -> None:
    done[row["cell"]] = row
    if _world()[0] == 0:  # under torchrun every rank runs the cell, the main process writes it
        write_text_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in done.values()))


def _world() -> tuple[int, int]:
    """(rank, world size) under torchrun or accelerate; (0, 1) in one process."""
    return int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))


def _plan_fingerprints(plan: Any) -> list[str]:
    """Every rank's sha256 of its kept units, gathered (one entry in one process)."""
    import torch.distributed as dist

    digest = fingerprint({"heads": h.int().tolist(), "channels": c.int().tolist()}
                         for h, c in zip(plan.heads, plan.channels))
    if not (dist.is_available() and dist.is_initialized()):
        return [digest]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, digest)
    return gathered


def train_unit_gates(model: Any, tokenizer: Any, blocks: list[list[int]], output_dir: Path, share: float,
                     objective: str, options: PosttrainOptions) -> tuple[Any, dict[str, Any]]:
    """Gate ``model`` (in place), train the gates for ``options``' token budget with the removal schedule
    reaching ``share``; resumes from the newest checkpoint in ``output_dir``. Returns (the gates' plan, info)
    with the gates folded and removed from ``model``."""
    layers = decoder_units(model)
    add_unit_gates(model, layers)
    steps = _train_steps(options)
    _, world = _world()
    if options.train_batch_size % world:
        raise PerplexityError(f"--train-batch-size {options.train_batch_size} (sequences per step, all processes "
                              f"together) does not split over {world} processes")
    lr = options.lr if options.lr is not None else \
        removal_gate_learning_rate(RemovalSchedule(share, steps, end=1.0))
    if tokenizer.pad_token is None:
        tokenizer = copy.copy(tokenizer)
        tokenizer.pad_token = tokenizer.eos_token
    args = TrainingArguments(output_dir=str(output_dir), max_steps=steps,
                             per_device_train_batch_size=options.train_batch_size // world,
                             learning_rate=lr, lr_scheduler_type="constant", weight_decay=0.0, max_grad_norm=0.0,
                             logging_steps=max(1, steps // 10), save_strategy="steps", save_steps=options.save_steps,
                             save_total_limit=1, report_to="none", seed=options.seed, dataloader_num_workers=0,
                             **trainer_arguments(options.device, options.precision))
    dataset = content_dataset({"input_ids": blocks[: steps * options.train_batch_size]})
    trainer = UnitGatesTrainer(model=model, args=args, layers=layers, target_removal=share, objective=objective,
                               train_dataset=dataset,
                               data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=last_checkpoint(output_dir))
    seconds = time.perf_counter() - start
    model.eval()
    plan = gate_plan(model, layers)
    remove_unit_gates(model)
    info = {"steps": steps, "batch_size": options.train_batch_size, "seqlen": options.train_seqlen,
            "train_tokens": steps * options.train_batch_size * options.train_seqlen, "learning_rate": lr,
            "objective": objective, "train_seconds": seconds, "world_size": world,
            "plan_fingerprint_by_rank": _plan_fingerprints(plan),
            "loss_log": [e for e in trainer.state.log_history if "loss" in e]}
    return plan, info


@dataclasses.dataclass
class _Inputs:
    """What every cell shares: tokens for calibration and gate training, the held-out texts, the record
    of both, and the calibration statistics once a method needed them."""

    tokenizer: Any
    calibration: list[list[int]]
    gate_blocks: list[list[int]]
    held_out: dict[str, tuple[list[str], Any]]
    setting: dict[str, Any]
    stats: Any = None


def _blocks(tokenizer: Any, texts: Sequence[str], seqlen: int, count: int, what: str, docs: str) -> list[list[int]]:
    blocks = pack_blocks(tokenizer, texts, seqlen, count)
    if len(blocks) < count:
        raise PerplexityError(f"{what}: documents {docs} give {len(blocks)} blocks of {seqlen} tokens, "
                              f"{count} were asked for")
    return blocks


def _prepare(options: PosttrainOptions, methods: list[str], model_path: str) -> _Inputs:
    """Corpora, disjoint ranges and token blocks, every one checked before any model loads."""
    c4, c4_prov = corpus_texts(options)  # options.corpus is the training/calibration corpus (C4)
    train_docs, eval_docs = doc_range(options.train_docs, "--train-docs"), doc_range(options.eval_docs)
    if set(range(len(c4))[train_docs]) & set(range(len(c4))[eval_docs]):
        raise PerplexityError("--train-docs and --eval-docs overlap; pruned models must be scored on held-out "
                              "documents")
    wiki, wiki_prov = corpus_texts(dataclasses.replace(options, corpus="wikitext2"))
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    calibration = _blocks(tokenizer, c4[train_docs], options.calibration_seqlen, options.calibration_samples,
                          "calibration", options.train_docs)
    gate_blocks = _blocks(tokenizer, c4[train_docs], options.train_seqlen,
                          _train_steps(options) * options.train_batch_size, "gate training",
                          options.train_docs) if any(m in UNIT_GATE_OBJECTIVES for m in methods) else []
    held_out = {"c4": (c4[eval_docs], c4_prov), "wikitext2": (wiki, wiki_prov)}
    protocol = {"protocol": "sparsegpt", "n_samples": options.n_samples, "seqlen": options.seqlen, "docs": options.docs}
    setting = {"calibration": {"source": f"{c4_prov.corpus} documents {options.train_docs} of {c4_prov.source}",
                               "samples": options.calibration_samples, "seqlen": options.calibration_seqlen,
                               "tokens": options.calibration_samples * options.calibration_seqlen,
                               "sha256": fingerprint({"ids": b} for b in calibration)},
               "scored": {name: {**protocol, "source": prov.source,
                                 "documents": options.eval_docs if name == "c4" else ":",
                                 "documents_sha256": fingerprint({"text": t} for t in texts)}
                          for name, (texts, prov) in held_out.items()}}
    return _Inputs(tokenizer, calibration, gate_blocks, held_out, setting)


def _pruned(method: str, share: float | None, dense: Any, inputs: _Inputs, options: PosttrainOptions,
            key: str) -> tuple[Any, dict[str, Any]]:
    """One cell's compacted model (dense itself for ``dense``) and what to record about how it was made."""
    if method == "dense":
        return dense, {}
    layers = decoder_units(dense)
    if method in ONE_SHOT:
        if inputs.stats is None and method != "magnitude-sp":
            inputs.stats = collect_statistics(dense, layers, [
                torch.tensor(inputs.calibration[i:i + 8], device=model_device(dense))
                for i in range(0, len(inputs.calibration), 8)])
        plan = one_shot_plan(method, dense, layers, share, inputs.stats)
        tokens = 0 if method == "magnitude-sp" else inputs.setting["calibration"]["tokens"]
        return compact(copy.deepcopy(dense), plan), {"plan": plan.to_dict(), "calibration_tokens": tokens}
    gated = copy.deepcopy(dense)
    plan, info = train_unit_gates(gated, inputs.tokenizer, inputs.gate_blocks,
                                  Path(options.out_dir) / "cells" / key.replace("@", "-"), share,
                                  UNIT_GATE_OBJECTIVES[method], options)
    return compact(gated, plan), {"plan": plan.to_dict(), "train": info}


def _scored(model: Any, dense: Any, inputs: _Inputs, options: PosttrainOptions, key: str) -> dict[str, Any]:
    """Perplexity on both held-out corpora, the accounting, and tokens/s against dense."""
    device = model_device(model)
    with autocast(device, resolve_precision(options.precision, device)):
        scores = {corpus: perplexity("sparsegpt", model, inputs.tokenizer, texts, n_samples=options.n_samples,
                                     seqlen=options.seqlen, docs=options.docs, model_name=key).to_dict()
                  for corpus, (texts, _) in inputs.held_out.items()}
    dense_tps, pruned_tps = tokens_per_second([dense, model], inputs.tokenizer, inputs.held_out["c4"][0])
    return {"accounting": parameter_accounting(model).to_dict(),
            "perplexity": {c: s["perplexity"] for c, s in scores.items()}, "scores": scores,
            "tokens_per_second": {"dense": dense_tps, "pruned": pruned_tps, "ratio": pruned_tps / dense_tps}}


def run_structured_posttrain(options: PosttrainOptions) -> list[dict[str, Any]]:
    """Every (method, removal) cell of the table: prune or post-train, compact, score, time; resumable."""
    log = logging.getLogger("glue_sparse").info
    methods, shares = _methods(options), _shares(options)
    trainer_arguments(options.device, options.precision)  # a device or precision not here: one line, first
    out_dir = Path(options.out_dir)
    check_writable(out_dir, "--output")
    model_path = options.model or smollm2_path()
    check_model(model_path)
    check_llama_heads(model_path)
    inputs = _prepare(options, methods, model_path)
    results_path = out_dir / RESULTS
    done = _load_done(results_path)
    dense, _, name = load_causal_lm(options.model, str(resolve_device(options.device)))
    rows = []
    for method, share in [("dense", None)] + [(m, s) for m in methods if m != "dense" for s in shares]:
        key = _cell_key(method, share)
        if key in done:
            log(f"{key}: done earlier, kept")
            rows.append(done[key])
            continue
        start = time.perf_counter()
        model, extra = _pruned(method, share, dense, inputs, options, key)
        row = {"cell": key, "method": method, "target_removal": share, "model": name,
               **_scored(model, dense, inputs, options, key), "wall_seconds": time.perf_counter() - start,
               "setting": inputs.setting, **extra}
        log(f"{key}: C4 {row['perplexity']['c4']:.2f}  WikiText-2 {row['perplexity']['wikitext2']:.2f}  removed "
            f"{row['accounting']['removed_share_of_gated']:.1%} of block linears  tokens/s "
            f"x{row['tokens_per_second']['ratio']:.2f}")
        _append(results_path, row, done)
        rows.append(row)
    markdown = structured_markdown(rows)
    if _world()[0] == 0:
        write_text_atomic(out_dir / "results.md", markdown)
        plot_structured(rows, out_dir / FIGURE)
        print(markdown)
    return rows


