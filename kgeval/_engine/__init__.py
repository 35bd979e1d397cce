"""The private engine: the loop that ranks one side's tasks (:func:`~kgeval._engine.loop.rank_side`) and its stages --
plan, sizes, scoring, filter index, pairs, counting, kernels -- plus distributed sharding and synchronisation.
Only :mod:`kgeval.evaluator` drives it; nothing here is public API (docs/design.md explains the stages).
"""
