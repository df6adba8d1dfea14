"""Developer tools (not used at run time): local conda channel builder."""
