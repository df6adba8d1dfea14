"""Developer tools (doc and data generators, the channel builder, the proofs): run from a checkout as `python -m tools.NAME`; not part of the wheel."""
