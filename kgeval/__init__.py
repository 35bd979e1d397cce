"""kgeval: exact, fast and lean rank-based evaluation of knowledge-graph-embedding models.

The public names are :class:`RankBasedEvaluator`, :class:`RankBasedMetricResults` and
:class:`MetricAccumulator`; see ``DESIGN.md``-style documentation in the README.
"""
