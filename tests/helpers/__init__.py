"""Shared test helpers: the brute-force reference (reference.py) and graphs / table models (graphs.py)."""
