"""Layer 4, workflow room ``demo``: the README's main job, a small bench grid (built on ``bench``).

``options``, ``run``, ``command`` (``glue-sparse demo``)."""
