"""Layer 4, the workflows' shared room: run provenance (``run_environment``), the packaged default models
named by content hash (``packaged``), how an option field is declared (``option_fields``) and the stated
targets (``targets``, read from ``targets.json``). It imports no workflow room."""
