"""The method's default numbers that the command line shows in ``--help``: written once here, in the base
layer, which imports no torch, so that help renders each default as a value without loading the method
(``import sparse_models`` takes seconds). The method core reads them from here."""

from __future__ import annotations

#: sigma of P(open) in the reference code: ``0.5 - 0.5*erf((-0.5 - mu) / (0.5*sqrt(2)))``. It is a
#: fixed constant, not the noise std (0.1); with 0.1 the gradient at initialisation is ~1e-35.
REFERENCE_SIGMA = 0.5

#: The reference regulariser's share of rows and of columns whose P(open) it pulls down (FineGates GLUE recipe).
REFERENCE_TARGET_SPARSITY = 0.4

#: Reference regulariser weight (FineGates GLUE recipe).
REFERENCE_LAMBDA = 50.0

#: Removal-mode pull weight: none. Measured: a steady pull at lambda 50 sinks every undefended gate
#: (median eval gate 0.98 -> 0.30 over the removal steps on CoLA, benchmarks/results/capacity_sweep), so the
#: weights and head train on a shrunken network that the final snap to 0/1 then replaces; gates+full on
#: CoLA scored MCC 0.00 with it and 0.19 without (benchmarks/results/capacity_sweep). Taylor ranking needs
#: no pull to rank gates.
REMOVAL_LAMBDA = 0.0

#: How far (in logit units) the removal recipe lets a gate logit travel over the removal steps under Adam
#: (which moves a logit by about its learning rate per step): gate lr = travel / removal steps.
REMOVAL_GATE_TRAVEL = 1.0

#: Kept row/column counts are rounded up to this multiple with closed ones: at ~1,280 outputs an odd
#: width or a multiple of 4 only ran 12-28% below the GFLOP/s of the multiples of 8 beside it on this
#: 2-core CPU (at ~316 outputs 313 and 316 ran -10..+4% of 312, and 320 6-12% above it), and 8 suits GPU
#: tensor cores. 16 kept 1.0-1.9 points more of the gated weights as zeros, and the pruned MiniLM ran
#: 0.9-4.1% slower than with 8 in all six paired rows of two runs (20/40/60% closed;
#: benchmarks/results/alignment_ab).
DEFAULT_ALIGN = 8
