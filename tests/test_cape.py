"""CAPE-T2V prompt enhancer: schema, inputs, decoding, SFT, operators + cache, scorer, 2x2 analysis.

LM tests use a tiny random-weight Llama built from a config and a byte-level BPE tokenizer trained here
on the world's own texts (no downloads, ~1 s)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vlgap.cape import world as W
from vlgap.cape.schema import LABELS, PARTS, SchemaError, SixPart, format_six, parse_six, read_targets_jsonl, six_from_dict
from vlgap.errors import VlgapError

torch = pytest.importorskip("torch")


# ------------------------------------------------------------------------------------------------ schema

def test_schema_round_trip_and_tolerant_parse():
    for v in W.sample_videos(6, seed=3):
        six = W.target_of(v)
        assert parse_six(format_six(six)) == six
    six = SixPart("A red circle.", "A red circle grows.", "a red circle", "a plain black background",
                  "static camera", "flat synthetic graphics")
    messy = ("  - **SHORT CAPTION**:   A red   circle.\n\n"
             "* Detailed description - A red circle\n   grows.\n"
             "1. main object: a red circle\n"
             "Setting : a plain black background\n"
             "__Camera motion__: static camera\n"
             "Style:flat synthetic graphics\n")
    assert parse_six(messy) == six
    # parts in another order parse to the same object
    lines = format_six(six).splitlines()
    assert parse_six("\n".join(reversed(lines))) == six


@pytest.mark.parametrize("drop", PARTS)
def test_schema_missing_part_is_named(drop):
    six = W.target_of(W.sample_videos(1, seed=1)[0])
    text = "\n".join(line for p, line in zip(PARTS, format_six(six).splitlines()) if p != drop)
    with pytest.raises(SchemaError, match=LABELS[drop]) as err:
        parse_six(text)
    assert err.value.part == drop


def test_schema_validator_errors():
    with pytest.raises(SchemaError, match="Camera.*empty"):
        parse_six("Short Caption: a\nDense Caption: b\nMain Object: c\nBackground: d\nCamera: \nStyle: f")
    with pytest.raises(SchemaError, match="appears twice"):
        parse_six("Short Caption: a\nShort Caption: x\nDense Caption: b\nMain Object: c\nBackground: d\n"
                  "Camera: e\nStyle: f")
    with pytest.raises(SchemaError, match="empty"):
        parse_six("   ")
    with pytest.raises(SchemaError, match="'style' is missing"):
        six_from_dict({"short_caption": "a", "dense_caption": "b", "main_object": "c", "background": "d",
                       "camera": "e"})
    with pytest.raises(SchemaError, match="Style.*words"):
        from vlgap.cape.schema import validate_six
        validate_six(SixPart("a", "b", "c", "d", "e", "one two three"), max_words={"style": 2})


def test_target_file_errors_name_line_and_part(tmp_path):
    good = {"id": "x", "input": "a red ball", "target": {"Short Caption": "a", "dense": "b", "main object": "c",
                                                        "background": "d", "camera": "e", "style": "f"}}
    bad = {"id": "y", "short_caption": "a", "dense_caption": "b", "main_object": "c", "background": "d",
           "style": "f"}
    p = tmp_path / "t.jsonl"
    p.write_text(json.dumps(good) + "\n")
    recs = read_targets_jsonl(p)
    assert recs[0]["target"].dense_caption == "b" and recs[0]["input"] == "a red ball"
    p.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(SchemaError, match="line 2.*'camera'"):
        read_targets_jsonl(p)


# ------------------------------------------------------------------------------------------------ inputs

def test_inputs_three_kinds_seeded_and_differently_phrased(tmp_path):
    vids = W.sample_videos(20, seed=5)
    assert [W.inputs_of(v) for v in vids] == [W.inputs_of(v) for v in W.sample_videos(20, seed=5)]
    for v in vids:
        ins, tgt = W.inputs_of(v), W.target_of(v)
        assert set(ins) == set(W.INPUT_KINDS)
        assert ins["user"] == ins["user"].lower() and len(ins["user"].split()) < len(ins["detailed"].split())
        assert tgt.short_caption not in ins.values() and tgt.dense_caption not in W.dense_source_of(v)
    # typos: some prompt carries a word outside the writers' vocabulary, deterministically
    typo = W._typo("circle", np.random.default_rng(0))
    assert typo != "circle" and abs(len(typo) - 6) <= 1
    p = tmp_path / "in.jsonl"
    p.write_text('{"id": 1, "text": "a red ball", "kind": "user"}\n{"id": 2, "prompt": "x", "kind": "bogus"}\n')
    with pytest.raises(VlgapError, match="line 2.*bogus"):
        W.read_inputs_jsonl(p)


# ------------------------------------------------------------------------------------------------ tiny LM

@pytest.fixture(scope="module")
def tiny_lm():
    from tiny_tokenizer import byte_bpe_tokenizer, cape_corpus  # tests/helpers
    from transformers import LlamaConfig, LlamaForCausalLM

    from vlgap.cape.lm import LoadedLM

    tok = byte_bpe_tokenizer(cape_corpus(30), vocab_size=400)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512, initializer_range=0.3,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=tok.eos_token_id)
    model = LlamaForCausalLM(cfg).eval()
    return LoadedLM(model, tok, "tiny-llama", "tiny-hash")


def test_label_forced_decoding_always_yields_the_schema(tiny_lm):
    from vlgap.cape.lm import generate_six, sft_prompt

    prompts = [sft_prompt(W.user_prompt(v)) for v in W.sample_videos(6, seed=2)]
    small = {p: 6 for p in PARTS}
    out = generate_six(tiny_lm, prompts, batch_size=4, max_retries=1, budget=small)
    assert len(out) == 6
    for d in out:
        assert d.six is not None, d.error  # random weights, yet all six labelled, non-empty parts
        assert parse_six(d.text) == d.six
        assert [line.split(":")[0] for line in d.text.splitlines()] == [LABELS[p] for p in PARTS]
        # a part that ran out of budget makes the output invalid and is retried (bounded)
        assert d.retries <= 1 and (d.valid or d.error and "was cut" in d.error)
    assert sum(d.retries for d in out) == sum(not d.valid or d.retries > 0 for d in out)


def test_sft_lowers_loss_on_a_fixed_batch(tiny_lm, tmp_path):
    import copy

    from vlgap.cape.lm import collate, encode_pairs, train_lora

    model = copy.deepcopy(tiny_lm.model)
    tok = tiny_lm.tokenizer
    pairs = W.sft_pairs(W.sample_videos(2, seed=4))
    rows = encode_pairs(tok, pairs)
    assert all(sum(x != -100 for x in r["labels"]) < len(r["input_ids"]) for r in rows)  # prompt masked
    batch = collate(tok)(rows)

    def loss() -> float:
        model.eval()
        with torch.no_grad():
            return float(model(**batch).loss)

    before = loss()
    info = train_lora(model, tok, pairs, tmp_path / "sft", steps=25, batch_size=len(pairs), lr=5e-2, seed=0,
                      r=8, save_every=100)
    after = loss()
    assert after < before - 0.5, (before, after)
    assert (tmp_path / "sft" / "adapter" / "adapter_model.safetensors").is_file()
    assert info["history"] and info["steps"] == 25


# ------------------------------------------------------------------------------------------------ operators

class _Counting:
    """A fake operator that counts what it is asked, and can fail after n batches (a killed run)."""

    def __new__(cls, *a, **k):
        from vlgap.cape.operators import Operator

        class Op(Operator):
            name = "fake"
            uses_lm = False

            def __init__(self, hash_="h1", fail_after=None):
                self.calls, self.hash_, self.fail_after, self.batches = [], hash_, fail_after, 0

            @property
            def model_hash(self):
                return self.hash_

            def rewrite_batch(self, texts):
                if self.fail_after is not None and self.batches >= self.fail_after:
                    raise RuntimeError("killed")
                self.batches += 1
                self.calls += list(texts)
                from vlgap.cape.operators import TemplateOperator

                return TemplateOperator().rewrite_batch(texts)
        return Op(*a, **k)


def test_operator_cache_resumes_and_refuses_other_model_hash(tmp_path):
    from vlgap.cape.operators import rewrite

    texts = [W.user_prompt(v) for v in W.sample_videos(7, seed=8)]
    op = _Counting(fail_after=1)
    with pytest.raises(RuntimeError):
        rewrite(op, texts, cache_dir=tmp_path, batch_size=3)
    assert len(op.calls) == 3
    op2 = _Counting()
    full = rewrite(op2, texts, cache_dir=tmp_path, batch_size=3)
    assert op2.calls == texts[3:]  # only what the killed run had not saved
    op3 = _Counting()
    again = rewrite(op3, texts + texts[:2], cache_dir=tmp_path, batch_size=3)
    assert op3.calls == [] and again[:7] == full and again[7] == full[0]
    with pytest.raises(VlgapError, match="model hash"):
        rewrite(_Counting(hash_="other"), texts, cache_dir=tmp_path)


def test_rewrite_cache_keeps_what_another_writer_saved(tmp_path):
    """Two caches of one operator opened side by side (the CAPE lanes rewrite the rewriter's two splits in
    two processes): each save keeps the other's entries, and the file is the same bytes in either order."""
    import threading
    import time

    from vlgap.cape.operators import RewriteCache, TemplateOperator
    from vlgap.io_utils import folder_lock

    test, train = ["a red cube spins", "a blue ball rolls"], ["a green cone falls slowly"]
    res = dict(zip(test + train, TemplateOperator().rewrite_batch(test + train)))
    files = []
    for order in ((test, train), (train, test)):
        folder = tmp_path / f"run{len(files)}"
        caches = [RewriteCache(folder, "rewriter", "h"), RewriteCache(folder, "rewriter", "h")]  # both empty
        for cache, texts in zip(caches, order):
            for t in texts:
                cache.put(t, res[t])
            cache.save()
        again = RewriteCache(folder, "rewriter", "h")
        assert {t: again.get(t)["text"] for t in test + train} == {t: res[t]["text"] for t in test + train}
        files.append((folder / "rewriter.json").read_bytes())
    assert files[0] == files[1]
    # a save waits for the folder's lock
    cache = RewriteCache(tmp_path / "run0", "rewriter", "h")
    cache.put("a yellow star waits", res[test[0]])
    saved = threading.Event()
    with folder_lock(tmp_path / "run0"):
        worker = threading.Thread(target=lambda: (cache.save(), saved.set()))
        worker.start()
        time.sleep(0.3)
        assert not saved.is_set()
    worker.join(10)
    assert saved.is_set() and RewriteCache(tmp_path / "run0", "rewriter", "h").get("a yellow star waits")


