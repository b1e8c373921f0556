"""timm models as all-layer encoders (the timm adapter): CNN blocks by the common layouts, ViTs through
`forward_intermediates`, weights from a checkpoint file, the Hugging Face cache or the hub.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import torch
from torch import nn

from vlgap.encoders._common import IMAGENET_MEAN, IMAGENET_STD, offline, require, weights_unavailable
from vlgap.encoders.vision import DEFAULT_CROP_PCT, FramePreprocess, ImageModelEncoder, Sink, _check_pooling
from vlgap.errors import VlgapError
from vlgap.runtime import parse_device, torch_dtype

def timm_cnn_blocks(model: nn.Module) -> list[tuple[str, nn.Module]] | None:
    """Every block of the common timm CNN layouts (ResNet, ConvNeXt/CSP-style stages, EfficientNet/MobileNet
    block lists), with the stem and head where they are feature maps; None for other layouts."""
    seqs = (nn.Sequential, nn.ModuleList)
    if all(hasattr(model, f"layer{i}") for i in range(1, 5)) and not hasattr(model, "stage2"):
        return [(f"layer{i}.{n}", m) for i in range(1, 5) for n, m in getattr(model, f"layer{i}").named_children()]
    stages = getattr(model, "stages", None)
    if isinstance(stages, seqs) and all(isinstance(getattr(st, "blocks", None), seqs) for st in stages):
        out = [("stem", model.stem)] if isinstance(getattr(model, "stem", None), nn.Module) else []
        return out + [(f"stages.{i}.blocks.{j}", b) for i, st in stages.named_children()
                      for j, b in st.blocks.named_children()]
    blocks = getattr(model, "blocks", None)
    if isinstance(blocks, nn.Sequential) and all(isinstance(c, nn.Sequential) for c in blocks.children()):
        out = [("bn1", model.bn1)] if isinstance(getattr(model, "bn1", None), nn.Module) else []
        out += [(f"blocks.{i}.{j}", b) for i, stage in blocks.named_children() for j, b in stage.named_children()]
        if isinstance(getattr(model, "bn2", None), nn.Module) and hasattr(model, "conv_head"):
            out.append(("bn2", model.bn2))  # EfficientNet's head conv (+BN+act), still a feature map
        return out
    return None


def timm_weights_location(pretrained_cfg) -> str:
    """Where timm looks for a model's pretrained weights (for messages and records)."""
    hub_id = getattr(pretrained_cfg, "hf_hub_id", None)
    if hub_id:
        from huggingface_hub import constants

        return f"the Hugging Face cache {constants.HF_HUB_CACHE} (repo {hub_id})"
    url = getattr(pretrained_cfg, "url", None)
    if url:
        import os
        from urllib.parse import urlparse

        return str(Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(urlparse(url).path))
    return "nowhere: timm lists no pretrained weights for it"


def _timm_cached_file(pretrained_cfg) -> Path | None:
    """The local file timm loaded (hub cache or torch hub checkpoints), when it can be told."""
    hub_id = getattr(pretrained_cfg, "hf_hub_id", None)
    if hub_id:
        from huggingface_hub import try_to_load_from_cache

        repo, _, rev = hub_id.partition("@")
        for filename in ("model.safetensors", getattr(pretrained_cfg, "hf_hub_filename", None) or "pytorch_model.bin"):
            found = try_to_load_from_cache(repo, filename, revision=rev or None)
            if isinstance(found, str):
                return Path(found)
        return None
    where = Path(timm_weights_location(pretrained_cfg))
    return where if where.is_file() else None


