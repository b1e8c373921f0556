"""A CLIP-family checkpoint as the caption scores need it: joint-space embeddings of pictures, of
captions (with a truncation that keeps the end-of-text token) and of caption tokens (for EMScore).

Specs:
    hf:<hub id or folder>[@revision]     any transformers model with get_image_features /
                                         get_text_features (CLIP, SigLIP, SigLIP 2, ...)
    pacs:<checkpoint.pth>[@<hub id or folder>]
                                         a PAC-S checkpoint (aimagelab/pacscore: the openai-CLIP
                                         state dict, fine-tuned) loaded onto the named CLIP
                                         architecture (default openai/clip-vit-base-patch32);
                                         selects w = 2.0 as PAC-S does

This is an adapter (transformers and torch live here); the scores themselves are in
captions.embedding_scores. A local adapter until the encoder registry loads CLIP towers itself.
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from vlgap.errors import VlgapError

PACS_DEFAULT_BASE = "openai/clip-vit-base-patch32"
SIGLIP_TYPES = ("siglip", "siglip2")


@dataclass
class TokenisedCaptions:
    ids: list[list[int]]
    truncated: list[bool]


@dataclass
class ClipModel:
    spec: str
    model: Any
    family: str                 # "clip" or "siglip"
    max_length: int             # the text tower's token limit
    default_w: float            # 2.5 (CLIP-S) or 2.0 (PAC-S)
    source: dict[str, Any] = field(default_factory=dict)
    device: str = "cpu"
    batch_size: int = 64
    files: Any = None           # where the tokenizer and processor files are: (source, revision)
    _processor: Any = None
    _openai: Any = None

    @property
    def processor(self):
        """The checkpoint's transformers processor (tokenizer and image processor), made on first use:
        the official conventions need neither."""
        if self._processor is None:
            self._processor = _load_processor(*self.files, self.spec)
        return self._processor

    @property
    def tokenizer(self):
        return self.processor.tokenizer

    @property
    def openai_tokenizer(self):
        """openai clip's tokenisation over this checkpoint's BPE vocabulary and merges
        (captions.openai_clip.OpenaiTokenizer), read from its tokenizer files on first use."""
        if self._openai is None:
            from vlgap.captions.openai_clip import OpenaiTokenizer

            vocab, merges = read_bpe_files(*self.files, self.spec)
            self._openai = OpenaiTokenizer(vocab, merges, name=repr(self.spec))
        return self._openai

    # ---- text --------------------------------------------------------------------------------
    def tokenise(self, texts: Sequence[str], *, truncate: bool = True, names: Sequence[Any] | None = None,
                 openai: bool = False, refusal: str = "shorten it, or allow truncation (drop --no-truncate)"
                 ) -> TokenisedCaptions:
        """Token ids per caption, special tokens included. openai: openai clip's tokenisation
        (captions.openai_clip.OpenaiTokenizer, as the official caption scores tokenise), else the
        checkpoint's transformers tokenizer. Longer than the limit: the first max_length - 1 tokens and
        the final end-of-text token (openai clip.tokenize(truncate=True) does the same); with
        truncate=False a VlgapError names the caption (`refusal` says what to do)."""
        if openai:
            tok = self.openai_tokenizer

            def ids_of(text):
                return tok.tokenize(text, self.max_length)
        else:
            hf = self.tokenizer
            specials = set(hf.all_special_ids)

            def ids_of(text):
                ids = list(hf(text, add_special_tokens=True)["input_ids"])
                if len(ids) <= self.max_length:
                    return ids, False
                return (ids[:self.max_length - 1] + [ids[-1]] if ids[-1] in specials else ids[:self.max_length]), True
        out, flags = [], []
        for n, text in enumerate(texts):
            ids, cut = ids_of(text)
            if cut and not truncate:
                who = names[n] if names is not None else n
                length = len(self.openai_tokenizer.encode(text)) + 2 if openai else len(self.tokenizer(text)["input_ids"])
                raise VlgapError(f"item {who!r}: caption of {length} tokens exceeds the text tower's limit "
                                 f"of {self.max_length} ({text[:60]!r}...); {refusal}")
            out.append(ids)
            flags.append(cut)
        return TokenisedCaptions(out, flags)

    def _padded(self, batch: list[list[int]]):
        import torch

        if self.family == "siglip":  # padded to the full length, the pad token matters
            pad = self.tokenizer.pad_token_id
            if pad is None:
                pad = self.tokenizer.eos_token_id or 0
        else:  # behind the attention mask and after every kept position (causal attention): any id
            pad = 0
        width = self.max_length if self.family == "siglip" else max(len(x) for x in batch)
        ids = torch.full((len(batch), width), int(pad), dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        for i, x in enumerate(batch):
            ids[i, :len(x)] = torch.tensor(x)
            mask[i, :len(x)] = 1
        return ids.to(self.device), mask.to(self.device)

    def _text_inputs(self, batch):
        ids, mask = self._padded(batch)
        # SigLIP was trained on max-length padding without a mask and pools the last position
        return ({"input_ids": ids} if self.family == "siglip" else {"input_ids": ids, "attention_mask": mask}), mask

    def _by_length(self, ids: list[list[int]]):
        """Batches of captions of similar length (less padding to compute): (positions, batch) pairs."""
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start:start + self.batch_size]
            yield chunk, [ids[i] for i in chunk]

    def embed_token_ids(self, ids: list[list[int]]) -> np.ndarray:
        """Pooled, projected caption embeddings (n, d) for tokenised captions (CLIP pools the first
        end-of-text position, as openai's encode_text does with the argmax of the ids)."""
        import torch

        rows: list[np.ndarray | None] = [None] * len(ids)
        with torch.inference_mode():
            for chunk, batch in self._by_length(ids):
                inputs, _ = self._text_inputs(batch)
                for i, row in zip(chunk, _features(self.model.get_text_features(**inputs))):
                    rows[i] = row
        return np.stack(rows) if rows else np.zeros((0, 0))

    def embed_texts(self, texts: Sequence[str], *, truncate: bool = True, names=None) -> tuple[np.ndarray, list[bool]]:
        tokens = self.tokenise(texts, truncate=truncate, names=names)
        return self.embed_token_ids(tokens.ids), tokens.truncated

    def embed_caption_tokens(self, ids: list[list[int]], *, specials_too: bool = False) -> list[np.ndarray]:
        """Projected per-token embeddings of each caption's tokens, for EMScore's fine-grained matching:
        the text tower's last hidden states through the same projection that makes the pooled
        embedding. specials_too: the official EMScore's tokens (its utils.encode_text, active branch):
        from the start of text to the first position of the largest id, the end of text (openai's
        argmax), that one included; a literal '<|endoftext|>' inside a caption ends it there. Else the
        content tokens only (special tokens left out)."""
        import torch

        text_model = self.model.text_model
        project = self.model.text_projection if self.family == "clip" else text_model.head
        specials = set() if specials_too else set(self.tokenizer.all_special_ids)
        if specials_too:  # causal attention: the kept positions do not see what follows them
            ids = [x[:int(np.argmax(x)) + 1] for x in ids]
        out: list[np.ndarray | None] = [None] * len(ids)
        with torch.inference_mode():
            for chunk, batch in self._by_length(ids):
                inputs, _ = self._text_inputs(batch)
                # last_hidden_state is after the final layer norm in both families, as the pooled one is
                tokens = project(text_model(**inputs).last_hidden_state).float().cpu().numpy()
                for i, x, row in zip(chunk, batch, tokens):
                    keep = list(range(len(x))) if specials_too else [j for j, t in enumerate(x) if t not in specials]
                    out[i] = row[keep].astype(np.float64)
        return out

    # ---- pictures ----------------------------------------------------------------------------
    def embed_images(self, images: Sequence[Any], *, pixels: str = "processor") -> np.ndarray:
        """Projected embeddings (n, d) of PIL images or HxWx3 uint8 arrays. pixels: "processor" (the
        checkpoint's transformers image processor) or "openai" (openai clip's preprocess, as the
        official CLIPScore, PAC-S and EMScore code: captions.openai_clip.openai_transform)."""
        import torch

        prepare = None
        if pixels == "openai":
            from PIL import Image

            from vlgap.captions.openai_clip import OPENAI_MEAN, OPENAI_STD, openai_transform

            geometry = openai_transform(self.image_size).transforms[:3]  # resize, crop, RGB: per picture (PIL)
            mean = torch.tensor(OPENAI_MEAN).view(1, 3, 1, 1)
            std = torch.tensor(OPENAI_STD).view(1, 3, 1, 1)

            def prepare(batch):
                # ToTensor and Normalize on the whole batch: the same elementwise operations, at once
                arrays = []
                for x in batch:
                    img = x if hasattr(x, "convert") else Image.fromarray(np.asarray(x))
                    for step in geometry:
                        img = step(img)
                    arrays.append(np.asarray(img))
                pixels = torch.from_numpy(np.stack(arrays)).permute(0, 3, 1, 2).contiguous().float().div(255)
                return pixels.sub_(mean).div_(std)
        rows: list[np.ndarray] = []
        with torch.inference_mode():
            for start in range(0, len(images), self.batch_size):
                batch = list(images[start:start + self.batch_size])
                pixels_in = (prepare(batch) if prepare is not None
                             else self.processor(images=batch, return_tensors="pt")["pixel_values"])
                pixels = pixels_in.to(self.device, dtype=next(self.model.parameters()).dtype)
                rows.append(_features(self.model.get_image_features(pixel_values=pixels)))
        return np.concatenate(rows) if rows else np.zeros((0, 0))

    @property
    def image_size(self) -> int:
        """The vision tower's input resolution (openai clip's n_px)."""
        return int(self.model.config.vision_config.image_size)

    def describe(self) -> dict[str, Any]:
        return {"spec": self.spec, "family": self.family, "max_tokens": self.max_length, **self.source}


def _features(out: Any) -> np.ndarray:
    """get_*_features returns a tensor (transformers 4) or an output object (transformers 5)."""
    tensor = out if hasattr(out, "detach") else getattr(out, "pooler_output", None)
    if tensor is None:
        tensor = out[0]
    return tensor.detach().float().cpu().numpy().astype(np.float64)


def _split_revision(rest: str) -> tuple[str, str | None]:
    if "@" in rest and not Path(rest).expanduser().exists():
        head, tail = rest.rsplit("@", 1)
        return head, tail or None
    return rest, None


#: models loaded by load_clip(reuse=True), most recently used last: (spec, device, files' state) -> ClipModel
_LOADED: "OrderedDict[tuple, ClipModel]" = OrderedDict()
_KEEP_LOADED = 2


def load_clip(spec: str, device: str = "cpu", *, reuse: bool = False) -> ClipModel:
    """Load a CLIP-family checkpoint from a spec (see the module docstring) on `device` (vlgap.runtime).

    reuse: return the model an earlier reuse=True call of this process loaded from the same spec onto
    the same device, while its files (name, size, modification time) are unchanged; the last two are
    kept. Such a model is shared: a caller must not change it (its dtype, device or weights)."""
    from vlgap.runtime import parse_device

    device = parse_device(device)
    if not isinstance(spec, str) or ":" not in spec:
        raise VlgapError(f"CLIP spec {spec!r} is not valid: use hf:<hub id or folder> (a CLIP or SigLIP "
                         "checkpoint) or pacs:<checkpoint.pth>[@<CLIP hub id or folder>]")
    prefix, _, rest = spec.partition(":")
    if prefix == "hf":
        where, revision = _split_revision(rest)
        file = None
    elif prefix == "pacs":
        file, base = (rest.split("@", 1) + [None])[:2] if not Path(rest).exists() else (rest, None)
        where, revision = base or PACS_DEFAULT_BASE, None
    else:
        raise VlgapError(f"CLIP spec {spec!r}: unknown prefix {prefix!r}; use hf:<hub id or folder> or "
                         "pacs:<checkpoint.pth>[@<CLIP hub id or folder>]")
    key = (spec, str(device), _files_state(where), _files_state(file))
    if reuse and key in _LOADED:
        _LOADED.move_to_end(key)
        return _LOADED[key]
    model, src, source = _load_hf(where, revision, spec)
    if file is not None:
        source.update(_load_pacs_weights(model, Path(file).expanduser(), spec))
    model_type = getattr(model.config, "model_type", "?")
    family = "siglip" if model_type in SIGLIP_TYPES else "clip"
    text_cfg = getattr(model.config, "text_config", None)
    max_length = int(getattr(text_cfg, "max_position_embeddings", 0) or 0) or 77
    tok_limit = _tokenizer_config(src, revision).get("model_max_length")
    if isinstance(tok_limit, int) and 0 < tok_limit < max_length:
        max_length = tok_limit
    model.eval().requires_grad_(False).to(device)
    loaded = ClipModel(spec=spec, model=model, family=family, max_length=max_length,
                       default_w=2.0 if file is not None else 2.5, source={"model_type": model_type, **source},
                       device=device, files=(src, revision))
    if reuse:
        _LOADED[key] = loaded
        while len(_LOADED) > _KEEP_LOADED:
            _LOADED.popitem(last=False)
    return loaded


def _files_state(where: str | None) -> tuple | None:
    """(name, size, modification time) of a local file or of a folder's files; None for a hub id."""
    if where is None:
        return None
    path = Path(where).expanduser()
    try:
        files = sorted(path.iterdir()) if path.is_dir() else [path] if path.is_file() else []
        return tuple((p.name, st.st_size, st.st_mtime_ns) for p in files for st in [p.stat()])
    except OSError:
        return None


def _load_hf(where: str, revision: str | None, spec: str):
    """(model, where transformers loads it from, what the result records of it). The processor is
    left for ClipModel.processor to make when a convention needs it."""
    from vlgap.encoders.hub import precheck_hub_id

    # before torch and transformers are imported (seconds): a hub id that can come from nowhere is refused at once
    precheck_hub_id(where, revision, what=f"CLIP checkpoint {spec!r}", local_form="--clip hf:FOLDER")
    from vlgap.encoders._common import loading_from_the_hub, model_source

    src, folder = model_source(where, f"CLIP spec {spec!r}: folder {where!r} does not exist; give a local folder or "
                                      "a hub id (e.g. hf:openai/clip-vit-base-patch32)", revision=revision,
                               what=f"CLIP checkpoint {spec!r}", local_form="--clip hf:FOLDER")
    from transformers import AutoModel

    is_local = folder is not None
    with loading_from_the_hub(f"CLIP checkpoint {spec!r}"):
        model = AutoModel.from_pretrained(src, revision=revision)
    if not (hasattr(model, "get_image_features") and hasattr(model, "get_text_features")):
        raise VlgapError(f"{spec!r} is not a CLIP-family checkpoint (model_type "
                         f"{getattr(model.config, 'model_type', '?')!r} has no joint image-text embedding); "
                         "use a CLIP or SigLIP checkpoint, e.g. hf:openai/clip-vit-base-patch32")
    source: dict[str, Any] = {"source": src, "library": "transformers"}
    commit = getattr(model.config, "_commit_hash", None) or revision
    if commit and not is_local:
        source["revision"] = commit
    if is_local:
        from vlgap.encoders.text import weights_of_folder

        source.update(weights_of_folder(folder))
    return model, src, source


def _load_processor(src: str, revision: str | None, spec: str):
    from transformers import AutoProcessor

    from vlgap.encoders._common import loading_from_the_hub

    with loading_from_the_hub(f"the processor of CLIP checkpoint {spec!r}"):
        processor = AutoProcessor.from_pretrained(src, revision=revision)
    if not (hasattr(processor, "tokenizer") and hasattr(processor, "image_processor")):
        raise VlgapError(f"{spec!r} has no CLIP-family processor (a tokenizer and an image processor); "
                         "use a CLIP or SigLIP checkpoint, e.g. hf:openai/clip-vit-base-patch32")
    return processor


def _tokenizer_file(src: str, revision: str | None, name: str) -> Path | None:
    """A file the checkpoint's tokenizer carries (a local folder's, or the hub cache's), None if absent."""
    folder = Path(src)
    if folder.is_dir():
        return folder / name if (folder / name).is_file() else None
    from transformers.utils import cached_file

    from vlgap.encoders._common import loading_from_the_hub

    with loading_from_the_hub(f"{name} of CLIP checkpoint {src!r}"):
        found = cached_file(src, name, revision=revision, _raise_exceptions_for_missing_entries=False)
    return Path(found) if found else None


def _tokenizer_config(src: str, revision: str | None) -> dict[str, Any]:
    import json

    path = _tokenizer_file(src, revision, "tokenizer_config.json")
    try:
        data = json.loads(path.read_text(encoding="utf-8")) if path is not None else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def read_bpe_files(src: str, revision: str | None, spec: str) -> tuple[dict[str, int], list[tuple[str, str]]]:
    """The vocabulary and the ordered merges of a checkpoint's byte-level BPE tokenizer: vocab.json and
    merges.txt (the files openai's vocabulary was converted to) where it carries them, else the BPE
    model inside tokenizer.json (the fast tokenizer's)."""
    import json

    vocab_file, merges_file = _tokenizer_file(src, revision, "vocab.json"), _tokenizer_file(src, revision, "merges.txt")
    try:
        if vocab_file is not None and merges_file is not None:
            vocab = json.loads(vocab_file.read_text(encoding="utf-8"))
            lines = merges_file.read_text(encoding="utf-8").splitlines()
            merges = [tuple(line.split(" ")) for line in lines if line and not line.startswith("#version")]
        else:
            fast = _tokenizer_file(src, revision, "tokenizer.json")
            if fast is None:
                raise VlgapError(f"{spec!r}: the official convention tokenises as openai clip with the checkpoint's "
                                 "BPE files, and it has neither vocab.json + merges.txt nor tokenizer.json; use "
                                 "--clip-convention transformers (or --emscore-convention content-tokens)")
            bpe = json.loads(fast.read_text(encoding="utf-8")).get("model") or {}
            if bpe.get("type") != "BPE" or bpe.get("end_of_word_suffix") not in (None, "</w>"):
                raise VlgapError(f"{spec!r}: its tokenizer.json holds a {bpe.get('type')!r} model, not CLIP's "
                                 "byte-level BPE with '</w>' word ends; use --clip-convention transformers")
            vocab = bpe.get("vocab")
            merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in bpe.get("merges") or []]
    except (OSError, ValueError) as err:
        raise VlgapError(f"{spec!r}: cannot read its tokenizer files: {type(err).__name__}: {err}") from None
    if not isinstance(vocab, dict) or any(len(m) != 2 for m in merges):
        raise VlgapError(f"{spec!r}: its BPE files are malformed (a vocabulary object and merges of two pieces "
                         "each are expected)")
    return vocab, merges


