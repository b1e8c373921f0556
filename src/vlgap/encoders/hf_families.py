"""The transformers adapter: one `hf:` prefix for every image, video and text model on the hub or on disk.

The config's `model_type` picks a row of FAMILIES (model class by AutoModel, the tower to keep, the input
name, the config key that holds the clip length n0, whether the architecture has a CLS token) and the
model's own processor (AutoVideoProcessor / AutoImageProcessor: mean, std, size, crop) prepares frames.
Model types that are not in the table and are not vision models go to the text loader (encoders/text.py).

Layers are the model's own `hidden_states` (embeddings output, then each block), exactly what the model
returns with output_hidden_states=True. Pooling follows the Dynamic Reflections rule (`paper_pooling`):
the CLS token where the architecture has one, else the mean over all (space-time) tokens; "mean" and
"cls" override it. Weights always come from the checkpoint: a missing weights file, or parameters the
checkpoint does not hold, is an error, never a random initialisation.

Spec: hf:<hub id or folder>[@revision][#vision|#text]; '#text' picks the text tower of a two-tower
checkpoint (CLIP, SigLIP), '#vision' (the default for them) its vision tower.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from vlgap.encoders._common import dtype_name, loading_from_the_hub, model_source, quiet_transformers, require, versions
from vlgap.encoders.base import VisionEncoder
from vlgap.encoders.forward_trace import traced as trace_call
from vlgap.encoders.hub import TOWERS, parse_hf_spec  # noqa: F401 - the spec grammar, torch-free there
from vlgap.errors import VlgapError
from vlgap.runtime import SPREAD, invalid, parse_device, torch_dtype

POOLINGS = ("auto", "cls", "mean")


@dataclass(frozen=True)
class Family:
    """One transformers architecture family, as data."""

    label: str                         # the name readers know, e.g. "DINOv2"
    model_types: tuple[str, ...]       # config.model_type values (full checkpoint, standalone tower)
    kind: str                          # "image" | "video"
    cls_token: bool                    # the architecture puts a CLS token first
    example: str                       # one working spec (a real hub id)
    input_name: str = "pixel_values"   # the forward's pixel argument
    clip_len_key: str | None = None    # config key holding n0 (video models)
    vision_tower: str | None = None    # attribute of the full model holding the vision tower
    text_tower: str | None = None      # attribute of the full model holding the text tower
    register_key: str | None = None    # config key: register tokens after the CLS (left out of the mean)
    frames_as_images: bool = False     # the tower sees B*T frames (X-CLIP): per-frame pooling, then the mean
    forward_kwargs: tuple[tuple[str, Any], ...] = ()   # fixed forward arguments
    config_overrides: tuple[tuple[str, Any], ...] = ()  # set on the config before loading
    note: str = ""
    test: str = "tests/test_hf_families.py"

    @property
    def pooling_rule(self) -> str:
        return paper_pooling(self.cls_token)


FAMILIES: tuple[Family, ...] = (
    Family("ViT", ("vit",), "image", True, "hf:google/vit-base-patch16-224-in21k"),
    Family("DINOv2", ("dinov2",), "image", True, "hf:facebook/dinov2-base"),
    Family("DINOv2 with registers", ("dinov2_with_registers",), "image", True,
           "hf:facebook/dinov2-with-registers-base", register_key="num_register_tokens"),
    Family("DINOv3", ("dinov3_vit",), "image", True, "hf:facebook/dinov3-vitb16-pretrain-lvd1689m",
           register_key="num_register_tokens", note="gated on the hub: accept the licence, then cache it"),
    Family("CLIP", ("clip", "clip_vision_model"), "image", True, "hf:openai/clip-vit-base-patch32",
           vision_tower="vision_model", text_tower="text_model",
           note="#text: the text tower of the same checkpoint"),
    Family("SigLIP / SigLIP 2", ("siglip", "siglip_vision_model"), "image", False,
           "hf:google/siglip-base-patch16-224", vision_tower="vision_model", text_tower="text_model",
           note="fixed-resolution SigLIP 2 (e.g. google/siglip2-base-patch16-224) loads as siglip; #text: text tower"),
    Family("MAE", ("vit_mae",), "image", True, "hf:facebook/vit-mae-base",
           config_overrides=(("mask_ratio", 0.0),), note="no masking at inference (mask_ratio 0, patch order kept)"),
    Family("VideoMAE", ("videomae",), "video", False, "hf:MCG-NJU/videomae-base", clip_len_key="num_frames"),
    Family("V-JEPA 2", ("vjepa2",), "video", False, "hf:facebook/vjepa2-vitl-fpc64-256",
           input_name="pixel_values_videos", clip_len_key="frames_per_clip",
           forward_kwargs=(("skip_predictor", True),), note="encoder only (the predictor is skipped)"),
    Family("TimeSformer", ("timesformer",), "video", True, "hf:facebook/timesformer-base-finetuned-k400",
           clip_len_key="num_frames"),
    Family("ViViT", ("vivit",), "video", True, "hf:google/vivit-b-16x2-kinetics400", clip_len_key="num_frames"),
    Family("X-CLIP (vision tower)", ("xclip",), "video", True, "hf:microsoft/xclip-base-patch32",
           clip_len_key="vision_config.num_frames", vision_tower="vision_model", frames_as_images=True,
           note="CLS of each frame, then the mean over the clip's frames"),
)
_BY_TYPE = {t: f for f in FAMILIES for t in f.model_types}


def family_of(model_type: str) -> Family | None:
    return _BY_TYPE.get(model_type)


def paper_pooling(has_cls_token: bool) -> str:
    """The Dynamic Reflections rule: the CLS token where the architecture has one, else the mean over
    all (space-time) tokens."""
    return "cls" if has_cls_token else "mean"


def resolve_pooling(requested: str | None, family: Family, name: str) -> str:
    """'auto' (or None) -> the paper's rule; 'cls' only where the model has a CLS token; 'mean' always."""
    requested = requested or "auto"
    if requested not in POOLINGS:
        raise VlgapError(f"pooling {requested!r} is not available for {name} ({family.label}); "
                         f"use one of {', '.join(POOLINGS)}")
    if requested == "auto":
        return family.pooling_rule
    if requested == "cls" and not family.cls_token:
        raise VlgapError(f"pooling 'cls' is not available for {name}: {family.label} has no CLS token; "
                         "use 'auto' or 'mean'")
    return requested


