"""Any Hugging Face text model (hub id, local folder, or GGUF file) as an all-layer text encoder.

Encoder models and decoder LMs alike: every hidden state (embeddings + each layer), pooled with the
attention mask: mean over real tokens (default) or the last real token. Batches are always padded on
the right, so a decoder's real tokens never see padding and positions do not shift: a text gives the
same vectors alone or padded in a batch.

Chat templates are never applied: a caption is tokenised as plain text (the record says so).
Encoder-decoder models (T5, mT5, UMT5) run their encoder only (T5EncoderModel and kin): its embeddings
and every encoder layer. Large LMs: device="spread" spreads the model over the GPUs with accelerate's
device_map="auto" (see vlgap.runtime for the device vocabulary); every hidden state is still returned,
moved to one device before pooling.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable

import torch

from vlgap.encoders._common import dtype_name, loading_from_the_hub, model_source, quiet_transformers, require, versions
from vlgap.encoders.base import TextEncoder
from vlgap.encoders.forward_trace import traced
from vlgap.errors import VlgapError
from vlgap.runtime import SPREAD, parse_device, torch_dtype

POOLINGS = ("mean", "last")
CHAT_TEMPLATE_NOTE = "not applied: captions are tokenised as plain text for feature extraction"
#: encoder-decoder families whose encoder is loaded on its own (no decoder weights in memory)
ENCODER_ONLY_CLASSES = {"t5": "T5EncoderModel", "mt5": "MT5EncoderModel", "umt5": "UMT5EncoderModel"}
_WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin")


def masked_pool(hidden: torch.Tensor, mask: torch.Tensor, pooling: str) -> torch.Tensor:
    """[B, L, D] hidden states + [B, L] 0/1 mask -> [B, D] float32. 'last' takes the last position whose
    mask is 1 (correct for right or left padding)."""
    mask = mask.to(hidden.device)
    if pooling == "last":
        positions = torch.arange(mask.shape[1], device=mask.device)
        last = (mask.long() * positions).argmax(dim=1)
        return hidden[torch.arange(hidden.shape[0], device=hidden.device), last].float()
    m = mask.to(torch.float32).unsqueeze(-1)
    return (hidden.float() * m).sum(1) / m.sum(1).clamp_min(1.0)


class HFTextEncoder(TextEncoder):
    def __init__(self, *, name: str, model, tokenizer, pooling: str, device: torch.device, dtype: torch.dtype,
                 source: dict[str, Any], max_length: int | None = None):
        self.name, self.model, self.tokenizer = name, model, tokenizer
        #: where inputs go and pooled vectors end up; a dispatched model (device_map) spans several devices
        self.device_map = dict(getattr(model, "hf_device_map", None) or {}) or None
        self.pooling, self.device, self.dtype, self.source = pooling, device, dtype, source
        self._lock = threading.Lock()
        tokenizer.padding_side = "right"
        if tokenizer.pad_token is None:
            # any real id works: padded positions are masked out of attention and pooling
            tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token or tokenizer.convert_ids_to_tokens(0)
        cfg = model.config
        limits = [v for v in (max_length, getattr(cfg, "max_position_embeddings", None),
                              getattr(tokenizer, "model_max_length", None)) if isinstance(v, int) and 0 < v < 10**7]
        self.max_length = min(limits) if limits else 8192
        import inspect

        try:
            self._accepts_cache = "use_cache" in inspect.signature(model.forward).parameters
        except (TypeError, ValueError):
            self._accepts_cache = False
        #: texts cut at max_length so far (never silent: extract reports it)
        self.n_truncated = 0
        self.n_tokens = 0
        with torch.inference_mode():
            probe = self.encode(["a probe sentence"])
            #: causal attention, measured: a token's hidden states do not depend on the tokens after it,
            #: so the prefixes of one text pool from its forward pass (`encode_prefixes`)
            self.causal = self._measure_causal()
        self.n_truncated = self.n_tokens = 0
        self.layer_dims = [int(t.shape[1]) for t in probe]
        self.layer_names = ["embeddings"] + [f"hidden_states.{i}" for i in range(1, len(probe))]

    def encode(self, texts: list[str]) -> list[torch.Tensor]:
        if isinstance(texts, str):
            texts = [texts]
        texts = list(texts)
        if not texts:
            raise VlgapError("encode() got no texts")
        bad = [i for i, t in enumerate(texts) if not isinstance(t, str) or not t.strip()]
        if bad:
            raise VlgapError(f"texts at positions {bad[:10]} are empty or not strings; every text needs words")
        with self._lock, torch.inference_mode():
            full = self.tokenizer(texts, truncation=False, verbose=False)["input_ids"]
            n_cut = sum(len(ids) > self.max_length for ids in full)
            enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                                 return_tensors="pt")
            pooled = self._pooled(dict(enc))
            self.n_truncated += n_cut
            self.n_tokens += int(enc["attention_mask"].sum())
        return pooled

    def forward_tokens(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> list[torch.Tensor]:
        """`encode` after tokenisation: token ids [B, L] with their 0/1 mask (padding on the right) ->
        one pooled [B, D] tensor per layer."""
        with self._lock, torch.inference_mode():
            return self._pooled({"input_ids": input_ids, "attention_mask": attention_mask})

    def _pooled(self, enc: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        hidden, mask = self._states(enc)
        # a dispatched model returns each hidden state on the device of its layer: pool there, then
        # gather every layer on one device
        return [masked_pool(h, mask, self.pooling).to(self.device) for h in hidden]

    def _states(self, enc) -> tuple[tuple[torch.Tensor, ...], torch.Tensor]:
        """The model's hidden states for a tokenised batch, and its attention mask (on the input device);
        the one place the model runs (traced on request, `vlgap.encoders.forward_trace`)."""
        enc = {k: v.to(self.device) for k, v in enc.items()}
        mask = enc["attention_mask"]
        kwargs = {"use_cache": False} if self._accepts_cache else {}
        with traced(self, lambda: {"shape": list(enc["input_ids"].shape), "lengths": mask.sum(1).tolist()}):
            out = self.model(**enc, output_hidden_states=True, return_dict=True, **kwargs)
        return out.hidden_states, mask

    def token_ids(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text as `encode` feeds them (plain text, no truncation)."""
        with self._lock:
            return list(self.tokenizer(list(texts), truncation=False, verbose=False)["input_ids"])

    def _hidden(self, texts: list[str]):
        enc = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
        return self._states(dict(enc))

    def _measure_causal(self) -> bool:
        """True when every layer's states on a text's first tokens equal those of the text alone (a
        decoder's causal mask); an encoder that attends both ways changes them."""
        short, longer = "a probe sentence", "a probe sentence, then more words after it"
        ids = self.token_ids([short, longer])
        n = len(ids[0])
        if len(ids[1]) <= n or ids[1][:n] != ids[0] or len(ids[1]) > self.max_length:
            return False
        with self._lock:
            (h_short, _), (h_long, _) = self._hidden([short]), self._hidden([longer])
        for a, b in zip(h_short, h_long):
            a, b = a[0].float().cpu(), b[0, :n].float().cpu()
            if not torch.allclose(a, b, rtol=1e-3, atol=1e-4 * float(a.abs().max().clamp_min(1.0))):
                return False
        return True

    def encode_prefixes(self, texts: list[str], lengths: list[list[int]]) -> list[list[torch.Tensor]]:
        """Pooled layers of token prefixes of each text from one forward pass (causal models only).
        lengths[j][i]: the number of tokens of text i in prefix j (at most its length); returns, for each
        j, one [B, D] tensor per layer, as `encode` gives for the texts whose tokens are those prefixes
        (equal up to float rounding: the states of a prefix's tokens do not see the tokens after it)."""
        if not self.causal:
            raise VlgapError(f"{self.name}: encode_prefixes needs a causal model; this one attends both ways")
        with self._lock, torch.inference_mode():
            hidden, mask = self._hidden(list(texts))
            if int(mask.sum(1).max()) > self.max_length:  # pragma: no cover - callers check lengths first
                raise VlgapError(f"{self.name}: a text is longer than max_length {self.max_length}")
            positions = torch.arange(mask.shape[1], device=mask.device)
            out = []
            for lens in lengths:
                n = torch.as_tensor(lens, device=mask.device).unsqueeze(1)
                sub = mask * (positions.unsqueeze(0) < n)
                out.append([masked_pool(h, sub, self.pooling).to(self.device) for h in hidden])
                self.n_tokens += int(sub.sum())
        return out

    def record(self) -> dict[str, Any]:
        return {
            "name": self.name, "modality": "text", **self.source,
            "model_class": type(self.model).__name__, "model_type": self.model.config.model_type,
            "dtype": dtype_name(self.dtype), "device": self.device.type,
            **({"device_map": {k: str(v) for k, v in self.device_map.items()}} if self.device_map else {}),
            "pooling": self.pooling,
            "chat_template": CHAT_TEMPLATE_NOTE,
            "pooling_detail": ("mean of hidden states over real tokens (attention mask), special tokens included"
                               if self.pooling == "mean" else "hidden state of the last real token"),
            "tokenizer": {"class": type(self.tokenizer).__name__, "padding_side": "right",
                          "max_length": self.max_length, "truncation": "right, at max_length (counted)"},
            "layer_names": self.layer_names, "layer_dims": self.layer_dims,
            "n_parameters": int(sum(p.numel() for p in self.model.parameters())),
            "versions": versions("tokenizers", "safetensors", "gguf"),
        }


