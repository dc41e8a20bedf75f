"""Raises while being imported."""
raise RuntimeError("this candidate does not import")
