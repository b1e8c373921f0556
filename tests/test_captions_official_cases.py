"""The captions on which vlgap's official conventions used to differ from the official code: per item,
CLIPScore, RefCLIPScore, PAC-S and EMScore (idf on and off) equal the ports of jmhessel/clipscore,
aimagelab/pacscore and ShiYaya/emscore (tests/helpers/official_caption_ports.py) within 1e-5, on a tiny
random CLIP whose tokenizer has learnt BPE merges."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import official_caption_ports as port
from test_captions_official import write_media, write_pictures
from test_captions_openai_tokenizer import CASES, ORDINARY, learn_merges, random_captions
from vlgap.errors import VlgapError

TOL = 1e-5
LITERAL = ["a dog <|endoftext|> runs on the grass", "<|endoftext|> at the very start", "two <|ENDOFTEXT|> cats",
           "a <|startoftext|> marker inside"]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    from vlgap.captions.clip_model import write_random_clip

    merges = learn_merges(ORDINARY * 3 + random_captions(200, seed=1) + list(CASES.values()) + LITERAL, 300)
    return write_random_clip(tmp_path_factory.mktemp("cases") / "clip", max_length=40, image_size=32, patch_size=8,
                             width=32, layers=2, seed=3, merges=merges)


def _captions(n: int, shift: int = 0) -> list[str]:
    pool = list(CASES.values()) + LITERAL + ["a man riding a horse", "food on a plate"]
    return [pool[(k + shift) % len(pool)] for k in range(n)]


@pytest.mark.parametrize("pacs", [False, True], ids=["clipscore", "pac-s"])
def test_clip_scores_of_the_cases_equal_official(folder, tmp_path, pacs):
    import torch
    import vlgap
    from transformers import CLIPModel

    from test_captions_embedding import _openai_layout
    from vlgap.captions.clip_model import load_clip
    from vlgap.captions.embedding_scores import clip_scores
    from vlgap.captions.openai_clip import openai_clean

    pictures = write_pictures(tmp_path / "pictures", 32, seed=4)
    ids = list(pictures)
    cands = _captions(len(ids))
    refs = [[r for r in _captions(1 + n % 3, shift=n + 2)] for n in range(len(ids))]
    spec = f"hf:{folder}"
    if pacs:
        torch.save({"state_dict": _openai_layout(CLIPModel.from_pretrained(folder).state_dict())}, tmp_path / "p.pth")
        spec = f"pacs:{tmp_path / 'p.pth'}@{folder}"
    res = vlgap.caption_eval(dict(zip(ids, cands)), dict(zip(ids, refs)), "clipscore,refclipscore",
                             images=tmp_path / "pictures", clip=spec, per_item=True)
    rows = {r["id"]: r for r in res["per_item"]}
    per, ref = port.clipscore_main(folder, [pictures[i] for i in ids], cands, refs, w=2.0 if pacs else 2.5)
    np.testing.assert_allclose([rows[i]["CLIPScore"] for i in ids], per, atol=TOL, rtol=0)
    np.testing.assert_allclose([rows[i]["RefCLIPScore"] for i in ids], ref, atol=TOL, rtol=0)
    # vlgap's earlier official path (transformers' tokenizer after openai's cleaning) is off on these items
    clip = load_clip(spec)
    earlier_ids = [list(clip.tokenizer(openai_clean("A photo depicts " + c))["input_ids"]) for c in cands]
    frames = np.stack([np.asarray(v) for v in clip.embed_images([_open(pictures[i]) for i in ids], pixels="openai")])
    earlier = clip_scores(frames, clip.embed_token_ids(earlier_ids), 2.0 if pacs else 2.5)
    assert np.max(np.abs(earlier - per)) > 100 * TOL


def _open(path):
    from PIL import Image

    from vlgap.captions.embedding_eval import _loaded

    return _loaded(Image.open(path))


@pytest.fixture(scope="module")
def media(tmp_path_factory):
    return write_media(tmp_path_factory.mktemp("media"), seed=2)


@pytest.mark.parametrize("idf", [True, False], ids=["idf", "no-idf"])
@pytest.mark.parametrize("with_refs", [True, False], ids=["refs", "no-refs"])
def test_emscore_of_the_cases_equals_official(folder, media, tmp_path, idf, with_refs):
    import vlgap

    manifest, frames = media
    ids = list(frames)
    preds = dict(zip(ids, _captions(len(ids))))
    refs = {i: _captions(1 + n % 2, shift=n + 3) for n, i in enumerate(ids)}
    options = {} if idf else {"emscore_idf": False}
    res = vlgap.caption_eval(preds, refs if with_refs else None, "emscore", videos=manifest, clip=f"hf:{folder}",
                             per_item=True, cache_dir=tmp_path / "cache", **options)
    rows = {r["id"]: r for r in res["per_item"]}
    use = refs if with_refs else {i: list(c) for i, c in vlgap_manifest_refs(manifest).items()}
    vid, both = port.emscore_score(folder, [preds[i] for i in ids], [use[i] for i in ids], [frames[i] for i in ids],
                                   idf=idf)
    np.testing.assert_allclose([rows[i]["EMScore"] for i in ids], vid, atol=TOL, rtol=0)
    np.testing.assert_allclose([rows[i]["EMScore-Ref"] for i in ids], both, atol=TOL, rtol=0)
    assert res["EMScore"]["idf"] is idf
    other, _ = port.emscore_score(folder, [preds[i] for i in ids], [use[i] for i in ids], [frames[i] for i in ids],
                                  idf=not idf)
    assert np.max(np.abs(other - vid)) > 100 * TOL  # the switch matters on these items


def vlgap_manifest_refs(manifest: Path) -> dict[str, list[str]]:
    import json

    return {json.loads(line)["id"]: json.loads(line)["captions"] for line in manifest.read_text().splitlines()}


def test_emscore_keeps_the_tokens_up_to_the_first_end_of_text(folder):
    from vlgap.captions.clip_model import load_clip

    clip = load_clip(f"hf:{folder}")
    ids = clip.tokenise(["a dog <|endoftext|> runs on the grass", "a dog"], openai=True).ids
    end = clip.openai_tokenizer.end
    assert ids[0].count(end) == 2 and ids[0].index(end) == len(ids[1]) - 1
    long_one, short_one = clip.embed_caption_tokens(ids, specials_too=True)
    assert long_one.shape == short_one.shape == (len(ids[1]), long_one.shape[1])
    np.testing.assert_allclose(long_one, short_one, atol=1e-6)  # causal: what follows changes nothing before


def test_emscore_idf_switch_is_refused_where_it_has_no_meaning(folder, media):
    import vlgap

    manifest, _ = media
    with pytest.raises(VlgapError, match="--emscore-idf weights the official EMScore"):
        vlgap.caption_eval({"v7": "a cat"}, None, "emscore", videos=manifest, clip=f"hf:{folder}",
                           emscore_convention="content-tokens", emscore_idf=True)
    res = vlgap.caption_eval({"v7": "a cat"}, {"v7": ["a cat"]}, "emscore", videos=manifest, clip=f"hf:{folder}",
                             emscore_idf=False)  # a single caption: idf would be 0 everywhere, uniform weights work
    assert res["EMScore"]["idf"] is False and np.isfinite(res["EMScore"]["score"])


def test_cli_emscore_idf_flag(folder, media, tmp_path, capsys):
    import json

    from typer.testing import CliRunner

    from vlgap.cli import app

    manifest, _ = media
    pred = tmp_path / "pred.json"
    pred.write_text(json.dumps({"v7": "a cat", "v13": "two dogs <|endoftext|> here"}))
    base = ["caption-eval", "--pred", str(pred), "--videos", str(manifest), "--clip", f"hf:{folder}",
            "--metrics", "emscore", "--json"]
    results = {}
    for flag in ("--emscore-idf", "--no-emscore-idf"):
        run = CliRunner().invoke(app, base + [flag])
        assert run.exit_code == 0, run.output
        results[flag] = json.loads(run.output)["EMScore"]
    assert results["--emscore-idf"]["idf"] is True and results["--no-emscore-idf"]["idf"] is False
    assert results["--emscore-idf"]["score"] != results["--no-emscore-idf"]["score"]


def test_the_model_is_loaded_once_and_the_processor_only_when_needed(folder, media, tmp_path, monkeypatch):
    import shutil

    import vlgap
    import vlgap.data.video as video
    from vlgap.captions.clip_model import load_clip, write_random_clip

    manifest, _ = media
    own = shutil.copytree(folder, tmp_path / "clip")
    monkeypatch.setattr(video, "count_frames", lambda item: (_ for _ in ()).throw(AssertionError("counted")))
    # the frame rule "all" decodes each video once, without counting its frames first
    vlgap.caption_eval({"v7": "a cat", "v13": "a dog"}, None, "clipscore,emscore", videos=manifest, clip=f"hf:{own}",
                       frame_cache=False)
    model = load_clip(f"hf:{own}", reuse=True)
    assert model._processor is None  # the official conventions need neither tokenizer nor image processor
    assert load_clip(f"hf:{own}", reuse=True) is model and load_clip(f"hf:{own}") is not model
    vlgap.caption_eval({"v7": "a cat"}, None, "clipscore", videos=manifest, clip=f"hf:{own}",
                       clip_convention="transformers", frame_cache=False)
    assert model._processor is not None  # made once it is needed, on the same loaded model
    write_random_clip(own, seed=9, max_length=40, image_size=32, patch_size=8)  # new weights in the folder
    assert load_clip(f"hf:{own}", reuse=True) is not model
