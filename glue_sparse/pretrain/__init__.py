"""Layer 4, workflow room ``pretrain``: Llama pre-training from scratch on C4, dense or gated, built on
``perplexity``.

``options``, ``data`` (packed blocks) and ``token_cache``, ``callbacks``, ``run``, ``report``,
``command`` (``glue-sparse pretrain``) and ``report_command`` (``glue-sparse pretrain-report``);
``model_configs/`` holds GaLore's sizes."""
