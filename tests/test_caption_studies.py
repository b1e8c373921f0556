"""Caption diversity vs quantity (shapes caption groups, the diverse - paraphrase probe) and PVD-style
split captions (rule and LM splitters, validation, split-caption scaling), plus their dr-full sections."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np
import pytest

from vlgap.errors import VlgapError

sys.path.insert(0, str(Path(__file__).parent / "helpers"))


def _items(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _shapes_named(text: str) -> set[str]:
    """Shape words a caption names, parsed from its text (independent of the writer's fact ids)."""
    from vlgap.data.shapes import SHAPES

    return {s for s in SHAPES if re.search(rf"\b{s}s?\b", text.lower())}


@pytest.fixture(scope="module")
def both_data(tmp_path_factory):
    from vlgap.data.shapes import generate_shapes

    root = tmp_path_factory.mktemp("shapes")
    both = generate_shapes(root / "both", 16, seed=3, n_frames=8, size=32, caption_mode="both")
    plain = generate_shapes(root / "plain", 16, seed=3, n_frames=8, size=32)
    return both, plain


# ---------------------------------------------------------------------------------------------- caption groups
def test_paraphrase_group_states_one_fact_set_and_diverse_group_distinct_ones(both_data):
    both, plain = both_data
    items, plain_items = _items(both), _items(plain)
    for it, ref in zip(items, plain_items):
        groups, facts = it["meta"]["caption_groups"], it["meta"]["caption_group_facts"]
        # the diverse group is exactly what the default generator writes
        assert it["captions"] == groups["diverse"] == ref["captions"]
        assert facts["diverse"] == ref["meta"]["caption_facts"]
        para = groups["paraphrase"]
        assert len(para) == 10 and len(set(para)) == 10  # ten distinct texts
        assert para[0] == groups["diverse"][0]
        # every paraphrase states exactly the first diverse caption's facts ...
        assert all(sorted(f) == sorted(facts["diverse"][0]) for f in facts["paraphrase"])
        # ... and names the same shapes (parsed from the text itself)
        assert all(_shapes_named(p) == _shapes_named(para[0]) for p in para)
        # the diverse captions state ten different fact sets
        assert len({frozenset(f) for f in facts["diverse"]}) == 10
        union = set().union(*map(set, facts["diverse"]))
        assert len(union) > len(set(facts["diverse"][0]))
    # the paraphrase manifest holds the same items with the paraphrases as captions
    para_items = _items(Path(both).parent / "manifest_paraphrase.jsonl")
    assert [p["id"] for p in para_items] == [it["id"] for it in items]
    assert all(p["captions"] == it["meta"]["caption_groups"]["paraphrase"] for p, it in zip(para_items, items))
    assert "caption_groups" not in plain_items[0]["meta"]


def test_paraphrase_mode_and_bad_mode(tmp_path):
    from vlgap.data.shapes import generate_shapes

    m = generate_shapes(tmp_path / "p", 3, seed=3, n_frames=4, size=32, caption_mode="paraphrase")
    for it in _items(m):
        assert it["captions"] == it["meta"]["caption_groups"]["paraphrase"]
        assert len({frozenset(f) for f in it["meta"]["caption_facts"]}) == 1
    with pytest.raises(VlgapError, match="caption mode 'many'"):
        generate_shapes(tmp_path / "x", 2, caption_mode="many")


def test_groups_rebuilt_from_a_plain_shapes_manifest_equal_the_stored_ones(both_data):
    from vlgap.data.manifest import read_manifest
    from vlgap.probe.caption_diversity import facts_at, manifest_groups

    both, plain = both_data
    g_both, f_both = manifest_groups(read_manifest(both))
    g_plain, f_plain = manifest_groups(read_manifest(plain))
    for g in ("diverse", "paraphrase"):
        assert [it.captions for it in g_both[g].items] == [it.captions for it in g_plain[g].items]
    assert f_both == f_plain
    counts = [facts_at(f_both["paraphrase"], c) for c in (1, 2, 4, 10)]
    assert counts[0] == counts[-1] == facts_at(f_both["diverse"], 1)  # paraphrases add no fact
    assert facts_at(f_both["diverse"], 10) > facts_at(f_both["diverse"], 2) > counts[0]


def test_manifest_without_groups_or_spec_is_refused(tmp_path):
    from vlgap.data.manifest import read_manifest
    from vlgap.probe.caption_diversity import manifest_groups

    (tmp_path / "a.mp4").write_bytes(b"")
    (tmp_path / "m.jsonl").write_text(json.dumps({"id": "v0", "video": "a.mp4", "captions": ["x"]}) + "\n")
    with pytest.raises(VlgapError, match="item 'v0' has neither meta.caption_groups"):
        manifest_groups(read_manifest(tmp_path / "m.jsonl"))


def test_group_difference_has_the_planted_sign():
    """Videos are 16 latent factors; caption j states factor block j. Diverse captions 1..4 state blocks
    0..3, paraphrases restate block 0 with new wording noise: diverse must align better at n_c = 4, and
    identical texts at n_c = 1 differ by exactly 0."""
    from vlgap.probe.caption_diversity import group_difference

    rng = np.random.default_rng(0)
    n, blocks = 120, 4
    z = rng.normal(size=(n, 16))

    def caption(block):
        emb = np.zeros_like(z)
        emb[:, 4 * block:4 * block + 4] = z[:, 4 * block:4 * block + 4]
        return emb + 0.3 * rng.normal(size=z.shape)

    diverse = sum(caption(j) for j in range(blocks))
    paraphrase = sum(caption(0) for _ in range(blocks))
    d = group_difference([z], [diverse], [paraphrase], k=10, n_bootstrap=200, seed=1)
    assert d.difference > 0 and d.ci[0] > 0 and d.score_a > d.score_b
    reverse = group_difference([z], [paraphrase], [diverse], k=10, n_bootstrap=200, seed=1)
    assert reverse.difference == pytest.approx(-d.difference) and reverse.ci[1] < 0
    one = caption(0)
    same = group_difference([z], [one], [one.copy()], k=10, n_bootstrap=50, seed=1)
    assert same.difference == 0.0 and same.ci == [0.0, 0.0]


def test_caption_diversity_on_toy_encoders_and_cli(both_data, tmp_path):
    from toy_encoders import ToyText, ToyVision
    from typer.testing import CliRunner

    from vlgap.cli import app
    from vlgap.features.source import FeatureOptions, FeatureSource
    from vlgap.probe.caption_diversity import caption_diversity

    both, _ = both_data
    cache = str(tmp_path / "cache")
    src = FeatureSource(FeatureOptions(cache_dir=cache, progress=False),
                        encoders={"toy_img": ToyVision("image"), "toy_txt": ToyText()})
    res = caption_diversity(both, ["toy_img"], ["toy_txt"], n_captions=[1, 2, 4], n_f=2, k=3, n_bootstrap=50,
                            features=src, out=tmp_path / "run")
    rows = {r["n_c"]: r for r in res["rows"]}
    assert res["n"] == 16 and sorted(rows) == [1, 2, 4]
    assert rows[1]["difference"] == 0.0 and rows[1]["score_a"] == rows[1]["score_b"]  # the same first caption
    assert rows[1]["facts_diverse"] == rows[1]["facts_paraphrase"] == rows[4]["facts_paraphrase"]
    assert rows[4]["facts_diverse"] > rows[2]["facts_diverse"] > rows[2]["facts_paraphrase"]
    for r in rows.values():
        assert r["ci"][0] <= r["difference"] <= r["ci"][1] and r["name_a"] == "diverse"
    section = json.loads((tmp_path / "run" / "sections" / "60_caption_diversity.json").read_text())
    assert "paraphrase" in section["html"] and section["figures"] == ["figures/caption_diversity.png"]
    with pytest.raises(VlgapError, match="exceeds the 10 captions"):
        caption_diversity(both, ["toy_img"], ["toy_txt"], n_captions=[11], n_f=2, k=3, features=src)
    # the CLI reads the cached features (the toy names are never loaded) and prints the same numbers
    out = CliRunner().invoke(app, ["caption-diversity", str(both), "--vision", "toy_img", "--text", "toy_txt",
                                   "--n-captions", "1,2,4", "--n-frames", "2", "--k", "3", "--bootstrap", "50",
                                   "--cache-dir", cache, "--json"])
    assert out.exit_code == 0, out.output
    cli_rows = json.loads(out.stdout)["rows"]
    assert [r["difference"] for r in cli_rows] == [r["difference"] for r in res["rows"]]


def test_make_data_cli_caption_mode(tmp_path):
    from typer.testing import CliRunner

    from vlgap.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["make-data", "shapes", "--out", str(tmp_path / "d"), "--n", "2", "--n-frames", "4",
                              "--size", "32", "--caption-mode", "both"])
    assert out.exit_code == 0, out.output
    assert (tmp_path / "d" / "manifest_paraphrase.jsonl").is_file()
    bad = runner.invoke(app, ["make-data", "test-of-time", "--out", str(tmp_path / "t"), "--caption-mode", "both"])
    assert isinstance(bad.exception, VlgapError)  # main() prints it in one line, exit code 2
    assert "--caption-mode applies to make-data shapes only" in str(bad.exception)


