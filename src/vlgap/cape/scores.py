"""Real benchmark scores in: per-prompt scores of the four 2x2 cells and the third operator, read from
the files the benchmarks write, through the offline experiment's analyses (2x2, paired third-operator
contrast, caption-set permutation test, MMD^2 and the witness regression when texts are given).

Layouts read (`format`, detected from the content when "auto"):

  vbench     VBench / VBench-2.0 `<name>_eval_results.json`: {dimension: [overall score,
             [{"video_path": ..., "video_results": number|bool, "prompt"?: ...}, ...]], ...}. A video's
             prompt is its "prompt" key, else its file name in VBench's sampling convention
             `<prompt>-<index>.mp4` (the index, the sampled video, is dropped; VBench cuts the prompt to
             its first 180 characters there, which the rewrite lookup allows for); several videos of a
             prompt are averaged. VBench-2.0's `compute_<dimension>` returns the same (score, per-video
             list) pair, so its files read the same way.
  compbench  T2V-CompBench's per-category CSV `<model>_<category>_score.csv`: header
             name,prompt,...,Score, one row per video, and the tool's closing "score: ,<mean>" row
             (skipped). Scores as written (the MLLM categories are 1-5; the tool's model score maps
             them to (s-1)/4, a linear map that scales every effect by 1/4). The category is taken from
             the file name.
  judge      an LLM judge's ratings: CSV or JSONL with prompt (or id) and score in [0, 1], optional
             dimension (default "judge").
  table      any per-prompt table: CSV or JSONL with prompt (or id), score, optional dimension, and
             optionally train, infer, seed columns (then one file holds every cell).

A cell is named `TRAIN/INFER` or `TRAIN/INFER/SEED` (e.g. pe/pe, rewriter/pe/1, third/pe).
"""
from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from vlgap.errors import VlgapError
from vlgap.io_utils import jsonl_lines

FORMATS = ("auto", "vbench", "compbench", "judge", "table")
COMPBENCH_CATEGORIES = ("consistent_attr", "dynamic_attr", "spatial_relationships", "motion_binding",
                        "action_binding", "interaction", "numeracy")

# {dimension: {prompt: [per-video scores]}}
DimScores = dict[str, dict[str, list[float]]]


def _norm(prompt: str) -> str:
    return " ".join(str(prompt).split())


def _number(v: Any, where: str) -> float:
    if isinstance(v, bool):
        return float(v)
    try:
        x = float(v)
    except (TypeError, ValueError):
        raise VlgapError(f"{where}: score {v!r} is not a number") from None
    if not np.isfinite(x):
        raise VlgapError(f"{where}: score {v!r} is not finite")
    return x


def prompt_of_video(video_path: str) -> str:
    """VBench's sampling convention: `<prompt>-<index>.<ext>` -> prompt."""
    stem = Path(str(video_path)).name
    stem = re.sub(r"\.[A-Za-z0-9]{2,4}$", "", stem)
    return _norm(re.sub(r"-\d+$", "", stem))


def read_vbench(path: Path, data: Any) -> DimScores:
    if not isinstance(data, dict) or not data:
        raise VlgapError(f"{path.name}: expected VBench's {{dimension: [score, [videos]]}} object")
    out: DimScores = {}
    for dim, val in data.items():
        if not (isinstance(val, list) and len(val) == 2 and isinstance(val[1], list)):
            raise VlgapError(f"{path.name}: dimension {dim!r} is not [overall score, [per-video results]] "
                             "(VBench's *_eval_results.json layout)")
        per: dict[str, list[float]] = {}
        for j, e in enumerate(val[1]):
            where = f"{path.name} {dim} video {j + 1}"
            if not isinstance(e, dict) or "video_results" not in e or ("video_path" not in e and "prompt" not in e):
                raise VlgapError(f"{where}: needs video_path (or prompt) and video_results")
            prompt = _norm(e["prompt"]) if isinstance(e.get("prompt"), str) else prompt_of_video(e["video_path"])
            per.setdefault(prompt, []).append(_number(e["video_results"], f"{where} ({e.get('video_path', prompt)})"))
        if not per:
            raise VlgapError(f"{path.name}: dimension {dim!r} has no per-video results")
        out[str(dim)] = per
    return out


