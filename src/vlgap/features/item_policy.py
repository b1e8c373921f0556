"""Degenerate items (undecodable; videos with fewer frames than n_f) under a run's flags: `--skip-bad` and
`--allow-repeated-frames` applied to what an entry holds, cached or fresh, so a cached result answers
exactly as a fresh run would (the policy `vlgap.features.extract` applies on every use).
"""
from __future__ import annotations

from vlgap.data.manifest import Item
from vlgap.errors import VlgapError
from vlgap.features.chunk_steps import bad_item_message, repeated_frames_message
from vlgap.features.store import FeatureSet
from vlgap.progress import stderr_console


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _repeated_by_item(rows: list[dict]) -> dict[str, tuple[int, list[int]]]:
    """{item id: (its frame count, the n_f values that repeat its frames)}, in first-seen order."""
    out: dict[str, tuple[int, list[int]]] = {}
    for r in rows:
        frames, vs = out.setdefault(r["id"], (int(r["frames"]), []))
        if r["n_f"] not in vs:
            vs.append(r["n_f"])
    return {i: (f, sorted(vs)) for i, (f, vs) in out.items()}



# -- degenerate items: the flags applied to what an entry holds (cached or fresh) -------------------

def repeated_items(fs: FeatureSet, kinds: dict[str, str]) -> list[dict]:
    """The entry's kept videos with fewer frames than its n_f: [{"id", "frames", "n_f"}]. Entries written
    before this list existed are read from their frame indices (fewer distinct frames than n_f; the
    last sampled index is the last frame)."""
    rec = fs.record
    if "repeated_frames" in rec:
        return list(rec["repeated_frames"])
    out = []
    sampling = rec.get("sampling") or {}
    n_f = sampling.get("n_f")
    for item_id, idx in (sampling.get("frame_indices") or {}).items():
        if item_id in fs.ids and kinds.get(item_id, "video") != "image" and len(set(idx)) < len(idx):
            out.append({"id": item_id, "frames": int(max(idx)) + 1, "n_f": int(n_f or len(idx))})
    return out


def item_problems(bad: list[dict], repeated: list[dict], value: int, position: dict[str, int], skip_bad: bool,
                  allow_repeated_frames: bool) -> list[tuple[int, int, str]]:
    """(item position, value, the one-line error a fresh run gives) for each item these flags refuse."""
    out = []
    if not skip_bad:
        out += [(position.get(b["id"], len(position)), value, bad_item_message(b)) for b in bad]
        if not allow_repeated_frames:
            out += [(position.get(r["id"], len(position)), value,
                     repeated_frames_message(r["id"], r["frames"], r["n_f"])) for r in repeated]
    return out


def _check_items(features: dict[int, FeatureSet], items: list[Item], kinds: dict[str, str], skip_bad: bool,
                 allow_repeated_frames: bool) -> None:
    position = {it.id: i for i, it in enumerate(items)}
    problems = []
    for v, fs in features.items():
        problems += item_problems(fs.record.get("bad_items", []), repeated_items(fs, kinds), v, position, skip_bad,
                                  allow_repeated_frames)
    if problems:
        raise VlgapError(min(problems)[2])  # the first item in manifest order, as a fresh run stops at it


def apply_item_policy(fs: FeatureSet, kinds: dict[str, str], skip_bad: bool, allow_repeated_frames: bool) -> FeatureSet:
    """The entry as this run's flags see it (after `_check_items` has refused what they refuse):
    with --allow-repeated-frames, short videos are kept and listed in record["repeated_frames"];
    with --skip-bad alone they are left out and listed in record["bad_items"]."""
    repeated = repeated_items(fs, kinds)
    record = dict(fs.record)
    if allow_repeated_frames or not repeated:
        record["repeated_frames"] = repeated
        return FeatureSet(fs.layers, fs.ids, record, fs.path)
    short = _repeated_by_item(repeated)
    record["repeated_frames"] = []
    record["bad_items"] = list(record.get("bad_items", [])) + [
        {"id": i, "reason": f"its video has {_count(f, 'frame')}, fewer than n_f={','.join(map(str, vs))} "
                            "(frames would repeat)"}
        for i, (f, vs) in short.items()]
    kept = fs.subset([i for i in fs.ids if i not in short])
    return FeatureSet(kept.layers, kept.ids, record, fs.path)


#: per-item warning lines printed before the rest is summarised (the record lists every item)
MAX_WARNING_LINES = 20


def _warn_repeated(rows: list[dict]) -> None:
    from rich.markup import escape

    items = _repeated_by_item(rows)
    for k, (item_id, (frames, vs)) in enumerate(items.items()):
        if k == MAX_WARNING_LINES:
            stderr_console.print(f"[yellow]warning:[/] ... and {len(items) - k} more items with repeated frames "
                                 "(all listed in record.json as repeated_frames)", highlight=False, soft_wrap=True)
            break
        stderr_console.print(f"[yellow]warning:[/] item {escape(repr(item_id))}: its video has "
                             f"{_count(frames, 'frame')}, fewer than n_f={','.join(map(str, vs))}: frames repeat "
                             "(kept by --allow-repeated-frames)",
                             highlight=False, soft_wrap=True)
