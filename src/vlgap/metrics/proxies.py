"""Downstream proxies on frozen features (pure array functions): weighted k-NN classification, linear
probes, text<->video retrieval; every accuracy with its N, chance level and an interval.

Weighted k-NN follows Dynamic Reflections Fig 2 (k = 8 on frozen features). The paper does not state
the vote temperature, so vlgap uses the DINO convention (Caron et al. 2021, Wu et al. 2018): rows
L2-normalised, cosine similarity, the k most similar training items vote for their class with weight
exp(sim / T), T = 0.07; the class with the largest summed weight wins (a tie goes to the class seen
first in sorted label order).

Accuracies are cross-validated with stratified folds (every item predicted once, by a model that never
saw it); the interval is Wilson's score interval on the N out-of-fold predictions, and chance is the
majority-class fraction (what always answering the most frequent class scores; 1/K for balanced
classes). Retrieval ranks count ties against the query (rank = 1 + number of other candidates at
least as similar), so constant features score chance, not 1.0.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from vlgap.errors import VlgapError

#: Dynamic Reflections Fig 2: weighted k-NN with k = 8
PAPER_K = 8
#: the paper gives no temperature; DINO's k-NN evaluation uses 0.07
DINO_TEMPERATURE = 0.07


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> list[float] | None:
    """Wilson score interval of a proportion successes / n (None for n = 0)."""
    from scipy import stats

    if n <= 0:
        return None
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    p = successes / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return [max(0.0, mid - half), min(1.0, mid + half)]


def _as_matrix(x, name: str) -> np.ndarray:
    from vlgap.arguments import as_numbers

    a = as_numbers(x, name, ndim=2)
    if not np.all(np.isfinite(a)):
        bad = np.flatnonzero(~np.all(np.isfinite(a), axis=1))
        raise VlgapError(f"{name} has non-finite values in rows {bad[:5].tolist()}")
    return a


def _normalise(a: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length, each divided by its largest |value| first so that no norm under- or
    overflows (a global scale of the features changes nothing); an all-zero row stays zero."""
    peak = np.abs(a).max(axis=1, keepdims=True)
    a = a / np.where(peak > 0, peak, 1.0)
    norm = np.linalg.norm(a, axis=1, keepdims=True)
    return a / np.where(norm > 0, norm, 1.0)