# ---------------------------------------------------------------------------------------------- split captions
KNOWN = "A man cooks. He adds salt; then he serves the soup, while music plays."


def test_rule_split_of_known_sentences():
    from vlgap.data.split_captions import rule_split

    assert rule_split(KNOWN, 3) == ["A man cooks.", "He adds salt", "Then he serves the soup, while music plays."]
    assert rule_split(KNOWN, 4) == ["A man cooks.", "He adds salt", "Then he serves the soup", "While music plays."]
    assert rule_split(KNOWN, 2) == ["A man cooks. He adds salt", "Then he serves the soup, while music plays."]
    assert rule_split(KNOWN, 1) == ["A man cooks. He adds salt, then he serves the soup, while music plays."]
    assert rule_split("A red circle on a blue background", 2) == ["A red circle", "On a blue background"]
    assert rule_split("Two words", 5) == ["Two", "Words"]  # no more word boundaries: fewer parts


def test_check_split_covering_and_not():
    from vlgap.data.split_captions import check_split, content_words, rule_split

    assert content_words(KNOWN) == ["man", "cook", "add", "salt", "serve", "soup", "music", "play"]
    ok = check_split(KNOWN, rule_split(KNOWN, 3), 3)
    assert ok.valid and not ok.missing and not ok.invented
    parts = ["A man cooks", "He adds salt", "Then he serves"]  # soup, music, play missing
    bad = check_split(KNOWN, parts, 3)
    assert not bad.valid and bad.missing == ["soup", "music", "play"]
    loose = check_split(KNOWN, ["A man cooks soup", "He adds salt and pepper", "He serves while music plays"], 3,
                        tolerance=0.2)
    assert loose.valid and loose.invented == ["pepper"] and loose.allowed_invented == 1
    strict = check_split(KNOWN, ["A man cooks soup", "He adds salt and pepper", "He serves while music plays"], 3)
    assert not strict.valid and "1 content words not in the caption (at most 0 allowed): pepper" in strict.reasons[0]
    count = check_split(KNOWN, [KNOWN], 3)
    assert not count.valid and count.reasons == ["1 parts, 3 asked"]


