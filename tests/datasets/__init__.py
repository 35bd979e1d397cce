"""Tests of kgeval/datasets."""
