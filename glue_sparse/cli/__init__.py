"""Layer 5, the ``glue-sparse`` command: one module per subcommand, each turning flags into one call
of the experiment layer (``main`` holds the CLI boundary: error lines, exit codes, ``-v``)."""