def build_timm(arch: str, *, checkpoint: str | None = None, random_weights: bool = False,
               display_name: str | None = None, image_size: int | None = None, pooling: str | None = None,
               device="cpu", dtype="float32") -> ImageModelEncoder:
    """Any timm model with, in this order: the local weights file `checkpoint` (loaded through timm's own
    pretrained path, so its checkpoint filters apply); random weights when `random_weights` (seed 0,
    labelled everywhere); else timm's pretrained weights (the Hugging Face hub or its local cache, or the
    torch hub cache for URL-only models). Never random weights silently: weights that cannot be had
    raise a one-line VlgapError. ViT-like models: every block, CLS (default when the model has one) or
    mean of patch tokens; CNNs: every block for the common layouts, else timm's forward_intermediates."""
    require("timm", "timm", for_what="a timm encoder")
    import timm
    from timm.models import get_pretrained_cfg

    if not timm.is_model(arch):
        close = difflib.get_close_matches(arch, timm.list_models(), n=5)
        raise VlgapError(f"timm has no model {arch!r}" + (f"; did you mean {', '.join(close)}?" if close else
                                                          "; see timm.list_models()"))
    spec = display_name or f"timm:{arch}"
    if checkpoint and random_weights:
        raise VlgapError(f"encoder {spec!r}: a checkpoint and random weights were both asked for; choose one")
    refuse = dict(local_form=f"timm:{arch}@/path/to/checkpoint.safetensors", random_form=f"config:{arch}")
    kwargs: dict[str, Any] = {}
    pretrained_cfg = None
    if checkpoint:
        ck = Path(checkpoint).expanduser()
        if not ck.is_file():
            raise VlgapError(f"timm checkpoint {str(ck)!r} does not exist")
        kwargs.update(pretrained=True, pretrained_cfg_overlay={"file": str(ck)})
    elif not random_weights:
        pretrained_cfg = get_pretrained_cfg(arch)
        has_source = pretrained_cfg is not None and any(
            getattr(pretrained_cfg, k, None) for k in ("hf_hub_id", "url", "file"))
        if not has_source:  # timm would warn and build random weights: refuse instead
            raise weights_unavailable(spec, "timm's pretrained registry", f"timm lists no pretrained weights for "
                                      f"{arch!r} (timm.list_models(pretrained=True) lists those that have)", **refuse)
        if _timm_cached_file(pretrained_cfg) is None:  # refuse at once, without network retries
            if offline():
                raise weights_unavailable(spec, timm_weights_location(pretrained_cfg), "not cached and offline", **refuse)
            if getattr(pretrained_cfg, "hf_hub_id", None):
                from vlgap.encoders.hub import hub_address, hub_reachable

                if not hub_reachable():
                    repo = pretrained_cfg.hf_hub_id.partition("@")[0]
                    raise weights_unavailable(spec, timm_weights_location(pretrained_cfg),
                                              f"not cached and the hub ({':'.join(map(str, hub_address()))}) cannot be "
                                              f"reached: `hf download {repo}` on a machine with network fills the "
                                              "cache to copy here", **refuse)
        kwargs["pretrained"] = True

    def create(**extra):
        try:
            return timm.create_model(arch, **kwargs, **extra)
        except VlgapError:
            raise
        except TypeError:
            raise
        except Exception as err:
            if not kwargs.get("pretrained") or checkpoint:
                raise
            # offline without a cached file (LocalEntryNotFoundError), no network, a missing repo file...
            reason = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            raise weights_unavailable(spec, timm_weights_location(pretrained_cfg), reason, **refuse) from None

    with torch.random.fork_rng(devices=[]):  # random weights, when asked for, are reproducible
        torch.manual_seed(0)
        base_cfg = pretrained_cfg or get_pretrained_cfg(arch)
        native = int((getattr(base_cfg, "input_size", None) or (3, 224, 224))[-1])
        model = None
        if image_size and int(image_size) != native:
            # ViTs fix their token grid at construction: build for the requested size (timm resamples the
            # position embeddings of pretrained weights); models without img_size take any size as is
            try:
                model = create(img_size=int(image_size))
            except TypeError:
                model = None
        if model is None:
            torch.manual_seed(0)
            model = create()
        cfg = dict(getattr(model, "pretrained_cfg", {}) or {})
    size = int(image_size or native)
    source: dict[str, Any] = {"library": "timm", "architecture": arch}
    if checkpoint:
        from vlgap.encoders.gguf_cache import file_sha256

        source.update(weights="weights file", weights_file=str(Path(checkpoint).expanduser().resolve()),
                      weights_sha256=file_sha256(checkpoint))
    elif random_weights:
        source.update(weights="random initialisation (seed 0), asked for", random_weights=True)
    else:
        source.update(weights="pretrained", weights_origin=f"timm {arch}.{cfg.get('tag') or ''}".rstrip("."))
        if cfg.get("hf_hub_id"):
            source["hf_hub_id"] = cfg["hf_hub_id"]
        found = _timm_cached_file(pretrained_cfg)
        if found is not None:
            from vlgap.encoders.gguf_cache import file_sha256

            source.update(weights_file=str(found.resolve()), weights_sha256=file_sha256(found))
            if cfg.get("hf_hub_id") and found.parent.parent.name == "snapshots":
                source["revision"] = found.parent.name  # the hub snapshot (commit) it came from
    pre = FramePreprocess.make(size, mean=cfg.get("mean", IMAGENET_MEAN), std=cfg.get("std", IMAGENET_STD),
                               crop_pct=float(cfg.get("crop_pct", DEFAULT_CROP_PCT) or DEFAULT_CROP_PCT),
                               interpolation=cfg.get("interpolation", "bilinear") or "bilinear")
    common = dict(name=display_name or f"timm:{arch}", model=model, preprocess=pre, device=torch.device(parse_device(device)),
                  dtype=torch_dtype(dtype), source=source)
    blocks = getattr(model, "blocks", None)
    if isinstance(blocks, (nn.Sequential, nn.ModuleList)) and hasattr(model, "num_prefix_tokens"):
        has_cls = getattr(model, "cls_token", None) is not None
        pooling = _check_pooling(pooling, ("cls", "mean") if has_cls else ("mean",), "cls" if has_cls else "mean", arch)
        return ImageModelEncoder(pooling=pooling, hooked=[(f"blocks.{n}", m) for n, m in blocks.named_children()],
                                 run=model.forward_features, prefix_tokens=int(model.num_prefix_tokens), **common)
    pooling = _check_pooling(pooling, ("mean",), "mean", arch)
    blocks_found = timm_cnn_blocks(model)
    if blocks_found:
        return ImageModelEncoder(pooling=pooling, hooked=blocks_found, run=getattr(model, "forward_features", model),
                                 conv_channels_last=True, **common)
    if hasattr(model, "forward_intermediates"):  # stage outputs, through timm's own API
        info = getattr(model, "feature_info", None) or []
        names = [f.get("module", f"stage.{i}") if isinstance(f, dict) else f"stage.{i}" for i, f in enumerate(info)]

        def explicit(x: torch.Tensor, sink: Sink) -> None:
            for t in model.forward_intermediates(x, intermediates_only=True):
                sink(t)

        enc = ImageModelEncoder(pooling=pooling, explicit=explicit, layer_names=names, conv_channels_last=True,
                                **common)
        if len(enc.layer_dims) != len(names):
            enc.layer_names = [f"stage.{i}" for i in range(len(enc.layer_dims))]
        return enc
    skip = {"head", "fc", "classifier", "global_pool", "head_drop", "fc_norm", "pre_logits"}
    return ImageModelEncoder(pooling=pooling, hooked=[(n, m) for n, m in model.named_children() if n not in skip],
                             **common)
