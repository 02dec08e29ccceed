"""Where and how the method core runs: what ``--device`` and ``--precision`` mean (``devices``) and the
one timing loop every speed comparison uses (``timing``)."""