def weights_of_folder(folder: Path) -> dict[str, Any]:
    from vlgap.encoders.gguf_cache import file_sha256

    files = sorted(p for p in folder.iterdir() if p.name in _WEIGHT_FILES or
                   (p.name.startswith("model-") and p.suffix == ".safetensors") or
                   (p.name.startswith("pytorch_model-") and p.suffix == ".bin"))  # shards of either format
    return {"weights_files": {p.name: file_sha256(p) for p in files}}


def _encoder_only_class(config):
    """T5EncoderModel and kin for T5-family configs (the decoder is never loaded); None otherwise."""
    name = ENCODER_ONLY_CLASSES.get(getattr(config, "model_type", ""))
    if name is None:
        return None
    import transformers

    return getattr(transformers, name)


def _auto_from_config(config, **kwargs):
    from transformers import AutoModel, AutoModelForCausalLM

    try:
        return AutoModel.from_config(config, **kwargs)
    except ValueError:  # architectures with no base-model mapping
        return AutoModelForCausalLM.from_config(config, **kwargs)


def placement(device) -> tuple[torch.device, Any]:
    """(input device, device_map or None). The rule: device "spread" -> accelerate's device_map="auto" over
    every visible GPU (the CPU when there is none); any other device (vlgap.runtime.parse_device) -> that
    one device; a dict -> that accelerate device map (advanced use, tests)."""
    if isinstance(device, dict):
        return torch.device("cpu"), device
    dev = parse_device(device, spread=True)
    if dev == SPREAD:
        if not torch.cuda.is_available():
            return torch.device("cpu"), None
        return torch.device("cuda", 0), "auto"
    return torch.device(dev), None


