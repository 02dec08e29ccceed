"""Layer 4, workflow room ``finetune``: fine-tuning an encoder on GLUE tasks with one method.

``options`` (every default, once), ``models`` (the model per method), ``run_dir`` (the run folder),
``run`` (one run), ``many`` (tasks x seeds), ``command`` (``glue-sparse finetune``)."""
