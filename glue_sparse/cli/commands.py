"""The ``glue-sparse`` subcommands: each one's module and one-line help, written here once, so that
``glue-sparse --help`` lists them without importing any of them (and so without torch, transformers,
lm-eval or datasets); a subcommand's module loads only when that subcommand runs or shows its help."""

from __future__ import annotations

#: name -> (module, help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "data": ("glue_sparse.data.command",
             "show which GLUE splits are available, with rows, labels, source and fingerprint"),
    "finetune": ("glue_sparse.finetune.command",
                 "fine-tune an encoder on GLUE tasks with a method that --method lists"),
    "bench": ("glue_sparse.bench.command", "fine-tune, evaluate through lm-eval and time methods x regimes x seeds"),
    "report": ("glue_sparse.bench.report_command", "markdown/CSV tables and plots from a bench results store"),
    "demo": ("glue_sparse.demo.command",
             "the main job: full fine-tuning vs gates vs magnitude vs mask search at 30 percent removal on SST-2 "
             "(packaged MiniLM)"),
    "perplexity": ("glue_sparse.perplexity.command",
                   "causal-LM token perplexity under named protocols (sparsegpt, galore, packed)"),
    "posttrain": ("glue_sparse.posttrain.command",
                  "structured post-training of a causal LM: row/column gates, or heads and FFN channels removed by "
                  "magnitude-sp, wanda-sp, flap or unit gates, scored on C4 and WikiText-2"),
    "pretrain": ("glue_sparse.pretrain.command",
                 "pre-train a Llama (GaLore's sizes) from scratch on C4, dense or with sparse gates; validation "
                 "perplexity curve in run.json, the (pruned) model in model/"),
    "pretrain-report": ("glue_sparse.pretrain.report_command",
                        "table, plot, speed and targets of pre-training runs (dense and gated twins)"),
    "predict": ("glue_sparse.predict.command",
                "a GLUE-server submission (the eleven files with AX, zipped) from a fine-tuning run or lm-eval "
                "samples"),
    "cache": ("glue_sparse.cache.command",
              "list, verify or clear what glue-sparse keeps under $GLUE_SPARSE_CACHE (tokens, teacher logits, "
              "tokenizers, models)"),
    "export": ("glue_sparse.export.command",
               "a run's checkpoints as Hub-ready folders: weights, tokenizer, the pruned model's code, a model card "
               "with the run's scores"),
    "speed": ("glue_sparse.speed.command",
              "dense vs physically pruned latency and FLOP ratios (default: packaged MiniLM; --causal: SmolLM2)"),
}