def _cached_commit(repo_id: str, revision: str | None) -> str | None:
    """The snapshot (commit) of a hub repo that the local cache resolved, when it can be told."""
    try:
        from huggingface_hub import try_to_load_from_cache

        found = try_to_load_from_cache(repo_id, "config.json", revision=revision)
    except Exception:  # an unusual cache layout: the record just lacks the commit
        return None
    return Path(found).parent.name if isinstance(found, str) else None


def _first_device(device_map: dict) -> torch.device:
    """The device of the first placed module (where the embeddings and so the inputs live)."""
    for d in device_map.values():
        if d == "disk":
            continue
        return torch.device("cuda", d) if isinstance(d, int) else torch.device(d)
    return torch.device("cpu")


#: parameters a checkpoint may lack without changing any hidden state: poolers (BERT's, ViT's, ViViT's: a
#: task-head checkpoint such as *ForImageClassification saves its backbone without one) and the projection
#: heads of two-tower models; everything else missing is refused
UNUSED_FOR_HIDDEN_STATES = ("pooler.", "visual_projection.", "text_projection.", "logit_scale")


def used_by_hidden_states(param: str) -> bool:
    """False for a parameter name no hidden state depends on (UNUSED_FOR_HIDDEN_STATES)."""
    return not any(param.startswith(p) or f".{p}" in param for p in UNUSED_FOR_HIDDEN_STATES)


#: the files a tokenizer is saved as (any one of the sets is enough)
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "merges.txt",
                   "tokenizer.model", "spiece.model", "sentencepiece.bpe.model")


