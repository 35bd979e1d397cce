"""Tests of kgeval/analysis."""
