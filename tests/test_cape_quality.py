"""CAPE-T2V run quality: decoding budgets sized from the targets, failure reasons, validity accounting by
input kind, SFT inputs of the dense kind, and a console that shows vlgap's own lines only."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from vlgap.cape import world as W
from vlgap.cape.schema import PARTS, SixPart
from vlgap.errors import VlgapError

torch = pytest.importorskip("torch")


class _WordTokenizer:
    """One token per whitespace-separated word: budgets are then countable by hand."""

    def encode(self, text, add_special_tokens=False):
        return text.split()


def _six(dense: str, **kw) -> SixPart:
    base = dict(short_caption="A red star.", dense_caption=dense, main_object="a red star",
                background="a plain white background", camera="the camera stays still", style="flat cartoon")
    return SixPart(**{**base, **kw})


def test_budgets_come_from_the_longest_target_of_each_part():
    from vlgap.cape.lm import budgets_from_targets

    targets = [_six("one two three four"), _six("w " * 10, camera="the camera slowly pans to the left").to_text()]
    b = budgets_from_targets(_WordTokenizer(), targets, factor=1.5, slack=4)
    # ceil(1.5 x longest) + 4, in words: short 3, dense 10, main 3, background 4, camera 7, style 2
    assert b == {"short_caption": 9, "dense_caption": 19, "main_object": 9, "background": 10, "camera": 15,
                 "style": 7}
    with pytest.raises(VlgapError, match="at least one"):
        budgets_from_targets(_WordTokenizer(), [])


def test_budgets_never_cut_a_target_in_the_real_world_targets():
    """Every captioner target of the world fits its part's budget with room to spare (the factor)."""
    from vlgap.cape.lm import budgets_from_targets

    tok = _WordTokenizer()
    targets = [W.target_of(v) for v in W.sample_videos(60, seed=3)]
    b = budgets_from_targets(tok, targets)
    for t in targets:
        for p in PARTS:
            assert len(tok.encode(" " + getattr(t, p))) * 1.5 <= b[p]


def test_failure_reason_codes():
    from vlgap.cape.lm import failure_reason

    none = [False] * 6
    assert failure_reason(None, none, none) is None
    cut = [False, True, False, False, False, False]
    assert failure_reason("cut", cut, none) == "budget:dense_caption"
    assert failure_reason("cut", cut, cut) == "loop:dense_caption"
    assert failure_reason("six-part text misses part", none, none) == "schema"


def test_validity_by_input_kind_counts_and_reasons():
    from vlgap.cape.experiment import validity_by_input_kind

    ok = {"valid": True, "retries": 0}
    rewrites = {"pe": {
        "test": [ok, {"valid": True, "retries": 1, "reasons": ["budget:dense_caption"]},
                 {"valid": False, "retries": 2, "reasons": ["loop:style", "budget:style", "loop:style"]}, ok],
        "train": [{"valid": True, "retries": 2, "reasons": ["budget:dense_caption", "loop:camera"]}, ok]},
        "template": {"train": [ok, ok]}}
    v = validity_by_input_kind(rewrites)
    t = v["pe/test"]
    assert (t["n"], t["n_first_try_valid"], t["n_valid_after_retries"]) == (4, 2, 3)
    assert t["first_try_valid"] == 0.5 and t["valid_after_retries"] == 0.75 and t["mean_retries"] == 0.75
    assert t["input_kind"].startswith("pseudo user prompts")
    assert t["first_try_failure_reasons"] == {"budget:dense_caption": 1, "loop:style": 1}
    d = v["pe/train"]
    assert d["input_kind"] == "dense training captions" and d["first_try_failure_reasons"] == {"budget:dense_caption": 1}
    assert v["template/train"]["valid_after_retries"] == 1.0 and v["template/train"]["first_try_failure_reasons"] == {}
    from vlgap.cape.report import validity_markdown

    md = validity_markdown(v, 2)
    assert "| pe | dense training captions | 2 | 1/2 (50%) | 2/2 (100%) | budget:dense_caption 1 |" in md


def test_sft_pairs_of_the_dense_kind_are_the_dataset_captions():
    vids = W.sample_videos(3, seed=7)
    pairs = W.sft_pairs(vids, ("user", "dense"))
    assert [x for x, _ in pairs[1::2]] == [W.dense_source_of(v) for v in vids]
    assert all(t == W.target_of(v).to_text() for v, (_, t) in zip(vids, pairs[::2]))
    with pytest.raises(VlgapError, match="unknown input kind 'bogus'"):
        W.sft_pairs(vids, ("bogus",))
    from vlgap.cape.experiment import CapeConfig

    with pytest.raises(VlgapError, match="sft_input_kinds"):
        CapeConfig(sft_input_kinds=("dense", "poem"))


