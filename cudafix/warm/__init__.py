"""PTX warm-up: what to warm and its state (plan.py), the detached job and its lock (runtime.py)."""
