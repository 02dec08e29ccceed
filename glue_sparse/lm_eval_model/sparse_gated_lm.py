"""The lm-eval model's old name and module: ``--model sparse-gated`` and ``SparseGatedLM`` still work and
warn; both go in glue-sparse 0.2.0. The model is ``hf-classifier`` (``classifier_lm.HFClassifierLM``), a
name that says what it serves: any sequence-classification checkpoint, gated, pruned or plain."""

from __future__ import annotations

import warnings
from typing import Any

from glue_sparse.lm_eval_model.classifier_lm import (  # noqa: F401  (their old home)
    EVAL_REPORT_FILE,
    HFClassifierLM,
    register,
    resolve_device,
    resolve_dtype,
    two_point_logprobs,
)

RESULTS_FILE = EVAL_REPORT_FILE  # the old constant's name
REMOVED_IN = "0.2.0"


class SparseGatedLM(HFClassifierLM):
    """``--model sparse-gated``: ``hf-classifier`` under its old name, with a deprecation warning."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        warnings.warn(f"lm-eval model 'sparse-gated' is now 'hf-classifier' (SparseGatedLM: HFClassifierLM); "
                      f"the old name goes in glue-sparse {REMOVED_IN}", DeprecationWarning, stacklevel=2)
        super().__init__(*args, **kwargs)
