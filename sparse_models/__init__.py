"""FineGates-style sparse gates as a PEFT method, pruned model classes and the lm-eval model."""

__version__ = "0.1.0"
