"""Layer 4, workflow room ``bench``: the fine-tune x evaluate x time grid, built on ``finetune``.

``options`` (the grid), ``store`` (its results file), ``run`` (one cell, the executors), ``ray_executor``,
``report`` / ``report_targets`` (tables, plots, targets), ``command`` (``glue-sparse bench``) and
``report_command`` (``glue-sparse report``)."""