def pool_tokens(hidden: torch.Tensor, pooling: str, prefix_tokens: int) -> torch.Tensor:
    """[B, L, D] -> [B, D] float32: the first token ('cls') or the mean over the tokens after the
    `prefix_tokens` (CLS and registers) ('mean'; 0 prefix tokens: every token)."""
    if pooling == "cls":
        return hidden[:, 0].float()
    return hidden[:, prefix_tokens:].mean(1, dtype=torch.float32)


def pooling_detail(pooling: str, prefix_tokens: int, family: Family) -> str:
    rule = "the paper's rule" if pooling == family.pooling_rule else "override of the paper's rule"
    if pooling == "cls":
        what = "CLS token"
    elif prefix_tokens:
        what = f"mean over the patch tokens ({prefix_tokens} CLS/register tokens left out)"
    else:
        what = "mean over all " + ("space-time " if family.kind == "video" else "") + "tokens"
    if family.frames_as_images:
        what += " of each frame, then the mean over the clip's frames"
    return f"{what} ({rule})"


def _config_value(config, dotted: str):
    value = config
    for part in dotted.split("."):
        value = getattr(value, part, None)
    return value


# ---------------------------------------------------------------- preprocessing (the model's own processor)
@dataclass
class HFProcessorPreprocess:
    """uint8 RGB frames [T, H, W, 3] -> float32 [T, 3, h, w] by the model's own processor. Holds no model:
    picklable for Ray decoding tasks; processors keep no state between calls (thread-safe)."""

    processor: Any
    video: bool                 # a video processor (frames as one video) rather than an image processor
    output_key: str
    image_size: int = field(init=False, default=0)

    def __post_init__(self):
        self.image_size = int(self(np.zeros((1, 64, 64, 3), np.uint8)).shape[-1])

    def __call__(self, frames: np.ndarray) -> torch.Tensor:
        arr = np.asarray(frames)
        if arr.ndim == 3 and arr.shape[-1] in (3, 4):
            arr = arr[None]
        if arr.ndim != 4 or arr.shape[-1] not in (3, 4) or arr.dtype != np.uint8:
            raise VlgapError(f"frames must be uint8 RGB of shape [T, H, W, 3], got {arr.dtype} {arr.shape}")
        if arr.shape[0] == 0:
            raise VlgapError("no frames to preprocess (T = 0)")
        arr = np.ascontiguousarray(arr[..., :3])
        if self.video:
            out = self.processor(videos=[arr], return_tensors="pt")
        else:
            out = self.processor(images=list(arr), return_tensors="pt")
        x = out.get(self.output_key)
        if x is None:
            x = out["pixel_values"]
        x = x[0] if x.dim() == 5 else x
        return x.float().contiguous()

    def record(self) -> dict[str, Any]:
        d = self.processor.to_dict()
        keep = ("size", "crop_size", "do_resize", "do_center_crop", "resample", "do_rescale", "rescale_factor",
                "do_normalize", "image_mean", "image_std")
        out = {k: _plain(d[k]) for k in keep if k in d}
        return {"processor": type(self.processor).__name__, "image_size": self.image_size, **out}


