"""Structured pruning of Llama-style causal LMs by whole units (attention heads, FFN channels): the unit
structure, the one-shot baselines (magnitude-sp, wanda-sp, FLAP), unit gates and their trainer, and the
compaction into a ``SparsePrunedForCausalLM`` that runs narrower matrices with no index work."""

from sparse_models.structured.compact import compact, masked_copy
from sparse_models.structured.scores import METHODS, collect_statistics, one_shot_plan
from sparse_models.structured.unit_gates import add_unit_gates, gate_plan, remove_unit_gates
from sparse_models.structured.units import UnitPlan, check_llama_heads, decoder_units

__all__ = ["METHODS", "UnitPlan", "add_unit_gates", "check_llama_heads", "collect_statistics", "compact", "decoder_units", "gate_plan",
           "masked_copy", "one_shot_plan", "remove_unit_gates"]