def _rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix.lower() in (".jsonl", ".json"):
        rows = []
        for n, rec in jsonl_lines(path):
            if not isinstance(rec, dict):
                raise VlgapError(f"{path.name} line {n}: expected an object")
            rows.append({**rec, "_line": n})
        return rows
    from vlgap.csv_files import read_csv  # a row with more fields than the header is refused by line

    return [{**r, "_line": n} for n, r in enumerate(read_csv(path, "score file")[1], start=2)]


def read_compbench(path: Path) -> DimScores:
    reader = list(csv.reader(path.read_text(encoding="utf-8").splitlines()))
    if not reader:
        raise VlgapError(f"{path.name}: empty CSV")
    head = [h.strip().lower() for h in reader[0]]
    if "name" not in head or head[-1] != "score":
        raise VlgapError(f"{path.name}: expected T2V-CompBench's header name,prompt,...,Score, got {reader[0]}")
    m = re.search(r"(" + "|".join(COMPBENCH_CATEGORIES) + r")_score$", path.stem)
    dim = m.group(1) if m else path.stem
    i_name, i_prompt = head.index("name"), head.index("prompt") if "prompt" in head else None
    per: dict[str, list[float]] = {}
    for n, row in enumerate(reader[1:], start=2):
        if not row or not any(c.strip() for c in row) or row[0].strip().lower().startswith("score"):
            continue  # the tool's closing "score: ,<mean>" row
        where = f"{path.name} row {n}"
        if len(row) != len(head):
            raise VlgapError(f"{where}: {len(row)} fields, header has {len(head)}")
        prompt = _norm(row[i_prompt]) if i_prompt is not None and row[i_prompt].strip() \
            else _norm(Path(row[i_name]).stem)
        per.setdefault(prompt, []).append(_number(row[-1], f"{where} ({row[i_name]})"))
    if not per:
        raise VlgapError(f"{path.name}: no scored videos")
    return {dim: per}


def read_table(path: Path, *, judge: bool = False) -> dict[tuple[str, str, int] | None, DimScores]:
    """{cell or None: {dimension: {prompt: [scores]}}}: cell from train/infer/seed columns when present."""
    out: dict[tuple[str, str, int] | None, DimScores] = {}
    rows = _rows(path)
    if not rows:
        raise VlgapError(f"{path.name}: no rows")
    for r in rows:
        where = f"{path.name} {'line' if path.suffix.lower() in ('.jsonl', '.json') else 'row'} {r['_line']}"
        prompt = r.get("prompt", r.get("id"))
        if prompt is None or not str(prompt).strip():
            raise VlgapError(f"{where}: needs a \"prompt\" (or \"id\") and a \"score\"")
        if "score" not in r:
            raise VlgapError(f"{where}: needs a \"score\" column")
        x = _number(r["score"], where)
        if judge and not 0.0 <= x <= 1.0:
            raise VlgapError(f"{where}: judge rating {x} is outside [0, 1]")
        cell = None
        if r.get("train") not in (None, "") or r.get("infer") not in (None, ""):
            if not r.get("train") or not r.get("infer"):
                raise VlgapError(f"{where}: give both train and infer (or neither)")
            cell = (str(r["train"]), str(r["infer"]), int(r.get("seed") or 0))
        dim = str(r.get("dimension") or ("judge" if judge else "score"))
        out.setdefault(cell, {}).setdefault(dim, {}).setdefault(_norm(str(prompt)), []).append(x)
    return out


