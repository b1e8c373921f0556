"""Alignment metrics on arrays (mutual k-NN, CKNNA, CKA, cycle k-NN, SVCCA), layer search over all
layer pairs, and the uncertainty of the best pair (bootstrap, permutation null).

Entry points: `vlgap.metrics.alignment.align`, `vlgap.metrics.layer_search.layer_search`,
`vlgap.metrics.layer_search.precompute_layers`.
"""