def openai_to_hf_state_dict(state: dict[str, Any]) -> dict[str, Any]:
    """Rename an openai-CLIP state dict (the layout PAC-S checkpoints use) to transformers' CLIPModel."""
    import torch

    out: dict[str, Any] = {}
    layer_names = {"ln_1": "layer_norm1", "ln_2": "layer_norm2", "mlp.c_fc": "mlp.fc1", "mlp.c_proj": "mlp.fc2",
                   "attn.out_proj": "self_attn.out_proj"}
    for key, value in state.items():
        if key.startswith("module."):
            key = key[len("module."):]
        tower, rest = ("vision_model", key[len("visual."):]) if key.startswith("visual.") else ("text_model", key)
        if rest.startswith("transformer.resblocks."):
            parts = rest.split(".")
            i, tail = parts[2], ".".join(parts[3:])
            base = f"{tower}.encoder.layers.{i}."
            if tail.startswith("attn.in_proj_"):
                kind = tail.rsplit("_", 1)[-1]  # weight or bias
                for name, chunk in zip(("q_proj", "k_proj", "v_proj"), torch.chunk(value, 3, dim=0)):
                    out[f"{base}self_attn.{name}.{kind}"] = chunk
                continue
            for old, new in layer_names.items():
                if tail.startswith(old + "."):
                    out[base + new + tail[len(old):]] = value
                    break
            continue
        simple = {
            ("text_model", "token_embedding.weight"): "text_model.embeddings.token_embedding.weight",
            ("text_model", "positional_embedding"): "text_model.embeddings.position_embedding.weight",
            ("text_model", "ln_final.weight"): "text_model.final_layer_norm.weight",
            ("text_model", "ln_final.bias"): "text_model.final_layer_norm.bias",
            ("text_model", "logit_scale"): "logit_scale",
            ("vision_model", "conv1.weight"): "vision_model.embeddings.patch_embedding.weight",
            ("vision_model", "class_embedding"): "vision_model.embeddings.class_embedding",
            ("vision_model", "positional_embedding"): "vision_model.embeddings.position_embedding.weight",
            ("vision_model", "ln_pre.weight"): "vision_model.pre_layrnorm.weight",
            ("vision_model", "ln_pre.bias"): "vision_model.pre_layrnorm.bias",
            ("vision_model", "ln_post.weight"): "vision_model.post_layernorm.weight",
            ("vision_model", "ln_post.bias"): "vision_model.post_layernorm.bias",
        }
        if (tower, rest) in simple:
            out[simple[(tower, rest)]] = value
        elif (tower, rest) == ("text_model", "text_projection"):
            out["text_projection.weight"] = value.T.contiguous()
        elif (tower, rest) == ("vision_model", "proj"):
            out["visual_projection.weight"] = value.T.contiguous()
        # input_resolution, context_length, vocab_size: jit-era scalars with no tensor to load
    return out