def _write_manifest(tmp_path, captions):
    (tmp_path / "v.mp4").write_bytes(b"")
    lines = [json.dumps({"id": f"v{i}", "video": "v.mp4", "captions": c}) for i, c in enumerate(captions)]
    path = tmp_path / "m.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_lm_splitter_with_a_stub_generator(tmp_path):
    from vlgap.data.split_captions import read_split_report, split_captions

    man = _write_manifest(tmp_path, [[KNOWN, "short one"], ["A red circle moves left, then a blue square grows."]])
    seen = []

    def stub(prompts):
        seen.extend(prompts)
        return ["1. A man cooks\n2) He adds salt\n- He serves the soup while music plays" if "man cooks" in p
                else "1. A purple elephant dances\n2. A giraffe sings\n3. Nothing else" for p in prompts]

    rep = split_captions(man, tmp_path / "lm.jsonl", parts=3, splitter="lm:stub", generator=stub)
    assert "exactly 3 short captions" in seen[0] and KNOWN in seen[0]  # the longest caption, App. A.3's prompt
    assert (rep["n_ok"], rep["n_fallback"], rep["n_skipped"]) == (1, 1, 0)
    items = _items(tmp_path / "lm.jsonl")
    assert items[0]["captions"] == ["A man cooks", "He adds salt", "He serves the soup while music plays"]
    assert items[0]["meta"]["split"]["splitter"] == "lm:stub"
    assert items[1]["meta"]["split"] == {"source_caption": "A red circle moves left, then a blue square grows.",
                                         "splitter": "rule", "status": "fallback", "parts": 3, "source": "longest"}
    bad = rep["invalid"][0]
    assert bad["id"] == "v1" and bad["status"] == "fallback" and "elephant" in bad["invented"]
    assert read_split_report(tmp_path / "lm.jsonl")["n_fallback"] == 1
    skip = split_captions(man, tmp_path / "skip.jsonl", parts=3, splitter="lm:stub", generator=stub, on_invalid="skip")
    assert skip["n_skipped"] == 1 and [it["id"] for it in _items(tmp_path / "skip.jsonl")] == ["v0"]
    with pytest.raises(VlgapError, match="item 'v1': the lm:stub split is invalid"):
        split_captions(man, tmp_path / "err.jsonl", parts=3, splitter="lm:stub", generator=stub, on_invalid="error")
    with pytest.raises(VlgapError, match="use rule or lm:<model>"):
        split_captions(man, tmp_path / "x.jsonl", parts=3, splitter="gpt")


