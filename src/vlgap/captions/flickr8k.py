"""Flickr8k's official human-judgment files read as the CLIPScore / SPICE protocol reads them.

`Flickr8k_text/` (the Flickr8k text archive) holds `ExpertAnnotations.txt` (image, caption id, three
expert ratings 1-4), `CrowdFlowerAnnotations.txt` (image, caption id, share of "yes", yes votes, no
votes) and `Flickr8k.token.txt` (caption id -> caption, five per image). As jmhessel/clipscore's
flickr8k_example prepares them (after the SPICE paper):

  - Expert: a candidate that is one of its image's five references is left out (counted); each of
    the three expert ratings is its own row (the candidate repeated); references: all five.
  - CrowdFlower: rating = share of yes votes; references: the image's five minus every rated
    candidate among them.
  - captions with their whitespace collapsed; a NaN rating is left out (counted).

Items are the picture file stems (`1000268201_693b08cb0e`), so `--images Flicker8k_Dataset/` finds
the pictures by the default naming rule.
"""
from __future__ import annotations

import math
from pathlib import Path

from vlgap.errors import VlgapError

FILES = {"ExpertAnnotations.txt": "expert", "CrowdFlowerAnnotations.txt": "crowdflower"}
TOKEN_FILE = "Flickr8k.token.txt"


def is_flickr8k(path) -> bool:
    return isinstance(path, (str, Path)) and Path(path).name in FILES


def _lines(path: Path) -> list[list[str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise VlgapError(f"cannot read {path}: {err.strerror or err} (Flickr8k's text archive holds it)") from None
    return [line.rstrip("\n").split("\t") for line in text.splitlines() if line.strip()]


def read_flickr8k(path) -> tuple[list[dict[str, str]], dict[str, list[str]], dict[str, int | str]]:
    """(rows {item, caption, rating}, references {item: [captions]}, report) of ExpertAnnotations.txt or
    CrowdFlowerAnnotations.txt, with Flickr8k.token.txt from the same folder (see the module docstring)."""
    path = Path(path)
    kind = FILES[path.name]
    captions: dict[str, str] = {}
    refs: dict[str, list[str]] = {}
    for n, parts in enumerate(_lines(path.parent / TOKEN_FILE)):
        if len(parts) != 2 or "#" not in parts[0]:
            raise VlgapError(f"{path.parent / TOKEN_FILE}, line {n + 1}: expected '<image>.jpg#<k>\\t<caption>'")
        captions[parts[0]] = " ".join(parts[1].split())
        refs.setdefault(parts[0].split("#")[0].split(".")[0], []).append(captions[parts[0]])
    rows: list[dict[str, str]] = []
    skipped_refs = skipped_nan = 0
    rated: dict[str, set[str]] = {}
    for n, parts in enumerate(_lines(path)):
        if len(parts) != 5:
            raise VlgapError(f"{path}, line {n + 1}: expected 5 tab-separated columns, got {len(parts)}")
        image, caption_id = parts[0], parts[1]
        item = image.split(".")[0]
        if caption_id not in captions:
            raise VlgapError(f"{path}, line {n + 1}: caption {caption_id!r} is not in {TOKEN_FILE}")
        caption = captions[caption_id]
        try:
            values = [float(v) for v in (parts[2:] if kind == "expert" else parts[2:3])]
        except ValueError:
            raise VlgapError(f"{path}, line {n + 1}: ratings {parts[2:]} are not numbers") from None
        if kind == "expert" and caption in refs.get(item, []):
            skipped_refs += 1  # SPICE's protocol: a reference is not rated against itself
            continue
        rated.setdefault(item, set()).add(caption)
        for value in values:
            if math.isnan(value):
                skipped_nan += 1
                continue
            rows.append({"item": item, "caption": caption, "rating": repr(value)})
    if kind == "crowdflower":
        refs = {item: [c for c in caps if c not in rated.get(item, ())] for item, caps in refs.items()}
    report = {"protocol": f"Flickr8k-{'Expert' if kind == 'expert' else 'CrowdFlower'} as jmhessel/clipscore's "
                          "flickr8k_example (one row per rating)",
              "candidates_in_references_left_out": skipped_refs, "nan_ratings_left_out": skipped_nan,
              "reported_as": "kendall_tau_c" if kind == "expert" else "kendall_tau_b"}
    if not rows:
        raise VlgapError(f"{path}: no judgment rows")
    return rows, refs, report