def _hub_file(where: str, filename: str, revision: str | None) -> str | None:
    """Local path of one file of a folder or a (cached) hub repository, or None when it has none."""
    from transformers.utils import cached_file

    try:
        return cached_file(where, filename, revision=revision, _raise_exceptions_for_missing_entries=False,
                           _raise_exceptions_for_connection_errors=False)
    except (OSError, ValueError):
        return None


def _plain(value):
    """A processor setting as JSON: enums (PIL or torchvision resampling) by value, tuples as lists."""
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    inner = getattr(value, "value", None)
    return inner if isinstance(inner, (int, str)) else str(value)


def load_processor(where: str, family: Family, *, revision: str | None, trust_remote_code: bool):
    """The model's own processor: a video processor for video families when the checkpoint has one, else
    its image processor. A checkpoint without a processor config is an error (no guessed preprocessing)."""
    from transformers import AutoImageProcessor, AutoVideoProcessor

    # the kind the checkpoint saved: a video processor file, else its image processor (converting one into
    # the other changes numbers, e.g. ViViT's rescale offset)
    saved_video = family.kind == "video" and _hub_file(where, "video_preprocessor_config.json", revision) is not None
    attempts = [(AutoVideoProcessor, True)] if saved_video else [(AutoImageProcessor, False)]
    for auto, is_video in attempts:
        try:
            with quiet_transformers():
                proc = auto.from_pretrained(where, revision=revision, trust_remote_code=trust_remote_code)
        except (OSError, ValueError, KeyError, TypeError):
            continue
        return HFProcessorPreprocess(proc, is_video, family.input_name)
    raise VlgapError(f"{where!r} has no image or video processor config (preprocessor_config.json or "
                     "video_preprocessor_config.json): vlgap preprocesses frames with the model's own processor; "
                     "save it beside the model (processor.save_pretrained(folder))")