def _load_pacs_weights(model, file: Path, spec: str) -> dict[str, Any]:

    from vlgap.io_utils import sha256_of_file

    if not file.is_file():
        raise VlgapError(f"PAC-S checkpoint {str(file)!r} not found (spec {spec!r}); give the .pth file "
                         "released with PAC-S, e.g. pacs:clip_ViT-B-32.pth")
    from vlgap.file_kinds import torch_load_plain

    blob = torch_load_plain(file, f"PAC-S checkpoint {file}")
    state = blob.get("state_dict", blob) if isinstance(blob, dict) else None
    if not isinstance(state, dict) or not state:
        raise VlgapError(f"{file} holds no state dict; expected the PAC-S .pth ({{'state_dict': ...}})")
    if any(k.startswith(("visual.", "module.visual.")) for k in state):
        state = openai_to_hf_state_dict(state)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not k.endswith("position_ids")]
    if missing or unexpected:
        raise VlgapError(f"{file} does not fit the CLIP architecture of {spec!r}: {len(missing)} missing "
                         f"(e.g. {missing[:2]}), {len(unexpected)} unexpected (e.g. {unexpected[:2]}); name the "
                         "matching base after '@', e.g. pacs:openClip_ViT-L-14.pth@openai/clip-vit-large-patch14")
    return {"pacs_checkpoint": str(file.resolve()), "pacs_sha256": sha256_of_file(file)}


