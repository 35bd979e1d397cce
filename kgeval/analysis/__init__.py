"""Analyses of per-task rank records (:class:`kgeval.records.RankRecords`): the rank table, per-relation and
per-category metrics, popularity-stratified metrics and their plots, paired significance tests and bootstrap
intervals, each task's ROC-AUC. They read records, never the results class, so they work on rank files too.
"""

__all__: list[str] = []  # import the module you need: relations, stratified, stats, resampling, plot, auc
