"""Post-training structured pruning of encoders after Kwon et al. (NeurIPS 2022), "A Fast Post-Training
Pruning Framework for Transformers": heads and FFN channels chosen by the Fisher information of their
masks under a removal share, rearranged within each layer, their kept masks tuned by least squares, then
removed through sparse gates. Written from the paper's equations; the baseline beside magnitude pruning."""

from sparse_models.mask_search.pipeline import MaskSearchResult, close_units, mask_search, unit_gates
from sparse_models.mask_search.units import encoder_layers

__all__ = ["MaskSearchResult", "close_units", "encoder_layers", "mask_search", "unit_gates"]