def test_rule_split_manifest_and_cli_report_invalid_items(tmp_path):
    from typer.testing import CliRunner

    from vlgap.cli import app

    man = _write_manifest(tmp_path, [[KNOWN], ["Two words"]])
    out = CliRunner().invoke(app, ["split-captions", str(man), "--out", str(tmp_path / "r.jsonl"), "--parts", "3"])
    assert out.exit_code == 0, out.output
    assert "1 of 2 items split into 3 parts by rule (1 valid, 0 replaced by the rule split, 1 skipped)" in out.output
    assert "v1: skipped: 2 parts, 3 asked" in out.output
    assert [it["captions"] for it in _items(tmp_path / "r.jsonl")] == [
        ["A man cooks.", "He adds salt", "Then he serves the soup, while music plays."]]


def test_lm_splitter_runs_a_tiny_causal_lm_from_a_folder(tmp_path):
    """Plumbing through load_lm and generate(): a tiny random Llama and a BPE tokenizer saved to a folder."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from vlgap.data.split_captions import split_captions

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator([KNOWN, "Split it into exactly 3 short captions."] * 5,
                            trainers.BpeTrainer(vocab_size=300, special_tokens=["<eos>"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<eos>", pad_token="<eos>")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=512,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id, bos_token_id=tok.eos_token_id)
    folder = tmp_path / "tiny-llama"
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    man = _write_manifest(tmp_path, [[KNOWN], ["A red circle moves left, then a blue square grows."]])
    rep = split_captions(man, tmp_path / "t.jsonl", parts=3, splitter=f"lm:{folder}", max_new_tokens=6, batch_size=2)
    # random weights write noise: both splits are caught and replaced by the rule split, each listed
    assert rep["n_items"] == 2 and rep["n_ok"] + rep["n_fallback"] == 2
    assert all(r["status"] == "fallback" and r["reasons"] for r in rep["invalid"])
    assert len(rep["model_hash"]) == 64


def test_split_caption_scaling_on_toy_encoders(both_data, tmp_path):
    from toy_encoders import ToyText, ToyVision

    from vlgap.data.split_captions import split_captions
    from vlgap.features.source import FeatureOptions, FeatureSource
    from vlgap.probe.split_scaling import split_caption_scaling

    both, _ = both_data
    split_captions(both, tmp_path / "s.jsonl", parts=3)
    src = FeatureSource(FeatureOptions(cache_dir=str(tmp_path / "cache"), progress=False),
                        encoders={"toy_img": ToyVision("image"), "toy_txt": ToyText()})
    res = split_caption_scaling(both, tmp_path / "s.jsonl", ["toy_img"], ["toy_txt"], n_f=2, n_captions=[1, 2, 4],
                                k=3, n_bootstrap=20, features=src)
    got = sorted((r["captions"], r["n_c"]) for r in res["rows"])
    assert got == [("independent", 1), ("independent", 2), ("independent", 4), ("original", 1), ("split", 1),
                   ("split", 2)]
    assert res["n_parts"] == 3 and res["n"] == 16 and res["splitters"] == ["rule"]
    assert all(0 <= r["score"] <= 1 and r["ci_lo"] <= r["score"] <= r["ci_hi"] for r in res["rows"])


# ---------------------------------------------------------------------------------------------- dr-full sections
def test_dr_full_caption_sections_on_toy_encoders(tmp_path):
    from toy_encoders import ToyText, ToyVision

    from vlgap.probe.demo import DemoConfig, shapes_manifest
    from vlgap.probe.dr_captions import caption_diversity_section, split_captions_section
    from vlgap.probe.dr_full import sections
    from vlgap.probe.sweep import SweepConfig, run_sweep

    assert {"60_caption_diversity", "61_split_captions"} <= set(sections())
    cfg = DemoConfig(n_videos=14, n_frames_per_video=8, video_size=32, vision=["toy_img"], text=["toy_txt"],
                     n_frames=[2], n_captions=[1, 2, 4], k=3, n_bootstrap=20, n_permutations=0,
                     out=str(tmp_path / "run"), cache_dir=str(tmp_path / "cache"), preset="dr-full")
    enc = {"toy_img": ToyVision("image"), "toy_txt": ToyText()}
    sweep = SweepConfig(str(shapes_manifest(cfg)), cfg.vision, cfg.text, cfg.n_frames, cfg.n_captions, k=3,
                        text_dtype=cfg.text_dtype,
                        n_bootstrap=20, n_permutations=0, image_size=cfg.image_size, cache_dir=cfg.cache_dir, fit=False)
    result = run_sweep(sweep, cfg.out, progress=False, encoders=enc)
    div = caption_diversity_section(cfg, result, False, encoders=enc)
    assert [r["n_c"] for r in div["rows"]] == [1, 2, 4] and div["rows"][0]["difference"] == 0.0
    split = split_captions_section(cfg, result, False, encoders=enc)
    kinds = {(r["captions"], r["n_c"]) for r in split["rows"]}
    assert {("independent", 1), ("independent", 4), ("original", 1), ("split", 1), ("split", 4)} <= kinds
    # the independent rows are the sweep's own cells
    sweep_scores = {r["n_c"]: r["score"] for r in result.rows}
    assert all(r["score"] == sweep_scores[r["n_c"]] for r in split["rows"] if r["captions"] == "independent")
    run = Path(cfg.out)
    for name in ("60_caption_diversity", "61_split_captions"):
        assert (run / "sections" / f"{name}.json").is_file()
    assert "rule splitter" in json.loads((run / "sections" / "61_split_captions.json").read_text())["html"]
