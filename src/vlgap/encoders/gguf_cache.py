"""Convert a GGUF model once into a plain transformers folder (safetensors) in the cache, keyed by the
GGUF file's sha256, and hash weight files once per (path, size, mtime).

Dequantising a GGUF takes 30-90 s on a CPU; loading the converted float32 safetensors takes about a
second. The converted folder appears atomically (written under a temporary name, then renamed), with a
`vlgap_gguf.json` marker written last, so an interrupted conversion is never mistaken for a finished one.
"""
from __future__ import annotations

import contextlib
import inspect
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_json, make_folder
from vlgap.progress import Stages, say

MARKER = "vlgap_gguf.json"
_HASH_INDEX = "file_sha256.json"
_memo: dict[tuple[str, int, int], str] = {}
_memo_lock = threading.Lock()


from vlgap.io_utils import cache_root, sha256_of_file  # noqa: E402


def models_dir() -> Path:
    """Where converted models live: $VLGAP_MODELS if set (a folder kept apart from the feature cache, so
    an emptied VLGAP_CACHE does not convert again; each conversion is keyed by its GGUF's sha256), else
    the cache's models/ folder."""
    env = os.environ.get("VLGAP_MODELS")
    return Path(env).expanduser() if env else cache_root() / "models"


def _hash_file(path: Path) -> str:
    return sha256_of_file(path)


def file_sha256(path: str | os.PathLike) -> str:
    """sha256 of a file, computed once per (real path, size, mtime): memoised in this process and kept
    in a small JSON index in the cache, so a 250 MB weights file is not re-hashed on every run."""
    p = Path(path).expanduser().resolve()
    try:
        st = p.stat()
    except FileNotFoundError:
        raise VlgapError(f"file {str(p)!r} does not exist") from None
    key = (str(p), st.st_size, st.st_mtime_ns)
    with _memo_lock:
        if key in _memo:
            return _memo[key]
    index_path = models_dir() / _HASH_INDEX
    skey = f"{key[0]}|{key[1]}|{key[2]}"
    index: dict[str, str] = {}
    try:
        index = json.loads(index_path.read_text())
    except (OSError, ValueError):
        pass
    digest = index.get(skey)
    if not (isinstance(digest, str) and len(digest) == 64):
        digest = _hash_file(p)
        index = {k: v for k, v in index.items() if not k.startswith(f"{key[0]}|")}  # drop stale versions
        index[skey] = digest
        try:
            atomic_write_json(index_path, index)
        except OSError:
            pass  # a read-only cache only costs re-hashing next time
    with _memo_lock:
        _memo[key] = digest
    return digest


def converted_dir(sha256: str) -> Path:
    return models_dir() / f"gguf-{sha256[:16]}"


def find_converted(sha256: str) -> Path | None:
    """The finished conversion of the GGUF with this sha256, or None."""
    folder = converted_dir(sha256)
    try:
        meta = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    return folder if meta.get("gguf_sha256") == sha256 else None


def read_marker(folder: str | os.PathLike) -> dict[str, Any]:
    return json.loads((Path(folder) / MARKER).read_text())


Progress = Callable[..., None]  # progress(stage, done=None, total=None), see vlgap.progress.Stages


def _quiet(stage: str, done: int | None = None, total: int | None = None) -> None:
    pass


@contextlib.contextmanager
def _tensor_progress(progress: Progress):
    """Route the per-tensor loop of transformers' GGUF loader (a bare tqdm) to `progress`: one
    "dequantising" stage advanced per tensor. Without that loop (another transformers) nothing changes."""
    try:
        from transformers import modeling_gguf_pytorch_utils as loader
    except ImportError:  # pragma: no cover - transformers without GGUF support fails later, clearly
        yield
        return
    original = getattr(loader, "tqdm", None)
    if original is None:  # pragma: no cover
        yield
        return

    def tracked(iterable, *args, **kwargs):
        try:
            total = len(iterable)
        except TypeError:
            total = None
        progress("dequantising GGUF tensors", 0, total)
        for i, item in enumerate(iterable, 1):
            yield item
            progress("dequantising GGUF tensors", i, total)

    with _patch_lock:
        loader.tqdm = tracked
        try:
            yield
        finally:
            loader.tqdm = original


_patch_lock = threading.Lock()


