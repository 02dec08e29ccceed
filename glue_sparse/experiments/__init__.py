"""Layer 4, experiments: what a study runs and records, built on the GLUE evaluation layer, the
method core and the lm-eval model.

- ``finetune_config`` / ``finetune`` / ``finetune_many``: fine-tuning runs (method, regime, seed, every
  default);
- ``bench`` / ``bench_ray`` / ``report``: the grid, its executors, its tables and plots;
- ``demo``: the main job's grid;
- ``perplexity`` / ``posttrain`` / ``causal_pruning`` / ``causal_speed``: causal-LM perplexity protocols,
  post-training and structured pruning of decoders;
- ``pretrain`` / ``pretrain_data`` / ``pretrain_callbacks`` / ``pretrain_report``: pre-training from scratch;
- ``speed``: dense vs pruned latency;
- ``run_environment`` / ``packaged`` / ``options``: provenance, the packaged default models (named by
  content hash), and how an option is declared.
"""
