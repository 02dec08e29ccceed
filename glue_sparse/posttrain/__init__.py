"""Layer 4, workflow room ``posttrain``: structured post-training of a pretrained causal LM, built on
``perplexity``.

``options``, ``run`` (row/column gates), ``structured`` (heads and FFN channels removed by magnitude-sp,
wanda-sp, flap or unit gates), ``command`` (``glue-sparse posttrain``)."""
