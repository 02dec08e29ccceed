"""FineGates-style sparse gates as a PEFT method (config + layer + model), registered once on import."""

from peft.utils import register_peft_method

from ._peft_type import NAME, SPARSE_GATES
from .config import SparseGatesConfig
from .layer import Linear, SparseGatesLayer
from .model import SparseGatesModel

__all__ = ["SPARSE_GATES", "SparseGatesConfig", "SparseGatesLayer", "SparseGatesModel", "Linear"]

try:
    register_peft_method(name=NAME, config_cls=SparseGatesConfig, model_cls=SparseGatesModel)
except KeyError:  # already registered (e.g. the module was reloaded)
    pass
