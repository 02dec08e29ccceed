"""One colour per method in every figure of every report (the benchmark's frontier and score plots, post-training
perplexity, pruned speed): a method is drawn the same wherever it appears."""

from __future__ import annotations

#: method -> colour (matplotlib's tab10/tab20 hues); encoder methods, then the causal post-training ones
METHOD_COLOURS = {"full": "#000000", "dense": "#000000", "lora": "#8c564b", "gates": "#1f77b4", "gates+lora": "#9467bd",
                  "gates+full": "#ff7f0e", "magnitude": "#2ca02c", "mask-search": "#d62728",
                  "magnitude-sp": "#2ca02c", "wanda-sp": "#17becf", "flap": "#d62728", "gates-distill": "#ff7f0e",
                  "gates-rowcol": "#1f77b4"}
#: pruning layouts of the speed figures
LAYOUT_COLOURS = {"auto": "#1f77b4", "per-layer": "#9467bd", "keep": "#7f7f7f", "remove": "#ff7f0e"}


def method_colour(method: str) -> str:
    """The colour of ``method`` in every plot (a method this table lacks gets a fixed grey)."""
    return METHOD_COLOURS.get(method, "#7f7f7f")