def detect_format(path: Path) -> str:
    if path.suffix.lower() == ".json":
        from vlgap.json_files import read_json

        try:
            data = read_json(path, "score file")
        except VlgapError:
            return "table"  # a JSONL named .json (read as a table, whose reader names a bad line)
        if isinstance(data, dict) and all(isinstance(v, list) and len(v) == 2 for v in data.values()):
            return "vbench"
        raise VlgapError(f"{path.name}: a JSON file that is not VBench's *_eval_results.json layout; "
                         "use JSONL (one object per line) for per-prompt tables")
    if path.suffix.lower() == ".csv":
        first = path.read_text(encoding="utf-8").splitlines()[:1]
        head = [h.strip().lower() for h in next(csv.reader(first), [])] if first else []
        if "name" in head and head and head[-1] == "score" and "train" not in head:
            return "compbench"
    return "table"


def read_score_file(path: str | Path, fmt: str = "auto") -> dict[tuple[str, str, int] | None, DimScores]:
    path = Path(path)
    if fmt not in FORMATS:
        raise VlgapError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    from vlgap.paths import read_text_utf8

    read_text_utf8(path, "score file")  # a folder, a missing file, non-UTF-8 bytes: one line naming it
    fmt = detect_format(path) if fmt == "auto" else fmt
    if fmt == "vbench":
        from vlgap.json_files import read_json

        return {None: read_vbench(path, read_json(path, "score file"))}
    if fmt == "compbench":
        return {None: read_compbench(path)}
    return read_table(path, judge=fmt == "judge")


def parse_cell(name: str) -> tuple[str, str, int]:
    parts = name.strip().split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise VlgapError(f"cell {name!r}: write TRAIN/INFER or TRAIN/INFER/SEED, e.g. pe/pe or rewriter/pe/1")
    try:
        seed = int(parts[2]) if len(parts) == 3 else 0
    except ValueError:
        raise VlgapError(f"cell {name!r}: the seed {parts[2]!r} is not a whole number") from None
    return parts[0], parts[1], seed


def load_cells(specs: Sequence[str | tuple[str, str | Path]], fmt: str = "auto"
               ) -> dict[str, dict[tuple[str, str, int], dict[str, float]]]:
    """`specs`: "CELL=PATH" (one tool output per cell) or "PATH" (a table with train/infer columns).
    Returns {dimension: {(train, infer, seed): {prompt: mean over its videos}}}."""
    merged: dict[str, dict[tuple[str, str, int], dict[str, list[float]]]] = {}
    # the spec (index, file) each (dimension, cell) was read from: files may add dimensions to a cell, never
    # a second set of scores to one dimension (which would be pooled into one mean per prompt)
    source: dict[tuple[str, tuple[str, str, int]], tuple[int, str]] = {}
    for i, spec in enumerate(specs):
        if isinstance(spec, tuple):
            cell_name, path = spec
        elif "=" in str(spec):
            cell_name, path = str(spec).split("=", 1)
        else:
            cell_name, path = None, spec
        given = parse_cell(cell_name) if cell_name is not None else None
        for cell, dims in read_score_file(path, fmt).items():
            cell = cell or given
            if cell is None:
                raise VlgapError(f"{Path(path).name}: name its cell (pe/pe={path}) or give train and infer columns")
            for dim, per in dims.items():
                first = source.setdefault((dim, cell), (i, str(path)))
                if first[0] != i:
                    raise VlgapError(f"cell {cell[0]}/{cell[1]} (seed {cell[2]}) is given twice for {dim!r}, by "
                                     f"{first[1]} and {path}: give one file per cell and dimension (a second seed is "
                                     "TRAIN/INFER/SEED, e.g. pe/pe/1)")
                target = merged.setdefault(dim, {}).setdefault(cell, {})
                for prompt, xs in per.items():
                    target.setdefault(prompt, []).extend(xs)
    if not merged:
        raise VlgapError("no scores read; give CELL=FILE for each cell, e.g. pe/pe=pe_pe_eval_results.json")
    return {dim: {cell: {p: float(np.mean(xs)) for p, xs in per.items()} for cell, per in cells.items()}
            for dim, cells in merged.items()}


