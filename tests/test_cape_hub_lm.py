"""Any transformers causal LM as the CAPE prompt enhancer or rewriter, on any device and dtype.

A tiny random-init Qwen2 causal LM (2 layers, hidden 32) and a byte-level BPE tokenizer trained here on
the shapes world's texts are saved into a folder and laid out in an offline Hugging Face cache. vlgap
loads them by folder, `hf:` spec and hub id (the logits are the model's own `from_pretrained` forward),
trains LoRA and full SFT (options, keys, resume after a kill), rewrites with the result, in float32 and
bfloat16 on the CPU. Bad --device / --dtype and checkpoints missing parameters are one-line errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vlgap.cape import world as W
from vlgap.cape.schema import LABELS, PARTS
from vlgap.errors import VlgapError

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from in_process_cli import run_cli  # noqa: E402  (tests/helpers)
from hub_cache import lay_out_hub_cache, use_offline_hub  # noqa: E402  (tests/helpers)

HUB_ID = "tiny-org/tiny-qwen2"


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """A hidden-32 model gains nothing from threads; on a shared CPU they only wait for each other."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def qwen_folder(tmp_path_factory):
    """The model and its tokenizer saved by save_pretrained, plus an offline hub cache holding the same."""
    from tiny_lm import save_tiny_qwen2  # tests/helpers

    root = tmp_path_factory.mktemp("qwen")
    folder = save_tiny_qwen2(root / "tiny-qwen2", max_positions=512)
    commit = lay_out_hub_cache(root / "hf_home" / "hub", HUB_ID, folder)
    return {"folder": folder, "hf_home": root / "hf_home", "commit": commit}


PROMPTS = [W.user_prompt(v) for v in W.sample_videos(4, seed=2)]


def _own_logits(folder, dtype=torch.float32):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=dtype).eval()
    tok = AutoTokenizer.from_pretrained(folder)
    ids = tok(PROMPTS[0], return_tensors="pt")
    with torch.no_grad():
        return model(**ids).logits, ids


def _logits(lm, ids):
    with torch.no_grad():
        return lm.model(**{k: v.to(lm.device) for k, v in ids.items()}).logits


# ------------------------------------------------------------------------------------------------ loading


def test_folder_spec_and_offline_hub_id_load_the_models_own_forward(qwen_folder, monkeypatch):
    from vlgap.cape.lm import load_lm

    folder = qwen_folder["folder"]
    ref, ids = _own_logits(folder)
    by_folder = load_lm(str(folder))
    by_spec = load_lm(f"hf:{folder}", device="cpu", dtype="float32")
    assert type(by_folder.model).__name__ == "Qwen2ForCausalLM" and by_folder.info["model_type"] == "qwen2"
    torch.testing.assert_close(_logits(by_folder, ids), ref, rtol=0, atol=0)
    assert by_spec.model_hash == by_folder.model_hash and len(by_folder.model_hash) == 64  # the weight file's hash
    use_offline_hub(monkeypatch, qwen_folder["hf_home"])
    by_id = load_lm(HUB_ID)
    torch.testing.assert_close(_logits(by_id, ids), ref, rtol=0, atol=0)
    assert by_id.model_hash == f"hub:{HUB_ID}@{qwen_folder['commit']}"
    assert load_lm(f"hf:{HUB_ID}").model_hash == by_id.model_hash
    # bfloat16: the model's own bf16 forward, and another hash (bf16 decodes differently)
    bf16 = load_lm(str(folder), dtype="bfloat16")
    assert next(bf16.model.parameters()).dtype == torch.bfloat16
    torch.testing.assert_close(_logits(bf16, ids), _own_logits(folder, torch.bfloat16)[0], rtol=0, atol=0)
    assert bf16.model_hash == by_folder.model_hash + "|bfloat16"
    with pytest.raises(VlgapError, match="no such folder"):
        load_lm(f"hf:{folder}/missing")