def test_library_output_goes_to_the_log_file(tmp_path):
    import io
    import logging
    import warnings

    from vlgap.cape.runlog import library_output_to

    console_out, console_err = io.StringIO(), io.StringIO()
    old = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = console_out, console_err
    try:
        handler = logging.StreamHandler(console_err)  # bound at import time, as transformers' is
        logging.getLogger("some_library").addHandler(handler)
        with library_output_to(tmp_path / "lib.log") as path:
            print({"loss": 1.0})
            print("[cape 12:00:00] step one", file=sys.stderr)
            # what Python's default warning display writes (pytest records warnings instead; the
            # subprocess test below sees real ones)
            sys.stderr.write(warnings.formatwarning("old API", FutureWarning, "lib.py", 1))
            logging.getLogger("some_library").warning("a library's log record")
            sys.stderr.write("\rbar 50%")
            sys.stderr.flush()
    finally:
        sys.stdout, sys.stderr = old
        logging.getLogger("some_library").removeHandler(handler)
    assert console_out.getvalue() == ""
    assert console_err.getvalue() == "[cape 12:00:00] step one\n"
    log = path.read_text()
    for text in ("{'loss': 1.0}", "FutureWarning: old API", "a library's log record", "bar 50%", "step one"):
        assert text in log
    assert handler.stream is console_err  # restored


@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_experiment_console_shows_vlgap_lines_only(tmp_path):
    """A tiny experiment in a fresh interpreter (real Trainer SFT of a tiny Llama, stand-in rewriters
    that raise a FutureWarning): its console has no trainer dict and no warning; the log file has them."""
    script = textwrap.dedent(r'''
        import sys, warnings
        import torch
        from tiny_tokenizer import byte_bpe_tokenizer, cape_corpus  # tests/helpers, on PYTHONPATH below
        from transformers import LlamaConfig, LlamaForCausalLM
        from vlgap.cape import experiment as E, lm as L, operators as O, world as W

        tok = byte_bpe_tokenizer(cape_corpus(20, inputs="user"), vocab_size=400)

        def tiny(name, **kw):
            torch.manual_seed(0)
            cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                              num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                              eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
            return L.LoadedLM(LlamaForCausalLM(cfg), tok, name, "tiny-" + name)

        class StandIn(O.TemplateOperator):
            def __init__(self, name):
                self.name = name
            @property
            def model_hash(self):
                return "stand-in-" + self.name
            def rewrite_batch(self, texts):
                warnings.warn("stand-in library API is deprecated", FutureWarning)
                return super().rewrite_batch(texts)

        import functools
        from vlgap.cape import generator as G
        G.train_generator = functools.partial(G.train_generator, epochs=5)  # the console is the point here
        L.load_lm = tiny
        O.anchored_operator = lambda name, adapter, **kw: StandIn(name)
        O.prompted_operator = lambda name, **kw: StandIn(name)
        cfg = E.CapeConfig(n_sft_videos=2, sft_input_kinds=("user",), sft_steps=2, sft_batch=2,
                           n_train_videos=6, n_test=6, generator_seeds=(0,), n_bootstrap=20, n_permutations=20,
                           gap_permutations=0, gap_bootstrap=0)
        E.run_experiment(sys.argv[1], cfg)
    ''')
    env = {**os.environ, "PYTHONWARNINGS": "default", "VLGAP_WORKERS": "1", "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1] / "src"), str(Path(__file__).resolve().parent / "helpers"),
         os.environ.get("PYTHONPATH", "")])}
    run = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-c", script, str(run)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    console = proc.stdout + proc.stderr
    assert "{'loss'" not in console and "Warning" not in console, console
    lines = [line for line in console.splitlines() if line.strip()]
    assert lines and all(line.startswith("[cape ") for line in lines), console
    assert "SFT pe" in console and lines[-1].endswith(str(run / "library.log"))
    log = (run / "library.log").read_text()
    assert "'loss'" in log and "FutureWarning: stand-in library API is deprecated" in log


