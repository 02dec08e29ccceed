"""Layer 4, experiments: what a study runs and records, built on the GLUE evaluation layer, the
method core and the lm-eval model.

- ``finetune_config`` / ``finetune_models`` / ``finetune_run_dir`` / ``finetune`` / ``finetune_many``:
  fine-tuning runs (every default; the model per method; the run folder; the run's steps; many runs);
- ``bench_config`` / ``bench_store`` / ``bench`` / ``bench_ray`` / ``report`` / ``report_targets``: the grid,
  its results store, the evaluation of one cell, its executors, its tables and plots, its targets;
- ``demo``: the main job's grid;
- ``perplexity`` / ``posttrain`` / ``causal_pruning`` / ``causal_speed``: causal-LM perplexity protocols,
  post-training and structured pruning of decoders;
- ``pretrain`` / ``pretrain_data`` / ``pretrain_callbacks`` / ``pretrain_report``: pre-training from scratch;
- ``pruned_timing`` / ``speed`` / ``speed_report``: what one dense-vs-pruned comparison measures (timed
  by ``sparse_models.timing``), the speed table over shares and batch sizes, its targets and Markdown;
- ``run_environment`` / ``packaged`` / ``options``: provenance, the packaged default models (named by
  content hash), and how an option is declared.
"""
