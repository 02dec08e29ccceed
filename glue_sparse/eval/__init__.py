"""Layer 4, workflow room ``eval``: ``lm_eval run`` with our tasks and models registered, data checked first.

``options`` (what the lm-eval arguments ask for), ``run``, ``command`` (``glue-sparse eval``)."""
