"""Layer 4, workflow room ``perplexity``: causal-LM token perplexity under named protocols.

``options``, ``run`` (the protocols, also used by ``posttrain`` and ``pretrain``), ``command``
(``glue-sparse perplexity``)."""
