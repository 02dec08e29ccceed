"""Layer 4, experiments: what a study runs and records, built on the GLUE evaluation layer, the
method core and the lm-eval model.

- ``finetune_config`` / ``finetune``: one fine-tuning run (method, regime, seed, every default);
- ``bench`` / ``bench_ray`` / ``report``: the grid, its executors, its tables and plots;
- ``demo``: the main job's grid;
- ``perplexity`` / ``posttrain``: causal-LM perplexity protocols and sparse-gate post-training;
- ``speed``: dense vs pruned latency;
- ``run_environment`` / ``run_files`` / ``packaged``: provenance, the file names of a run folder, and
  the packaged default models (named by content hash).
"""
