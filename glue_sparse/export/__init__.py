"""Layer 4, workflow room ``export``: a run's checkpoints as Hub-ready folders (weights as safetensors,
tokenizer, the pruned model's code, a model card with the run's scores)."""