def test_bad_device_dtype_and_missing_parameters_are_one_line_errors(qwen_folder, tmp_path, monkeypatch, capsys):
    import shutil

    from safetensors.torch import load_file, save_file

    from vlgap.cape.lm import load_lm
    from vlgap.cape.operators import get_operator

    folder = str(qwen_folder["folder"])
    for kw, words in (({"device": "gpu"}, "spread"), ({"device": "cuda:7"}, "cuda"), ({"dtype": "int8"}, "bfloat16")):
        with pytest.raises(VlgapError, match=words) as err:
            load_lm(folder, **kw)
        assert "\n" not in str(err.value)
    with pytest.raises(VlgapError, match="--device"):
        get_operator("rewriter", rewriter_model=folder, device="tpu")  # said before any model loads
    # the CLI: exit code 2, one line
    prompts = tmp_path / "p.txt"
    prompts.write_text("a red ball\n")
    for flag, value in (("--device", "gpu"), ("--dtype", "float8")):
        code, _, err = run_cli(monkeypatch, capsys, "cape", "rewrite", prompts, "--operator", "rewriter",
                               "--rewriter-lm", folder, flag, value)
        assert code == 2 and len([x for x in err.splitlines() if x.strip()]) == 1, err
        assert flag in err and "Traceback" not in err
    # a checkpoint that lacks a layer's weights is refused, naming them (never random weights)
    holed = tmp_path / "holed"
    shutil.copytree(folder, holed)
    state = load_file(str(holed / "model.safetensors"))
    save_file({k: v for k, v in state.items() if "layers.1.mlp.down_proj" not in k}, str(holed / "model.safetensors"),
              metadata={"format": "pt"})
    with pytest.raises(VlgapError, match=r"no weights for 1 parameters \(e\.g\. model\.layers\.1\.mlp\.down_proj"):
        load_lm(str(holed))


# ------------------------------------------------------------------------------------------------ options


def _linear_shapes(model) -> dict[str, tuple[int, int]]:
    return {n: (m.in_features, m.out_features) for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)}


@pytest.mark.parametrize("layers, modules, r", [("top:1", None, 4), ("all", "q_proj,v_proj", 8), ("0", "all-linear", 2),
                                                (None, None, 16)])
def test_lora_options_select_the_trainable_parameters(qwen_folder, layers, modules, r):
    from vlgap.cape.lm import LORA_MODULES, load_lm, lora_model

    lm = load_lm(str(qwen_folder["folder"]))
    shapes = _linear_shapes(lm.model)
    chosen_layers = {"top:1": [1], "all": [0, 1], "0": [0], None: [0, 1]}[layers]
    chosen_modules = {None: LORA_MODULES, "q_proj,v_proj": ("q_proj", "v_proj"),
                      "all-linear": LORA_MODULES}[modules]  # all-linear: every linear but the LM head
    expected = sum(r * (i + o) for n, (i, o) in shapes.items()
                   if n.rsplit(".", 1)[-1] in chosen_modules and int(n.split(".")[2]) in chosen_layers)
    peft_model = lora_model(lm.model, r=r, alpha=2 * r, layers=layers, modules=modules)
    trainable, _ = peft_model.get_nb_trainable_parameters()
    assert trainable == expected == sum(p.numel() for p in peft_model.parameters() if p.requires_grad)
    hit = {n for n, p in peft_model.named_parameters() if p.requires_grad}
    assert {int(n.split("layers.")[1].split(".")[0]) for n in hit} == set(chosen_layers)


def test_lora_option_errors_name_what_is_valid(qwen_folder):
    from vlgap.cape.lm import load_lm, lora_model, parse_lora_layers

    assert parse_lora_layers("top:8") == parse_lora_layers(8) == 8 and parse_lora_layers("all") is None
    assert parse_lora_layers("5,0,1") == parse_lora_layers([0, 1, 5]) == (0, 1, 5)
    for bad in ("top:0", "top", "first:2", "-1", ""):
        with pytest.raises(VlgapError, match=r"--lora-layers .*top:N .*all .*0,1,5"):
            parse_lora_layers(bad)
    lm = load_lm(str(qwen_folder["folder"]))
    with pytest.raises(VlgapError, match=r"layer 5 does not exist; the model has 2 decoder layers"):
        lora_model(lm.model, layers="0,5")
    with pytest.raises(VlgapError, match=r"--lora-modules qkv: .*linear layers are .*q_proj.*all-linear") as err:
        lora_model(lm.model, modules="qkv")
    assert "\n" not in str(err.value)