def test_rewrite_bad_input_and_template_contract(tmp_path):
    from vlgap.cape.operators import TemplateOperator, get_operator, rewrite

    op = TemplateOperator()
    with pytest.raises(VlgapError, match="prompt 2 is empty"):
        rewrite(op, ["a red ball", "  "])
    long = "word " * 300
    with pytest.raises(VlgapError, match="prompt 1 has 300 tokens.*--truncate"):
        rewrite(op, [long])
    res = rewrite(op, [long], truncate=True)
    assert res[0]["truncated_input"] and len(res[0]["dense_caption"].split()) == 192
    with pytest.raises(VlgapError, match="unknown operator 'gpt'"):
        get_operator("gpt")
    with pytest.raises(VlgapError, match="--adapter"):
        get_operator("pe")
    out = rewrite(op, ["gimme a big red ball on black bg, zoom in, cartoon look"])[0]
    assert out["main_object"] == "a red circle" and out["background"] == "a plain black background"
    assert out["camera"] == W.CAMERA_DESCRIPTIONS["zoom in"] and out["style"] == W.STYLE_DESCRIPTIONS["synthetic"]


def test_cli_rewrite_json_contract(tmp_path, capsys):
    from typer.testing import CliRunner

    from vlgap.cli import app

    p = tmp_path / "prompts.txt"
    p.write_text("a red ball on black bg\nsome blue star, zoom out\n")
    r = CliRunner().invoke(app, ["cape", "rewrite", str(p), "--operator", "template", "--json"])
    assert r.exit_code == 0, r.output
    data = json.loads(r.output)
    assert len(data) == 2 and data[1]["main_object"] == "a blue star"
    assert set(data[0]) == set(PARTS) | {"valid", "retries"}
    p.write_text("ok\n\nsecond\n")
    r = CliRunner().invoke(app, ["cape", "rewrite", str(p), "--operator", "nope"])
    assert r.exit_code != 0