def missing_tokenizer(src: str, folder: Path) -> VlgapError:
    """The refusal for a model folder whose tokenizer does not load: which files it has and which it lacks."""
    present = [f for f in TOKENIZER_FILES if (folder / f).is_file()]
    has = f"it has only {', '.join(present)}" if present else "it has none of them"
    return VlgapError(f"text model folder {src!r} has no usable tokenizer files (tokenizer.json, or "
                      f"tokenizer_config.json with vocab.txt / vocab.json + merges.txt / tokenizer.model; {has}): "
                      "save the tokenizer beside the model (tokenizer.save_pretrained(folder))")


RANDOM_WEIGHTS_WAY_OUT = "use --random-weights for a speed test"


def refuse_missing_parameters(spec: str, info: dict | None, *, way_out: str = RANDOM_WEIGHTS_WAY_OUT) -> None:
    """transformers initialises parameters a checkpoint lacks at random, with only a log line: a model
    built that way is refused (never random weights unless asked for). `way_out`: what the caller's user
    can do instead (the text encoders' --random-weights by default)."""
    missing = sorted(k for k in (info or {}).get("missing_keys") or () if used_by_hidden_states(k))
    if missing:
        raise VlgapError(f"{spec!r}: the checkpoint holds no weights for {len(missing)} parameters (e.g. "
                         f"{', '.join(missing[:3])}); refusing to run them with random weights ({way_out})")


def load_placed(spec: str, where: str, config, classes, *, dtype: torch.dtype, device="cpu",
                revision: str | None = None, offload_folder: str | None = None, size_class=None,
                unavailable: Callable[[str], Exception] | None = None,
                way_out: str = RANDOM_WEIGHTS_WAY_OUT, trust_remote_code: bool = False) -> tuple[Any, torch.device]:
    """The one way vlgap loads pretrained transformers weights onto devices: `from_pretrained` of the first
    of `classes` that accepts the config (a ValueError moves on to the next), in `dtype`, placed by
    `placement` (one device, or accelerate's device_map over GPUs for device "spread"), refusing a
    checkpoint that lacks parameters. Returns (the model in eval mode, the device its inputs go to).
    `size_class`: unused (kept for callers); `unavailable(reason)`: the exception for a folder or cache without weight files
    (default: `weights_unavailable`)."""
    dev, device_map = placement(device)
    load_kwargs: dict[str, Any] = dict(revision=revision, dtype=dtype, output_loading_info=True)
    if trust_remote_code:
        load_kwargs["trust_remote_code"] = True
    if device_map is not None:
        require("accelerate", "accelerate", for_what="spreading a model over devices (device_map)")
        load_kwargs.update(device_map=device_map)
        if offload_folder:
            load_kwargs.update(offload_folder=offload_folder)
    with quiet_transformers():
        try:
            for i, cls in enumerate(classes):
                try:
                    model, info = cls.from_pretrained(where, **load_kwargs)
                    break
                except ValueError:  # architectures this class has no mapping for: the next one
                    if i == len(classes) - 1:
                        raise
        except OSError as err:  # a folder or cached repo without weight files: never fall back to random
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            if unavailable is not None:
                raise unavailable(reason) from None
            from vlgap.encoders._common import weights_unavailable

            raise weights_unavailable(spec, where, reason,
                                      local_form="hf:/path/to/folder with model.safetensors") from None
    refuse_missing_parameters(spec, info, way_out=way_out)
    model.eval()
    if device_map is None:
        model.to(dev)
    else:
        dev = _first_device(dict(getattr(model, "hf_device_map", None) or {"": dev}))
    return model, dev