def write_random_clip(folder: str | Path, *, seed: int = 0, max_length: int = 77, image_size: int = 32,
                      width: int = 32, layers: int = 2, patch_size: int | None = None, aligned: bool = False,
                      merges: Sequence[tuple[str, str]] = ()) -> Path:
    """Save a random-weight CLIP with its processor to `folder` (a byte-level tokenizer built without
    vocabulary files). No CLIP weights ship offline: this shows the plumbing, its scores mean nothing.

    aligned: shift both towers' final layer norms and make the projections non-negative, so that
    every image-caption cosine is positive (random weights otherwise give cosines of either sign).
    merges: BPE merges (pairs of byte-symbol strings, earlier first); the vocabulary is laid out as
    openai's: the 256 byte symbols, the same with '</w>', one token per merge, start and end of text."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

    from vlgap.captions.openai_clip import byte_symbols

    symbols = sorted(byte_symbols(), key=ord)  # openai's order: the printable bytes first
    vocab: dict[str, int] = {}
    for s in symbols + [s + "</w>" for s in symbols] + ["".join(m) for m in merges] + ["<|startoftext|>", "<|endoftext|>"]:
        vocab.setdefault(s, len(vocab))
    tok = CLIPTokenizer(vocab=vocab, merges=[tuple(m) for m in merges], model_max_length=max_length)
    eos, bos = vocab["<|endoftext|>"], vocab["<|startoftext|>"]
    tower = dict(hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers, num_attention_heads=2)
    config = CLIPConfig(text_config=dict(vocab_size=len(vocab), max_position_embeddings=max_length, eos_token_id=eos,
                                         bos_token_id=bos, pad_token_id=eos, **tower),
                        vision_config=dict(image_size=image_size, patch_size=patch_size or max(1, image_size // 4), **tower),
                        projection_dim=max(8, width // 2))
    torch.manual_seed(seed)
    model = CLIPModel(config).eval()
    if aligned:
        with torch.no_grad():
            model.text_model.final_layer_norm.bias += 2.0
            model.vision_model.post_layernorm.bias += 2.0
            model.text_projection.weight.abs_()
            model.visual_projection.weight.abs_()
    folder = Path(folder)
    model.save_pretrained(folder)
    crop = {"height": image_size, "width": image_size}
    CLIPProcessor(image_processor=CLIPImageProcessor(size={"shortest_edge": image_size}, crop_size=crop),
                  tokenizer=tok).save_pretrained(folder)
    return folder