# ------------------------------------------------------------------------------------------------ generator

def test_attribute_scorer_hand_computed():
    from vlgap.cape.generator import score_attributes

    truth = [{"shape": "circle", "colour": "red", "size": "small", "background": "black", "camera": "static",
              "style": "real", "event_order": ("move", "grow")},
             {"shape": "star", "colour": "blue", "size": "large", "background": "coffee", "camera": "zoom in",
              "style": "synthetic", "event_order": ("appear", "none")}]
    pred = [dict(truth[0], colour="green", event_order=("grow", "move")),  # 5 of 7 right
            dict(truth[1], camera="static")]  # 6 of 7 right
    sc = score_attributes(pred, truth)
    assert sc["item"].tolist() == [5 / 7, 6 / 7]
    assert sc["accuracy"]["colour"] == 0.5 and sc["accuracy"]["event_order"] == 0.5
    assert sc["accuracy"]["camera"] == 0.5 and sc["accuracy"]["shape"] == 1.0
    with pytest.raises(VlgapError, match="one per prompt"):
        score_attributes(pred[:1], truth)


def test_generator_learns_and_renders():
    from vlgap.cape.generator import render_prediction, score_attributes, train_generator

    vids = W.sample_videos(24, seed=9)
    attrs = [W.attributes_of(v) for v in vids]
    rng = np.random.default_rng(0)
    x = rng.normal(size=(24, 16)).astype(np.float32)  # arbitrary but distinct codes: memorisable
    g = train_generator(x, attrs, seed=0, epochs=400)
    pred = g.predict_embeddings(x)
    assert score_attributes(pred, attrs)["overall"] > 0.9
    frames = render_prediction(pred[0], n_frames=4, size=32)
    assert frames.shape == (4, 32, 32, 3) and frames.dtype == np.uint8


