"""Layer 4, workflow room ``predict``: a GLUE-server submission (the eleven files, AX included, zipped)
from a fine-tuning run or from lm-eval ``--log_samples`` output.

``options``, ``samples`` (lm-eval samples -> predictions per file), ``classifier`` (a run's checkpoints
through lm-eval), ``writer`` (the files, the zip and ``predict.json``, replaced atomically), ``run``,
``command`` (``glue-sparse predict``)."""
