"""Activation: the plan (plan.py), its run-time behind activate.d (runtime.py), one renderer per shell (shells/)."""
