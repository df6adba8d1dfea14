"""Integrations loaded by other programs (conda's plugin manager)."""
