"""glue-sparse's application layers, above the GLUE evaluation layer (``glue_sparse_tasks``) and the
method core (``sparse_models``):

- ``glue_sparse.lm_eval_model`` (layer 3): the ``hf-classifier`` lm-eval model, which answers the
  ``glue_sparse_*`` tasks from fine-tuned classifiers;
- ``glue_sparse.experiments`` (layer 4): fine-tuning, the benchmark and its report, perplexity,
  post-training, speed measurement, run provenance and the packaged default models;
- ``glue_sparse.cli`` (layer 5): the ``glue-sparse`` command, argument parsing only.

A layer imports only the layers below it (``tests/test_layering.py`` holds this).
"""

import glue_sparse_tasks

__version__ = glue_sparse_tasks.__version__  # read once, in glue_sparse_tasks
