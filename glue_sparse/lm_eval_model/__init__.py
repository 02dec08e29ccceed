"""Layer 3, the lm-eval model: ``hf-classifier`` serves fine-tuned (gated, pruned or plain) sequence
classifiers to lm-eval's ``glue_sparse_*`` tasks (``sparse-gated``: its old name, deprecated). It imports
lm-eval, so nothing below it does."""

from glue_sparse.lm_eval_model.classifier_lm import HFClassifierLM, SparseGatedLM

__all__ = ["HFClassifierLM", "SparseGatedLM"]