def test_sft_key_changes_with_each_option_and_keeps_older_keys():
    from vlgap.cape.lm import sft_key

    pairs = [("a red ball", "Short Caption: x")]
    base = dict(base_model_hash="h", steps=4, batch_size=2, lr=1e-3, seed=0, r=16, top_layers=8, max_length=256,
                save_every=10)
    old = sft_key(pairs, **base)
    assert set(old) == {"format", "base_model_hash", "pairs", "n_pairs", "steps", "batch_size", "lr", "seed",
                        "lora_r", "top_layers", "max_length", "save_every"}  # an older adapter stays valid
    # one idea, one key: the same layers said two ways
    assert sft_key(pairs, **{**base, "top_layers": None}, lora_layers="top:8") == old
    assert sft_key(pairs, **base, lora_modules="q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj") == old
    variants = [sft_key(pairs, **base, full=True), sft_key(pairs, **base, lora_alpha=16),
                sft_key(pairs, **{**base, "top_layers": None}, lora_layers="all"),
                sft_key(pairs, **{**base, "top_layers": None}, lora_layers="0,1"),
                sft_key(pairs, **base, lora_modules="q_proj,v_proj"), sft_key(pairs, **base, lora_modules="all-linear"),
                sft_key(pairs, **{**base, "r": 8}), sft_key(pairs, **{**base, "base_model_hash": "h|bfloat16"})]
    keys = [json.dumps(k, sort_keys=True) for k in [old, *variants]]
    assert len(set(keys)) == len(keys)


# ------------------------------------------------------------------------------------------------ SFT + rewriting


def _run_cli(monkeypatch, capsys, *args):
    """`vlgap ARGS...` in-process, which must succeed: its stdout."""
    code, out, err = run_cli(monkeypatch, capsys, *args)
    assert code == 0, err
    return out


def _check_six(rows):
    for r in rows:
        assert all(isinstance(r[p], str) and r[p] for p in PARTS), r  # six labelled, non-empty parts


def test_lora_and_full_sft_then_rewrite_from_the_cli(qwen_folder, tmp_path, monkeypatch, capsys):
    folder = qwen_folder["folder"]
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS[:2]) + "\n")
    common = ["--lm", f"hf:{folder}", "--videos", 4, "--steps", 2, "--batch-size", 4, "--lr", 0.05]
    # stdout is the record cape train writes, as JSON alone: the Trainer's own log dicts go to library.log
    printed = _run_cli(monkeypatch, capsys, "cape", "train", "--out", tmp_path / "lora", *common, "--lora-r", 4,
                       "--lora-layers", "top:1", "--lora-modules", "q_proj,v_proj")
    lora = json.loads((tmp_path / "lora" / "sft.json").read_text())
    assert json.loads(printed) == {k: v for k, v in lora.items() if k != "history"}
    assert "'loss'" in (tmp_path / "lora" / "library.log").read_text()
    assert lora["full"] is False and lora["saved"] == "adapter" and lora["n_trainable"] == 4 * (32 + 32 + 32 + 16)
    assert (tmp_path / "lora" / "adapter" / "adapter_model.safetensors").is_file()
    _run_cli(monkeypatch, capsys, "cape", "train", "--out", tmp_path / "full", *common, "--full")
    full = json.loads((tmp_path / "full" / "sft.json").read_text())
    assert full["full"] is True and full["saved"] == "model"
    assert full["n_trainable"] == sum(p.numel() for p in _own_model(folder).parameters())
    # the options are in the SFT key every saved file is sealed under
    seal = json.loads((tmp_path / "lora" / "adapter" / ".adapter_model.safetensors.seal.json").read_text())["key"]
    assert (seal["lora_r"], seal["top_layers"], seal["lora_modules"]) == (4, 1, ["q_proj", "v_proj"])
    seal = json.loads((tmp_path / "full" / "model" / ".model.safetensors.seal.json").read_text())["key"]
    assert seal["full"] is True and seal["lora_r"] is None
    from vlgap.cape.lm import load_trained

    # rewriting with each result: the train folder, or its adapter / model folder
    for adapter in (tmp_path / "lora", tmp_path / "full" / "model"):
        rows = json.loads(_run_cli(monkeypatch, capsys, "cape", "rewrite", prompts, "--operator", "pe", "--adapter",
                                   adapter, "--lm", f"hf:{folder}", "--json", "--device", "cpu"))
        assert len(rows) == 2
        _check_six(rows)
    # the adapter over another base (a wider model) is one line naming the base it was trained on
    from transformers import Qwen2Config, Qwen2ForCausalLM

    wide = tmp_path / "wide"
    Qwen2ForCausalLM(Qwen2Config(vocab_size=1000, hidden_size=48, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2)).save_pretrained(wide)
    _own_tokenizer(folder).save_pretrained(wide)
    with pytest.raises(VlgapError, match=r"does not fit the base LM .*trained on .*tiny-qwen2: give that as --lm"):
        load_trained(tmp_path / "lora", str(wide))
    # the full-SFT folder is a saved model: its own forward is what vlgap decodes with
    trained = load_trained(tmp_path / "full")
    ids = trained.tokenizer(PROMPTS[0], return_tensors="pt")
    torch.testing.assert_close(_logits(trained, ids), _own_model(tmp_path / "full" / "model")(**ids).logits.detach(),
                               rtol=0, atol=0)
    assert not torch.equal(_logits(trained, ids), _own_logits(folder)[0])  # it trained


