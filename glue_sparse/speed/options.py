"""``glue-sparse speed``'s options, in a module that imports no torch (``--help`` is instant); the timing
is ``run.py``."""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.common.option_fields import option

#: ``--dtype`` names the speed table takes (sparse_models.runtime.devices maps each to a torch dtype)
DTYPES = ("float32", "bfloat16")


@dataclass(kw_only=True)
class SpeedOptions:
    """``glue-sparse speed``: what to prune, how to time it, where to write the rows."""

    model: str | None = option(None, "encoder folder or Hub name (default: the packaged MiniLM)")
    removed: str = option("0.2,0.4,0.6", "shares of gated weights to remove with random closed patterns")
    adapter: list[str] = option(help="trained sparse-gates adapter folder(s) to time as well (repeatable)",
                                default_factory=list, action="extend")
    batch_sizes: str = option("32,1", "batch sizes to time")
    align: int | None = option(None, "round kept row/column counts up to this multiple with closed ones (1: remove "
                                      "exactly what the gates closed; default: merge_and_unload's, DEFAULT_ALIGN in "
                                      "sparse_models.sparse_gates.layout_costs)")
    batches: int = option(8, "batches per timing round")
    rounds: int = option(5, "timing rounds (median; one extra warm-up round)")
    threads: int = option(0, "torch CPU threads (0: torch's default)")
    device: str = option("auto", "device to time dense and pruned on, as every command reads --device: auto (a CUDA "
                                 "GPU when one is visible, else the CPU), cpu, cuda or cuda:N")
    dtype: str = option("float32", f"weights and activations: {' or '.join(DTYPES)} (bfloat16 on a GPU: the "
                                   "accelerator table of issue #15)")
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
                                 "channels removed at each --removed share of decoder-block linear weights")
    causal_method: str = option("magnitude-sp", "--causal: which one-shot method picks the units "
                                                "(magnitude-sp, wanda-sp, flap; the last two calibrate on C4)")
    causal_seqlen: int = option(256, "--causal: tokens per sequence (packed C4 text)")
    output: str | None = option(None, "write the rows as JSON here (atomically)")