def load_hf_text(src: str, *, name: str | None = None, pooling: str | None = None, device="cpu",
                 dtype="float32", max_length: int | None = None, revision: str | None = None,
                 extra_source: dict[str, Any] | None = None, hash_weights: bool = True,
                 random_weights: bool = False, offload_folder: str | None = None,
                 trust_remote_code: bool = False) -> HFTextEncoder:
    """Load a text model from a hub id or a local folder: the base model (no LM head); for T5-family
    models the encoder only. device: see vlgap.runtime ('spread': over every GPU, see `placement`), or an
    accelerate device map dict. random_weights: the architecture from its
    config with random weights (seed 0), for speed tests; labelled as such."""
    require("transformers", "transformers", for_what="a Hugging Face text encoder")
    pooling = pooling or "mean"
    if pooling not in POOLINGS:
        raise VlgapError(f"pooling {pooling!r} is not available for text encoders; use one of {', '.join(POOLINGS)}")
    dt = torch_dtype(dtype)
    if not isinstance(device, dict):
        device = parse_device(device, spread=True)
    spec = name or f"hf:{src}"
    # before transformers is imported (seconds): a hub id that can come from nowhere is refused at once
    where, folder = model_source(src, f"text model folder {src!r} does not exist; give a local folder, a hub id "
                                      "(org/name) or a .gguf file", revision=revision, what=f"text model {spec!r}")
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoTokenizer
    is_local = folder is not None
    remote = {"trust_remote_code": True} if trust_remote_code else {}
    with loading_from_the_hub(f"text model {src!r}"):
        config = AutoConfig.from_pretrained(where, revision=revision, **remote)
    if folder is not None and not any((folder / f).is_file() for f in TOKENIZER_FILES):
        # transformers would build an empty tokenizer (special tokens only) without a word
        raise missing_tokenizer(src, folder)
    try:
        with loading_from_the_hub(f"the tokenizer of text model {src!r}"):
            tokenizer = AutoTokenizer.from_pretrained(where, revision=revision, **remote)
    except VlgapError:
        if folder is not None:
            raise missing_tokenizer(src, folder) from None
        raise
    encoder_class = _encoder_only_class(config)
    if random_weights:
        with torch.random.fork_rng(devices=[]), quiet_transformers():
            torch.manual_seed(0)
            model = encoder_class(config) if encoder_class is not None else _auto_from_config(config, **remote)
        model.to(dt)
        # a random model is built in memory, on one device: placement's device_map does not apply
        dev, _ = placement(device if not isinstance(device, dict) else "cpu")
    else:
        classes = [encoder_class] if encoder_class is not None else [AutoModel, AutoModelForCausalLM]
        model, dev = load_placed(spec, where, config, classes, dtype=dt, device=device, revision=revision,
                                 offload_folder=offload_folder, size_class=encoder_class,
                                 trust_remote_code=trust_remote_code)
    if encoder_class is None and getattr(config, "is_encoder_decoder", False) and hasattr(model, "get_encoder"):
        model = model.get_encoder()
    model.eval().requires_grad_(False)
    if random_weights:
        model.to(dev)
    source: dict[str, Any] = {"source": where, "library": "transformers"}
    if encoder_class is not None:
        source["encoder_only"] = f"{encoder_class.__name__}: the encoder's embeddings and every encoder layer"
    if trust_remote_code:
        source["trust_remote_code"] = True
    if random_weights:
        source.update(weights="random initialisation (seed 0), asked for", random_weights=True)
    elif is_local and hash_weights:
        source.update(weights_of_folder(folder))
    elif not is_local:
        commit = getattr(config, "_commit_hash", None) or _cached_commit(src, revision) or revision
        if commit:
            source["revision"] = commit
    source.update(extra_source or {})
    return HFTextEncoder(name=spec, model=model, tokenizer=tokenizer, pooling=pooling,
                         device=dev, dtype=dt, source=source, max_length=max_length)


def load_gguf_text(gguf: str | Path | None = None, *, name: str | None = None, sha256: str | None = None,
                   fetch=None, pooling: str | None = None, device="cpu", dtype="float32",
                   max_length: int | None = None, extra_source: dict[str, Any] | None = None,
                   random_weights: bool = False) -> HFTextEncoder:
    """A GGUF model: converted once into the cache (see gguf_cache), then loaded from there in seconds."""
    require("gguf", "gguf", for_what="loading a GGUF model")
    require("accelerate", "accelerate", for_what="loading a GGUF model")
    from vlgap.encoders import gguf_cache

    folder = gguf_cache.ensure_converted(gguf, sha256=sha256, fetch=fetch)
    meta = gguf_cache.read_marker(folder)
    source = {"gguf_file": str(Path(gguf).expanduser().resolve()) if gguf else meta.get("gguf_name"),
              "gguf_sha256": meta["gguf_sha256"], "converted_folder": str(folder),
              "conversion": "transformers GGUF loader, dequantised to float32, saved as safetensors",
              **(extra_source or {})}
    enc = load_hf_text(str(folder), name=name or f"gguf:{gguf}", pooling=pooling, device=device, dtype=dtype,
                       max_length=max_length, hash_weights=False,  # identified by the GGUF's sha256
                       random_weights=random_weights)
    enc.source = {**enc.source, **source} if not random_weights else {**source, **enc.source}
    return enc
