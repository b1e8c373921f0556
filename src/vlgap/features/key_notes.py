"""Lines about cache keys, said before computing: which weights identity keys an extraction
(`_weights_identity`, loading the model first when only loading can tell), and why existing entries of the
same request are not reused (other weights: `_note_changed_weights`; a dtype alias: `_note_alias_entries`)."""
from __future__ import annotations

import json

from vlgap.errors import VlgapError
from vlgap.features.chunk_steps import encoder_info
from vlgap.features.store import Entry, FeatureKey
from vlgap.progress import step, stderr_console


def _weights_identity(encoder: str, random_weights: bool, loaded, opts: dict, device, dtype, ray, progress):
    """(the weights' identity for the key, the encoder when it had to be loaded to tell it). Told from the
    spec without loading where it can be (vlgap.encoders.identity); weights not cached yet (a hub id to
    download) are loaded first, then told from the cache or the loaded encoder's record."""
    from vlgap.encoders.identity import UNRESOLVED, identity_from_record, weights_id

    ident = weights_id(encoder, random_weights=random_weights)
    if ident != UNRESOLVED:
        return ident, loaded
    if loaded is None:
        if ray:
            raise VlgapError(f"the weights of {encoder!r} are not in the local caches, so their identity (part of the "
                             "feature cache key) cannot be told before loading: load it once without --ray (or "
                             "download it into the Hugging Face cache), then run with --ray")
        from vlgap.encoders.registry import get_encoder, labelled

        with step(f"loading encoder {labelled(encoder, random_weights)}", enabled=progress):
            loaded = get_encoder(encoder, device=device, dtype=dtype, **opts)
    ident = weights_id(encoder, random_weights=random_weights)
    if ident == UNRESOLVED:
        ident = identity_from_record((encoder_info(loaded).get("record") or {})) or UNRESOLVED
    if ident == UNRESOLVED:
        raise VlgapError(f"cannot tell which weights {encoder!r} loaded (no hub commit, file or sha256 in its record): "
                         "give a local folder or file (hf:/path, tv:name@file, timm:name@file)")
    return ident, loaded


def _note_changed_weights(encoder: str, ekey: dict, fp: str, param: str, pending: list[int], shard, root) -> None:
    """One line when entries of the same request exist for other weights (replaced files, a moved hub
    ref): they are not reused, and the line says from which identity to which."""
    from vlgap.encoders.identity import short

    if "weights_id" not in ekey:
        return
    same = {k: v for k, v in ekey.items() if k != "weights_id"}
    found: dict[str | None, float] = {}
    for v in pending:
        entry_dir = FeatureKey(ekey, fp, param, v, shard).entry_dir(root)
        prefix = entry_dir.name.rsplit("-", 1)[0] + "-"
        try:
            siblings = [d for d in entry_dir.parent.iterdir() if d.name.startswith(prefix) and d != entry_dir]
        except OSError:
            continue
        for d in siblings:
            try:
                old_key = json.loads((d / "record.json").read_text()).get("encoder_key") or {}
            except (OSError, ValueError, AttributeError):
                continue
            if isinstance(old_key, dict) and {k: x for k, x in old_key.items() if k != "weights_id"} == same:
                try:
                    when = d.stat().st_mtime
                except OSError:  # removed meanwhile
                    continue
                found[old_key.get("weights_id")] = max(found.get(old_key.get("weights_id"), 0.0), when)
    if not found:
        return
    old = max(found, key=lambda k: found[k])  # the most recent other weights
    values = ", ".join(map(str, pending))
    if old is None:
        stderr_console.print(f"note: features of {encoder} cached before its weights were part of the key are not "
                             f"reused ({short(ekey['weights_id'])} now): recomputing {param} = {values}",
                             highlight=False, markup=False, soft_wrap=True)
    else:
        stderr_console.print(f"weights of {encoder} changed ({short(old)} -> {short(ekey['weights_id'])}): "
                             f"recomputing {param} = {values}", highlight=False, markup=False, soft_wrap=True)


def _note_alias_entries(asked_dtype, ekey: dict, fp: str, param: str, pending: list[int], shard, root) -> None:
    """Entries keyed with a dtype alias (before dtypes were canonical, `bf16` was keyed apart from
    `bfloat16`) are not read: the canonical entry is computed afresh, said in one line."""
    alias = str(asked_dtype).strip().lower().removeprefix("torch.") if asked_dtype is not None else None
    if alias is None or alias == ekey["dtype"]:
        return
    old = [v for v in pending if Entry(FeatureKey(dict(ekey, dtype=alias), fp, param, v, shard), root).features_path.is_file()]
    if old:
        stderr_console.print(f"note: features cached under dtype {alias!r} (an alias of {ekey['dtype']!r}) are not "
                             f"reused; computing the {ekey['dtype']} entry for {param} = {', '.join(map(str, old))}")
