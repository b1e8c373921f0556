"""CAPE prompt enhancer on a GPU: SFT steps (LoRA and full) and label-forced decoding tokens/s of a
0.5B-class Qwen2 causal LM built from Qwen2.5-0.5B's config dimensions with random weights (nothing is
downloaded), through the same vlgap code a user runs (`load_lm` from a saved folder, `train_lora`,
`generate_six`), plus a CPU baseline of a tiny config through the same code.

    python benchmarks/cape_gpu.py                          # cuda, bfloat16, 0.5B config; then the CPU baseline
    python benchmarks/cape_gpu.py --device cpu --tiny      # the tiny config only, on the CPU (a smoke test)

Prints, per model: SFT samples/s and seconds per step after a one-step warm-up (LoRA r=16 on every
projection of every layer, and full-parameter SFT, AdamW; Trainer's time, which includes its logging), and decoding tokens/s (greedy, label-forced, one batch of prompts), with the share
of valid six-part outputs. `--json FILE` writes the numbers. Random weights decode nonsense, so the
valid share says only that the schema machinery ran; the timings are what this measures.
"""
from __future__ import annotations

import argparse
import json
import platform
import tempfile
import time
from pathlib import Path

import torch

from vlgap.cape import world as W
from vlgap.cape.lm import generate_six, load_lm, sft_prompt, train_lora

#: Qwen2.5-0.5B's config.json dimensions (494M parameters with the tied 151936 x 896 embedding)
QWEN25_05B = dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                  num_attention_heads=14, num_key_value_heads=2, max_position_embeddings=32768,
                  rope_theta=1000000.0, rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False)
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=2048, tie_word_embeddings=True)


def tokenizer(vocab_size: int | None):
    """A byte-level BPE trained on the shapes world's texts; with `vocab_size`, filler tokens (decodable,
    never produced by encoding) fill the vocabulary up to the model's size, so every id the random model
    can write decodes, as with a real tokenizer of that size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    corpus = []
    for v in W.sample_videos(200, seed=11):
        corpus += list(W.inputs_of(v).values()) + [W.target_of(v).to_text()]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=2000, special_tokens=["<|endoftext|>"],
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    if vocab_size is not None:
        state = json.loads(bpe.to_str())
        vocab = state["model"]["vocab"]
        for i in range(vocab_size - len(vocab)):
            vocab[f"fill{i}"] = len(vocab)
        bpe = Tokenizer.from_str(json.dumps(state))
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>", pad_token="<|endoftext|>")


def build(folder: Path, dims: dict, seed: int = 0) -> Path:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tok = tokenizer(dims.get("vocab_size"))
    cfg = Qwen2Config(**{"vocab_size": len(tok), **dims}, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id, bos_token_id=tok.eos_token_id)
    torch.manual_seed(seed)
    with torch.device("cpu"):
        model = Qwen2ForCausalLM(cfg).to(torch.bfloat16)  # saved in bf16: half the bytes to write and read
    model.save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


def sync(device: str) -> None:
    if device.startswith("cuda") or device == "auto":
        torch.cuda.synchronize()


def bench(label: str, folder: Path, device: str, dtype: str, args) -> dict:
    pairs = W.sft_pairs(W.sample_videos(max(4, args.sft_batch), seed=78))
    out: dict = {"model": label, "device": device, "dtype": dtype}
    for name, opts in (("lora", dict(r=16, lora_layers="all")), ("full", dict(full=True))):
        with tempfile.TemporaryDirectory() as d:  # warm-up: one step on a fresh copy (kernels, allocator)
            lm = load_lm(str(folder), device=device, dtype=dtype)
            train_lora(lm.model, lm.tokenizer, pairs, d, steps=1, batch_size=args.sft_batch, save_every=10**6, **opts)
            del lm
        lm = load_lm(str(folder), device=device, dtype=dtype)
        out["n_parameters"] = lm.info["n_parameters"]
        with tempfile.TemporaryDirectory() as d:
            sync(device)
            t0 = time.perf_counter()
            info = train_lora(lm.model, lm.tokenizer, pairs, d, steps=args.steps, batch_size=args.sft_batch, lr=1e-4,
                              seed=0, save_every=10**6, **opts)
            sync(device)
            wall = time.perf_counter() - t0
        out[f"sft_{name}"] = {"steps": args.steps, "batch_size": args.sft_batch, "n_trainable": info["n_trainable"],
                              "samples_per_second": info["samples_per_second"],
                              "seconds_per_step": round(args.sft_batch / info["samples_per_second"], 4),
                              "wall_s": round(wall, 2),
                              "autocast": "bf16" if info["bf16"] else "fp16" if info["fp16"] else "none"}
        print(f"[{label}] SFT {name}: {info['n_trainable']:,} trainable, {info['samples_per_second']:.2f} samples/s, "
              f"{out[f'sft_{name}']['seconds_per_step']:.3f} s/step (batch {args.sft_batch}, {args.steps} steps, "
              f"autocast {out[f'sft_{name}']['autocast']})", flush=True)
        del lm, info
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    lm = load_lm(str(folder), device=device, dtype=dtype)
    prompts = [sft_prompt(W.user_prompt(v)) for v in W.sample_videos(args.prompts, seed=77)]
    generate_six(lm, prompts[:2], batch_size=2, max_retries=0)  # warm-up: token classes, kernels
    sync(device)
    t0 = time.perf_counter()
    dec = generate_six(lm, prompts, batch_size=args.decode_batch, max_retries=0)
    sync(device)
    dt = time.perf_counter() - t0
    n_tok = sum(len(lm.tokenizer.encode(d.text, add_special_tokens=False)) for d in dec)
    out["decode"] = {"prompts": len(prompts), "batch_size": args.decode_batch, "tokens": n_tok,
                     "seconds": round(dt, 3), "tokens_per_second": round(n_tok / dt, 1),
                     "six_parts": sum(d.six is not None for d in dec), "valid": sum(d.valid for d in dec)}
    print(f"[{label}] decode: {n_tok} tokens in {dt:.2f} s = {n_tok / dt:.1f} tokens/s (batch {args.decode_batch}, "
          f"{len(prompts)} prompts; six parts {out['decode']['six_parts']}/{len(prompts)}, "
          f"valid {out['decode']['valid']})", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda", help="cuda | cuda:N | auto | cpu")
    ap.add_argument("--dtype", default="bfloat16")
    ap.add_argument("--tiny", action="store_true", help="only the tiny config (no 0.5B model)")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--sft-batch", type=int, default=8)
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--decode-batch", type=int, default=16)
    ap.add_argument("--no-cpu-baseline", action="store_true")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    print(f"{platform.processor() or platform.machine()}, {gpu}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}", flush=True)
    results = []
    with tempfile.TemporaryDirectory() as root:
        tiny = build(Path(root) / "tiny", TINY)
        if not args.tiny:
            t0 = time.perf_counter()
            big = build(Path(root) / "qwen2.5-0.5b-config", QWEN25_05B)
            print(f"built the 0.5B-class model in {time.perf_counter() - t0:.1f} s", flush=True)
            results.append(bench("qwen2.5-0.5b-config", big, args.device, args.dtype, args))
        else:
            results.append(bench("tiny", tiny, args.device, args.dtype, args))
        if not args.no_cpu_baseline and args.device != "cpu":
            results.append(bench("tiny", tiny, "cpu", "float32", args))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