# ------------------------------------------------------------------------------------------------ analysis

def test_two_by_two_equals_hand_computation():
    from vlgap.cape.analysis import two_by_two

    # 4 prompts, 2 seeds; per-prompt seed means are whole quarters, so every contrast is exact
    base = {("rewriter", "rewriter"): [[0, 1, 0, 1], [0, 1, 1, 1]],
            ("rewriter", "pe"): [[1, 1, 0, 0], [1, 0, 0, 0]],
            ("pe", "rewriter"): [[1, 1, 1, 0], [1, 1, 0, 0]],
            ("pe", "pe"): [[1, 1, 1, 1], [1, 1, 1, 0]],
            ("third", "pe"): [[0, 1, 1, 1], [0, 1, 1, 1]]}
    scores = {(a, b, s): v for (a, b), runs in base.items() for s, v in enumerate(runs)}
    r = two_by_two(scores, n_bootstrap=200, n_permutations=200)
    m = {k: np.mean(np.array(v, float), axis=0) for k, v in base.items()}
    y00, y01, y10, y11 = m[("rewriter", "rewriter")], m[("rewriter", "pe")], m[("pe", "rewriter")], m[("pe", "pe")]
    cells = {(c["train"], c["infer"]): c for c in r["cells"]}
    assert cells[("pe", "pe")]["mean"] == pytest.approx(float(y11.mean()))
    assert cells[("rewriter", "pe")]["seed_means"] == [0.5, 0.25]
    assert r["main_effects"]["training_captions"]["estimate"] == pytest.approx(float(((y10 + y11 - y00 - y01) / 2).mean()))
    assert r["main_effects"]["inference_rewrites"]["estimate"] == pytest.approx(float(((y01 + y11 - y00 - y10) / 2).mean()))
    assert r["interaction"]["estimate"] == pytest.approx(float(((y11 - y10) - (y01 - y00)).mean()))
    assert r["interaction"]["estimate"] == pytest.approx(0.5)  # per prompt: -1, 0.5, 1, 1.5
    third = r["third_operator"]["third/pe - pe/pe"]
    assert third["estimate"] == pytest.approx(float((m[("third", "pe")] - y11).mean())) == pytest.approx(-0.125)
    # 4 prompts: below vlgap.stats' minimum for an interval (6 for an inverted sign-flip test at 95%, 10 for a
    # bootstrap), so the report prints "n/a (why)" beside the p-value, never a point or a contradiction
    from vlgap.cape.analysis import verdict

    assert r["interaction"]["ci"] is None and r["interaction"]["ci_reason"].startswith("n too small: n=4 < 6")
    assert cells[("pe", "pe")]["ci"] is None and cells[("pe", "pe")]["ci_reason"] == "n too small: n=4 < 10"
    line = verdict(r["interaction"])
    assert "n/a (n too small: n=4 < 6" in line and "no significant difference" in line
    with pytest.raises(VlgapError, match="no scores for cell"):
        two_by_two({k: v for k, v in scores.items() if k[:2] != ("pe", "pe")})


# ------------------------------------------------------------------------------------------------ diffusers

