"""``glue-sparse posttrain``'s options, in a module that imports no torch (``--help`` is instant); the
post-training itself is ``run.py`` and ``structured.py``."""

from __future__ import annotations

from dataclasses import dataclass

from glue_sparse.common.option_fields import option, required
from glue_sparse.perplexity.options import ProtocolOptions
from glue_sparse_tasks.method_defaults import REFERENCE_LAMBDA, REFERENCE_SIGMA, REMOVAL_GATE_TRAVEL

REFERENCE_GATE_LR = 1e-3  # the reference regulariser's gate learning rate


@dataclass(kw_only=True)
class PosttrainOptions(ProtocolOptions):
    """``glue-sparse posttrain``: which targets, how long, on which documents, and where results go."""

    out_dir: str = required("folder for results.json(l), results.md, adapters and checkpoints", flag="output",
                            deprecated={"--out-dir": None})
    method: str = option("gates-rowcol", "gates-rowcol (row/column PEFT gates, with --targets or --target-removal), "
                                         "or a comma-separated list of dense, magnitude-sp, wanda-sp, flap, gates "
                                         "(unit gates, LM loss), gates-distill (unit gates, KL to the dense model): "
                                         "whole heads and FFN channels removed at each --target-removal share of "
                                         "decoder-block linear weights (default gates-rowcol)")
    model: str | None = option(None, "causal LM folder or Hub name (default: packaged SmolLM2-135M)")
    targets: str = option("0.1,0.2,0.3", "comma-separated target sparsities (reference regulariser; ignored with "
                                         "--target-removal)")
    target_removal: str | None = option(None, "comma-separated shares of gated weights to remove, e.g. 0.1,0.2,0.3 "
                                              "(removal recipe: exact, binary gates)")
    steps: int = option(100, "post-training optimiser steps per target")
    tokens: int | None = option(None, "unit gates: training tokens per target (sets the steps: tokens / (batch x "
                                      "seqlen)); default --steps")
    calibration_samples: int = option(128, "one-shot baselines: calibration blocks from --train-docs")
    calibration_seqlen: int = option(128, "one-shot baselines: tokens per calibration block")
    save_steps: int = option(50, "unit gates: checkpoint every this many steps (a rerun resumes from the last)")
    seed: int = option(0, "training seed", flag=None)
    train_seqlen: int = option(256, "tokens per training block")
    train_batch_size: int = option(4, "training blocks per step")
    lr: float | None = option(None, f"gate learning rate (default {REFERENCE_GATE_LR:g}; with --target-removal, "
                                    f"{REMOVAL_GATE_TRAVEL:g} / removal steps, so a gate can travel from open to "
                                    "closed within the budget)")
    sparsity_lambda: float | None = option(None, f"weight of the sparsity regulariser (default {REFERENCE_LAMBDA:g}, "
                                                 "the FineGates GLUE recipe's)")
    reg_sigma: float | None = option(None, f"sigma of P(open) (default {REFERENCE_SIGMA:g}, the reference code's)")
    train_docs: str = option("0:1000", "START:END training documents")
    eval_docs: str = option("1000:", "START:END held-out documents")
    score_gated: bool = option(False, "also score the gated (unpruned) model; it equals the pruned one")
