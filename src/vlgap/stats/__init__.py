"""Distribution-gap statistics with calibrated uncertainty (pure functions unless noted).

resampling  bootstrap intervals (percentile, BCa), paired bootstrap, sign-flip test: shared by all
bounds      a statistic's range, intervals kept inside it (flagged when clipped), the small-sample warning
kernels     RBF (median heuristic), linear, KID cubic, CMMD preset
mmd         MMD^2 (unbiased, biased), `mmd_test` with permutation p-value and bootstrap interval
permutation vectorised permutation null / bootstrap / jackknife from one cached kernel matrix
linear_time block estimator and its t-test, for N too large for an N x N kernel
c2st        classifier two-sample test;  frechet  Frechet distance;  witness  items that differ most
paired      `compare`: paired difference;  factorial  2x2 main effects and interaction
text_sets   caption length matching and embedding (through vlgap.encoders.registry)
inputs      file readers (the only file I/O here);  gap  the `gap` API behind `vlgap gap`
"""