def test_prompt_enhanced_diffusers_pipeline_and_caption_export(tiny_lm, tmp_path):
    diffusers = pytest.importorskip("diffusers")
    from transformers import CLIPTextConfig, CLIPTextModel

    from vlgap.cape.diffusion import PromptEnhancedPipeline, export_captions
    from vlgap.cape.operators import TemplateOperator

    torch.manual_seed(0)
    unet = diffusers.UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, block_out_channels=(8, 16), layers_per_block=1,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=16, norm_num_groups=4, attention_head_dim=2)
    vae = diffusers.AutoencoderKL(block_out_channels=(8,), down_block_types=("DownEncoderBlock2D",),
                                  up_block_types=("UpDecoderBlock2D",), latent_channels=4, norm_num_groups=4)
    text = CLIPTextModel(CLIPTextConfig(vocab_size=len(tiny_lm.tokenizer), hidden_size=16, intermediate_size=32,
                                        num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=512))
    tok = tiny_lm.tokenizer
    tok.model_max_length = 96
    pipe = diffusers.StableDiffusionPipeline(vae=vae, text_encoder=text, tokenizer=tok, unet=unet,
                                             scheduler=diffusers.DDIMScheduler(), safety_checker=None,
                                             feature_extractor=None, requires_safety_checker=False)
    seen = []
    encode = pipe.encode_prompt
    pipe.encode_prompt = lambda prompt, *a, **k: (seen.append(prompt), encode(prompt, *a, **k))[1]
    enhanced = PromptEnhancedPipeline(pipe, TemplateOperator())
    out = enhanced("a red ball on black bg, zoom in", num_inference_steps=2, height=16, width=16, output_type="np")
    assert out.images.shape == (1, 16, 16, 3)
    assert parse_six(seen[0]).main_object == "a red circle" and enhanced.last_rewrites[0]["valid"]
    src = tmp_path / "ft.jsonl"
    src.write_text('{"video": "a.mp4", "caption": "a blue star on a plain white background"}\n')
    assert export_captions(src, tmp_path / "out.jsonl", TemplateOperator()) == 1
    rec = json.loads((tmp_path / "out.jsonl").read_text())
    assert rec["source_caption"].startswith("a blue star") and parse_six(rec["caption"]).main_object == "a blue star"


# ------------------------------------------------------------------------------------------------ experiment

def _stand_in_lms(monkeypatch):
    """The CAPE experiment with its LMs replaced by template variants (SFT leaves a sealed stand-in
    adapter), so it runs in seconds; returns the experiment module and its small configuration."""
    from vlgap.cape import experiment as E
    from vlgap.cape import lm as L
    from vlgap.cape import operators as O

    class Variant(O.TemplateOperator):
        def __init__(self, name, drop=None):
            self.name, self.drop = name, drop

        @property
        def model_hash(self):
            return f"variant-{self.name}"

        def rewrite_batch(self, texts):
            out = super().rewrite_batch(texts)
            for r in out:
                if self.drop:
                    r[self.drop] = "unspecified"
            return out

    def fake_train(model, tok, pairs, out_dir, **kw):
        assert len(pairs) == len(E.CapeConfig().sft_input_kinds) * 4
        adapter = out_dir / "adapter"  # what the real one leaves: the adapter, sealed under the SFT key
        adapter.mkdir(parents=True, exist_ok=True)
        (adapter / "adapter_model.safetensors").write_bytes(b"stand-in weights")
        L.seal_folder(adapter, kw["key"])
        return {"steps": kw["steps"], "batch_size": kw["batch_size"], "n_pairs": len(pairs), "seconds": 0.0,
                "samples_per_second": 0.0, "train_loss": 1.0, "lora_r": kw["r"], "seed": kw["seed"],
                "history": [{"step": 1, "loss": 2.0}, {"step": 2, "loss": 1.0}]}

    monkeypatch.setenv("VLGAP_WORKERS", "1")  # the stand-ins live in this process: the LM lanes run here
    monkeypatch.setattr(L, "load_lm", lambda name, **kw: L.LoadedLM(None, None, name, "h"))
    monkeypatch.setattr(L, "train_lora", fake_train)
    monkeypatch.setattr(O, "anchored_operator", lambda name, adapter, **kw: Variant(name, "style" if name == "third" else None))
    monkeypatch.setattr(O, "prompted_operator", lambda name, **kw: Variant(name, "camera"))
    cfg = E.CapeConfig(n_sft_videos=4, n_train_videos=16, n_test=12, generator_seeds=(0,), n_bootstrap=50,
                       n_permutations=50, gap_permutations=10, gap_bootstrap=10)
    return E, cfg