# ---------------------------------------------------------------- the vision encoder
class HFVisionEncoder(VisionEncoder):
    """A transformers image or video model: every hidden state, pooled by `pooling`."""

    def __init__(self, *, name: str, model, family: Family, preprocess: HFProcessorPreprocess, n0: int,
                 pooling: str, prefix_tokens: int, device: torch.device, dtype: torch.dtype,
                 source: dict[str, Any]):
        self.name, self.model, self.family, self._pre = name, model, family, preprocess
        self.kind = family.kind
        self.native_clip_len = int(n0)
        self.pooling, self.prefix_tokens = pooling, int(prefix_tokens)
        self.device, self.dtype, self.source = device, dtype, source
        self._lock = threading.Lock()
        model.eval().requires_grad_(False).to(device=device, dtype=dtype)
        s = preprocess.image_size
        shape = (1, 3, s, s) if self.kind == "image" else (1, self.native_clip_len, 3, s, s)
        with torch.inference_mode():
            probe = self.forward_layers(torch.zeros(shape, device=device, dtype=dtype))
        self.layer_dims = [int(t.shape[1]) for t in probe]
        self.layer_names = ["embeddings"] + [f"hidden_states.{i}" for i in range(1, len(probe))]

    def preprocess(self, frames: np.ndarray) -> torch.Tensor:
        return self._pre(frames)

    @property
    def preprocessor(self):
        return self._pre

    def hidden_states(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The model's own hidden states for pixels x (what output_hidden_states=True returns)."""
        kwargs = dict(self.family.forward_kwargs)
        if self.family.frames_as_images:
            x = x.flatten(0, 1)
        if self.model.config.model_type == "vit_mae":
            # identity noise: no masking and no shuffle, so token order (and the CLS) is the image's own
            n = (x.shape[-1] // self.model.config.patch_size) * (x.shape[-2] // self.model.config.patch_size)
            kwargs["noise"] = torch.arange(n, device=x.device, dtype=torch.float32).expand(x.shape[0], n)
        out = self.model(**{self.family.input_name: x}, output_hidden_states=True, return_dict=True, **kwargs)
        return out.hidden_states

    def forward_layers(self, x: torch.Tensor) -> list[torch.Tensor]:
        want = 4 if self.kind == "image" else 5
        if x.dim() != want or (self.kind == "video" and x.shape[1] != self.native_clip_len):
            what = "images [B, 3, h, w]" if self.kind == "image" else f"clips [B, {self.native_clip_len}, 3, h, w]"
            raise VlgapError(f"{self.name}: expected {what}, got {tuple(x.shape)}")
        traced = trace_call(self, lambda: {"shape": list(x.shape), "dtype": dtype_name(x.dtype)})
        with self._lock, torch.inference_mode(), traced:
            pooled = [pool_tokens(h, self.pooling, self.prefix_tokens) for h in self.hidden_states(x)]
            if self.family.frames_as_images:
                pooled = [p.view(x.shape[0], x.shape[1], -1).mean(1) for p in pooled]
            return pooled

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name, "modality": "vision", "kind": self.kind, "n0": self.native_clip_len, **self.source,
            "family": self.family.label, "model_class": type(self.model).__name__,
            "model_type": self.model.config.model_type, "dtype": dtype_name(self.dtype),
            "device": self.device.type, "pooling": self.pooling, "pooling_rule": self.family.pooling_rule,
            "pooling_detail": pooling_detail(self.pooling, self.prefix_tokens, self.family),
            "preprocess": self._pre.record(), "layer_names": self.layer_names, "layer_dims": self.layer_dims,
            "n_parameters": int(sum(p.numel() for p in self.model.parameters())),
            "versions": versions(),
        }


# ---------------------------------------------------------------- loading
def _where(src: str, revision: str | None = None, name: str | None = None) -> tuple[str, Path | None]:
    return model_source(src, f"model folder {src!r} does not exist; give a local folder or a hub id (org/name)",
                        revision=revision, what=f"encoder {name or 'hf:' + src!r}", local_form="hf:FOLDER")


_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def _check_weights_present(folder: Path, src: str) -> None:
    if not any(p.suffix in _WEIGHT_SUFFIXES or p.name.endswith(".index.json") for p in folder.iterdir()):
        raise VlgapError(f"model folder {src!r} has a config but no weights file (model.safetensors or "
                         "pytorch_model.bin): vlgap never falls back to random weights")


def _load_pretrained(where: str, src: str, *, revision, dtype, trust_remote_code, config_overrides=()):
    """AutoModel with every parameter from the checkpoint, or a VlgapError naming what is missing."""
    from transformers import AutoModel

    kwargs = dict(config_overrides)
    with loading_from_the_hub(f"the weights of {src!r}"):
        model, info = AutoModel.from_pretrained(where, revision=revision, dtype=dtype, output_loading_info=True,
                                                trust_remote_code=trust_remote_code, **kwargs)
    from vlgap.encoders.text import used_by_hidden_states

    # a task-head checkpoint (*ForVideoClassification, *ForImageClassification) loads its backbone; the
    # backbone's pooler, which no hidden state uses, may be missing from it
    missing = sorted(k for k in info.get("missing_keys") or () if used_by_hidden_states(k))
    if missing:
        raise VlgapError(f"{src!r}: the checkpoint holds no weights for {len(missing)} parameters (e.g. "
                         f"{', '.join(missing[:3])}); refusing to run them with random weights")
    return model


def _source_record(where: str, folder: Path | None, config, revision: str | None) -> dict[str, Any]:
    source: dict[str, Any] = {"source": where, "library": "transformers"}
    if folder is not None:
        from vlgap.encoders.text import weights_of_folder

        source.update(weights_of_folder(folder))
        source["weights"] = "pretrained, from the folder's weight files (sha256 in weights_files)"
    else:
        path = _hub_file(where, "config.json", revision)  # .../snapshots/<commit>/config.json
        commit = getattr(config, "_commit_hash", None) or (Path(path).parent.name if path else None) or revision
        if commit:
            source["revision"] = commit
        source["weights"] = f"pretrained, hub id {where} at revision {commit or 'main'}"
    return source


def load_hf(src: str, *, name: str | None = None, tower: str | None = None, revision: str | None = None,
            pooling: str | None = None, device="cpu", dtype="float32", image_size: int | None = None,
            max_length: int | None = None, trust_remote_code: bool = False, random_weights: bool = False):
    """Any transformers model by hub id or folder; the config's model_type picks the family (module doc).
    Returns an HFVisionEncoder, or an HFTextEncoder for text models and '#text' towers. device (vlgap.runtime)
    'spread': text models are spread over the GPUs (encoders.text.placement); vision models refuse it.
    random_weights: text models only (the architecture from its config, labelled); a vision family with
    random weights is built by `config:` specs."""
    require("transformers", "transformers", for_what="a Hugging Face model")
    name = name or f"hf:{src}"
    where, folder = _where(src, revision, name)
    from transformers import AutoConfig  # after the hub check, which refuses an unobtainable hub id at once
    if folder is not None and revision:
        raise VlgapError(f"{name!r}: a local folder has no revisions, so '@{revision}' cannot be honoured; drop "
                         f"'@{revision}' (the folder's files are what loads), or give a hub id (org/name@{revision})")
    device = parse_device(device, spread=True)
    dt = torch_dtype(dtype)
    try:
        with quiet_transformers():
            config = AutoConfig.from_pretrained(where, revision=revision, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        msg = str(err).splitlines()[0] if str(err) else type(err).__name__
        if "trust_remote_code" in str(err) and not trust_remote_code:
            raise VlgapError(f"{src!r} runs custom code from its repository: pass --trust-remote-code "
                             "(trust_remote_code=True) only if you trust that code; vlgap never implies it") from None
        raise VlgapError(f"could not load model {src!r}: {msg} "
                         "(hub ids need network access or a populated Hugging Face cache)") from None
    family = family_of(config.model_type)
    text_model = family is None and not (getattr(config, "auto_map", None) and _remote_clip_len(config))
    if device == SPREAD and (not text_model or tower == "text"):
        raise invalid("device", device, f"{name!r} is not a text LM; spread is for text models larger than one GPU")
    dev = None if device == SPREAD else torch.device(device)
    if family is None and getattr(config, "auto_map", None) and _remote_clip_len(config):
        return load_remote_code_video(where, folder, config, name=name, revision=revision, pooling=pooling,
                                      device=dev, dtype=dt, image_size=image_size, src=src,
                                      source=_source_record(where, folder, config, revision),
                                      trust_remote_code=trust_remote_code)
    if family is None:
        _refuse_unknown_vision(config, src)
        if tower == "vision":
            raise VlgapError(f"{src!r} ({config.model_type}) is a text model: drop '#vision'")
        if image_size:
            raise VlgapError(f"image_size applies to vision encoders; {name!r} is a text encoder")
        from vlgap.encoders.text import load_hf_text

        if folder is not None and not random_weights:
            _check_weights_present(folder, src)
        try:
            return load_hf_text(src, name=name, revision=revision, pooling=pooling if pooling != "auto" else None,
                                device=device, dtype=dtype, max_length=max_length, random_weights=random_weights,
                                trust_remote_code=trust_remote_code)
        except OSError as err:  # e.g. a hub repository whose cache holds the config but not the weights
            raise VlgapError(f"could not load the weights of {src!r}: {str(err).splitlines()[0]}") from None
    if random_weights:
        raise VlgapError(f"random weights for {name!r}: hf: image and video models load trained weights only; use "
                         "config:videomae-small|base|large|huge or config:<timm name> for a random-weight vision model")
    if folder is not None:
        _check_weights_present(folder, src)
    if tower == "text":
        return _load_text_tower(where, folder, config, family, name=name, src=src, revision=revision,
                                pooling=pooling, dev=dev, dt=dt, max_length=max_length,
                                trust_remote_code=trust_remote_code)
    if max_length:
        raise VlgapError(f"max_length applies to text encoders; {name!r} is a vision encoder")
    pooling = resolve_pooling(pooling, family, name)
    n0 = 1
    if family.kind == "video":
        n0 = _config_value(config, family.clip_len_key)
        if not n0:
            raise VlgapError(f"{src!r} ({config.model_type}) has no {family.clip_len_key} in its config: "
                             "its clip length n0 is unknown")
    model = _load_pretrained(where, src, revision=revision, dtype=dt, trust_remote_code=trust_remote_code,
                             config_overrides=family.config_overrides)
    if family.vision_tower and hasattr(model, family.vision_tower):
        model = getattr(model, family.vision_tower)
    pre = load_processor(where, family, revision=revision, trust_remote_code=trust_remote_code)
    if image_size and int(image_size) != pre.image_size:
        raise VlgapError(f"{src!r} runs at its processor's size {pre.image_size}; image_size {image_size} "
                         "would change the model's own preprocessing (drop --image-size)")
    prefix = (1 if family.cls_token else 0) + int(_config_value(model.config, family.register_key) or 0
                                                   if family.register_key else 0)
    source = _source_record(where, folder, config, revision)
    if family.config_overrides:
        source["config_overrides"] = dict(family.config_overrides)
    if family.vision_tower:
        source["tower"] = "vision"
    return HFVisionEncoder(name=name, model=model, family=family, preprocess=pre, n0=int(n0), pooling=pooling,
                           prefix_tokens=prefix, device=dev, dtype=dt, source=source)


def _refuse_unknown_vision(config, src: str) -> None:
    """A vision model type outside the table would otherwise reach the text loader and fail obscurely."""
    from transformers.models.auto.image_processing_auto import IMAGE_PROCESSOR_MAPPING_NAMES

    text_like = getattr(config, "vocab_size", None) or getattr(getattr(config, "text_config", None), "vocab_size",
                                                                None)
    if config.model_type in IMAGE_PROCESSOR_MAPPING_NAMES and not text_like or config.model_type == "siglip2":
        known = ", ".join(sorted(_BY_TYPE))
        raise VlgapError(f"{src!r} is a {config.model_type} model, which vlgap's transformers family table does "
                         f"not cover yet; supported vision model types: {known}")


def _load_text_tower(where, folder, config, family: Family, *, name, src, revision, pooling, dev, dt, max_length,
                     trust_remote_code):
    from transformers import AutoTokenizer

    from vlgap.encoders.text import POOLINGS as TEXT_POOLINGS
    from vlgap.encoders.text import HFTextEncoder

    if not family.text_tower:
        raise VlgapError(f"{src!r} ({family.label}) has no text tower vlgap can load; drop '#text'")
    pooling = None if pooling in (None, "auto") else pooling
    if pooling is not None and pooling not in TEXT_POOLINGS:
        raise VlgapError(f"pooling {pooling!r} is not available for text towers; use one of {', '.join(TEXT_POOLINGS)}")
    model = _load_pretrained(where, src, revision=revision, dtype=dt, trust_remote_code=trust_remote_code)
    if hasattr(model, family.text_tower):
        model = getattr(model, family.text_tower)
    elif "vision" in model.config.model_type:
        raise VlgapError(f"{src!r} is a standalone vision tower: it holds no text tower")
    from vlgap.encoders.text import TOKENIZER_FILES, missing_tokenizer

    if folder is not None and not any((folder / f).is_file() for f in TOKENIZER_FILES):
        raise missing_tokenizer(src, folder)  # transformers would build an empty one without a word
    try:
        with quiet_transformers():
            tokenizer = AutoTokenizer.from_pretrained(where, revision=revision, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as err:
        if folder is not None:
            raise missing_tokenizer(src, folder) from None
        raise VlgapError(f"could not load the tokenizer of {src!r}: {str(err).splitlines()[0]}") from None
    model.eval().requires_grad_(False).to(dev)
    source = {**_source_record(where, folder, config, revision), "tower": "text", "family": family.label}
    return HFTextEncoder(name=name, model=model, tokenizer=tokenizer, pooling=pooling or "mean", device=dev,
                         dtype=dt, source=source, max_length=max_length)


def family_table() -> list[dict[str, Any]]:
    """The DR paper's model families: one working spec each, the pooling and n0 vlgap uses, the test."""
    twin = "tiny twin from its config: folder + offline hub cache, equal to the model's own forward"
    rows = []
    for f in FAMILIES:
        n0 = f"config {f.clip_len_key}" if f.kind == "video" else "1"
        rows.append({"family": f.label, "spec": f.example, "kind": f.kind, "model_types": list(f.model_types),
                     "pooling": "cls" if f.cls_token else "mean (all tokens)", "n0": n0, "note": f.note,
                     "tested": twin})
        if f.text_tower:
            rows.append({"family": f"{f.label} text tower", "spec": f.example + "#text", "kind": "text",
                         "model_types": list(f.model_types), "pooling": "mean (real tokens)", "n0": "-",
                         "note": "", "tested": twin})
    rows.append({"family": "VideoMAEv2", "spec": VIDEOMAE_V2.example, "kind": "video",
                 "model_types": ["(remote code)"], "pooling": "mean (all tokens)", "n0": "config model_config.num_frames",
                 "note": "remote code: runs only with --trust-remote-code, never implied",
                 "tested": "refused without the flag; a stand-in with its remote-code layout"})
    rows.append({"family": "Perception Encoder (PE-Core)", "spec": "timm:vit_pe_core_base_patch16_224", "kind": "image",
                 "model_types": ["(timm)"], "pooling": "timm adapter's rule", "n0": "1",
                 "note": "transformers has PE only inside PerceptionLM / PE-Video; the image encoder is in timm",
                 "tested": "its timm twin by hub id from an offline cache (tests/test_pretrained_weights.py)"})
    return rows


# ---------------------------------------------------------------- remote code (VideoMAEv2)
# Models that exist only as remote code on the hub run only with trust_remote_code. Their code is not
# transformers' own, so hidden states are read the timm way: a forward pre-hook on the first block gives
# the embeddings (patch plus position embedding), a forward hook on every block its output. The layout
# is VideoMAEv2's (OpenGVLab/VideoMAEv2-*): a `blocks` list, pixels [B, C, T, H, W],
# `extract_features(pixel_values=...)`, n0 in `model_config["num_frames"]`; another layout is refused.

VIDEOMAE_V2 = Family("VideoMAEv2 (remote code)", ("(remote code)",), "video", False,
                     "hf:OpenGVLab/VideoMAEv2-Base --trust-remote-code", clip_len_key="model_config.num_frames",
                     note="remote code: runs only with --trust-remote-code")


class RemoteCodeVideoEncoder(HFVisionEncoder):
    """HFVisionEncoder whose hidden states come from hooks on the model's blocks."""

    def hidden_states(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        blocks = self._blocks
        states: list[torch.Tensor] = []
        handles = [blocks[0].register_forward_pre_hook(lambda _m, args: states.append(args[0]))]
        handles += [b.register_forward_hook(lambda _m, _a, out: states.append(out[0] if isinstance(out, tuple)
                                                                              else out)) for b in blocks]
        try:
            pixels = x.permute(0, 2, 1, 3, 4)  # [B, T, C, H, W] -> [B, C, T, H, W], VideoMAEv2's layout
            run = getattr(self.model, "extract_features", None) or self.model
            run(pixel_values=pixels)
        finally:
            for h in handles:
                h.remove()
        return tuple(states)

    @functools.cached_property
    def _blocks(self) -> nn.ModuleList:
        return find_blocks(self.model)


def find_blocks(model: nn.Module) -> nn.ModuleList:
    lists = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.ModuleList)
             and name.split(".")[-1] == "blocks" and len(m)]
    if not lists:
        raise VlgapError(f"remote-code model {type(model).__name__} has no `blocks` list of transformer blocks: "
                         "vlgap reads VideoMAEv2-style remote models only")
    return max(lists, key=lambda nm: len(nm[1]))[1]


def _remote_clip_len(config) -> int | None:
    """n0 of a VideoMAEv2-style remote config (model_config["num_frames"]), else None."""
    model_config = getattr(config, "model_config", None)
    if isinstance(model_config, dict):
        return model_config.get("num_frames")
    return None


def load_remote_code_video(where: str, folder: Path | None, config, *, name: str, src: str, revision,
                           pooling, device: torch.device, dtype: torch.dtype, image_size, source: dict[str, Any],
                           trust_remote_code: bool = True) -> RemoteCodeVideoEncoder:
    if not trust_remote_code:
        raise VlgapError(f"{src!r} runs custom code from its repository: pass --trust-remote-code "
                         "(trust_remote_code=True) only if you trust that code; vlgap never implies it")
    n0 = _remote_clip_len(config)
    if not n0:
        raise VlgapError(f"{src!r} ({config.model_type}) is remote code without model_config.num_frames: "
                         "vlgap reads VideoMAEv2-style remote video models only")
    if folder is not None:
        _check_weights_present(folder, src)
    pooling = resolve_pooling(pooling, VIDEOMAE_V2, name)
    model = _load_pretrained(where, src, revision=revision, dtype=dtype, trust_remote_code=True)
    find_blocks(model)
    pre = load_processor(where, VIDEOMAE_V2, revision=revision, trust_remote_code=True)
    if image_size and int(image_size) != pre.image_size:
        raise VlgapError(f"{src!r} runs at its processor's size {pre.image_size}; drop --image-size")
    source = {**source, "trust_remote_code": True, "remote_class": type(model).__name__}
    return RemoteCodeVideoEncoder(name=name, model=model, family=VIDEOMAE_V2, preprocess=pre, n0=int(n0),
                                  pooling=pooling, prefix_tokens=0, device=device, dtype=dtype, source=source)