def _own_tokenizer(folder):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(folder)


def _own_model(folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder).eval()


def test_bfloat16_on_cpu_trains_and_decodes_six_parts(qwen_folder, tmp_path):
    from vlgap.cape.lm import generate_six, load_lm, load_trained, sft_prompt, train_lora

    lm = load_lm(str(qwen_folder["folder"]), dtype="bfloat16")
    pairs = W.sft_pairs(W.sample_videos(2, seed=4))
    info = train_lora(lm.model, lm.tokenizer, pairs, tmp_path / "sft", steps=2, batch_size=3, lr=0.05, r=4,
                      save_every=100)
    assert info["dtype"] == "bfloat16" and info["bf16"] is False  # no CPU autocast: the weights are bf16
    assert info["history"] and all(h["loss"] == h["loss"] for h in info["history"])  # finite losses
    pe = load_trained(tmp_path / "sft", str(qwen_folder["folder"]), dtype="bfloat16")
    assert next(pe.model.parameters()).dtype == torch.bfloat16
    small = {p: 6 for p in PARTS}
    out = generate_six(pe, [sft_prompt(p) for p in PROMPTS], batch_size=4, max_retries=0, budget=small)
    for d in out:  # greedy in bf16: every output is six labelled, non-empty parts in order
        assert d.six is not None, d.error
        assert [line.split(":")[0] for line in d.text.splitlines()] == [LABELS[p] for p in PARTS]
    # full SFT in bf16 on the CPU trains too
    lm = load_lm(str(qwen_folder["folder"]), dtype="bfloat16")
    info = train_lora(lm.model, lm.tokenizer, pairs, tmp_path / "full", steps=2, batch_size=3, lr=1e-3,
                      save_every=100, full=True)
    assert info["full"] and (tmp_path / "full" / "model" / "model.safetensors").is_file()
    with pytest.raises(VlgapError, match="--dtype bfloat16"):
        half = load_lm(str(qwen_folder["folder"]), dtype="float16")
        train_lora(half.model, half.tokenizer, pairs, tmp_path / "half", steps=1, full=True)


class _Killed(Exception):
    pass


@pytest.mark.parametrize("full", [False, True])
def test_resume_after_a_kill_gives_the_weights_of_an_uninterrupted_run(qwen_folder, tmp_path, full):
    """Killed after step 5 (checkpoint at step 4), resumed from that checkpoint: the same weights as one
    uninterrupted run of 6 steps (data order, dropout and optimizer state all come back)."""
    from safetensors.torch import load_file

    from vlgap.cape.lm import load_lm, sft_key, train_lora

    pairs = W.sft_pairs(W.sample_videos(4, seed=5))
    kw = dict(steps=6, batch_size=4, lr=0.02, seed=3, r=4, save_every=2, full=full, lora_layers="all")

    def run(out, log=None):
        lm = load_lm(str(qwen_folder["folder"]))
        key = sft_key(pairs, base_model_hash=lm.model_hash, steps=6, batch_size=4, lr=0.02, seed=3, r=4,
                      top_layers=None, max_length=256, save_every=2, full=full, lora_layers="all")
        return train_lora(lm.model, lm.tokenizer, pairs, out, key=key, log=log, **kw)

    def kill_at_step_5(line):
        if line.startswith("SFT step 5/"):
            raise _Killed

    uninterrupted = run(tmp_path / "whole")
    with pytest.raises(_Killed):
        run(tmp_path / "killed", log=kill_at_step_5)
    assert [p.name for p in (tmp_path / "killed" / "checkpoints").iterdir()] == ["checkpoint-4"]
    info = run(tmp_path / "killed")
    assert info["resumed_from"].endswith("checkpoint-4")
    # the whole loss history and its mean, as the uninterrupted run's (before: steps 5-6 only, their mean)
    assert [h["step"] for h in info["history"]] == [h["step"] for h in uninterrupted["history"]] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(info["history"], uninterrupted["history"]):
        assert a["loss"] == pytest.approx(b["loss"], rel=1e-4)
    assert info["train_loss"] == pytest.approx(uninterrupted["train_loss"], rel=1e-4)
    assert info["train_loss"] == pytest.approx(np.mean([h["loss"] for h in info["history"]]), rel=1e-9)
    name = "model/model.safetensors" if full else "adapter/adapter_model.safetensors"
    whole, resumed = load_file(str(tmp_path / "whole" / name)), load_file(str(tmp_path / "killed" / name))
    assert whole.keys() == resumed.keys() and whole
    for k in whole:
        torch.testing.assert_close(resumed[k], whole[k], rtol=1e-5, atol=1e-6)
    # a changed option never resumes that checkpoint: another key, training starts from step 0
    if full:
        return  # (the same code path; LoRA's own option shows it)
    lines = []
    lm = load_lm(str(qwen_folder["folder"]))
    key = sft_key(pairs, base_model_hash=lm.model_hash, steps=6, batch_size=4, lr=0.02, seed=3, r=4, top_layers=None,
                  max_length=256, save_every=2, lora_layers="all", lora_alpha=8)
    info = train_lora(lm.model, lm.tokenizer, pairs, tmp_path / "killed", key=key, log=lines.append,
                      **{**kw, "lora_alpha": 8})
    assert info["resumed_from"] is None and any("not reused" in x for x in lines)


