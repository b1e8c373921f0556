"""Alignment metrics on arrays (mutual k-NN, CKNNA, CKA, cycle k-NN, SVCCA, LCS and edit-distance
k-NN), layer search over all layer pairs, and the uncertainty of the best pair (bootstrap,
permutation null).

Import order, lowest first (no module imports one above it): prepare -> knn -> base -> ordinal ->
alignment -> uncertainty -> layer_search.
Entry points: `vlgap.metrics.layer_search.align`, `vlgap.metrics.layer_search.layer_search`,
`vlgap.metrics.layer_search.precompute_layers`; single-pair functions in `vlgap.metrics.alignment`.
"""
