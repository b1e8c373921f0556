"""The paper's controls and the reviewers' randomization check, from per-prompt scores and texts.

- `surface_overlap`: Table 3's control. Corpus BLEU-4 (SacreBLEU, with its signature) of each
  operator's rewrites of the dense training captions against those dense sources: a high value would
  mean the operator copies its source rather than re-realising it in the schema.
- `caption_set_permutation_test`: does a prompt's score depend on which caption set the generator was
  trained on, beyond the inference operator and the prompt? Strata are (prompt, inference operator);
  within a stratum, under H0 the generator runs (training caption set x generator seed) are
  exchangeable, so their caption-set labels are permuted within every stratum independently. The
  statistic is the between-caption-set sum of squares of the stratum-centred scores (an F numerator),
  so it covers two or more caption sets (pe, rewriter, third) in one test.
- `witness_regression`: per-prompt score regressed on the prompt's MMD^2 contribution, the witness
  value of its inference rewrite against the training captions (vlgap.stats.witness: f(z) = mean
  k(z, rewrites) - mean k(z, captions), leave-self-out). Within-prompt (prompt fixed effects: both
  sides centred per prompt across cells) and pooled slopes, each with a cluster bootstrap interval
  over prompts. A negative slope says: the further a rewrite sits from the captions the generator
  was trained on, the lower its score.
- `controls_from_run`: all of the above from the stage files an existing `vlgap cape experiment`
  run folder holds (data.json, rewrites/, cells/, embeddings.npz), without retraining anything.
"""
from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vlgap.errors import VlgapError

#: fewer prompts than this: intervals are not reported (a bootstrap over 2-3 clusters is a point)
MIN_PROMPTS_FOR_INTERVAL = 5


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def surface_overlap(rewrites: Mapping[str, Sequence[str]], sources: Sequence[str],
                    dense_parts: Mapping[str, Sequence[str | None]] | None = None) -> dict[str, Any]:
    """{operator: {bleu4, signature, n, dense_caption_bleu4?}}: corpus BLEU-4 of the operator's six-part
    rewrites (one line each) against the dense source each was written from (one reference)."""
    from vlgap.captions.sacrebleu_score import sacrebleu_corpus

    out: dict[str, Any] = {}
    refs = [[_one_line(s)] for s in sources]
    for op, texts in rewrites.items():
        if len(texts) != len(sources):
            raise VlgapError(f"operator {op!r}: {len(texts)} rewrites for {len(sources)} dense sources "
                             "(one rewrite per source, in order)")
        r = sacrebleu_corpus([_one_line(t) for t in texts], refs)
        row = {"bleu4": r.score, "signature": r.signature, "n": len(texts)}
        if dense_parts and op in dense_parts:
            parts = dense_parts[op]
            keep = [i for i, p in enumerate(parts) if p]
            if keep:
                d = sacrebleu_corpus([_one_line(parts[i]) for i in keep], [refs[i] for i in keep])
                row["dense_caption_bleu4"] = d.score
                row["dense_caption_n"] = len(keep)
        out[op] = row
    return out


# ------------------------------------------------------------------------------------------------
# randomization check: caption-set identity
# ------------------------------------------------------------------------------------------------


def _groups(scores: Mapping[tuple[str, str, int], Sequence[float]]) -> dict[str, tuple[np.ndarray, list[str]]]:
    """{inference operator: (Y [prompts, runs], caption-set label per run)} for inference operators
    whose prompts were scored by generators of at least two caption sets."""
    by_infer: dict[str, list[tuple[str, int]]] = {}
    for (t, i, s) in sorted(scores):
        by_infer.setdefault(i, []).append((t, s))
    out = {}
    n = None
    for infer, runs in by_infer.items():
        if len({t for t, _ in runs}) < 2:
            continue
        cols = [np.asarray(scores[(t, infer, s)], float) for t, s in runs]
        for (t, s), c in zip(runs, cols):
            if c.ndim != 1 or (n is not None and c.shape[0] != n):
                raise VlgapError(f"run train={t}, infer={infer}, seed={s}: {c.shape} scores, expected "
                                 f"{n} (the same prompts in every run)")
            n = c.shape[0]
            if not np.all(np.isfinite(c)):
                raise VlgapError(f"run train={t}, infer={infer}, seed={s} has NaN or Inf scores")
        out[infer] = (np.stack(cols, axis=1), [t for t, _ in runs])
    return out