def convert_gguf(gguf_path: Path, out_dir: Path, progress: Progress = _quiet) -> dict[str, Any]:
    """Dequantise a GGUF through transformers' GGUF loader and save model + tokenizer as safetensors.
    `progress(stage, done, total)` hears each stage (tokenizer, model, tensors dequantised, writing)."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from vlgap.encoders._common import quiet_transformers

    kwargs: dict[str, Any] = {"gguf_file": gguf_path.name, "dtype": torch.float32}
    try:  # transformers >= 5 can keep GGUF blocks packed; a plain dense model is what we save
        from transformers import GgufConfig

        kwargs["quantization_config"] = GgufConfig(dequantize=True)
    except ImportError:
        pass
    try:
        with quiet_transformers():
            progress("reading the tokenizer from the GGUF")
            tok = AutoTokenizer.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name)
            progress("reading the GGUF metadata and building the model")
            with _tensor_progress(progress):
                model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), **kwargs)
    except Exception as err:
        raise VlgapError(f"transformers could not load GGUF file {str(gguf_path)!r}: {type(err).__name__}: {err}. "
                         "It needs the 'gguf' and 'accelerate' packages and an architecture transformers' "
                         "GGUF loader supports (llama, mistral, qwen2, gemma3, ...)") from None
    progress(f"writing float32 safetensors ({sum(p.numel() for p in model.parameters()) * 4 / 1e6:.0f} MB)")
    # the weights are plain tensors now: drop the quantizer so save_pretrained writes a normal checkpoint
    model.hf_quantizer = None
    for obj in (model, model.config):
        for attr in ("quantization_config", "is_quantized"):
            if attr in getattr(obj, "__dict__", {}):
                try:
                    delattr(obj, attr)
                except AttributeError:
                    pass
    with quiet_transformers():
        model.save_pretrained(str(out_dir), safe_serialization=True)
        tok.save_pretrained(str(out_dir))
    return {"architecture": type(model).__name__, "model_type": model.config.model_type,
            "n_parameters": int(sum(p.numel() for p in model.parameters()))}


STALE_SECONDS = 6 * 3600


def _remove_stale_temporaries(folder: Path) -> None:
    """Half-written conversions left by killed processes are large (0.5-1 GB): drop those untouched for 6 h."""
    now = time.time()
    for p in folder.glob(".*.tmp"):
        try:
            if p.is_dir() and now - p.stat().st_mtime > STALE_SECONDS:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass


def ensure_converted(gguf_path: str | os.PathLike | None = None, *, sha256: str | None = None,
                     fetch: Callable[[Path], Path] | None = None,
                     convert: Callable[..., dict[str, Any]] = convert_gguf,
                     progress: bool = True) -> Path:
    """Folder of the converted model for a GGUF file, converting it first if needed.

    Either `gguf_path` is given, or `sha256` (known in advance) plus `fetch(tmp_dir) -> gguf path`, which
    materialises the file only when no conversion exists yet (used for Gemma, assembled from chunks).
    `convert(gguf, out_dir[, progress=])` does the work; the one-time conversion says on stderr what it
    is doing (each stage, tensors dequantised so far) unless `progress` is False."""
    if gguf_path is not None:
        gguf_path = Path(gguf_path).expanduser()
        if not gguf_path.is_file():
            raise VlgapError(f"GGUF file {str(gguf_path)!r} does not exist")
        sha256 = file_sha256(gguf_path)
    elif sha256 is None or fetch is None:
        raise VlgapError("ensure_converted needs a GGUF path, or a sha256 together with a fetch function")
    done = find_converted(sha256)
    if done is not None:
        return done
    final = converted_dir(sha256)
    make_folder(final.parent)
    _remove_stale_temporaries(final.parent)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.", suffix=".tmp"))
    fetched_dir: Path | None = None
    try:
        with Stages(progress, unit="tensors") as stages:
            if gguf_path is None:
                fetched_dir = Path(tempfile.mkdtemp(dir=final.parent, prefix=".fetch.", suffix=".tmp"))
                stages(f"assembling the GGUF file (sha256 {sha256[:12]}...)")
                gguf_path = Path(fetch(fetched_dir))
                if _hash_file(gguf_path) != sha256:  # a temporary file: not worth an index entry
                    raise VlgapError(f"GGUF file {str(gguf_path)!r} does not have the expected sha256 {sha256}")
                stages.close()
            if progress:
                say(f"converting {gguf_path.name} ({gguf_path.stat().st_size / 1e6:.0f} MB) to safetensors in "
                    f"{final} (once; 30-90 s on a CPU)")
            t0 = time.perf_counter()
            takes_progress = "progress" in inspect.signature(convert).parameters
            info = convert(gguf_path, tmp, progress=stages) if takes_progress else convert(gguf_path, tmp)
        if progress:
            say(f"converted {gguf_path.name} in {time.perf_counter() - t0:.0f} s; later loads read the safetensors")
        meta = {"gguf_sha256": sha256, "gguf_file": str(gguf_path.resolve()), "gguf_name": gguf_path.name,
                "gguf_size": gguf_path.stat().st_size, "converted_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                "conversion_seconds": round(time.perf_counter() - t0, 1), "dtype": "float32", **(info or {})}
        try:
            import transformers

            meta["transformers"] = transformers.__version__
        except ImportError:
            pass
        atomic_write_json(tmp / MARKER, meta)
        try:
            os.rename(tmp, final)
        except OSError:
            # another process finished first (or a stale unfinished folder sits there)
            if find_converted(sha256) is None:
                shutil.rmtree(final, ignore_errors=True)
                os.rename(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
        if fetched_dir is not None:
            shutil.rmtree(fetched_dir, ignore_errors=True)
    done = find_converted(sha256)
    if done is None:
        raise VlgapError(f"conversion of GGUF (sha256 {sha256[:16]}...) did not produce {final}")
    return done