def _labels(y, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(class names sorted, integer codes) of a label vector of length n."""
    if y is None or isinstance(y, (str, bytes, dict, set)) or not hasattr(y, "__iter__"):
        raise VlgapError(f"y: expected one label per item (a list or 1-D array of length {n}), got "
                         f"{'None' if y is None else type(y).__name__}")
    arr = np.asarray([str(v) for v in y])
    if arr.shape != (n,):
        raise VlgapError(f"labels must give one label per item ({n}), got {arr.shape[0] if arr.ndim else 0}")
    classes, codes = np.unique(arr, return_inverse=True)
    if classes.size < 2:
        raise VlgapError(f"y: every one of the {n} items has the same label {str(classes[0])!r}, so a classifier's "
                         "accuracy is 1 = chance whatever the features; give labels of at least 2 classes")
    return classes, codes


def weighted_knn_predict(train_x, train_y, test_x, *, k: int = PAPER_K,
                         temperature: float = DINO_TEMPERATURE) -> np.ndarray:
    """Class codes predicted for test rows by the weighted vote of their k most similar training rows
    (cosine similarity, weight exp(sim / T)). train_y: integer class codes >= 0."""
    tr = _normalise(_as_matrix(train_x, "train_x"))
    te = _normalise(_as_matrix(test_x, "test_x"))
    ty = np.asarray(train_y, dtype=np.int64)
    if ty.shape != (tr.shape[0],):
        raise VlgapError(f"train_y must have one class per training row ({tr.shape[0]}), got shape {ty.shape}")
    if k < 1:
        raise VlgapError(f"k must be >= 1, got {k}")
    if not temperature > 0:
        raise VlgapError(f"temperature must be > 0, got {temperature}")
    kk = min(k, tr.shape[0])
    sims = te @ tr.T
    # stable order: among equal similarities the earlier training row is the nearer neighbour
    nn = np.argsort(-sims, axis=1, kind="stable")[:, :kk]
    top = np.take_along_axis(sims, nn, axis=1)
    weights = np.exp((top - 1.0) / temperature)  # exp(sim/T) scaled by exp(-1/T): same argmax, no overflow
    votes = np.zeros((te.shape[0], int(ty.max()) + 1))
    np.add.at(votes, (np.repeat(np.arange(te.shape[0]), kk), ty[nn].ravel()), weights.ravel())
    return votes.argmax(axis=1)


#: how the warning that --folds was lowered begins (lifted to the result's warnings by vlgap.probe.proxies)
FOLDS_REDUCED = "--folds reduced"


def stratified_folds(codes: np.ndarray, n_folds: int, seed: int) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[str]]:
    """Stratified K folds (scikit-learn StratifiedKFold, shuffled with `seed`). With a class smaller
    than n_folds the folds cannot all hold it: n_folds is lowered to the largest class count that
    allows at least 2 folds, and a note says so."""
    from sklearn.model_selection import StratifiedKFold

    notes = []
    counts = np.bincount(codes)
    if n_folds < 2:
        raise VlgapError(f"folds must be >= 2 for cross-validation, got {n_folds}")
    if counts.max() < 2:
        raise VlgapError("every class has a single item: cross-validated classification needs classes with "
                         ">= 2 items (check the labels)")
    if n_folds > counts.max():
        notes.append(f"{FOLDS_REDUCED} from {n_folds} to {int(counts.max())} because the largest class has "
                     f"{int(counts.max())} items (stratified folds need a class in every fold)")
        n_folds = int(counts.max())
    if counts.min() < n_folds:
        notes.append(f"{int(np.sum(counts < n_folds))} classes have fewer than {n_folds} items: some folds "
                     "lack them (their items are predicted from the others' classes only)")
    import warnings

    skf = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # the small-class warning is the note above
        folds = list(skf.split(np.zeros(len(codes)), codes))
    return folds, notes


def _summary(task: str, codes: np.ndarray, pred: np.ndarray, classes: np.ndarray, n_folds: int,
             confidence: float, notes: list[str], **extra) -> dict[str, Any]:
    n = int(codes.size)
    correct = int(np.sum(pred == codes))
    counts = np.bincount(codes, minlength=classes.size)
    return {"task": task, "accuracy": correct / n, "n": n, "n_correct": correct,
            "ci": wilson_interval(correct, n, confidence), "confidence": confidence,
            "chance": float(counts.max() / n), "chance_rule": "majority-class fraction",
            "n_classes": int(classes.size), "n_folds": n_folds, "interval": "Wilson score, out-of-fold predictions",
            "notes": notes, **extra}


def knn_classify_cv(x, y, *, k: int = PAPER_K, temperature: float = DINO_TEMPERATURE, n_folds: int = 5,
                    seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """Cross-validated weighted k-NN accuracy of features x [N, D] on labels y (one per row)."""
    a = _as_matrix(x, "x")
    classes, codes = _labels(y, a.shape[0])
    folds, notes = stratified_folds(codes, n_folds, seed)
    pred = np.full(codes.size, -1)
    for train, test in folds:
        pred[test] = weighted_knn_predict(a[train], codes[train], a[test], k=k, temperature=temperature)
    return _summary("knn-classify", codes, pred, classes, len(folds), confidence, notes, k=k, temperature=temperature)


def linear_probe_cv(x, y, *, c: float = 1.0, n_folds: int = 5, seed: int = 0, confidence: float = 0.95,
                    max_iter: int = 2000) -> dict[str, Any]:
    """Cross-validated accuracy of a linear probe: scikit-learn LogisticRegression (L2, inverse strength
    `c`) on standardised features, fitted on each training fold."""
    a = _as_matrix(x, "x")
    classes, codes = _labels(y, a.shape[0])
    folds, notes = stratified_folds(codes, n_folds, seed)
    pred = np.full(codes.size, -1)
    from threadpoolctl import threadpool_limits

    # one BLAS thread: these fits are small, and many threads on a shared CPU are 10-50x slower than one
    with threadpool_limits(1):
        unconverged = _fit_folds(a, codes, folds, pred, c, max_iter)
    if unconverged:
        notes.append(f"logistic regression did not converge in {max_iter} iterations on {unconverged} fold(s)")
    return _summary("linear-probe", codes, pred, classes, len(folds), confidence, notes, c=c)


def _fit_folds(a, codes, folds, pred, c, max_iter) -> int:
    import warnings

    from sklearn.exceptions import ConvergenceWarning
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    unconverged = 0
    for train, test in folds:
        if np.unique(codes[train]).size < 2:
            pred[test] = codes[train][0]
            continue
        model = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=max_iter))
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            model.fit(a[train], codes[train])
        unconverged += any(issubclass(w.category, ConvergenceWarning) for w in caught)
        pred[test] = model.predict(a[test])
    return unconverged


def _ranks(sims: np.ndarray, correct: np.ndarray) -> np.ndarray:
    """Rank of the correct column in each row: 1 + other columns at least as similar (ties count against)."""
    true = sims[np.arange(sims.shape[0]), correct]
    return (sims >= true[:, None]).sum(axis=1)  # includes the correct column itself


def retrieval_scores(video, text, caption_owner: Sequence[int] | None = None, *, ks: Sequence[int] = (1, 5, 10),
                     n_bootstrap: int = 1000, confidence: float = 0.95, seed: int = 0) -> dict[str, Any]:
    """Text->video and video->text retrieval in a joint embedding space (cosine similarity).

    video [N, D]; text [M, D]; caption_owner[m] = the video index of caption m (default: caption i
    belongs to video i, M = N). Text->video: each caption ranks all N videos. Video->text: each video
    ranks all M captions and its rank is that of its best caption. R@k with a Wilson interval and
    chance k / (number of candidates); median rank with a percentile bootstrap interval over queries."""
    from vlgap.stats.resampling import percentile_interval

    v = _normalise(_as_matrix(video, "video"))
    t = _normalise(_as_matrix(text, "text"))
    if v.shape[1] != t.shape[1]:
        raise VlgapError(f"retrieval needs one joint space: video features have {v.shape[1]} dimensions, "
                         f"text features {t.shape[1]}")
    owner = np.arange(t.shape[0]) if caption_owner is None else np.asarray(caption_owner, dtype=np.int64)
    if owner.shape != (t.shape[0],) or owner.min() < 0 or owner.max() >= v.shape[0]:
        raise VlgapError(f"caption_owner must give each of the {t.shape[0]} captions a video index in "
                         f"[0, {v.shape[0]})")
    if caption_owner is None and t.shape[0] != v.shape[0]:
        raise VlgapError(f"{t.shape[0]} captions for {v.shape[0]} videos: pass caption_owner")
    missing = sorted(set(range(v.shape[0])) - set(owner.tolist()))
    if missing:
        raise VlgapError(f"videos {missing[:5]} have no caption; every video needs at least one")
    sims = t @ v.T  # [M, N]
    t2v = _ranks(sims, owner)
    # video -> text: rank of the best of the video's captions among all captions
    sv = sims.T  # [N, M]
    best_true = np.array([sv[i, owner == i].max() for i in range(v.shape[0])])
    others = owner[None, :] != np.arange(v.shape[0])[:, None]
    v2t = 1 + ((sv >= best_true[:, None]) & others).sum(axis=1)
    rng = np.random.default_rng([0x7E, int(seed)])
    out: dict[str, Any] = {"n_videos": int(v.shape[0]), "n_captions": int(t.shape[0]), "confidence": confidence,
                           "rank_ties": "ties count against the query"}
    for name, ranks, n_cand in (("text_to_video", t2v, v.shape[0]), ("video_to_text", v2t, t.shape[0])):
        d: dict[str, Any] = {"n": int(ranks.size), "n_candidates": int(n_cand)}
        for k in ks:
            hits = int(np.sum(ranks <= k))
            d[f"R@{k}"] = {"value": hits / ranks.size, "ci": wilson_interval(hits, ranks.size, confidence),
                           "chance": min(1.0, k / n_cand)}
        med = float(np.median(ranks))
        boot = np.median(ranks[rng.integers(0, ranks.size, size=(n_bootstrap, ranks.size))], axis=1) \
            if n_bootstrap else np.array([med])
        d["median_rank"] = {"value": med, "ci": list(percentile_interval(boot, confidence)) if n_bootstrap else None,
                            "chance": (n_cand + 1) / 2}
        out[name] = d
    return out
