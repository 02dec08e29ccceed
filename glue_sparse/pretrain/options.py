"""``glue-sparse pretrain`` and ``pretrain-report`` options, in a module that imports no torch (``--help`` is
instant); the pre-training itself is ``run.py``, the report ``report.py``."""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.common.option_fields import DeviceOptions, option, required

METHODS, RECIPES, SCHEDULES = ("dense", "gates"), ("removal", "reference"), ("cosine", "linear", "constant")
#: options that do not change what is trained (a rerun with other values resumes the same run)
NOT_IDENTITY = ("out_dir", "save_steps", "keep_checkpoints", "check_shards", "eval_batch_size", "token_cache",
                "device")


@dataclass(kw_only=True)
class PretrainOptions(DeviceOptions):
    """Everything ``glue-sparse pretrain`` takes; each default and help is written here once."""

    out_dir: str = required("folder for run.json, model/ and checkpoints/ (a rerun resumes the run there)",
                            flag="output", deprecated={"--out-dir": None})
    model_config: str = option("llama_9m", "one of GaLore's sizes (llama_9m, llama_20m, llama_35m, llama_60m, "
                                           "llama_130m, llama_350m, llama_1b) or a LlamaConfig JSON path; its "
                                           "vocab_size is replaced by the tokenizer's")
    method: str = option("dense", "dense, or gates (the gated twin)")
    recipe: str = option("removal", "gates: removal (exactly --target-removal of gated weights removed by the end, "
                                    "our schedule) or reference (FineGates' lambda / target-sparsity regulariser)")
    target_removal: float = option(0.4, "removal recipe: share of gated weights removed")
    removal_end: float = option(0.8, "removal recipe: share of the steps after which the removal is final "
                                     "(the rest trains the pruned network)")
    target_sparsity: float = option(0.4, "reference recipe: target sparsity of the regulariser")
    sparsity_lambda: float = option(100.0, "reference recipe: regulariser weight (the reference's 100)")
    sparsity_from_step: int = option(1000, "reference recipe: the regulariser is off before this step")
    gate_bias: bool = option(False, "add a trainable bias to the gated layers, as the reference does (Llama's "
                                    "attention_bias and mlp_bias: down_proj gets one too)")
    tokenizer: str = option("bpe:1024", "smollm2 (packaged), bpe:N (a byte-level BPE of N tokens trained on the "
                                        "training documents, cached), or a tokenizer folder or Hub name; 1024 "
                                        "suits llama_9m on CPU best (benchmarks/results/pretrain_c4_cpu)")
    train_data: str | None = option(None, "training text: a JSON Lines file, a folder of c4-train.*.json.gz / "
                                          ".jsonl shards, a glob, or hub (allenai/c4 en, streamed); default: the "
                                          "local C4 sample")
    train_docs: str = option("0:1800", "START:END documents of --train-data (END empty: all)")
    eval_data: str | None = option(None, "validation documents: one C4 JSON Lines file, or hub (allenai/c4 "
                                         "validation shard 0); default: the local C4 sample")
    eval_docs: str = option("1800:2000", "START:END validation documents (disjoint from training)")
    data_dir: str | None = option(None, "folder holding c4/ (default: $GLUE_SPARSE_DATA_DIR)")
    hub: bool = option(True, "allow the Hugging Face Hub for a source that is not local (--no-hub: never)")
    check_shards: bool = option(True, "read every local training shard once before the model loads, so a bad "
                                      "line is named first (--no-check-shards for corpora too large to scan)")
    token_cache: bool = option(True, "tokenise each local training shard once into a memory-mapped token file in "
                                     "$GLUE_SPARSE_CACHE/tokens, keyed by the shard's content and the tokenizer "
                                     "(--no-token-cache: tokenise while training; the blocks are the same)")
    data_lanes: int = option(1, "training streams, each over its own shards (k, k + lanes, ...), taken in turn; "
                                "under torchrun with lanes = processes each rank reads only its own shards, and "
                                "one process with the same lanes trains on the same batches")
    tokens: int = option(1_000_000, "training tokens (sets the steps: tokens / (seqlen x global batch))")
    seqlen: int = option(128, "tokens per packed block (GaLore: 256)")
    batch_size: int = option(16, "blocks per device per micro-batch")
    grad_accum: int = option(1, "micro-batches per optimiser step")
    lr: float = option(1e-3, "peak learning rate of the weights (GaLore: 0.01 at 10k steps of 512 x 256; 1e-3 "
                             "was best for llama_9m at CPU budgets, benchmarks/results/pretrain_c4_cpu)")
    gate_lr: float | None = option(None, "learning rate of the gate logits (default: the removal recipe's gate "
                                         "travel over the removal steps; the reference recipe: --lr)")
    warmup: float = option(0.1, "warm-up: a share of the steps (< 1) or a number of steps")
    schedule: str = option("cosine", "cosine (down to --min-lr-ratio x lr), linear (to 0) or constant")
    min_lr_ratio: float = option(0.1, "cosine: the final learning rate as a share of --lr (GaLore: 0.1)")
    weight_decay: float = option(0.0, "AdamW weight decay (the reference's 0)")
    eval_every: int = option(100, "steps between validation evaluations (and one at the end)")
    eval_tokens: int = option(65_536, "validation targets scored, exactly (GaLore: 10M)")
    eval_batch_size: int = option(16, "validation windows per forward")
    save_steps: int = option(100, "steps between checkpoints (weights, optimiser, scheduler, RNG, data position)")
    keep_checkpoints: bool = option(False, "keep checkpoints/ after the run completes")
    seed: int = option(0, "seed of the initial weights, the gate noise and the removal ranking", flag=None)


@dataclass(kw_only=True)
class PretrainReportOptions:
    """Which runs, where the report goes, how speed is timed, and the targets the table states."""

    runs: str = required("comma-separated run folders (each with run.json and model/); the first dense one is "
                         "the reference")
    out: str = required("folder for results.md, results.json and curves.png", flag="output",
                        deprecated={"--out": None})
    speed: bool = option(True, "time each saved model's forward pass against the dense one (--no-speed: skip)")
    speed_batch_size: int = option(8, "timing: blocks per forward")
    speed_batches: int = option(4, "timing: batches per round")
    speed_rounds: int = option(7, "timing: interleaved rounds (median)")
    threads: int = option(2, "timing: torch threads")
    removal_level: float = option(0.4, "the removal level the perplexity target is checked at")
    target_ppl_ratio: float = option(1.10, "target: gated perplexity at most this times dense at equal tokens")
    target_speedup: float = option(1.15, "target: pruned forward tokens/s at least this times dense")
