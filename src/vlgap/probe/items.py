"""Which items a sweep can use, said before extraction and recorded after it.

Before any feature is extracted (and before the run folder records anything), `plan_items` asks every
item what the grid needs of it: max n_f frames (the media's frame count, `vlgap.data.frame_counts`;
a still image is one frame by declaration and never short) and max n_c captions (the manifest), and
whether its media can be read at all. Each problem names the item, what it has, what is needed and
the n_f or n_c values it cannot reach. Without --skip-bad the first one refuses the run in one line
(the message a fresh extraction would give, with the count of the others); with it, every item that
cannot reach some cell is listed by reason.

One item set for every cell. Mutual k-NN scores, and their chance level k/(N-1), depend on N and on
which items are compared; the cells of a sweep share their bootstrap resamples and permutations, and
the scaling law fitted across them assumes only n_f and n_c change from cell to cell. So an item
that cannot reach one cell is left out of every cell, said per item and reason, with the number of
items each cell could have used on its own (`per_cell`). The way to keep such items is a smaller
grid (a sweep of its own), or --allow-repeated-frames for short videos.

After extraction, `settle` checks the plan against the feature sets (the truth: a decoder may find
what a container's header did not say): the items in every feature set are kept, and an item missing
that the plan did not foresee is listed with the reason extraction recorded. `ItemPlan.to_dict` is
what sweep.json ("items") and dropped_items.jsonl hold; `items_html` is the report's section.
"""
from __future__ import annotations

import html
from dataclasses import asdict, dataclass, field
from typing import Any

from vlgap.data.manifest import Manifest
from vlgap.errors import VlgapError

#: the reasons an item can miss cells, in the order they are shown
REASONS = {
    "unreadable": "unreadable media",
    "frames": "too few frames",
    "sampling": "frame sampling does not fit",
    "captions": "too few captions",
    "extraction": "refused during extraction",
}

ITEM_SET_WHY = ("every cell uses the same items: mutual k-NN scores and their chance level k/(N-1) depend on N "
                "and on which items are compared, the cells share their bootstrap resamples and permutations, "
                "and the scaling law across cells assumes that only n_f and n_c change; an item that cannot "
                "reach one cell is therefore left out of every cell (to keep it: a smaller grid, or "
                "--allow-repeated-frames for short videos)")

#: items named per reason in the console before the rest is counted (the JSON lists every one)
MAX_SHOWN = 8


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _values(vs) -> str:
    return ",".join(map(str, vs))


@dataclass(frozen=True)
class Problem:
    """One item that cannot reach some values of one side: why (`kind`, `reason`: what it has and what
    is needed), which values (`values`: n_f for vision, n_c for text; `frame_sampling`: only under that
    strategy), and the one-line error a run without --skip-bad gives (`message`)."""

    id: str
    kind: str
    side: str
    values: tuple[int, ...]
    reason: str
    message: str
    frame_sampling: str | None = None
    encoder: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["values"] = list(self.values)
        out["param"] = "n_f" if self.side == "vision" else "n_c"
        del out["message"]
        return {k: v for k, v in out.items() if v is not None}

    def reaches(self, sampling: str, n_f: int, n_c: int) -> bool:
        if self.frame_sampling is not None and self.frame_sampling != sampling:
            return True
        return (n_f if self.side == "vision" else n_c) not in self.values

    def cells(self) -> str:
        """The cells it cannot reach, in words: "n_f=4,8 (every n_c)"."""
        param, other = ("n_f", "n_c") if self.side == "vision" else ("n_c", "n_f")
        where = f" under {self.frame_sampling}" if self.frame_sampling else ""
        return f"{param}={_values(self.values)}{where} (every {other})"


