"""FineGates-style sparse gates as a PEFT method (config + layer + model), registered once on import."""

from peft.utils import register_peft_method

from sparse_models.sparse_gates._peft_type import NAME, SPARSE_GATES
from sparse_models.sparse_gates.config import SparseGatesConfig
from sparse_models.sparse_gates.layer import Linear, SparseGatesLayer
from sparse_models.sparse_gates.model import SparseGatesModel

__all__ = ["SPARSE_GATES", "SparseGatesConfig", "SparseGatesLayer", "SparseGatesModel", "Linear"]

try:
    register_peft_method(name=NAME, config_cls=SparseGatesConfig, model_cls=SparseGatesModel)
except KeyError:  # already registered (e.g. the module was reloaded)
    pass
