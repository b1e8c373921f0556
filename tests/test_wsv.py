"""WSV captioner: module shapes, training lowers the loss, kill + resume equals an uninterrupted run,
JSON contracts of caption/eval/gap, the falsifier on constructed latents, and clear errors."""
import json

import numpy as np
import pytest
import torch

from vlgap.errors import VlgapError
from vlgap.wsv.models import Polisher, PrefixMLP, Prompter
from vlgap.wsv.train import TrainData, WSVConfig, load_model, train

C, GRID = 8, (4, 2, 2)
TINY = dict(head_steps=2, polisher_steps=2, lm_pretrain_steps=2, caption_steps=2, batch_size=8, lm_dim=32,
            lm_layers=1, lm_heads=2, prompter_dim=16, prompter_layers=1, polisher_hidden=8, n_prompts=2,
            checkpoint_every=1, max_len=24)
CAPTIONS = ["A red circle on a black background.", "A blue square moves to the left.",
            "The green star grows and then disappears.", "Two shapes: a pink heart and a white cross.",
            "A yellow triangle in the top left corner.", "The cyan diamond turns red.",
            "Early on, the orange hexagon appears.", "A big purple star on a photo of a cat."]


def tiny_data(n=8, seed=0):
    rng = np.random.default_rng(seed)
    lat = rng.normal(size=(n, C, *GRID)).astype(np.float32)
    emb = rng.normal(size=(n, 12)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return TrainData(CAPTIONS[:n], lat, emb, real_unlabelled=rng.normal(size=(6, C, *GRID)).astype(np.float32))


def test_polisher_is_shape_preserving_identity_at_start_and_prompter_shapes():
    x = torch.randn(3, C, *GRID)
    pol = Polisher(C, hidden=8)
    assert torch.equal(pol(x), x)  # zero-initialised last convolutions
    torch.nn.init.normal_(pol.blocks[0].conv2.weight)
    assert pol(x).shape == x.shape and not torch.equal(pol(x), x)
    assert Prompter(C, GRID, d_lm=24, n_prompts=5, d_model=16)(x).shape == (3, 5, 24)
    assert PrefixMLP(12, 24, n_prompts=4)(torch.randn(3, 12)).shape == (3, 4, 24)
    with pytest.raises(VlgapError, match=r"latents must be \[B, 8, 4, 2, 2\].*got \[3, 8, 4, 3, 2\]"):
        Prompter(C, GRID, d_lm=24)(torch.randn(3, C, 4, 3, 2))


def test_short_training_lowers_the_loss_on_a_fixed_batch(tmp_path):
    cfg = WSVConfig(system="no_polisher", **{**TINY, "caption_steps": 30, "checkpoint_every": 100, "lr": 3e-3})
    train(tiny_data(), cfg, tmp_path)  # batch_size == N: every step sees the same fixed batch
    hist = [h[2] for h in load_model(tmp_path / "model.pt").history]
    assert np.mean(hist[-5:]) < 0.6 * np.mean(hist[:5])


@pytest.mark.parametrize("system", ["wsv_mmd", "frozen_lm", "text_only"])
def test_kill_and_resume_equals_uninterrupted(tmp_path, system):
    data = tiny_data()
    cfg = WSVConfig(system=system, **TINY)
    full = train(data, cfg, tmp_path / "a")
    assert train(data, cfg, tmp_path / "b", stop_after=3) is not None  # "killed" after step 3 (mid-stage)
    assert not (tmp_path / "b" / "model.pt").exists()
    resumed = train(data, cfg, tmp_path / "b")
    a, b = full.state_dict(), resumed.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ha = torch.load(tmp_path / "a" / "model.pt", weights_only=False)["history"]
    hb = torch.load(tmp_path / "b" / "model.pt", weights_only=False)["history"]
    assert ha == hb


def with_val(data, n=3, seed=1):
    rng = np.random.default_rng(seed)
    emb = rng.normal(size=(n, data.text_emb.shape[1])).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    return TrainData(data.captions, data.latents, data.text_emb, real_unlabelled=data.real_unlabelled,
                     val_captions=["A white circle grows.", "The red square moves up.", "A blue heart on gray."][:n],
                     val_latents=rng.normal(size=(n, *data.latents.shape[1:])).astype(np.float32), val_text_emb=emb)


@pytest.mark.parametrize("system", ["wsv", "text_only"])
def test_validation_loss_is_recorded_keeps_the_best_step_and_resumes_bit_exact(tmp_path, system):
    from vlgap.wsv.lm import encode_batch
    from vlgap.wsv.train import validation_loss

    data = with_val(tiny_data())
    # a large learning rate overfits the 8 captions within a few steps: the validation loss turns up
    cfg = WSVConfig(system=system, **{**TINY, "caption_steps": 12, "val_every": 1, "lr": 0.05})
    full = train(data, cfg, tmp_path / "a")
    model = load_model(tmp_path / "a" / "model.pt")
    val = [(step, loss) for stage, step, loss in model.history if stage == "val"]
    assert [step for step, _ in val] == list(range(1, 13))  # every val_every steps of the caption stage
    best_step, best_loss = min(val, key=lambda v: v[1])
    assert best_step < 12  # so the kept weights are not simply the last ones
    assert model.extra["selected"] == {"caption_step": best_step, "val_loss": best_loss} == full.selected
    tok = encode_batch(full.lm.tokenizer, data.val_captions, cfg.max_len)
    assert validation_loss(full, data, tok) == pytest.approx(best_loss, rel=1e-6)  # the kept model's loss
    # the validation draws no random numbers: the kept weights equal a run stopped at that step without it
    stopped = WSVConfig(system=system, **{**TINY, "caption_steps": best_step, "val_every": 1, "lr": 0.05,
                                          "keep_best": False})
    plain = train(tiny_data(), stopped, tmp_path / "plain")
    for k, v in plain.state_dict().items():
        assert torch.equal(v, full.state_dict()[k]), k
    # kill mid caption stage (after a validation), resume: the same weights, history and choice
    n_before = len(cfg.stages()) * 2 - 2  # the earlier stages' steps (2 each)
    train(data, cfg, tmp_path / "b", stop_after=n_before + 8)
    resumed = train(data, cfg, tmp_path / "b")
    for k, v in full.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k
    assert load_model(tmp_path / "b" / "model.pt").history == model.history
    assert resumed.selected == full.selected
    with pytest.raises(VlgapError, match=r"validation latents must be \[N=3"):
        bad = with_val(tiny_data())
        bad.val_latents = bad.val_latents[:, :, :2]
        train(bad, cfg, tmp_path / "c")


def test_checkpoint_from_another_config_is_refused(tmp_path):
    data = tiny_data()
    train(data, WSVConfig(system="no_polisher", **TINY), tmp_path, stop_after=1)
    with pytest.raises(VlgapError, match="another config.*caption_steps"):
        train(data, WSVConfig(system="no_polisher", **{**TINY, "caption_steps": 3}), tmp_path)
    with pytest.raises(VlgapError, match="not a WSV model file"):
        load_model(tmp_path / "checkpoint.pt")


def test_empty_corpus_and_mismatched_latents_are_clear_errors(tmp_path):
    d = tiny_data()
    with pytest.raises(VlgapError, match="corpus is empty"):
        train(TrainData([], d.latents[:0], d.text_emb[:0]), WSVConfig(**TINY), tmp_path)
    with pytest.raises(VlgapError, match="differ in shape"):
        bad = TrainData(d.captions, d.latents, d.text_emb, real_unlabelled=np.zeros((2, C, 4, 2, 3), np.float32))
        train(bad, WSVConfig(system="wsv_mmd", **TINY), tmp_path)
    from vlgap.wsv.evaluate import two_sample

    with pytest.raises(VlgapError, match="differ in shape"):
        two_sample(d.latents, d.latents[:, :, :2])


def test_falsifier_detects_a_known_gap_and_not_a_null_one():
    from vlgap.wsv.evaluate import latent_gap

    rng = np.random.default_rng(1)
    real = rng.normal(size=(40, 4, 2, 2, 2))
    same = rng.normal(size=(40, 4, 2, 2, 2))
    shifted = rng.normal(size=(40, 4, 2, 2, 2)) + 0.8
    res = latent_gap(real, shifted, same, n_permutations=200, n_bootstrap=200, c2st_permutations=20, seed=0)
    for side in ("raw", "polished"):
        assert {"mmd2_unbiased", "p_value", "ci", "c2st", "fd"} <= set(res[side])
    assert res["raw"]["p_value"] < 0.01 and res["raw"]["c2st"]["accuracy"] > 0.8
    assert res["polished"]["p_value"] > 0.05 and res["polished"]["mmd2_unbiased"] < res["raw"]["mmd2_unbiased"]
    assert res["polished"]["fd"] < res["raw"]["fd"]


@pytest.fixture(scope="module")
def manifest_and_model(tmp_path_factory):
    """Three real-style shapes videos in a manifest, and a tiny model trained on MobileNet latents."""
    from vlgap.data.shapes import render, sample_spec, write_captions, write_manifest_lines, write_mp4
    from vlgap.wsv.latents import MobileNetLatents

    root = tmp_path_factory.mktemp("wsv")
    rng = np.random.default_rng(3)
    items = []
    for i in range(6):
        spec = sample_spec(rng)
        write_mp4(root / f"v{i}.mp4", render(spec, 16, 64, style="real", style_seed=i))
        items.append({"id": f"v{i}", "video": f"v{i}.mp4", "captions": write_captions(spec, i)})
    write_manifest_lines(root / "m.jsonl", items)
    enc = MobileNetLatents(image_size=64)
    caps = [c for it in items for c in it["captions"][:1]]
    from vlgap.wsv.generate import ShapesT2V

    z = enc.encode(ShapesT2V().generate(caps, seed=0))
    emb = np.random.default_rng(0).normal(size=(len(caps), 12)).astype(np.float32)
    emb /= np.linalg.norm(emb, axis=1, keepdims=True)
    train(TrainData(caps, z, emb), WSVConfig(system="wsv", **{**TINY, "checkpoint_every": 10}), root / "model",
          extra={"generator": ShapesT2V().record(), "latent_encoder": enc.record()})
    return root / "m.jsonl", root / "model" / "model.pt", root


def test_caption_and_gap_json_contracts(manifest_and_model):
    from typer.testing import CliRunner

    from vlgap.cli import app

    manifest, model, root = manifest_and_model
    runner = CliRunner()
    r = runner.invoke(app, ["wsv", "caption", str(model), str(manifest), "--out", str(root / "p.json")])
    assert r.exit_code == 0, r.output
    preds = json.loads((root / "p.json").read_text())
    assert [p["image_id"] for p in preds] == [f"v{i}" for i in range(6)] and all(isinstance(p["caption"], str) for p in preds)
    r = runner.invoke(app, ["wsv", "caption", str(model), str(manifest), "--out", str(root / "pb.json"), "--beam", "3"])
    assert r.exit_code == 0, r.output
    beam = json.loads((root / "pb.json").read_text())
    assert [p["image_id"] for p in beam] == [p["image_id"] for p in preds]
    assert all(isinstance(p["caption"], str) for p in beam)
    r = runner.invoke(app, ["wsv", "gap", str(model), str(manifest), "--json", "--permutations", "20",
                            "--bootstrap", "20"])
    assert r.exit_code == 0, r.output
    g = json.loads(r.stdout)
    for side in ("raw", "polished"):
        assert {"mmd2_unbiased", "p_value", "ci", "c2st", "fd"} <= set(g[side])


@pytest.mark.serial  # METEOR's Java VM where the machine has Java: make test runs it alone
def test_eval_json_contract(manifest_and_model):
    import shutil

    from typer.testing import CliRunner

    from vlgap.cli import app

    manifest, model, root = manifest_and_model
    runner = CliRunner()
    r = runner.invoke(app, ["wsv", "caption", str(model), str(manifest), "--out", str(root / "pe.json")])
    assert r.exit_code == 0, r.output
    r = runner.invoke(app, ["wsv", "eval", str(root / "pe.json"), str(manifest), "--json", "--bootstrap", "50"])
    assert r.exit_code == 0, r.output
    res = json.loads(r.stdout)
    assert res["n"] == 6 and 0 < res["distinct"]["share"] <= 1
    for k in ("BLEU-4", "ROUGE-L", "CIDEr") + (("METEOR",) if shutil.which("java") else ()):
        assert set(res[k]) >= {"score", "ci"}, k


def test_manifest_without_videos_is_refused(tmp_path):
    from vlgap.data.shapes import write_manifest_lines
    from vlgap.wsv.api import manifest_latents

    from PIL import Image

    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(tmp_path / "a.png")
    write_manifest_lines(tmp_path / "m.jsonl", [{"id": "a", "image": "a.png", "captions": ["x"]}])
    with pytest.raises(VlgapError, match=r"\['a'\] are not videos"):
        manifest_latents(tmp_path / "m.jsonl")


def test_vae_latents_and_diffusers_adapter_on_a_tiny_random_vae():
    pytest.importorskip("diffusers")
    from diffusers import AutoencoderKLCogVideoX

    from vlgap.data.shapes import render, sample_spec
    from vlgap.wsv.generate import DiffusersT2V, ShapesT2V
    from vlgap.wsv.latents import VaeLatents

    torch.manual_seed(0)
    vae = AutoencoderKLCogVideoX(in_channels=3, out_channels=3, down_block_types=("CogVideoXDownBlock3D",) * 2,
                                 up_block_types=("CogVideoXUpBlock3D",) * 2, block_out_channels=(8, 8),
                                 latent_channels=4, layers_per_block=1, norm_num_groups=2,
                                 temporal_compression_ratio=4, sample_height=16, sample_width=16)
    v = render(sample_spec(np.random.default_rng(0)), 9, 16)
    z = VaeLatents(vae).encode([v, v])
    assert z.shape[:2] == (2, 4) and z.shape[3:] == (8, 8) and z.shape[2] < 9  # time compressed
    assert np.array_equal(z[0], z[1])

    class LatentPipeline:
        """Pipeline-shaped test double: a VAE and __call__(prompt, generator, output_type='latent') that
        returns CogVideoX-style [1, F, C, H, W] latents of the offline generator's clip."""

        def __init__(self, vae):
            self.vae = vae

        def __call__(self, prompt, generator, output_type):
            assert output_type == "latent"
            clip = ShapesT2V(n_frames=9, size=16).generate([prompt], seed=int(generator.initial_seed()))[0]
            lat = torch.from_numpy(VaeLatents(self.vae).encode([clip]))  # [1, C, F, H, W]
            return type("Out", (), {"frames": lat.transpose(1, 2)})()

    out = DiffusersT2V(LatentPipeline(vae)).generate_latents(["A red circle.", "A blue square."], seed=1)
    assert out.shape == z.shape
    with pytest.raises(VlgapError, match="exposes no .vae"):
        DiffusersT2V(object())


def test_mobilenet_latent_max_pooling_is_the_max_of_the_frame_features_and_keys_apart():
    import torch.nn.functional as F

    from vlgap.wsv.latents import IMAGENET_MEAN, IMAGENET_STD, MobileNetLatents

    video = np.random.default_rng(0).integers(0, 256, size=(4, 32, 32, 3), dtype=np.uint8)
    avg = MobileNetLatents(block=3, grid=(2, 2, 2), image_size=32)
    mx = MobileNetLatents(block=3, grid=(2, 2, 2), image_size=32, pooling="max")
    x = (torch.from_numpy(video).permute(0, 3, 1, 2).float() / 255.0 - torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)) \
        / torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    with torch.no_grad():
        feats = mx.net(x).permute(1, 0, 2, 3)  # [C, T, h, w] = [24, 4, 8, 8]
    want = feats.reshape(24, 2, 2, 2, 4, 2, 4).amax(dim=(2, 4, 6)).numpy()  # 2x2x2 cells of 2x4x4 features
    np.testing.assert_allclose(mx.encode([video])[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(avg.encode([video])[0], F.avg_pool3d(feats[None], (2, 4, 4))[0].numpy(), rtol=1e-5,
                               atol=1e-6)
    assert "max pool" in mx.record()["pooling"] and "average pool" in avg.record()["pooling"]
    with pytest.raises(VlgapError, match="pooling 'mean' is not valid; valid: avg, max"):
        MobileNetLatents(pooling="mean")


@pytest.mark.parametrize("system", ["wsv", "frozen_lm"])
def test_polishing_the_corpus_once_trains_as_polishing_each_batch(tmp_path, monkeypatch, system):
    """The caption stage reads the frozen polisher's output computed once for the whole corpus; with the
    size limit at 0 it polishes each batch instead: the same losses and weights, bit for bit (the
    polisher treats each latent on its own, whatever its batch)."""
    import vlgap.wsv.train as wsv_train

    data = tiny_data()
    cfg = WSVConfig(system=system, **{**TINY, "polisher_steps": 4, "caption_steps": 6})
    once = train(data, cfg, tmp_path / "once")
    monkeypatch.setattr(wsv_train, "POLISH_ONCE_BYTES", 0)
    each = train(data, cfg, tmp_path / "each")
    assert load_model(tmp_path / "once" / "model.pt").history == load_model(tmp_path / "each" / "model.pt").history
    for k, v in once.state_dict().items():
        assert torch.equal(v, each.state_dict()[k]), k
    assert once.polisher.blocks[0].conv2.weight.abs().sum() > 0  # the polisher trained: not the identity


def _first_converged_step(val, start, threshold):
    """Naive reference: the first validation step >= start at which the curve's lowest point improved by at
    most `threshold` over the last fifth ((lowest loss at or before 0.8 * step - lowest loss after it, or 0)
    / the former)."""
    for k, (step, _) in enumerate(val):
        if step < start:
            continue
        before = [v for t, v in val[:k + 1] if t <= 0.8 * step]
        within = [v for t, v in val[:k + 1] if t > 0.8 * step]
        if before and within and max(min(before) - min(within), 0) / min(before) <= threshold:
            return step
    return None


# the validation loss keeps setting new lows past the minimum, then stops (37 and 14 steps here)
@pytest.mark.parametrize("lr, minimum", [(3e-3, 15), (0.01, 5)])
def test_training_until_converged_stops_at_the_first_flat_validation_and_resumes_bit_exact(tmp_path, lr, minimum):
    from vlgap.wsv.convergence import STILL_FALLING

    data = with_val(tiny_data())
    cfg = WSVConfig(system="no_polisher", **{**TINY, "caption_steps": minimum, "max_caption_steps": 60,
                                             "val_every": 1, "checkpoint_every": 3, "lr": lr})
    full = train(data, cfg, tmp_path / "a")
    hist = load_model(tmp_path / "a" / "model.pt").history
    val = [(step, loss) for stage, step, loss in hist if stage == "val"]
    ran = max(step for stage, step, _ in hist if stage == "caption")
    expected = _first_converged_step(val, minimum, STILL_FALLING)
    assert ran == (expected if expected is not None else 60)
    assert [s for s, _ in val] == list(range(1, ran + 1))
    assert minimum < ran < 60  # it went on past caption_steps, and stopped before the limit
    # killed while past caption_steps, resumed: the same stopping step, history and weights
    train(data, cfg, tmp_path / "b", stop_after=ran - 1)
    resumed = train(data, cfg, tmp_path / "b")
    assert load_model(tmp_path / "b" / "model.pt").history == hist
    for k, v in full.state_dict().items():
        assert torch.equal(v, resumed.state_dict()[k]), k


def test_training_until_converged_stops_at_the_step_limit_when_never_flat(tmp_path, monkeypatch):
    import vlgap.wsv.convergence as convergence

    monkeypatch.setattr(convergence, "STILL_FALLING", -1.0)  # no curve ever counts as converged
    cfg = WSVConfig(system="text_only", **{**TINY, "caption_steps": 3, "max_caption_steps": 9, "val_every": 2})
    train(with_val(tiny_data()), cfg, tmp_path)
    hist = load_model(tmp_path / "model.pt").history
    assert max(step for stage, step, _ in hist if stage == "caption") == 9
    assert [step for stage, step, _ in hist if stage == "val"] == [2, 3, 4, 6, 8, 9]  # every 2nd, the minimum, the limit
    # without a step limit, exactly caption_steps (the validation at its last step included)
    fixed = WSVConfig(system="text_only", **{**TINY, "caption_steps": 3, "val_every": 2})
    train(with_val(tiny_data()), fixed, tmp_path / "fixed")
    assert max(s for st, s, _ in load_model(tmp_path / "fixed" / "model.pt").history if st == "caption") == 3


def test_training_until_converged_needs_validation_pairs_and_a_limit_above_the_minimum(tmp_path):
    with pytest.raises(VlgapError, match="max_caption_steps 4 is below caption_steps 5"):
        WSVConfig(system="wsv", **{**TINY, "caption_steps": 5, "max_caption_steps": 4})
    with pytest.raises(VlgapError, match="max_caption_steps needs val_every > 0"):
        WSVConfig(system="wsv", **{**TINY, "max_caption_steps": 40, "val_every": 0})
    with pytest.raises(VlgapError, match="needs validation pairs"):
        train(tiny_data(), WSVConfig(system="wsv", **{**TINY, "max_caption_steps": 40}), tmp_path)


def test_experiment_training_until_converged_needs_validation_scenes():
    from vlgap.wsv.experiment import ExperimentConfig

    with pytest.raises(VlgapError, match=r"--n-val 0 leaves no held-out caption loss.*--max-caption-steps 0"):
        ExperimentConfig(n_val=0, systems=("wsv",), train={"caption_steps": 50, "max_caption_steps": 100})
    assert ExperimentConfig(n_val=0, systems=("wsv",), train={"caption_steps": 50}).n_val == 0  # fixed steps: fine
    # a limit of 0 stays out of the record (the cells' keys), as before the setting existed
    rec = ExperimentConfig(systems=("wsv",), train={"caption_steps": 50, "max_caption_steps": 0}).record()
    assert rec["train"] == {"caption_steps": 50}