@dataclass
class ItemPlan:
    """What the sweep can use: every item (`ids`, manifest order), the grid, and each problem."""

    ids: list[str]
    n_f: list[int]
    n_c: list[int]
    problems: list[Problem] = field(default_factory=list)
    #: videos kept with repeated frames (--allow-repeated-frames): [{"id", "frames", "n_f": [...]}]
    repeated: list[dict] = field(default_factory=list)
    samplings: list[str] = field(default_factory=lambda: ["uniform"])

    @property
    def dropped(self) -> list[str]:
        bad = {p.id for p in self.problems}
        return [i for i in self.ids if i in bad]

    @property
    def kept(self) -> list[str]:
        bad = {p.id for p in self.problems}
        return [i for i in self.ids if i not in bad]

    def by_item(self) -> dict[str, list[Problem]]:
        out: dict[str, list[Problem]] = {i: [] for i in self.dropped}
        for p in self.problems:
            out[p.id].append(p)
        return out

    def by_reason(self) -> dict[str, list[Problem]]:
        out: dict[str, list[Problem]] = {}
        for kind in REASONS:
            got = [p for p in self.problems if p.kind == kind]
            if got:
                out[kind] = got
        return out

    def per_cell(self) -> list[dict[str, Any]]:
        """The items each cell could use if it had its own item set (what one item set gives up)."""
        out = []
        for s in self.samplings:
            for nf in self.n_f:
                for nc in self.n_c:
                    bad = {p.id for p in self.problems if not p.reaches(s, nf, nc)}
                    row = {"n_f": nf, "n_c": nc, "n": sum(i not in bad for i in self.ids)}
                    out.append({"frame_sampling": s, **row} if len(self.samplings) > 1 else row)
        return out

    def summary(self, skip: str | None = None) -> str:
        """The items left out, counted by reason ("2 too few frames, 1 unreadable media")."""
        counts = {what: {p.id for p in self.problems if p.kind == kind and p.id != skip}
                  for kind, what in REASONS.items()}
        return ", ".join(f"{len(ids)} {what}" for what, ids in counts.items() if ids) or "none left out"

    def refusal(self) -> str | None:
        """The one-line error of a run without --skip-bad: the first item in manifest order (as a fresh
        extraction stops at it), with the count of the others by reason."""
        if not self.problems:
            return None
        position = {i: k for k, i in enumerate(self.ids)}
        first = min(self.problems, key=lambda p: (position.get(p.id, len(position)), p.side != "vision"))
        others = [i for i in self.dropped if i != first.id]
        if not others:
            return first.message
        return (f"{first.message}; {_plural(len(others), 'more item')} cannot reach every cell either "
                f"({self.summary(skip=first.id)})")

    def dropped_records(self) -> list[dict[str, Any]]:
        """One record per item left out (dropped_items.jsonl): its reasons and the cells each cannot reach."""
        out = []
        for item_id, probs in self.by_item().items():
            out.append({"id": item_id, "reason": "; ".join(f"{REASONS[p.kind]}: {p.reason}" for p in probs),
                        "cannot_reach": "; ".join(p.cells() for p in probs),
                        "left_out_of": "every cell (one item set)", "problems": [p.to_dict() for p in probs]})
        return out

    def to_dict(self) -> dict[str, Any]:
        """What sweep.json records as "items"."""
        return {"item_set": "common", "why": ITEM_SET_WHY, "n_items": len(self.ids), "n_kept": len(self.kept),
                "n_dropped": len(self.dropped),
                "by_reason": {kind: sorted({p.id for p in ps}, key=self.ids.index)
                              for kind, ps in self.by_reason().items()},
                "dropped": self.dropped_records(), "per_cell": self.per_cell(),
                **({"repeated_frames": self.repeated} if self.repeated else {})}

    def lines(self) -> list[str]:
        """The console's account (empty when every item reaches every cell and none repeats frames)."""
        out = []
        if self.problems:
            out.append(f"items: {len(self.kept)} of {len(self.ids)} reach every cell (n_f up to {max(self.n_f)}, "
                       f"n_c up to {max(self.n_c)}); {_plural(len(self.dropped), 'item')} left out of every cell, "
                       "one item set for all cells (docs/probe.md, Items):")
            for kind, probs in self.by_reason().items():
                shown = [f"{p.id!r} ({p.reason})" for p in probs[:MAX_SHOWN]]
                more = f", and {len(probs) - MAX_SHOWN} more" if len(probs) > MAX_SHOWN else ""
                out.append(f"  {REASONS[kind]}: " + ", ".join(shown) + more)
            cells = self.per_cell()
            if any(c["n"] != len(self.kept) for c in cells):
                rows: dict[str, list[str]] = {}
                for c in cells:
                    label = (f"{c['frame_sampling']} " if "frame_sampling" in c else "") + f"n_f={c['n_f']}"
                    rows.setdefault(label, []).append(str(c["n"]))
                out.append(f"  items each cell could use on its own (n_c = {', '.join(map(str, self.n_c))}): "
                           + "; ".join(f"{label}: {', '.join(ns)}" for label, ns in rows.items()))
        if self.repeated:
            out.append(f"items: {_plural(len(self.repeated), 'video')} with fewer frames than n_f kept with repeated "
                       "frames (--allow-repeated-frames): " + ", ".join(
                           f"{r['id']!r} ({_plural(r['frames'], 'frame')} < n_f={_values(r['n_f'])})"
                           for r in self.repeated[:MAX_SHOWN])
                       + (f", and {len(self.repeated) - MAX_SHOWN} more" if len(self.repeated) > MAX_SHOWN else ""))
        return out


