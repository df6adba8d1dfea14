"""Renderers: the human/JSON report and one small renderer per shell."""
