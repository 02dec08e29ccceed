"""Layer 4, workflow room ``data``: which GLUE splits are where.

``options``, ``run``, ``command`` (``glue-sparse data``)."""