def _caption_problem(item, n_c: list[int], draws: list) -> Problem | None:
    from vlgap.data.sampling import draw_captions
    from vlgap.errors import BadItemError
    from vlgap.features.chunk_steps import bad_item_message

    failed, first = [], None
    for v in n_c:
        for d in draws:
            try:
                if not item.captions:
                    raise BadItemError(item.id, "has no captions")
                draw_captions(item.captions, v, item.id, d)
            except VlgapError as err:
                failed.append(v)
                first = first or str(err)
                break
    if not failed:
        return None
    have = len(item.captions)
    if "empty caption" in first:
        reason = "an empty caption"
    elif not have:
        reason = "no captions"
    else:
        reason = f"{_plural(have, 'caption')}, fewer than n_c={_values(failed)}"
    return Problem(item.id, "captions", "text", tuple(failed), reason,
                   bad_item_message({"id": item.id, "reason": first}))


def _stride_problems(item_id: str, frames: int, strategy: str, n_f: list[int], allow_repeated_frames: bool
                     ) -> list[Problem]:
    """stride:S places n_f frames S apart: a run longer than the video cannot be placed (extraction
    refuses the item: `vlgap.data.sampling.strided_indices`). Shorter videos than n_f are the frames
    rule's, unless --allow-repeated-frames keeps them (stride cannot repeat frames)."""
    from vlgap.data.sampling import strided_indices
    from vlgap.features.chunk_steps import bad_item_message

    step = int(strategy.split(":", 1)[1])
    wide = [v for v in n_f if (v - 1) * step + 1 > frames and (allow_repeated_frames or v <= frames)]
    if not wide:
        return []
    try:
        strided_indices(frames, wide[0], step, item_id)
    except VlgapError as err:
        return [Problem(item_id, "sampling", "vision", tuple(wide),
                        f"{_plural(frames, 'frame')}, fewer than {strategy} with n_f={_values(wide)} spans",
                        bad_item_message({"id": item_id, "reason": str(err)}), frame_sampling=strategy)]
    return []


def plan_items(man: Manifest, n_f: list[int], n_c: list[int], *, frame_sampling: list[str] | None = None,
               caption_draws: int = 1, seed: int = 0, allow_repeated_frames: bool = False,
               cache_dir=None, progress: bool = False) -> ItemPlan:
    """Every item against the grid, before extraction (see the module's text)."""
    from vlgap.data.frame_counts import frame_counts
    from vlgap.features.chunk_steps import bad_item_message, repeated_frames_message

    n_f, n_c = sorted(set(n_f)), sorted(set(n_c))
    samplings = list(frame_sampling or ["uniform"])
    draws = [None] if caption_draws <= 1 else [(seed, r) for r in range(caption_draws)]
    counts = frame_counts(man, max(n_f), cache_dir, progress=progress)
    plan = ItemPlan([it.id for it in man.items], n_f, n_c, samplings=samplings)
    for item in man.items:
        got = counts[item.id]
        if got.reason is not None:
            plan.problems.append(Problem(item.id, "unreadable", "vision", tuple(n_f), got.reason,
                                         bad_item_message({"id": item.id, "reason": got.reason})))
        elif item.kind != "image":
            frames = int(got.frames)
            short = [v for v in n_f if frames < v]
            if short and allow_repeated_frames:
                plan.repeated.append({"id": item.id, "frames": frames, "n_f": short})
            elif short:
                plan.problems.append(Problem(item.id, "frames", "vision", tuple(short),
                                             f"{_plural(frames, 'frame')}, fewer than n_f={_values(short)}",
                                             repeated_frames_message(item.id, frames, short[0])))
            for s in samplings:
                if s.startswith("stride:"):
                    plan.problems += _stride_problems(item.id, frames, s, n_f, allow_repeated_frames)
        cap = _caption_problem(item, n_c, draws)
        if cap is not None:
            plan.problems.append(cap)
    return plan


def check_sweep(cfg, man: Manifest, encoders: dict[str, Any] | None = None, *, ray: str | bool | None = None,
                progress: bool = False) -> ItemPlan:
    """Every check of a sweep (`cfg`: a `vlgap.probe.sweep.SweepConfig`) that needs no model, run before
    its folder records anything, so a refused command never blocks its corrected rerun: k against the
    manifest, the device, what Ray cannot do yet, the encoders' names (a given encoder object needs
    none), and every item against the grid (without --skip-bad the first item that cannot reach a cell
    refuses the run). Returns the item plan."""
    from vlgap.encoders.registry import check_encoder_name
    from vlgap.runtime import parse_device

    if cfg.k >= len(man) - 1:
        raise VlgapError(f"k={cfg.k} needs more than k+1 items; the manifest has {len(man)}")
    parse_device(cfg.device, spread=True, check=not ray)  # a Ray driver may have no GPU of its own
    if ray and cfg.caption_draws > 1:
        raise VlgapError("--caption-draws above 1 runs in this process only for now: drop --ray, or use one draw")
    for name in (*cfg.vision, *cfg.text):
        if name not in (encoders or {}):
            check_encoder_name(name, cfg.cache_dir)
    plan = plan_items(man, cfg.n_frames, cfg.n_captions, frame_sampling=cfg.frame_sampling,
                      caption_draws=cfg.caption_draws, seed=cfg.seed, allow_repeated_frames=cfg.allow_repeated_frames,
                      cache_dir=cfg.cache_dir, progress=progress)
    refusal = plan.refusal()
    if refusal and not cfg.skip_bad:
        raise VlgapError(refusal)
    if len(plan.kept) <= cfg.k + 1:
        raise VlgapError(f"only {len(plan.kept)} of {len(man)} items reach every cell of this grid "
                         f"({plan.summary()}); k={cfg.k} needs more than k+1: lower --k or the largest --n-frames / "
                         "--n-captions, or fix the items")
    return plan


