"""``glue-sparse pretrain``: a Llama of one of GaLore's sizes trained from scratch on C4, dense or with
FineGates row/column gates (the gated twin), on the transformers ``Trainer``.

- Data: ``data`` (local shards or the Hub, streamed and packed; fixed validation documents).
- Gates: the PEFT ``sparse_gates`` method on q, k, v, o, gate and up (down is left ungated, as the
  reference does), with every base weight trainable. ``--recipe removal`` removes exactly
  ``--target-removal`` of the gated weights on our schedule; ``--recipe reference`` is FineGates'
  regulariser (lambda, target sparsity, switched on at ``--sparsity-from-step``).
- Evaluation: the ``packed`` perplexity protocol over exactly ``--eval-tokens`` validation targets,
  gates deterministic (eval mode), at every ``--eval-every`` steps; each point is kept in the Trainer's
  log history, so it travels with the checkpoint and a resumed run has the uninterrupted run's curve.
- Output: ``run.json`` (options, curve, accounting, final perplexity, unigram perplexity of the same
  validation tokens) and ``model/``: an HF Llama (dense) or a pruned ``SparsePrunedForCausalLM``
  (gates), with its tokenizer, which ``glue-sparse perplexity --protocols packed`` scores identically.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import shutil
import time
from importlib import resources
from pathlib import Path
from typing import Any, Sequence

import torch

from glue_sparse.perplexity.protocols import packed_perplexity, unigram_perplexity
from glue_sparse.pretrain.callbacks import (
    PretrainProgressCallback,
    ValidationCallback,
    gate_accounting,
    parameter_sizes,
)
from glue_sparse.pretrain.data import (
    HUB,
    PackedBlocks,
    PretrainDataError,
    lane_layout,
    lane_sources,
    load_tokenizer,
    train_source,
    validation_texts,
)
from glue_sparse.pretrain.options import METHODS, NOT_IDENTITY, RECIPES, SCHEDULES, PretrainOptions
from glue_sparse_tasks.atomic import check_writable, write_json_atomic
from sparse_models.removal import RemovalSchedule, removal_gate_learning_rate
from sparse_models.runtime.devices import trainer_arguments
from sparse_models.sparse_gates import SparseGatesConfig
from sparse_models.trainer import SparseGatesTrainer

RUN_FILE, OPTIONS_FILE, MODEL_DIR, CHECKPOINTS_DIR = "run.json", "options.json", "model", "checkpoints"
#: FineGates' pre-training choice: every attention projection and the FFN's gate/up; down stays dense
GATED_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj")
#: a dense run has learned context when its validation perplexity is at most this share of the unigram one
DENSE_FLOOR = 0.5
class PretrainError(PretrainDataError):
    """Options or an output folder that ``glue-sparse pretrain`` cannot use."""


def check_options(options: PretrainOptions) -> None:
    """One-line refusals for bad values, before any data or model is touched."""
    for name, allowed in (("method", METHODS), ("recipe", RECIPES), ("schedule", SCHEDULES)):
        if getattr(options, name) not in allowed:
            raise PretrainError(f"--{name} {getattr(options, name)!r}: expected one of {', '.join(allowed)}")
    for name in ("tokens", "seqlen", "batch_size", "grad_accum", "eval_every", "eval_tokens", "save_steps",
                 "data_lanes"):
        if getattr(options, name) < 1:
            raise PretrainError(f"--{name.replace('_', '-')} must be >= 1, got {getattr(options, name)}")
    if not 0 < options.target_removal < 1 or not 0 <= options.target_sparsity < 1:
        raise PretrainError("--target-removal must be in (0, 1) and --target-sparsity in [0, 1)")
    if options.lr <= 0 or (options.gate_lr is not None and options.gate_lr <= 0) or options.warmup < 0:
        raise PretrainError("--lr and --gate-lr must be > 0 and --warmup >= 0")
    if not options.hub and HUB in (options.train_data, options.eval_data):
        raise PretrainError("--train-data/--eval-data hub read the Hugging Face Hub, which --no-hub forbids")
    model_config_path(options.model_config)


def model_config_path(name: str) -> Path:
    """A shipped GaLore size by name, or a JSON file."""
    shipped = resources.files("glue_sparse.pretrain") / "model_configs" / f"{name}.json"
    if shipped.is_file():
        return Path(str(shipped))
    path = Path(name).expanduser()
    if path.is_file():
        return path
    sizes = sorted(p.name[:-5] for p in (resources.files("glue_sparse.pretrain") / "model_configs").iterdir()
                   if p.name.endswith(".json"))
    raise PretrainError(f"--model-config {name!r}: not a shipped size ({', '.join(sizes)}) nor a JSON file")


def build_model(options: PretrainOptions, tokenizer: Any) -> torch.nn.Module:
    """The randomly initialised Llama (seeded), gated when ``--method gates``, every weight trainable."""
    import peft
    from transformers import LlamaConfig, LlamaForCausalLM, set_seed

    config = LlamaConfig.from_json_file(str(model_config_path(options.model_config)))
    config.vocab_size = len(tokenizer)
    config.eos_token_id = config.bos_token_id = config.pad_token_id = tokenizer.eos_token_id
    if options.gate_bias:
        config.attention_bias = config.mlp_bias = True
    if options.seqlen + 1 > config.max_position_embeddings:
        raise PretrainError(f"--seqlen {options.seqlen}: the model has {config.max_position_embeddings} positions")
    set_seed(options.seed)
    model = LlamaForCausalLM(config)
    if options.method == "dense":
        return model
    goal = ({"target_removal": options.target_removal, "removal_end": options.removal_end}
            if options.recipe == "removal" else
            {"target_sparsity": options.target_sparsity, "sparsity_lambda": options.sparsity_lambda})
    gated = peft.get_peft_model(model, SparseGatesConfig(task_type="CAUSAL_LM", target_modules=list(GATED_MODULES),
                                                         bias_delta=False, **goal))  # the biases train anyway
    for parameter in gated.parameters():
        parameter.requires_grad_(True)  # pre-training: the backbone trains with its gates
    return gated


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def plan(options: PretrainOptions) -> dict[str, int]:
    """Steps and tokens: the global batch spans every process, so N processes take the same steps as one."""
    global_batch = options.batch_size * options.grad_accum * world_size()
    steps = max(1, math.ceil(options.tokens / (global_batch * options.seqlen)))
    return {"steps": steps, "global_batch": global_batch, "tokens_per_step": global_batch * options.seqlen,
            "train_tokens": steps * global_batch * options.seqlen}


def identity(options: PretrainOptions) -> dict[str, Any]:
    return {k: v for k, v in dataclasses.asdict(options).items() if k not in NOT_IDENTITY}


def prepare_out_dir(options: PretrainOptions) -> dict[str, Any] | None:
    """The finished run if ``out_dir`` holds this one; refuses a folder holding another run."""
    out = Path(options.out_dir)
    check_writable(out, "--output")
    saved = out / OPTIONS_FILE
    if saved.is_file():
        before = json.loads(saved.read_text())
        defaults = identity(PretrainOptions(out_dir=options.out_dir))  # a key added later: its default there
        changed = [f"{k}: {before.get(k, defaults[k])!r} there vs {v!r} now" for k, v in identity(options).items()
                   if before.get(k, defaults[k]) != v]
        if changed:
            raise PretrainError(f"{out} holds a different run ({'; '.join(changed[:3])}); choose another --output")
        if (out / RUN_FILE).is_file():
            return json.loads((out / RUN_FILE).read_text())
    elif out.is_dir() and any(out.iterdir()):
        raise PretrainError(f"{out} is not empty and holds no {OPTIONS_FILE}; choose another --output")
    return None


def training_arguments(options: PretrainOptions, steps: int) -> Any:
    from transformers import TrainingArguments

    scheduler = {"cosine": ("cosine_with_min_lr", {"min_lr_rate": options.min_lr_ratio}),
                 "linear": ("linear", {}), "constant": ("constant_with_warmup", {})}[options.schedule]
    warmup = options.warmup if options.warmup < 1 else int(options.warmup)
    return TrainingArguments(
        output_dir=str(Path(options.out_dir) / CHECKPOINTS_DIR), max_steps=steps,
        per_device_train_batch_size=options.batch_size, gradient_accumulation_steps=options.grad_accum,
        learning_rate=options.lr, weight_decay=options.weight_decay, warmup_steps=warmup,
        lr_scheduler_type=scheduler[0], lr_scheduler_kwargs=scheduler[1], logging_steps=max(1, min(50, steps // 20)),
        save_strategy="steps", save_steps=options.save_steps, save_total_limit=2, report_to="none",
        seed=options.seed, data_seed=options.seed, dataloader_num_workers=0,
        **trainer_arguments(options.device, options.precision),  # use_cpu: torchrun on CPU processes uses gloo
        disable_tqdm=False,
        # one lane: the main process reads the stream and hands each rank its slice of every global batch;
        # several: each rank reads its own lanes and accelerate's slicing keeps its part (PackedBlocks)
        accelerator_config={"dispatch_batches": options.data_lanes == 1, "split_batches": False})


def run_pretrain(options: PretrainOptions, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    """Train (or resume, or return the finished run in ``out_dir``); write run.json and model/."""
    from transformers.trainer_callback import ProgressCallback
    from transformers.trainer_utils import get_last_checkpoint

    check_options(options)
    counts = plan(options)
    args = training_arguments(options, counts["steps"])
    processes = args.distributed_state  # under torchrun: this rank; else the one process
    finished = prepare_out_dir(options) if processes.is_main_process else None
    processes.wait_for_everyone()  # the main process checked (and may refuse) the folder first
    if finished is None and not processes.is_main_process and (Path(options.out_dir) / RUN_FILE).is_file():
        finished = json.loads((Path(options.out_dir) / RUN_FILE).read_text())
    if finished is not None:
        return finished
    source = train_source(options.train_data, options.data_dir, options.train_docs, options.check_shards)
    val_texts, val_prov = validation_texts(options.eval_data, options.data_dir, options.eval_docs, source,
                                           use_hub=options.hub)
    chunk, read = lane_layout(options.data_lanes, options.batch_size, processes.num_processes,
                              processes.process_index)
    lanes = lane_sources(source, options.data_lanes)
    tokenizer, tokenizer_record = load_tokenizer(options.tokenizer, source)
    model = build_model(options, tokenizer)
    out = Path(options.out_dir)
    if processes.is_main_process:  # only now, when every input was accepted: a refusal writes nothing
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / OPTIONS_FILE, identity(options))
    gated = options.method == "gates"
    gate_lr = None
    if gated:
        gate_lr = (options.gate_lr or options.lr) if options.recipe == "reference" else (
            options.gate_lr or removal_gate_learning_rate(RemovalSchedule(options.target_removal, counts["steps"])))
    blocks = PackedBlocks(lanes, tokenizer, options.seqlen, chunk, read, token_cache=options.token_cache)
    validation = ValidationCallback(val_texts, tokenizer, options.seqlen, options.eval_tokens,
                                    options.eval_batch_size, options.eval_every, counts["tokens_per_step"])
    trainer = SparseGatesTrainer(
        model=model, args=args,
        train_dataset=blocks, gate_learning_rate=gate_lr,
        backbone_trains=gated, callbacks=[validation, *callbacks],
        sparsity_from_step=options.sparsity_from_step if gated and options.recipe == "reference" else 0)
    trainer.remove_callback(ProgressCallback)
    trainer.add_callback(PretrainProgressCallback(counts["tokens_per_step"], validation))
    checkpoints = out / CHECKPOINTS_DIR
    last = get_last_checkpoint(str(checkpoints)) if checkpoints.is_dir() else None
    start = time.perf_counter()
    trainer.train(resume_from_checkpoint=last)
    seconds = time.perf_counter() - start
    state = trainer.state
    if state.global_step < counts["steps"]:
        return {"status": "interrupted", "global_step": state.global_step}
    curve = [e for e in state.log_history if "val_perplexity" in e]
    record = {"status": "complete", "options": dataclasses.asdict(options), **counts,
              "resumed_from_step": int(Path(last).name.split("-")[-1]) if last else None,
              "world_size": processes.num_processes, "train_seconds_this_session": seconds,
              "parallelism": trainer.accelerator.distributed_type.value,  # NO, MULTI_CPU, MULTI_GPU
              "tokenizer": tokenizer_record,
              "train_data": {**source.describe(), "lanes": options.data_lanes, "lanes_read_by_main_process": read,
                             "token_cache": bool(blocks.fingerprint) and not source.hub},
              "validation": {**val_prov.to_dict(), "docs": options.eval_docs},
              "gate_learning_rate": gate_lr, "curve": curve,
              "train_loss": [{"step": e["step"], "loss": e["loss"]} for e in state.log_history if "loss" in e]}
    record.update(finish(trainer.model, tokenizer, val_texts, options, out, trainer.is_world_process_zero()))
    if trainer.is_world_process_zero():
        write_json_atomic(out / RUN_FILE, record)
        if not options.keep_checkpoints:
            shutil.rmtree(checkpoints, ignore_errors=True)
        logging.getLogger("glue_sparse").info(summary_line(record))
    return record


def finish(model: Any, tokenizer: Any, val_texts: list[str], options: PretrainOptions, out: Path,
           main_process: bool) -> dict[str, Any]:
    """Score the final model (pruned for gates) on the validation tokens, save it, account for it."""
    model.eval()
    sizes = parameter_sizes(model)
    accounting = gate_accounting(model, sizes) if options.method == "gates" else None
    if accounting is not None:
        model = model.merge_and_unload()  # the pruned SparsePrunedForCausalLM
    final = packed_perplexity(model, tokenizer, val_texts, options.seqlen, options.eval_tokens,
                              options.eval_batch_size, device=str(next(model.parameters()).device))
    if main_process:
        staging = out / f".{MODEL_DIR}-staging"
        shutil.rmtree(staging, ignore_errors=True)
        model.save_pretrained(str(staging))
        tokenizer.save_pretrained(str(staging))
        shutil.rmtree(out / MODEL_DIR, ignore_errors=True)
        staging.rename(out / MODEL_DIR)
    unigram = unigram_perplexity(tokenizer, val_texts, options.eval_tokens)
    return {"final": {"val_perplexity": final.perplexity, "val_nll": final.mean_nll,
                      "tokens_scored": final.tokens_scored, "model": MODEL_DIR,
                      "model_class": type(model).__name__},
            "unigram_perplexity": unigram, "dense_floor_met": final.perplexity <= DENSE_FLOOR * unigram,
            "parameters": sizes, "accounting": accounting,
            "reproduce_perplexity": perplexity_command(options, out)}


def perplexity_command(options: PretrainOptions, out: Path) -> str:
    data = "" if options.eval_data in (None, HUB) else f" --c4-path {options.eval_data}"
    hub = " --no-hub" if not options.hub else ""
    return (f"glue-sparse perplexity --model {out / MODEL_DIR} --protocols packed --seqlen {options.seqlen} "
            f"--token-budget {options.eval_tokens} --eval-docs {options.eval_docs}{data}"
            + (f" --data-dir {options.data_dir}" if options.data_dir else "") + hub)


def summary_line(record: dict[str, Any]) -> str:
    acc = record["accounting"]
    removed = (f", removed {acc['removed_share_of_gated']:.1%} of gated weights "
               f"({acc['removed_share_of_nonembedding']:.1%} of non-embedding, {acc['removed_share_of_total']:.1%} "
               "of all parameters)") if acc else ""
    return (f"validation perplexity {record['final']['val_perplexity']:.2f} after {record['train_tokens']:,} tokens "
            f"(unigram {record['unigram_perplexity']:.1f}){removed}")