def aligned(cells: Mapping[tuple[str, str, int], Mapping[str, float]], dim: str
            ) -> tuple[list[str], dict[tuple[str, str, int], list[float]]]:
    """The same prompts in every cell, in one order; a prompt missing from a cell is an error naming both."""
    order = list(next(iter(cells.values())))
    every = set(order)
    for per in cells.values():
        every |= set(per)
    for cell, per in sorted(cells.items()):
        missing = sorted(every - set(per))
        if missing:
            raise VlgapError(f"dimension {dim!r}: cell {cell[0]}/{cell[1]} (seed {cell[2]}) has no score for prompt "
                             f"{missing[0][:80]!r} ({len(missing)} missing); every cell needs the same prompts")
    order += sorted(every - set(order))
    return order, {cell: [per[p] for p in order] for cell, per in cells.items()}


def read_text_file(path: str | Path) -> dict[str, str]:
    """{input prompt or record id: six-part text} from a precomputed-rewrites JSONL (input, output, model)
    or an exported caption JSONL (`vlgap cape export`: caption, source_caption)."""
    from vlgap.cape.operators import _six_or_invalid

    path = Path(path)
    if not path.is_file():
        raise VlgapError(f"text file {str(path)!r} does not exist")
    out = {}
    for r in _rows(path):
        where = f"{path.name} line {r['_line']}"
        if "output" in r:
            text = _six_or_invalid(r["output"], where)["text"]
            key = r.get("input", r["_line"])
        elif isinstance(r.get("caption"), str):
            text, key = r["caption"], r.get("source_caption", r.get("id", r["_line"]))
        else:
            raise VlgapError(f"{where}: needs \"output\" (rewrites: input, output, model) or \"caption\" "
                             "(an exported caption file)")
        out[_norm(str(key))] = text
    if not out:
        raise VlgapError(f"text file {str(path)!r} has no records")
    return out


#: VBench names a video after the first 180 characters of its prompt
VBENCH_PROMPT_CHARS = 180


def _with_truncated_keys(table: Mapping[str, str]) -> dict[str, str]:
    """The table, also reachable by each prompt's first 180 characters (VBench's file names), where that
    prefix is unambiguous."""
    out = dict(table)
    prefixes: dict[str, list[str]] = {}
    for k in table:
        if len(k) > VBENCH_PROMPT_CHARS:
            prefixes.setdefault(_norm(k[:VBENCH_PROMPT_CHARS]), []).append(k)
    for pre, keys in prefixes.items():
        if len(keys) == 1 and pre not in out:
            out[pre] = table[keys[0]]
    return out


def default_embed(encoder: str = "minilm") -> Callable[[Sequence[str]], np.ndarray]:
    from vlgap.stats.text_sets import embed_texts, load_text_encoder

    box: list[Any] = []

    def embed(texts: Sequence[str]) -> np.ndarray:
        if not box:
            box.append(load_text_encoder(encoder))
        return embed_texts(list(texts), box[0]).array

    return embed