def settle(plan: ItemPlan, sets: list[tuple[str, str, str, int, Any]]) -> tuple[ItemPlan, list[str]]:
    """The plan checked against the extracted feature sets, `sets` = [(side, encoder, param, value,
    FeatureSet)]: the items in every set are kept (a problem the plan foresaw for one of them is
    dropped), an item missing from some set that the plan did not foresee gets the reason recorded with
    the set's bad items. Returns the settled plan and the ids kept, in manifest order."""
    present = set(plan.ids)
    for *_, fs in sets:
        present &= set(fs.ids)
    foreseen = {p.id for p in plan.problems}
    problems = [p for p in plan.problems if p.id not in present]
    found: dict[tuple[str, str, str, str, str], list[int]] = {}
    for side, encoder, param, value, fs in sets:
        reasons = {b["id"]: str(b.get("reason", "")) for b in fs.record.get("bad_items", [])}
        have = set(fs.ids)
        for item_id in plan.ids:
            if item_id not in have and item_id not in foreseen:
                why = reasons.get(item_id) or f"missing from the features of {encoder} {param}={value}"
                found.setdefault((item_id, side, encoder, param, why), []).append(value)
    for (item_id, side, encoder, param, why), values in found.items():
        problems.append(Problem(item_id, "extraction", side, tuple(sorted(set(values))), f"{encoder}: {why}",
                                f"item {item_id!r}: {why}", encoder=encoder))
    settled = ItemPlan(plan.ids, plan.n_f, plan.n_c, problems,
                       [r for r in plan.repeated if r["id"] in present], plan.samplings)
    return settled, settled.kept


def items_html(items: dict[str, Any] | None) -> str:
    """The report's account of the items (sweep.json "items"): N kept and left out, each item left out
    with its reasons and the cells it cannot reach, and what each cell could have used on its own."""
    if not items:
        return ""
    n, kept, dropped = items.get("n_items"), items.get("n_kept"), items.get("n_dropped")
    parts = [f"<h2>Items</h2><p>{kept} of {n} items of the manifest in every cell"
             + (f"; {dropped} left out of every cell." if dropped else ".") + "</p>"]
    if dropped:
        parts.append(f"<p>Why one item set for all cells: {html.escape(items.get('why', ITEM_SET_WHY))}.</p>")
        rows = []
        for rec in items.get("dropped", []):
            for p in rec.get("problems", []):
                other = "n_c" if p.get("param") == "n_f" else "n_f"
                where = f" under {p['frame_sampling']}" if p.get("frame_sampling") else ""
                rows.append([REASONS.get(p.get("kind"), p.get("kind")), rec["id"], p.get("reason", ""),
                             f"{p.get('param')}={_values(p.get('values', []))}{where} (every {other})"])
        rows.sort(key=lambda r: list(REASONS.values()).index(r[0]) if r[0] in REASONS.values() else len(REASONS))
        parts.append("<table><tr>" + "".join(f"<th>{h}</th>" for h in
                                             ("reason", "item", "has / needs", "cannot reach")) + "</tr>"
                     + "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows)
                     + "</table>")
        cells = items.get("per_cell") or []
        if cells:
            parts.append("<p>Items each cell could use with an item set of its own: "
                         + html.escape(", ".join((f"{c['frame_sampling']} " if "frame_sampling" in c else "")
                                                 + f"n_f={c['n_f']} n_c={c['n_c']}: {c['n']}" for c in cells))
                         + ".</p>")
    if items.get("repeated_frames"):
        rep = items["repeated_frames"]
        parts.append("<p>Kept with repeated frames (--allow-repeated-frames): " + html.escape(", ".join(
            f"{r['id']} ({_plural(r['frames'], 'frame')} < n_f={_values(r['n_f'])})" for r in rep)) + ".</p>")
    return "".join(parts)