def test_experiment_takes_device_dtype_and_sft_options_and_keeps_older_run_keys(monkeypatch, capsys, tmp_path):
    import hashlib
    from dataclasses import asdict

    from vlgap.cape import experiment as E

    cfg = E.CapeConfig()
    # what a run folder recorded before (the published full run also recorded decode_dtype: null)
    older = {**{k: v for k, v in asdict(cfg).items() if k not in E.ADDED_LATER}, "decode_dtype": None}
    assert cfg.record() == older
    assert cfg.key() == hashlib.sha256(json.dumps(older, sort_keys=True).encode()).hexdigest()[:12]
    assert cfg.key() == "720b0ae16f4f"  # the key the published full run recorded (commit ba2f074; results/cape/)
    assert E.CapeConfig(dtype="bfloat16").record()["dtype"] == "bfloat16"
    with pytest.raises(VlgapError, match="--lora-layers"):
        E.CapeConfig(lora_layers="top:0")
    seen = {}

    def fake_run(out, config, *, force=False, device="cpu", log=None):
        seen.update(config=config, device=device)
        (out / "report.md").parent.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text("report\n")
        return {}

    monkeypatch.setattr(E, "run_experiment", fake_run)
    _run_cli(monkeypatch, capsys, "cape", "experiment", "--out", tmp_path / "run", "--lm", "hf:org/model", "--device",
             "cpu", "--dtype", "bfloat16", "--full", "--lora-alpha", 8, "--lora-layers", "0,1", "--lora-modules",
             "q_proj")
    c = seen["config"]
    assert seen["device"] == "cpu" and (c.base, c.dtype, c.sft_full) == ("hf:org/model", "bfloat16", True)
    assert (c.lora_alpha, c.lora_layers, c.lora_modules) == (8, "0,1", "q_proj")
    _run_cli(monkeypatch, capsys, "cape", "demo", "--out", tmp_path / "demo", "--dtype", "float16")
    assert seen["config"].dtype == "float16" and seen["config"].sft_full is False


def test_bundled_names_still_route_to_the_bundled_models(qwen_folder, monkeypatch):
    """`smollm2` / `gemma3_270m` go to the bundled GGUF conversion (here a stand-in folder), keyed by the
    GGUF's sha256 as before; `hf:smollm2` is a hub id, not the bundled model."""
    from vlgap.cape import lm as L
    from vlgap.encoders import causal_lm

    use_offline_hub(monkeypatch, qwen_folder["hf_home"])  # never the network
    asked = []
    monkeypatch.setattr(causal_lm, "bundled_folder", lambda name: (asked.append(name), (qwen_folder["folder"], "ab" * 32))[1])
    assert L.load_lm("gemma3_270m").model_hash == "ab" * 32 and asked == ["gemma3_270m"]
    assert L.load_lm("smollm2", dtype="bfloat16").model_hash == "ab" * 32 + "|bfloat16"
    with pytest.raises(VlgapError, match="language model 'hf:smollm2': 'smollm2' is not in the Hugging Face cache"):
        L.load_lm("hf:smollm2")
    assert asked == ["gemma3_270m", "smollm2"]
