"""``glue-sparse speed``'s options, in a module that imports no torch (``--help`` is instant); the timing
is ``run.py``."""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.common.option_fields import option
from glue_sparse_tasks.method_defaults import DEFAULT_ALIGN



@dataclass(kw_only=True)
class SpeedOptions:
    """``glue-sparse speed``: what to prune, how to time it, where to write the rows."""

    model: str | None = option(None, "encoder folder or Hub name (default: the packaged MiniLM)")
    removed: str = option("0.2,0.4,0.6", "comma-separated shares of gated weights to remove with random closed "
                                          "patterns", flag="target-removal", deprecated={"--removed": None})
    adapter: list[str] = option(help="comma-separated trained sparse-gates adapter folder(s) to time as well",
                                default_factory=list)
    batch_sizes: str = option("32,1", "batch sizes to time")
    align: int = option(DEFAULT_ALIGN, "round kept row/column counts up to this multiple with closed ones (1: remove "
                                       "exactly what the gates closed)")
    batches: int = option(8, "batches per timing round")
    rounds: int = option(5, "timing rounds (median; one extra warm-up round)")
    threads: int = option(0, "torch CPU threads (0: torch's default)")
    device: str = option("auto", "device to time dense and pruned on, as every command reads --device: auto (a CUDA "
                                 "GPU when one is visible, else the CPU), cpu, cuda or cuda:N")
    precision: str = option("auto", "the weights and activations cast to: auto (bf16 on a CUDA GPU that supports it, "
                                    "fp32 elsewhere), fp32 or bf16 (fp16 on a GPU)",
                            deprecated={"--dtype": {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}})
    layouts: str = option("auto,keep,remove", "pruning layouts to time side by side: auto (merge_and_unload's "
                                              "default: timed per layer, then that choice and remove "
                                              "whole against keep, with and without attention narrowed per "
                                              "head), per-layer (auto without "
                                              "the whole-model check), keep (no index work), "
                                              "remove (every closed row/column, with its index work); a "
                                              "'+heads' suffix always narrows attention per head (e.g. "
                                              "auto+heads)")
    data_dir: str | None = option(None, "GLUE folder for SST-2 validation sentences (--causal: a folder with c4/, "
                                        "or the GLUE folder beside it)")
    causal: bool = option(False, "time a causal LM (default: the packaged SmolLM2-135M) with whole heads and FFN "
                                 "channels removed at each --target-removal share of decoder-block linear weights")
    causal_method: str = option("magnitude-sp", "--causal: which one-shot method picks the units "
                                                "(magnitude-sp, wanda-sp, flap; the last two calibrate on C4)")
    causal_seqlen: int = option(256, "--causal: tokens per sequence (packed C4 text)")
    runtimes: str = option("torch", "torch (dense against pruned layouts in torch), or torch,onnxruntime: one table "
                                    "of runtime x precision (torch fp32, ONNX Runtime fp32 and int8) x removal on the "
                                    "CPU, the instruction sets in its header (needs pip install 'glue-sparse[onnx]')")
    run: str | None = option(None, "--runtimes torch,onnxruntime: a fine-tuning run folder whose <task>/pruned models "
                                   "to time too")
    output: str | None = option(None, "folder to write the rows to: speed.json and speed.md (atomically)")