@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_experiment_end_to_end_with_stand_in_operators(tmp_path, monkeypatch):
    """The whole pipeline (SFT stage, rewrites, MMD, generators, 2x2, report, JSON keys, resume) with
    the LMs replaced by template variants, so it runs in seconds."""
    from vlgap.cape import lm as L

    E, cfg = _stand_in_lms(monkeypatch)
    r = E.run_experiment(tmp_path / "run", cfg, log=lambda m: None)
    assert {(c["train"], c["infer"]) for c in r["cells"]} >= {("pe", "pe"), ("pe", "rewriter"), ("rewriter", "pe"),
                                                               ("rewriter", "rewriter"), ("third", "pe")}
    assert set(r) >= {"cells", "main_effects", "interaction", "third_operator", "mmd", "validity"}
    assert r["validity"]["pe/test"]["valid_after_retries"] == 1.0
    assert "user(pe) vs dense(rewriter)" in r["mmd"] and (tmp_path / "run" / "report.md").is_file()
    # the paper's controls are part of every run: Table 3 overlap (SacreBLEU) and the randomization check
    ctl = r["controls"]
    assert set(ctl["surface_overlap"]) == {"pe", "third", "rewriter", "template"}
    assert ctl["surface_overlap"]["pe"]["signature"].startswith("nrefs:1|")
    assert 0 < ctl["caption_set_permutation"]["p_value"] <= 1 and ctl["witness_regression"]["n_cells"] == 5
    assert "Randomization check" in (tmp_path / "run" / "report.md").read_text()
    from vlgap.cape.controls import controls_from_run

    # `vlgap cape controls RUN` recomputes them from the stage files alone: the same numbers
    assert controls_from_run(tmp_path / "run", write=False) == ctl
    # resume: every stage is on disk, a second run recomputes nothing and gives the same numbers
    monkeypatch.setattr(L, "train_lora", lambda *a, **k: pytest.fail("SFT re-run"))
    r2 = E.run_experiment(tmp_path / "run", cfg, log=lambda m: None)
    assert r2["cells"] == r["cells"] and r2["interaction"] == r["interaction"]
    with pytest.raises(VlgapError, match="another configuration"):
        E.run_experiment(tmp_path / "run", E.CapeConfig(n_test=3), log=lambda m: None)


def test_experiment_interrupted_resumes_without_redoing_finished_stages(tmp_path, monkeypatch):
    """vlgap.runs: a run killed in its generator cells keeps its sealed SFT, MMD and finished cells; the
    rerun computes only the missing cells; a changed configuration is refused with the difference."""
    from vlgap.cape import generator as G
    from vlgap.cape import lm as L

    E, cfg = _stand_in_lms(monkeypatch)
    real_train, trained = G.train_generator, []

    def killed_after_two(*args, **kw):
        if len(trained) == 2:
            raise KeyboardInterrupt("killed")
        trained.append(1)
        return real_train(*args, **kw)

    monkeypatch.setattr(G, "train_generator", killed_after_two)
    with pytest.raises(KeyboardInterrupt):
        E.run_experiment(tmp_path / "run", cfg, log=lambda m: None)
    sealed = {p.name: p.read_bytes() for p in (tmp_path / "run" / "cells").glob("[!.]*.json")}
    assert len(sealed) == 2
    monkeypatch.setattr(L, "train_lora", lambda *a, **k: pytest.fail("SFT re-run"))
    trained.clear()
    monkeypatch.setattr(G, "train_generator", lambda *a, **kw: (trained.append(1), real_train(*a, **kw))[1])
    resumed = E.run_experiment(tmp_path / "run", cfg, log=lambda m: None)
    assert len(trained) == 6 - 2  # six cells (2x2, third operator, template); the two sealed ones read back
    assert all((tmp_path / "run" / "cells" / name).read_bytes() == b for name, b in sealed.items())
    assert len(resumed["cells"]) == 5 and "interaction" in resumed
    with pytest.raises(VlgapError, match=r"another configuration \(.*n_test: 12 -> 13"):  # changed: refused
        E.run_experiment(tmp_path / "run", E.CapeConfig(**{**cfg.__dict__, "n_test": 13}), log=lambda m: None)
