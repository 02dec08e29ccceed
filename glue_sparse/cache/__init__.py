"""Layer 4, workflow room ``cache``: see, check and clear what glue-sparse keeps under ``$GLUE_SPARSE_CACHE``
(in the spirit of the Hub's ``scan-cache`` and ``delete-cache``)."""