def test_dtype_runs_the_rewriter_in_it_and_keys_the_cache(tmp_path, monkeypatch):
    """The demo's format (auto: bfloat16 where the device computes it natively) is the one `dtype` option
    (no second keyword): the operator's LM loads in it, and a non-float32 dtype is in the model hash, so
    float32 rewrites never share its cache."""
    from vlgap.cape import lm as L
    from vlgap.cape import operators as O
    from vlgap.cape.experiment import PRESETS

    assert (PRESETS["demo"].dtype, PRESETS["full"].dtype) == ("auto", "float32")

    def fake_load_lm(src, *, device="cpu", dtype="float32"):  # load_lm's hash rule (tested in test_cape_hub_lm)
        from vlgap.runtime import torch_dtype

        dt = torch_dtype(dtype)
        return L.LoadedLM(torch.nn.Linear(2, 2).to(dt), None, src, "w" if dt == torch.float32 else f"w|{dtype}")

    monkeypatch.setattr(L, "load_lm", fake_load_lm)
    monkeypatch.setattr(O.LMOperator, "uses_lm", False)  # prompts counted in words; rewrites from the template
    monkeypatch.setattr(O.LMOperator, "rewrite_batch", lambda self, texts: O.TemplateOperator().rewrite_batch(texts))
    bf16 = O.prompted_operator("rewriter", model="m", dtype="bfloat16")
    assert bf16.lm.model.weight.dtype == torch.bfloat16
    O.rewrite(bf16, ["a red ball"], cache_dir=tmp_path)
    assert O.rewrite(O.prompted_operator("rewriter", model="m", dtype="bfloat16"), ["a red ball"],
                     cache_dir=tmp_path)[0]["valid"]  # the same dtype reads its own cache
    with pytest.raises(VlgapError, match="another operator's results"):  # float32 outputs are not bf16's
        O.rewrite(O.prompted_operator("rewriter", model="m", dtype="float32"), ["a red ball"], cache_dir=tmp_path)
    with pytest.raises(VlgapError, match="--dtype"):
        O.prompted_operator("rewriter", model="m", dtype="int8")


def test_length_bucket_sampler_is_a_seeded_permutation_that_pads_less():
    """Every row once per epoch, the same order for the same seed and epoch (a resumed SFT skips the same
    batches), another order for another epoch, and batches that pad less than random ones (exact
    count against a naive padded-token sum)."""
    import random

    from vlgap.cape.finetune import LengthBucketSampler, sft_key

    rng = random.Random(3)
    lengths = [rng.randint(20, 220) for _ in range(160)]
    s = LengthBucketSampler(lengths, 4, seed=0)
    first = list(s)
    assert sorted(first) == list(range(160)) and len(s) == 160
    assert list(LengthBucketSampler(lengths, 4, seed=0)) == first
    assert list(LengthBucketSampler(lengths, 4, seed=1)) != first
    s.set_epoch(1)
    assert list(s) != first and sorted(s) == list(range(160))

    def padded(order):
        return sum(4 * max(lengths[i] for i in order[b:b + 4]) for b in range(0, len(order), 4))

    shuffled = list(range(160))
    random.Random(0).shuffle(shuffled)
    assert padded(first) < 0.92 * padded(shuffled)
    # within each batch the rows come from one length-sorted chunk: a batch's spread is small
    assert max(max(lengths[i] for i in first[b:b + 4]) - min(lengths[i] for i in first[b:b + 4])
               for b in range(0, 160, 4)) < max(lengths) - min(lengths)
    base = dict(base_model_hash="h", steps=2, batch_size=4, lr=1e-3, seed=0, r=4, top_layers=None, max_length=64,
                save_every=10)
    assert "length_buckets" not in sft_key([("a", "b")], **base)  # older adapters keep their key
    assert sft_key([("a", "b")], **base, length_buckets=True)["length_buckets"] is True


def test_demo_computes_on_one_thread_unless_omp_num_threads_says(monkeypatch):
    import torch

    from vlgap.cape.experiment import one_thread_unless_set

    before = torch.get_num_threads()
    lines = []
    try:
        torch.set_num_threads(2)
        monkeypatch.setenv("OMP_NUM_THREADS", "2")
        one_thread_unless_set(lines.append)
        assert torch.get_num_threads() == 2 and lines == []  # the user's choice stands
        monkeypatch.delenv("OMP_NUM_THREADS")
        one_thread_unless_set(lines.append)
        assert torch.get_num_threads() == 1 and len(lines) == 1 and "OMP_NUM_THREADS" in lines[0]
    finally:
        torch.set_num_threads(before)