def _between_ss(yc: np.ndarray, codes: np.ndarray, n_sets: int) -> np.ndarray:
    """Between-set sum of squares of centred scores; yc [..., prompts, runs] -> [...]."""
    total = np.zeros(yc.shape[:-2])
    for k in range(n_sets):
        cols = codes == k
        s = yc[..., cols].sum(axis=(-1, -2))
        total = total + s ** 2 / (yc.shape[-2] * cols.sum())
    return total


def caption_set_permutation_test(scores: Mapping[tuple[str, str, int], Sequence[float]], *,
                                 n_permutations: int = 2000, seed: int = 0,
                                 chunk: int = 250) -> dict[str, Any]:
    """Stratified permutation test (see module docstring). Returns {statistic, p_value, n_permutations,
    n_prompts, groups: {infer: {sets, runs, set_effects: {set: mean centred score}}}}."""
    from vlgap.counts import check_count

    check_count("n_permutations", n_permutations, 1, flag="--permutations", example=2000)
    groups = _groups(scores)
    if not groups:
        raise VlgapError("caption-set permutation test: no inference operator has prompts scored by generators "
                         "trained on two or more caption sets")
    rng = np.random.default_rng(seed)
    obs = 0.0
    null = np.zeros(n_permutations)
    info = {}
    n_prompts = None
    for infer, (y, labels) in groups.items():
        sets = sorted(set(labels))
        codes = np.array([sets.index(t) for t in labels])
        yc = y - y.mean(axis=1, keepdims=True)  # the prompt x inference-operator stratum's mean removed
        obs += float(_between_ss(yc, codes, len(sets)))
        n_prompts = y.shape[0]
        for start in range(0, n_permutations, chunk):
            p = min(chunk, n_permutations - start)
            order = np.argsort(rng.random((p, *yc.shape)), axis=-1)  # one permutation per stratum
            null[start:start + p] += _between_ss(np.take_along_axis(np.broadcast_to(yc, (p, *yc.shape)), order,
                                                                    axis=-1), codes, len(sets))
        info[infer] = {"sets": sets, "runs": len(labels),
                       "set_effects": {t: float(yc[:, codes == k].mean()) for k, t in enumerate(sets)}}
    p_value = float((1 + np.sum(null >= obs - 1e-12 * max(1.0, abs(obs)))) / (n_permutations + 1))
    return {"statistic": obs, "p_value": p_value, "n_permutations": n_permutations, "n_prompts": n_prompts,
            "groups": info,
            "null": "given the prompt and the inference operator, the score does not depend on the caption set "
                    "the generator was trained on (runs exchangeable within each prompt x inference stratum)"}


# ------------------------------------------------------------------------------------------------
# regression on the per-prompt MMD^2 contribution
# ------------------------------------------------------------------------------------------------


def prompt_witness(rewrites: np.ndarray, captions: np.ndarray, *, seed: int = 0) -> np.ndarray:
    """Witness value of each prompt rewrite (rows of `rewrites`) against the training captions: RBF kernel,
    median-heuristic bandwidth on the pooled set, the rewrite itself left out of its own side's mean."""
    import torch

    from vlgap.stats.kernels import kernel_matrix, resolve_kernel, to_tensor, validate_pair
    from vlgap.stats.witness import witness_values

    a, b = to_tensor(rewrites, name="rewrites"), to_tensor(captions, name="captions")
    validate_pair(a, b, names=("rewrites", "captions"))
    z = torch.cat([a, b])
    k = resolve_kernel("rbf", z, seed=seed)
    f_a, _ = witness_values(kernel_matrix(z, z, k), a.shape[0])
    return f_a


def _slope(x: np.ndarray, y: np.ndarray) -> float:
    xc, yc = x - x.mean(), y - y.mean()
    den = float(np.sum(xc * xc))
    return float(np.sum(xc * yc) / den) if den > 0 else float("nan")


