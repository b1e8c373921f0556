"""Classifier two-sample test (Lopez-Paz & Oquab 2017): can a classifier tell A from B?

A standardised, class-balanced, L2-regularised logistic regression (scikit-learn, liblinear: the
fastest solver here, which matters because the permutation p-value refits it) is cross-validated (stratified
k-fold, seeded); every item gets one held-out probability. Accuracy and AUC are computed on those
held-out predictions. Class weights are balanced, so chance accuracy is 0.5 even when |A| != |B|.

p-value, two exact options:
- "permutation" (default): the labels are permuted and the *whole* cross-validation is rerun;
  p = (1 + #{AUC_perm >= AUC_obs}) / (1 + B). Under H0 the labels are exchangeable and the
  procedure is a fixed function of (items, labels), so the test is exact at any B. The binomial test
  on cross-validated predictions is not used: held-out predictions of different folds come from
  classifiers trained on overlapping data, so they are not independent trials.
- "holdout": one stratified half trains, the other half tests; p is Fisher's exact test on the
  held-out confusion table. Given the trained classifier, the held-out labels are an exchangeable
  assignment with fixed counts under H0, so the correct-count is hypergeometric: exact, one fit,
  suited to large N (at the price of half the data for training and testing).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
from scipy import stats

from vlgap.caveats import reports_caveats
from vlgap.errors import VlgapError


@dataclass(frozen=True)
class C2STResult:
    accuracy: float
    auc: float
    p_value: float | None
    n_a: int
    n_b: int
    n_folds: int
    n_permutations: int
    p_value_method: str
    balanced_accuracy: float
    #: why the value means little for this input (vlgap.caveats), one line each
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _classifier(c: float, seed: int):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(StandardScaler(), LogisticRegression(C=c, class_weight="balanced", solver="liblinear",
                                                              max_iter=2000, random_state=seed))


def _cv_probabilities(x: np.ndarray, y: np.ndarray, n_folds: int, c: float, seed: int) -> np.ndarray:
    from sklearn.model_selection import StratifiedKFold, cross_val_predict

    folds = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    return cross_val_predict(_classifier(c, seed), x, y, cv=folds, method="predict_proba")[:, 1]


@reports_caveats
def c2st(
    a: Any,
    b: Any,
    *,
    n_folds: int = 5,
    n_permutations: int = 100,
    p_value_method: Literal["permutation", "holdout"] = "permutation",
    C: float = 1.0,
    seed: int = 0,
) -> C2STResult:
    """Classifier two-sample test between item sets a [m, D] and b [n, D]; see the module docstring."""
    from sklearn.metrics import accuracy_score, balanced_accuracy_score, roc_auc_score

    from vlgap.stats.kernels import to_tensor, validate_pair

    ta, tb = to_tensor(a, name="A"), to_tensor(b, name="B")
    validate_pair(ta, tb)
    x = np.concatenate([ta.cpu().numpy(), tb.cpu().numpy()])
    m, n = ta.shape[0], tb.shape[0]
    y = np.r_[np.zeros(m, dtype=int), np.ones(n, dtype=int)]
    rng = np.random.default_rng(seed)

    if p_value_method == "holdout":
        from sklearn.model_selection import train_test_split

        if min(m, n) < 4:
            raise VlgapError(f"holdout C2ST needs at least 4 items per side (2 to train, 2 to test), got {m} and {n}")
        x_tr, x_te, y_tr, y_te = train_test_split(x, y, test_size=0.5, stratify=y, random_state=seed)
        proba = _classifier(C, seed).fit(x_tr, y_tr).predict_proba(x_te)[:, 1]
        pred = (proba >= 0.5).astype(int)
        table = [[int(np.sum((y_te == 1) & (pred == 1))), int(np.sum((y_te == 1) & (pred == 0)))],
                 [int(np.sum((y_te == 0) & (pred == 1))), int(np.sum((y_te == 0) & (pred == 0)))]]
        p_value = float(stats.fisher_exact(table, alternative="greater").pvalue)
        return C2STResult(float(accuracy_score(y_te, pred)), float(roc_auc_score(y_te, proba)), p_value, m, n,
                          0, 0, "holdout fisher exact", float(balanced_accuracy_score(y_te, pred)))

    if p_value_method != "permutation":
        raise VlgapError(f"p_value_method={p_value_method!r}: use 'permutation' or 'holdout'")
    if n_folds < 2 or min(m, n) < n_folds:
        raise VlgapError(f"{n_folds}-fold C2ST needs at least {max(n_folds, 2)} items per side "
                         f"(got {m} and {n}): lower n_folds or add items")
    if n_permutations and m + n <= 64:
        from vlgap.stats.resampling import few_permutations_caveat

        few_permutations_caveat(math.comb(m + n, m), n_permutations, f"labellings of {m} + {n} items", exact=False)
    proba = _cv_probabilities(x, y, n_folds, C, seed)
    pred = (proba >= 0.5).astype(int)
    auc = float(roc_auc_score(y, proba))
    null = np.empty(n_permutations)
    for r in range(n_permutations):
        y_perm = rng.permutation(y)
        null[r] = roc_auc_score(y_perm, _cv_probabilities(x, y_perm, n_folds, C, seed))
    p_value = float((1 + np.count_nonzero(null >= auc)) / (1 + n_permutations)) if n_permutations else None
    return C2STResult(float(accuracy_score(y, pred)), auc, p_value, m, n, n_folds, n_permutations,
                      "permutation", float(balanced_accuracy_score(y, pred)))
