"""Layer 4, workflow room ``speed``: dense vs physically pruned latency and FLOPs.

``options``, ``timing`` (one dense-vs-pruned comparison), ``run`` (encoders), ``causal`` (decoders,
built on ``posttrain``'s pruning), ``report``, ``command`` (``glue-sparse speed``)."""