def witness_regression(y: np.ndarray, w: np.ndarray, *, cells: Sequence[str] | None = None,
                       n_bootstrap: int = 2000, seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """Per-prompt score y[cell, prompt] on witness value w[cell, prompt]. within_prompt: both centred per
    prompt across cells (prompt difficulty removed); pooled: all (cell, prompt) points. Intervals:
    percentile bootstrap over prompts (all cells of a prompt move together), None below
    MIN_PROMPTS_FOR_INTERVAL prompts."""
    y, w = np.asarray(y, float), np.asarray(w, float)
    if y.shape != w.shape or y.ndim != 2:
        raise VlgapError(f"scores {y.shape} and witness values {w.shape} must both be [cells, prompts]")
    n_cells, n = y.shape
    if n_cells < 2 or n < 2:
        raise VlgapError(f"witness regression needs >= 2 cells and >= 2 prompts, got {n_cells} x {n}")

    def fit(idx: np.ndarray) -> tuple[float, float]:
        yy, ww = y[:, idx], w[:, idx]
        within = _slope((ww - ww.mean(axis=0)).ravel(), (yy - yy.mean(axis=0)).ravel())
        return within, _slope(ww.ravel(), yy.ravel())

    within, pooled = fit(np.arange(n))
    out: dict[str, Any] = {"n_prompts": n, "n_cells": n_cells, "cells": list(cells) if cells else None,
                           "within_prompt": {"slope": within, "ci": None},
                           "pooled": {"slope": pooled, "ci": None,
                                      "correlation": float(np.corrcoef(w.ravel(), y.ravel())[0, 1])
                                      if np.std(w) > 0 and np.std(y) > 0 else float("nan")},
                           "confidence": confidence, "n_bootstrap": n_bootstrap}
    if n >= MIN_PROMPTS_FOR_INTERVAL and n_bootstrap > 0:
        rng = np.random.default_rng(seed)
        reps = np.array([fit(rng.integers(0, n, n)) for _ in range(n_bootstrap)])
        q = [(1 - confidence) / 2, 1 - (1 - confidence) / 2]
        for j, name in enumerate(("within_prompt", "pooled")):
            r = reps[:, j][np.isfinite(reps[:, j])]
            if r.size:
                out[name]["ci"] = [float(v) for v in np.quantile(r, q)]
    else:
        out["note"] = f"n/a (n too small): intervals need at least {MIN_PROMPTS_FOR_INTERVAL} prompts"
    return out


def witness_table(scores: Mapping[tuple[str, str, int], Sequence[float]],
                  prompt_rewrites: Mapping[str, np.ndarray], captions: Mapping[str, np.ndarray], *,
                  seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(y [cells, prompts] seed-averaged, w [cells, prompts], cell names) for every scored cell whose
    inference rewrites and training captions are both embedded."""
    from vlgap.cape.analysis import cell_scores

    ys, ws, names = [], [], []
    for (t, i) in sorted({(t, i) for (t, i, _s) in scores}):
        if t not in captions or i not in prompt_rewrites:
            continue
        ys.append(cell_scores(scores, t, i))
        ws.append(prompt_witness(prompt_rewrites[i], captions[t], seed=seed))
        if ws[-1].shape != ys[-1].shape:
            raise VlgapError(f"cell {t}/{i}: {ys[-1].shape[0]} scored prompts but {ws[-1].shape[0]} rewrites")
        names.append(f"{t}/{i}")
    if len(names) < 2:
        raise VlgapError("witness regression: need at least 2 cells whose training captions and inference "
                         "rewrites are both given")
    return np.stack(ys), np.stack(ws), names


def controls(scores: Mapping[tuple[str, str, int], Sequence[float]], *,
             prompt_rewrites: Mapping[str, np.ndarray] | None = None, captions: Mapping[str, np.ndarray] | None = None,
             overlap: dict[str, Any] | None = None, n_permutations: int = 2000, n_bootstrap: int = 2000,
             seed: int = 0, confidence: float = 0.95) -> dict[str, Any]:
    """The randomization check (and the regression when embeddings are given) for one score set."""
    out: dict[str, Any] = {"surface_overlap": overlap,
                           "caption_set_permutation": caption_set_permutation_test(
                               scores, n_permutations=n_permutations, seed=seed)}
    out["witness_regression"] = None
    if prompt_rewrites and captions:
        y, w, names = witness_table(scores, prompt_rewrites, captions, seed=seed)
        out["witness_regression"] = witness_regression(y, w, cells=names, n_bootstrap=n_bootstrap, seed=seed,
                                                       confidence=confidence)
    return out


def _fmt_ci(ci: Sequence[float] | None, fmt: str = "{:+.4f}") -> str:
    return "n/a (n too small)" if not ci else "[" + ", ".join(fmt.format(v) for v in ci) + "]"


def controls_markdown(c: Mapping[str, Any], title: str = "Controls") -> str:
    lines = [f"### {title}", ""]
    ov = c.get("surface_overlap")
    if ov:
        sig = next(iter(ov.values()))["signature"]
        lines += ["Surface overlap (Table 3): corpus BLEU-4 of each operator's rewrites of the dense training "
                  f"captions against their dense sources (SacreBLEU `{sig}`):", "",
                  "| operator | BLEU-4 (six-part text) | BLEU-4 (Dense Caption part) | n |", "|---|---|---|---|"]
        for op, r in ov.items():
            d = r.get("dense_caption_bleu4")
            lines.append(f"| {op} | {r['bleu4']:.2f} | {'-' if d is None else f'{d:.2f}'} | {r['n']} |")
        lines.append("")
    p = c["caption_set_permutation"]
    lines += ["Randomization check: does the score depend on the caption set the generator was trained on, "
              "beyond the prompt and the inference operator? (permutation of caption-set labels within each "
              "prompt x inference-operator stratum)", "",
              f"- between-caption-set statistic {p['statistic']:.4g}, p = {p['p_value']:.3g} "
              f"({p['n_permutations']} permutations, {p['n_prompts']} prompts)"]
    for infer, g in p["groups"].items():
        eff = ", ".join(f"{t} {v:+.4f}" for t, v in g["set_effects"].items())
        lines.append(f"- inference {infer}: {g['runs']} runs; caption-set effect (mean centred score): {eff}")
    wr = c.get("witness_regression")
    if wr:
        lines += ["", "Regression of per-prompt score on the prompt's MMD^2 contribution (witness value of its "
                  "inference rewrite against the generator's training captions; cells "
                  f"{', '.join(wr['cells'] or [])}; {int(wr['confidence'] * 100)}% bootstrap over prompts):", "",
                  "| model | slope | interval |", "|---|---|---|",
                  f"| within prompt (prompt fixed effects) | {wr['within_prompt']['slope']:+.4f} | "
                  f"{_fmt_ci(wr['within_prompt']['ci'])} |",
                  f"| pooled (r = {wr['pooled']['correlation']:+.3f}) | {wr['pooled']['slope']:+.4f} | "
                  f"{_fmt_ci(wr['pooled']['ci'])} |"]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------------------
# from an experiment's run folder
# ------------------------------------------------------------------------------------------------


_REBUILD = "rerun `vlgap cape experiment` on this folder to rebuild it"


def _verified_json(path: Path, what: str, schema: dict) -> Any:
    """A sealed file of the run (a cell, a rewrite cache): its seal must hold, its fields checked."""
    from vlgap.reuse import check_artefact
    from vlgap.runs.schemas import read_run_json

    v = check_artefact(path, None)
    if v.status != "ok":
        raise VlgapError(f"{what} {v.message()}; {_REBUILD}")
    return read_run_json(path, schema, what=what, fix=_REBUILD)


def run_texts(run_dir: str | Path) -> dict[str, Any]:
    """The texts of an experiment run folder: dense sources, test prompts, and every operator's rewrites
    (six-part text and Dense Caption part), from data.json and the sealed rewrite caches."""
    from vlgap.cape.schema import six_part_text as _six_text
    from vlgap.cape.operators import _key

    run = Path(run_dir)
    if not (run / "data.json").is_file():
        raise VlgapError(f"{str(run)!r} is not a `vlgap cape experiment` run folder (no data.json)")
    from vlgap.runs.schemas import CAPE_DATA, read_run_json

    data = read_run_json(run / "data.json", CAPE_DATA, fix=_REBUILD)
    out: dict[str, Any] = {"train_captions": data["train_captions"], "test_prompts": data["test_prompts"],
                           "rewrites": {}}
    for path in sorted(p for p in (run / "rewrites").glob("*.json") if not p.name.startswith(".")):
        from vlgap.runs.schemas import CAPE_REWRITES

        entries = _verified_json(path, "rewrite cache", CAPE_REWRITES)["entries"]
        rw = {}
        for split, inputs in (("train", data["train_captions"]), ("test", data["test_prompts"])):
            res = [entries.get(_key(" ".join(t.split()))) for t in inputs]
            if all(r is not None for r in res):
                rw[split] = {"text": [_six_text(r) for r in res], "dense": [r.get("dense_caption") for r in res]}
        if rw:
            out["rewrites"][path.stem] = rw
    return out


def run_scores(run_dir: str | Path) -> dict[tuple[str, str, int], list[float]]:
    scores = {}
    for path in sorted(p for p in (Path(run_dir) / "cells").glob("*.json") if not p.name.startswith(".")):
        from vlgap.runs.schemas import CAPE_CELL

        cell = _verified_json(path, "generator cell", CAPE_CELL)
        scores[(cell["train"], cell["infer"], int(cell["seed"]))] = cell["item"]
    if not scores:
        raise VlgapError(f"{str(run_dir)!r} holds no generator cells (cells/*.json); run the experiment first")
    return scores


def run_embeddings(run_dir: str | Path) -> Callable[[Sequence[str]], np.ndarray]:
    from vlgap.reuse import check_artefact

    path = Path(run_dir) / "embeddings.npz"
    v = check_artefact(path, None)
    if v.status != "ok":
        raise VlgapError(f"embedding cache {str(path)!r} is {v.status}; rerun `vlgap cape experiment` on the folder")
    with np.load(io.BytesIO(path.read_bytes()), allow_pickle=False) as z:
        known = dict(zip(z["keys"].tolist(), z["x"]))

    def emb(texts: Sequence[str]) -> np.ndarray:
        keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        missing = [t for t, k in zip(texts, keys) if k not in known]
        if missing:
            raise VlgapError(f"embedding cache {str(path)!r} lacks {len(missing)} texts (e.g. {missing[0][:60]!r})")
        return np.stack([known[k] for k in keys])

    return emb


def experiment_controls(train_sources: Sequence[str], rewrites: Mapping[str, Mapping[str, Any]],
                        scores: Mapping[tuple[str, str, int], Sequence[float]], emb: Callable[[Sequence[str]], np.ndarray],
                        *, n_permutations: int = 2000, n_bootstrap: int = 2000, seed: int = 0,
                        confidence: float = 0.95) -> dict[str, Any]:
    """`rewrites`: {operator: {"train": {"text": [...], "dense": [...]}, "test": {...}}}."""
    train_ops = {op: rw["train"] for op, rw in rewrites.items() if "train" in rw}
    overlap = surface_overlap({op: v["text"] for op, v in train_ops.items()}, train_sources,
                              {op: v["dense"] for op, v in train_ops.items()})
    analysed = {k: v for k, v in scores.items() if k[0] != "template"}
    prompt_emb = {op: emb(rw["test"]["text"]) for op, rw in rewrites.items() if "test" in rw and op != "template"}
    cap_emb = {op: emb(v["text"]) for op, v in train_ops.items() if op != "template"}
    return controls(analysed, prompt_rewrites=prompt_emb, captions=cap_emb, overlap=overlap,
                    n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed, confidence=confidence)


def controls_from_run(run_dir: str | Path, *, n_permutations: int | None = None, n_bootstrap: int | None = None,
                      write: bool = True, confidence: float = 0.95) -> dict[str, Any]:
    """Controls of an existing experiment run folder (no model is loaded or trained); writes
    controls.json and controls.md into it when `write`."""
    from vlgap.io_utils import atomic_write_json, atomic_write_text

    run = Path(run_dir)
    from vlgap.runs.schemas import CAPE_CONFIG, read_run_json

    cfg = read_run_json(run / "config.json", CAPE_CONFIG, fix=_REBUILD) if (run / "config.json").is_file() else {}
    texts = run_texts(run)
    res = experiment_controls(texts["train_captions"], texts["rewrites"], run_scores(run), run_embeddings(run),
                              n_permutations=n_permutations or cfg.get("n_permutations", 2000),
                              n_bootstrap=n_bootstrap or cfg.get("n_bootstrap", 2000), seed=cfg.get("seed", 0),
                              confidence=confidence)
    if write:
        atomic_write_json(run / "controls.json", res)
        atomic_write_text(run / "controls.md", controls_markdown(res, "Controls (Table 3 overlap, randomization check)"))
    return res
