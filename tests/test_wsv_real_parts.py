"""WSV with real parts, on tiny random-weight twins saved to folders (tests/helpers/tiny_wsv_parts.py):
a CogVideoX pipeline (tiny transformer, T5 encoder, VAE, scheduler) as the generator and its VAE as the
latent space, a tiny CLIP as the polisher's frozen video-text model, a tiny GPT-2 (by hub id, from an
offline Hugging Face cache) as the LM. The whole train -> caption -> eval -> gap path runs through the
CLI on an MSR-VTT manifest written by `vlgap import msrvtt` (real mp4 files), at bfloat16 on CPU; the
adapters are compared against the models' own forwards; kill + resume stays bit-exact; the per-caption
generation cache regenerates only what is missing; other parts are refused with the difference named."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from tiny_wsv_parts import lay_out_hub_cache, make_tiny_clip, make_tiny_cogvideox, make_tiny_gpt2
from vlgap.cli import app
from vlgap.errors import VlgapError

pytest.importorskip("diffusers")

GPT2_HUB_ID = "tiny-org/tiny-gpt2"
CORPUS = ["a red circle moves left", "a blue square grows", "a green star on a black background",
          "a yellow heart moves up and then disappears", "a big white square shrinks", "a small red star moves right"]
STEPS = ["--polisher-steps", "1", "--caption-steps", "2", "--batch-size", "3", "--checkpoint-every", "1"]
SMALL = ["--n-frames", "9", "--size", "16", "--generator-steps", "1"]


@pytest.fixture(scope="module")
def twins(tmp_path_factory):
    root = tmp_path_factory.mktemp("wsv_parts")
    out = {"root": root, "pipe": make_tiny_cogvideox(root / "cogvideox"), "clip": make_tiny_clip(root / "clip"),
           "gpt2": make_tiny_gpt2(root / "gpt2"), "hf_home": root / "hf_home"}
    lay_out_hub_cache(out["hf_home"], GPT2_HUB_ID, out["gpt2"])
    (root / "corpus.txt").write_text("\n".join(CORPUS) + "\n")
    out["manifest"] = _msrvtt_manifest(root)
    return out


def _msrvtt_manifest(root):
    """Six real mp4 clips (rendered shapes scenes) with MSR-VTT 2016 annotations, imported by the CLI."""
    from vlgap.data.shapes import render, sample_spec, write_captions, write_mp4

    rng = np.random.default_rng(5)
    videos, sentences = [], []
    (root / "videos").mkdir()
    for i in range(6):
        spec = sample_spec(rng)
        write_mp4(root / "videos" / f"video{i}.mp4", render(spec, 12, 24, style="real", style_seed=i))
        videos.append({"category": 0, "url": "u", "video_id": f"video{i}", "start time": 0.0, "end time": 1.0,
                       "split": "test", "id": i})
        sentences += [{"caption": c, "video_id": f"video{i}", "sen_id": 10 * i + k}
                      for k, c in enumerate(write_captions(spec, i)[:3])]
    ann = root / "test_videodatainfo.json"
    ann.write_text(json.dumps({"videos": videos, "sentences": sentences}))
    r = CliRunner().invoke(app, ["import", "msrvtt", str(ann), str(root / "videos"), "--out",
                                 str(root / "msrvtt.jsonl"), "--split", "test"])
    assert r.exit_code == 0, r.output
    return root / "msrvtt.jsonl"


@pytest.fixture
def offline_hub(twins, monkeypatch):
    import huggingface_hub.constants as hf_constants

    monkeypatch.setenv("HF_HOME", str(twins["hf_home"]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(twins["hf_home"] / "hub"))
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", True)


def _run(args):
    r = CliRunner().invoke(app, [str(a) for a in args])
    assert r.exit_code == 0, (r.output, r.exception)
    return r


def test_train_caption_eval_gap_through_real_parts_at_bfloat16(twins, offline_hub, tmp_path):
    from vlgap.wsv.parts import folder_fingerprint
    from vlgap.wsv.train import load_model

    pipe, clip, cache = twins["pipe"], twins["clip"], tmp_path / "cache"
    model_dir = tmp_path / "model"
    _run(["wsv", "train", "--out", model_dir, "--corpus", twins["root"] / "corpus.txt",
          "--generator", f"diffusers:{pipe}", "--video-text", f"clip:{clip}", "--lm", f"hf:{GPT2_HUB_ID}",
          "--dtype", "bfloat16", "--device", "cpu", "--cache-dir", cache, *SMALL, *STEPS])
    bundle = load_model(model_dir / "model.pt")
    parts = bundle.extra["parts"]
    # the default latent space of a diffusers generator is its own VAE; every part is recorded with its weights
    assert parts["latents"]["spec"] == f"vae:{pipe}" and parts["latents"]["subfolder"] == "vae"
    assert parts["latents"]["weights"] == folder_fingerprint(pipe / "vae")
    assert parts["latents"]["n_frames"] == 9 and parts["latents"]["size"] == 16
    assert parts["latents"]["dtype"] == "bfloat16"
    assert parts["generator"]["call"] == {"num_frames": 9, "height": 16, "width": 16, "num_inference_steps": 1}
    assert parts["video_text"]["spec"] == f"clip:{clip}" and parts["video_text"]["weights"].startswith("sha256:")
    assert bundle.lm.record["source"] == f"hf:{GPT2_HUB_ID}" and bundle.cfg.lora_r == 0  # GPT-2 fully fine-tuned
    assert bundle.lm.record["weights"] == "hub snapshot " + (twins["hf_home"] / "hub" / "models--tiny-org--tiny-gpt2"
                                                             / "refs" / "main").read_text()
    assert bundle.head is None and bundle.cfg.stages() == ("polisher", "caption")  # CLIP replaces the tower
    assert bundle.latent_shape == (4, 3, 4, 4)  # CogVideoX VAE: 9 frames -> 3, 16 px -> 4
    assert [h[0] for h in bundle.history] == ["polisher"] + ["caption"] * 2

    preds = tmp_path / "preds.json"
    _run(["wsv", "caption", model_dir / "model.pt", twins["manifest"], "--out", preds, "--dtype", "bfloat16"])
    got = json.loads(preds.read_text())
    assert [p["image_id"] for p in got] == [f"video{i}" for i in range(6)]
    assert all(isinstance(p["caption"], str) for p in got)
    # METEOR's Java VM would make this test `serial`; wsv eval's default metrics: tests/test_wsv.py
    r = _run(["wsv", "eval", preds, twins["manifest"], "--json", "--bootstrap", "20", "--metrics", "bleu,rouge,cider"])
    res = json.loads(r.stdout)
    assert res["n"] == 6 and {"score", "ci"} <= set(res["CIDEr"]) and "METEOR" not in res
    r = _run(["wsv", "gap", model_dir / "model.pt", twins["manifest"], "--json", "--permutations", "10",
              "--bootstrap", "10", "--cache-dir", cache])
    gap = json.loads(r.stdout)
    assert gap["latent_space"]["spec"] == f"vae:{pipe}"
    for side in ("raw", "polished"):
        assert gap[side]["n_real"] == 6 and gap[side]["n_synthetic"] == 6
        assert {"mmd2_unbiased", "p_value", "ci", "c2st", "fd"} <= set(gap[side])


def test_generated_latents_are_the_pipelines_own_and_cached_per_caption(twins, tmp_path):
    from diffusers import DiffusionPipeline

    from vlgap.wsv.parts import build_parts, generated_latents

    parts = build_parts(f"diffusers:{twins['pipe']}", n_frames=9, size=16, generator_steps=1)
    lines: list[str] = []
    z = generated_latents(parts.generator, parts.encoder, CORPUS[:4], seed=3, cache_dir=tmp_path, log=lines.append)
    assert z.shape == (4, 4, 3, 4, 4)
    # caption 2's latent equals the pipeline's own output for it (generator seed 3 * 100003 + 2), channels first
    pipe = DiffusionPipeline.from_pretrained(twins["pipe"])
    own = pipe(prompt=CORPUS[2], num_frames=9, height=16, width=16, num_inference_steps=1, output_type="latent",
               generator=torch.Generator().manual_seed(3 * 100003 + 2)).frames
    np.testing.assert_array_equal(z[2], own[0].transpose(0, 1).float().numpy())
    files = sorted((tmp_path / "wsv" / "generated").glob("*/*.npy"))
    assert len(files) == 4
    # a "killed" run: two clips never written; the rerun generates exactly those and nothing else
    files[0].unlink()
    files[3].unlink()
    lines.clear()
    again = generated_latents(parts.generator, parts.encoder, CORPUS[:4], seed=3, cache_dir=tmp_path,
                              log=lines.append)
    np.testing.assert_array_equal(again, z)
    assert any("2 of 4 latents generated, 2 from the cache" in ln for ln in lines), lines
    # a file whose bytes changed (a torn write, a flipped byte) is said and regenerated, never read
    raw = bytearray(files[1].read_bytes())
    raw[-1] ^= 0xFF
    files[1].write_bytes(bytes(raw))
    lines.clear()
    np.testing.assert_array_equal(generated_latents(parts.generator, parts.encoder, CORPUS[:4], seed=3,
                                                    cache_dir=tmp_path, log=lines.append), z)
    assert any("1 of 4 latents generated" in ln for ln in lines), lines
    # with another latent space the pipeline's decoded frames are encoded by it
    other = build_parts(f"diffusers:{twins['pipe']}", "mobilenet", n_frames=9, size=16, generator_steps=1)
    frames = pipe(prompt=CORPUS[1], num_frames=9, height=16, width=16, num_inference_steps=1, output_type="np",
                  generator=torch.Generator().manual_seed(1)).frames[0]
    want = other.encoder.encode([(np.clip(frames, 0, 1) * 255).round().astype(np.uint8)])[0]
    np.testing.assert_array_equal(other.generator.one(CORPUS[1], 1, other.encoder, seed=0), want)


def test_vae_latents_equal_the_vaes_own_encode_and_bad_counts_are_refused(twins):
    from diffusers import AutoencoderKLCogVideoX

    from vlgap.wsv.parts import build_latent_encoder

    vae = AutoencoderKLCogVideoX.from_pretrained(twins["pipe"] / "vae")
    rng = np.random.default_rng(0)
    video = rng.integers(0, 256, (9, 16, 16, 3), dtype=np.uint8)
    x = torch.from_numpy(video).permute(3, 0, 1, 2)[None].float() / 127.5 - 1.0
    for dtype in ("float32", "bfloat16"):
        enc = build_latent_encoder(f"vae:{twins['pipe']}", n_frames=9, size=16, dtype=dtype)
        dt = getattr(torch, dtype)
        with torch.no_grad():
            ref = vae.to(dt).encode(x.to(dt)).latent_dist.mode().float() * vae.config.scaling_factor
        np.testing.assert_array_equal(enc.encode([video])[0], ref[0].numpy())
        assert enc.record()["dtype"] == dtype
    # another frame count or size is resampled to the recorded one (here: 17 frames -> every other one)
    long = np.repeat(video, 2, axis=0)[:17]
    enc = build_latent_encoder(f"vae:{twins['pipe']}", n_frames=9, size=16)
    np.testing.assert_array_equal(enc.encode([long])[0], enc.encode([long[::2]])[0])
    with pytest.raises(VlgapError, match=r"--n-frames 16: .* takes 4k\+1 frames, e\.g\. 13 or 17$"):
        build_latent_encoder(f"vae:{twins['pipe']}", n_frames=16, size=16)
    with pytest.raises(VlgapError, match=r"--size 18: .* multiple of 4, e\.g\. 16 or 20$"):
        build_latent_encoder(f"vae:{twins['pipe']}", n_frames=9, size=18)


def test_wan_vae_latents_are_normalised_as_its_pipeline_normalises_them():
    """Wan's pipeline latents are (z - latents_mean) / latents_std; decode inverts that."""
    from diffusers import AutoencoderKLWan

    from vlgap.wsv.latents import VaeLatents

    torch.manual_seed(0)
    mean, std = [0.1, -0.2, 0.3, 0.0], [1.5, 2.0, 0.5, 1.0]
    vae = AutoencoderKLWan(base_dim=8, z_dim=4, dim_mult=[1, 1, 1], num_res_blocks=1, temperal_downsample=[False, True],
                           latents_mean=mean, latents_std=std, scale_factor_temporal=2, scale_factor_spatial=4).eval()
    enc = VaeLatents(vae, n_frames=9, size=16)
    video = np.random.default_rng(0).integers(0, 256, (9, 16, 16, 3), dtype=np.uint8)
    z = enc.encode([video])
    x = torch.from_numpy(video).permute(3, 0, 1, 2)[None].float() / 127.5 - 1.0
    with torch.no_grad():
        mode = vae.encode(x).latent_dist.mode()
        want = (mode - torch.tensor(mean).view(1, 4, 1, 1, 1)) / torch.tensor(std).view(1, 4, 1, 1, 1)
        np.testing.assert_allclose(z, want.numpy(), rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(enc.decode(torch.from_numpy(z)), vae.decode(mode).sample.clamp(-1, 1),
                                   rtol=1e-4, atol=1e-5)
    assert z.shape == (1, 4, 5, 4, 4)  # time / 2 (4 + 1 latent frames from 9), space / 4
    with pytest.raises(VlgapError, match=r"takes 2k\+1 frames, e\.g\. 7 or 9$"):
        VaeLatents(vae, n_frames=8, size=16)


def test_clip_video_text_equals_clipmodels_own_forward(twins):
    from transformers import CLIPModel, CLIPProcessor

    from vlgap.wsv.parts import build_latent_encoder, build_video_text

    enc = build_latent_encoder(f"vae:{twins['pipe']}", n_frames=9, size=16)
    vt = build_video_text(f"clip:{twins['clip']}", enc)
    model, proc = CLIPModel.from_pretrained(twins["clip"]).eval(), CLIPProcessor.from_pretrained(twins["clip"])
    rng = np.random.default_rng(1)
    frames = rng.integers(0, 256, (2, 3, 16, 16, 3), dtype=np.uint8)  # 2 videos of 3 frames at CLIP's size
    caps = ["a red circle", "a blue square moves left"]
    with torch.no_grad():
        out = model(**proc(text=caps, images=list(frames.reshape(6, 16, 16, 3)), return_tensors="pt",
                           padding=True))
        per_frame = out.image_embeds.view(2, 3, -1)  # CLIP's own normalised frame embeddings
        want = torch.nn.functional.normalize(per_frame.mean(1), dim=-1)  # CLIP4Clip mean pooling
        video = torch.from_numpy(frames).permute(0, 4, 1, 2, 3).float() / 127.5 - 1.0
        got = vt.embed_videos(video)
    torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    np.testing.assert_allclose(vt.embed_texts(caps), out.text_embeds.numpy(), atol=2e-5, rtol=1e-4)
    # the latent path decodes with the VAE first, and gradients reach the latent
    z = torch.zeros(1, 4, 3, 4, 4, requires_grad=True)
    vt.embed_latents(z).sum().backward()
    assert z.grad is not None and z.grad.abs().sum() > 0
    with pytest.raises(VlgapError, match="needs a video VAE as the latent space"):
        build_video_text(f"clip:{twins['clip']}", build_latent_encoder("mobilenet", n_frames=9, size=32))


@pytest.mark.parametrize("system", ["wsv", "text_only"])
def test_kill_and_resume_is_bit_exact_with_clip_and_gpt2_at_bfloat16(twins, tmp_path, system):
    from vlgap.wsv.lm import build_pretrained_lm
    from vlgap.wsv.parts import build_latent_encoder, build_video_text
    from vlgap.wsv.train import TrainData, WSVConfig, train

    enc = build_latent_encoder(f"vae:{twins['pipe']}", n_frames=9, size=16, dtype="bfloat16")
    vt = build_video_text(f"clip:{twins['clip']}", enc, dtype="bfloat16")
    rng = np.random.default_rng(0)
    data = TrainData(CORPUS, rng.normal(size=(6, 4, 3, 4, 4)).astype(np.float32), vt.embed_texts(CORPUS),
                     parts={"video_text": vt.record()})
    cfg = WSVConfig(system=system, lm=f"hf:{twins['gpt2']}", video_text="clip", dtype="bfloat16",
                    polisher_steps=1, caption_steps=3, batch_size=2, checkpoint_every=1, n_prompts=2)
    full = train(data, cfg, tmp_path / "a", video_text=vt)
    train(data, cfg, tmp_path / "b", video_text=vt, stop_after=len(cfg.stages()) + 1)  # "killed" mid-run
    resumed = train(data, cfg, tmp_path / "b", video_text=vt)
    a, b = full.state_dict(), resumed.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert full.lm.record["source"].startswith("hf:")
    assert sum(p.numel() for p in full.lm.parameters()) == sum(
        p.numel() for p in build_pretrained_lm(f"hf:{twins['gpt2']}").parameters())  # no adapters: full fine-tune


def test_lora_r_puts_peft_adapters_on_gpt2_and_only_they_train(twins):
    from vlgap.wsv.lm import build_pretrained_lm
    from vlgap.wsv.train import WSVConfig

    assert WSVConfig(lm=f"hf:{twins['gpt2']}").lora_r == 0 and WSVConfig(lm="smollm2").lora_r == 8
    lm = build_pretrained_lm(f"hf:{twins['gpt2']}", lora_r=2)
    names = [n for n, _ in lm.model.named_parameters()]
    assert any("lora_A" in n for n in names) and lm.record["lora_r"] == 2
    assert {n for n, p in lm.model.named_parameters() if p.requires_grad} == {n for n in names if "lora_" in n}


def test_a_lora_run_stores_only_what_trains_and_resumes_bit_exact(twins, tmp_path):
    """Under LoRA the pretrained LM's base weights never change: checkpoint.pt and model.pt leave them out
    (rebuilt from the LM's source when read), resumption stays bit-exact, the loaded model equals the
    trained one, and a base LM whose weights changed since training is refused in one line."""
    import io
    import shutil

    from transformers import AutoModelForCausalLM

    from vlgap.wsv.train import TrainData, WSVConfig, fixed_lm_keys, load_model, train

    gpt2 = tmp_path / "gpt2"
    shutil.copytree(twins["gpt2"], gpt2)
    rng = np.random.default_rng(0)
    data = TrainData(CORPUS, rng.normal(size=(6, 4, 3, 4, 4)).astype(np.float32),
                     rng.normal(size=(6, 16)).astype(np.float32))
    cfg = WSVConfig(system="wsv", lm=f"hf:{gpt2}", lora_r=2, head_steps=1, polisher_steps=1, caption_steps=3,
                    batch_size=2, checkpoint_every=1, n_prompts=2)
    full = train(data, cfg, tmp_path / "a")
    train(data, cfg, tmp_path / "b", stop_after=len(cfg.stages()) + 1)  # "killed" mid-run
    resumed = train(data, cfg, tmp_path / "b")
    a, b = full.state_dict(), resumed.state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    fixed = fixed_lm_keys(full, a)
    assert fixed and all(k.startswith("lm.") and "lora_" not in k for k in fixed)
    assert any("lora_A" in k for k in a) and any("lora_A" in k for k in a if k not in fixed)
    for name in ("model.pt", "checkpoint.pt"):
        stored = torch.load(io.BytesIO((tmp_path / "a" / name).read_bytes()), weights_only=False)
        assert set(stored["modules"]) == set(a) - set(fixed), name  # no base weight stored, every trained one
        assert stored["fixed_lm"]["n_tensors"] == len(fixed)
    loaded = load_model(tmp_path / "a" / "model.pt")
    c = loaded.state_dict()
    assert c.keys() == a.keys() and all(torch.equal(a[k], c[k]) for k in a)

    # the same LM spec, fully fine-tuned, stores every weight
    full_ft = train(data, WSVConfig(**{**cfg.__dict__, "lora_r": 0}), tmp_path / "c")
    assert fixed_lm_keys(full_ft, full_ft.state_dict()) == []
    assert "fixed_lm" not in torch.load(io.BytesIO((tmp_path / "c" / "model.pt").read_bytes()), weights_only=False)

    model = AutoModelForCausalLM.from_pretrained(gpt2)  # the base LM's files change after training
    with torch.no_grad():
        next(model.parameters()).add_(0.5)
    model.save_pretrained(gpt2)
    with pytest.raises(VlgapError, match="now has other weights than the ones this file was trained with"):
        load_model(tmp_path / "a" / "model.pt")


def test_other_parts_are_refused_with_the_difference_named(twins, tmp_path):
    from vlgap.wsv.api import caption_manifest, train_system
    from vlgap.wsv.parts import build_parts

    common = dict(corpus=CORPUS, system="no_polisher", caption_steps=1, batch_size=3, cache_dir=tmp_path / "c",
                  n_frames=9, size=16)
    model = train_system(tmp_path / "m", latents=f"vae:{twins['pipe']}", **common)
    with pytest.raises(VlgapError, match=r"another configuration \(.*parts\.latents"):
        train_system(tmp_path / "m", latents="mobilenet", **common)
    with pytest.raises(VlgapError, match=r"--latents: the latent encoder differs from the one the model was trained "
                                         r"with \(encoder: trained 'AutoencoderKLCogVideoX' vs given 'mobilenet_v2'"):
        caption_manifest(model, twins["manifest"], latents="mobilenet")
    for kw, msg in ((dict(generator="dalle:x"), r"--generator 'dalle:x' is not valid; valid: shapes"),
                    (dict(latents="vae:"), r"--latents 'vae:': nothing after 'vae:'"),
                    (dict(video_text="clip:/no/such/dir"), r"--video-text clip: '/no/such/dir': folder does not"),
                    (dict(dtype="int8"), r"dtype 'int8' \(--dtype\) is not valid here; valid: float32 \(fp32, float\), "
                                         r"bfloat16 \(bf16\), float16"),
                    (dict(device="tpu0"), r"device 'tpu0' \(--device\) is not valid here; valid: cpu, cuda")):
        with pytest.raises(VlgapError, match=msg) as err:
            build_parts(**{"n_frames": 9, "size": 16, **kw})
        assert "\n" not in str(err.value)
    r = CliRunner().invoke(app, ["wsv", "train", "--out", str(tmp_path / "x"), "--lm", "hf:"])
    assert isinstance(r.exception, VlgapError) and re.match(r"--lm 'hf:' is not valid", str(r.exception))


def test_experiment_runs_with_a_diffusers_generator_in_its_vae_latent_space(twins, tmp_path):
    from vlgap.wsv.experiment import ExperimentConfig, run_experiment

    cfg = ExperimentConfig(n_train=1, n_eval=5, n_unlabelled=0, n_val=1, seeds=(0,), systems=("no_polisher",),
                           generators=("diffusers",),
                           n_frames=9, size=16, n_bootstrap=0, n_permutations=10, c2st_permutations=5,
                           metrics=("bleu", "rouge", "cider"),  # without METEOR's Java VM: not `serial`
                           parts={"generator": f"diffusers:{twins['pipe']}", "generator_steps": 1},
                           train=dict(caption_steps=1, batch_size=4, lm_dim=16,
                                      lm_layers=1, lm_heads=2, prompter_dim=8, prompter_layers=1, n_prompts=2))
    summary = run_experiment(tmp_path / "exp", cfg, cache_dir=tmp_path / "cache", log=lambda line: None)
    assert summary["n_cells"] == 1 and summary["rows"][0]["generator"] == "diffusers"
    assert summary["raw_gap"]["diffusers"]["n_real"] == 5
    cell = json.loads((tmp_path / "exp" / "cells" / "diffusers-no_polisher-s0.json").read_text())
    assert set(cell["predictions"]) == {f"eval_{i:05d}" for i in range(5)}
    # one latent file per caption: the corpus (10 captions of one scene), the 5 held-out captions and the
    # validation scene's captions
    n_val = json.loads((tmp_path / "exp" / "hygiene.json").read_text())["val_captions"]
    assert n_val == 10 and cell["loss_curves"]["val"][-1][0] == 1
    assert len(list((tmp_path / "cache" / "wsv" / "generated").glob("*/*.npy"))) == 10 + 5 + n_val
    # the inversion check captions those 5 held-out latents (no new generation), attributes against the
    # evaluation scenes (what a diffusers generator drew is unknown)
    inv = json.loads((tmp_path / "exp" / "inversion" / "diffusers-no_polisher-s0.json").read_text())
    assert set(inv["predictions_synthetic"]) == set(cell["predictions"]) and inv["real"]["n"] == 5
    assert summary["inversion"]["synthetic_specs"] == [inv["synthetic_specs"]] and "evaluation scene" in inv["synthetic_specs"]
    with pytest.raises(VlgapError, match="render styles belong to the shapes generator"):
        ExperimentConfig(generators=("synthetic", "real"), parts={"generator": f"diffusers:{twins['pipe']}"})
