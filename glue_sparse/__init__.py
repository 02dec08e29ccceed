"""glue-sparse's application layers, above the GLUE evaluation layer (``glue_sparse_tasks``) and the
method core (``sparse_models``):

- ``glue_sparse.lm_eval_model`` (layer 3): the ``hf-classifier`` lm-eval model, which answers the
  ``glue_sparse_*`` tasks from fine-tuned classifiers;
- layer 4, the workflows: one room per workflow (``finetune``, ``bench``, ``demo``, ``perplexity``,
  ``posttrain``, ``pretrain``, ``speed``, ``data``, ``eval``), each with ``options.py`` and ``command.py``
  (and ``run.py``, ``report.py`` where it has them), over the shared room ``common``;
- ``glue_sparse.cli`` and every room's ``command`` (layer 5): the ``glue-sparse`` command.

A layer imports only the layers below it; ``docs/architecture.md`` draws the rooms and the edges
between them, and ``tests/test_layering.py`` holds both.
"""

import glue_sparse_tasks

__version__ = glue_sparse_tasks.__version__  # read once, in glue_sparse_tasks