def analyse_scores(cells_by_dim: Mapping[str, Mapping[tuple[str, str, int], Mapping[str, float]]], *,
                   prompt_rewrites: Mapping[str, Mapping[str, str]] | None = None,
                   captions: Mapping[str, Mapping[str, str]] | None = None,
                   embed: Callable[[Sequence[str]], np.ndarray] | None = None, high: str = "pe",
                   low: str = "rewriter", third: str = "third", n_bootstrap: int = 2000,
                   n_permutations: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Per dimension: the 2x2 (+ third operator) and the controls; once: MMD^2 between every inference
    operator's prompt rewrites and every training caption set, when texts are given."""
    from vlgap.cape.analysis import two_by_two
    from vlgap.cape.controls import controls

    emb_cache: dict[str, np.ndarray] = {}
    if (prompt_rewrites or captions) and embed is None:
        embed = default_embed()

    def emb(texts: Sequence[str]) -> np.ndarray:
        todo = [t for t in dict.fromkeys(texts) if t not in emb_cache]
        if todo:
            emb_cache.update(zip(todo, np.asarray(embed(todo), float)))  # type: ignore[misc]
        return np.stack([emb_cache[t] for t in texts])

    cap_emb = {op: emb(list(texts.values())) for op, texts in (captions or {}).items()}
    out: dict[str, Any] = {"dimensions": {}, "mmd": {}}
    for dim, cells in cells_by_dim.items():
        prompts, scores = aligned(cells, dim)
        res = two_by_two(scores, high=high, low=low, third=third, n_bootstrap=n_bootstrap,
                         n_permutations=n_permutations, seed=seed)
        pr_emb = None
        if prompt_rewrites and cap_emb:
            pr_emb = {}
            for op, table in prompt_rewrites.items():
                table = _with_truncated_keys(table)
                missing = [p for p in prompts if p not in table]
                if missing:
                    raise VlgapError(f"prompt rewrites of {op!r} lack scored prompt {missing[0][:80]!r} "
                                     f"({len(missing)} missing in dimension {dim!r})")
                pr_emb[op] = emb([table[p] for p in prompts])
        res["controls"] = controls(scores, prompt_rewrites=pr_emb, captions=cap_emb or None,
                                   n_permutations=n_permutations, n_bootstrap=n_bootstrap, seed=seed)
        res["prompts"] = prompts
        out["dimensions"][dim] = res
    if prompt_rewrites and cap_emb:
        from vlgap.stats.mmd import mmd_test

        for i, table in prompt_rewrites.items():
            for t, c in cap_emb.items():
                r = mmd_test(emb(list(table.values())), c, n_permutations=min(n_permutations, 1000),
                             n_bootstrap=min(n_bootstrap, 1000), seed=seed)
                out["mmd"][f"user({i}) vs dense({t})"] = {"mmd2_unbiased": r.mmd2_unbiased, "p_value": r.p_value,
                                                          "ci": r.ci, "n_a": r.n_a, "n_b": r.n_b}
    return out


def scores_markdown(r: Mapping[str, Any]) -> str:
    from vlgap.cape.analysis import verdict
    from vlgap.cape.controls import controls_markdown

    lines = ["## CAPE-T2V 2x2 from benchmark scores", "",
             "Per dimension: cell means over prompts (videos of a prompt and generator seeds averaged first); "
             "effects paired over prompts, 95% bootstrap interval, sign-flip p.", "",
             "| dimension | n | " + " | ".join(["rw/rw", "rw/pe", "pe/rw", "pe/pe", "third/pe"]) +
             " | train pe - rw | infer pe - rw | interaction (matched - crossed) | third/pe - pe/pe |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for dim, d in r["dimensions"].items():
        cm = {(c["train"], c["infer"]): c["mean"] for c in d["cells"]}
        cells = [cm.get(k) for k in (("rewriter", "rewriter"), ("rewriter", "pe"), ("pe", "rewriter"), ("pe", "pe"),
                                     ("third", "pe"))]
        third = (d.get("third_operator") or {}).get("third/pe - pe/pe")
        lines.append(f"| {dim} | {d['n_items']} | " + " | ".join("-" if v is None else f"{v:.4f}" for v in cells)
                     + f" | {verdict(d['main_effects']['training_captions'])} | "
                       f"{verdict(d['main_effects']['inference_rewrites'])} | {verdict(d['interaction'])} | "
                       f"{verdict(third) if third else '-'} |")
    for dim, d in r["dimensions"].items():
        lines += ["", controls_markdown(d["controls"], f"Controls: {dim}")]
    if r.get("mmd"):
        lines += ["", "MMD^2 (embedding of the given texts, RBF, not length-matched; 95% bootstrap CI, permutation p):",
                  "", "| pair | MMD^2 | 95% CI | p | n |", "|---|---|---|---|---|"]
        for k, m in r["mmd"].items():
            ci = "-" if not m["ci"] else f"[{m['ci'][0]:.4f}, {m['ci'][1]:.4f}]"
            lines.append(f"| {k} | {m['mmd2_unbiased']:.4f} | {ci} | {m['p_value']:.3g} | {m['n_a']}/{m['n_b']} |")
    return "\n".join(lines) + "\n"
