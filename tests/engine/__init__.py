"""Tests of the private engine (kgeval/_engine)."""
