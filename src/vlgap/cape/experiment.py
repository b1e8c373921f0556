"""The CAPE-T2V experiment the paper did not run, end to end and resumable stage by stage.

    videos -> SFT pairs (concise / detailed / user input / dataset dense caption -> captioner six-part target)
           -> anchored PE (LoRA seed 0) and third operator (LoRA seed 1), same base, same pairs
           -> rewrites of the generator's training captions and of held-out user prompts by
              pe, rewriter (prompted Gemma-3-270M, few-shot), third, template
           -> MMD^2 diagnostics between rewrite sets (vlgap.gap, length-matched)
           -> generators trained on each operator's captions (>= 3 seeds), scored per attribute on
              the held-out prompts as rewritten by each inference operator
           -> 2x2 + third-operator contrast (vlgap.stats factorial / paired), report

Every stage writes its result under `out_dir` atomically and is skipped when present (rewrites are
cached per batch, SFT checkpoints every few steps, generator cells one file each), so a killed run
resumes where it stopped. Presets: `demo` (reduced, one generator seed) and `full`.

Reuse (vlgap.reuse): `out_dir` records the configuration (another one is refused with the
differences unless `force`, which starts the folder over); every stage's file is sealed under a key
of the configuration and its inputs, and one whose bytes changed is reported and recomputed.
"""
from __future__ import annotations

import hashlib
import json
import sys
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Callable

import numpy as np

from vlgap.cape import world as W
from vlgap.errors import VlgapError
from vlgap.io_utils import atomic_write_json, atomic_write_text
from vlgap.runs.folder import open_run_folder


@dataclass(frozen=True)
class CapeConfig:
    seed: int = 0
    base: str = "smollm2"
    # the prompted rewriter: SmolLM2 few-shot by default (Gemma-3-270M is 2x the parameters and ~2.5x slower
    # per token on these shared CPUs); any other LM via rewriter_model="gemma3_270m" or an HF id/folder
    rewriter_model: str = "smollm2"
    n_sft_videos: int = 40  # x len(sft_input_kinds) = SFT pairs
    # The PE rewrites two kinds of text: the video model's dense training captions and user prompts. The
    # paper trains it on concise, detailed and user-style inputs; here the "detailed" kind comes from the
    # user-side templates, which share no sentence frame with the dataset captioner's dense captions, so
    # without "dense" (the dataset's own dense captions of the SFT videos, disjoint from the generator's
    # training videos) the PE never saw the kind of input it rewrites for the DiT.
    sft_input_kinds: tuple[str, ...] = ("concise", "detailed", "user", "dense")
    # 16 steps x batch 8 at lr 2e-3 (the first full run) left the PE valid on 46 % of the dense captions
    # after retries, and 24 x 8 with the dense kind still on 50 % (16-caption sample): its outputs ran on
    # past the first sentence of the short caption or looped, i.e. the LoRA was undertrained. Batch 4
    # gives twice the optimizer updates per sample; lr 3e-3 moves the LoRA further per update (gradients
    # are clipped at norm 1). 40 steps: the PE valid on 17/32 user prompts at the first try (greedy loops
    # in the event list); 80 steps (2 epochs of the 160 pairs): 15/16 dense captions and 16/16 prompts
    # of a sample at the first try, and in the full run 27/28 and 32/32
    sft_steps: int = 80
    sft_batch: int = 4
    sft_lr: float = 3e-3
    # prompt + target + EOS of the longest pair: a dense input (<= ~135 SmolLM2 tokens here, and at most
    # operators.MAX_INPUT_TOKENS = 192 at rewriting time) plus a target (<= ~115)
    sft_max_length: int = 320
    lora_r: int = 16
    lora_top_layers: int | None = 8
    pe_seed: int = 0
    third_seed: int = 1
    n_train_videos: int = 28  # the generator's fine-tuning set (dense captions rewritten by an operator)
    n_test: int = 32  # held-out pseudo user prompts
    generator_seeds: tuple[int, ...] = (0, 1, 2)
    gen_batch: int = 24
    max_retries: int = 2
    camera_fraction: float = 0.6
    n_bootstrap: int = 2000
    n_permutations: int = 2000
    gap_permutations: int = 500
    gap_bootstrap: int = 500
    # added after the first runs (recorded only when set otherwise, so older run folders stay theirs):
    # the LMs' weights for SFT and rewriting: "bfloat16" halves the weight bytes each decoding step reads
    # (~1.85x less CPU time per token on an AVX512-BF16 CPU), at the cost of outputs that may differ from
    # float32's (a non-float32 dtype is part of the model hash, so of every cache key). "auto" (the demo's):
    # bfloat16 where the run's device computes it natively, else float32 (vlgap.runtime.resolve_dtype),
    # resolved when the run starts (`resolved`); records and keys hold what it resolved to. The full
    # recipe keeps float32: its published run is float32
    dtype: str = "float32"
    sft_full: bool = False  # full-parameter SFT instead of LoRA
    lora_alpha: int = 32
    lora_layers: str | None = None  # top:N | all | 0,1,5; replaces lora_top_layers when set
    lora_modules: str | None = None  # q_proj,v_proj | all-linear; None: every projection
    # SFT batches of pairs of similar length (finetune.LengthBucketSampler) instead of random ones: the
    # demo's random batches of 4 pad to 1.25x the real tokens; a bucketed order is another data order
    sft_length_buckets: bool = False

    def __post_init__(self):
        from vlgap.counts import check_count

        flags = {"n_test": "--prompts", "n_train_videos": "--train-captions", "sft_steps": "--sft-steps",
                 "n_bootstrap": "--bootstrap", "n_permutations": "--permutations"}
        if not self.sft_input_kinds or any(k not in W.SFT_KINDS for k in self.sft_input_kinds):
            raise VlgapError(f"sft_input_kinds {list(self.sft_input_kinds)!r}: give one or more of {list(W.SFT_KINDS)}")
        for name, minimum in (("n_sft_videos", 1), ("sft_steps", 1), ("sft_batch", 1), ("lora_r", 1),
                              ("sft_max_length", 16),
                              ("n_train_videos", 2), ("n_test", 2), ("gen_batch", 1), ("max_retries", 0),
                              ("n_bootstrap", 0), ("n_permutations", 0), ("gap_permutations", 0),
                              ("gap_bootstrap", 0)):
            check_count(name, getattr(self, name), minimum, flag=flags.get(name))
        check_count("lora_top_layers", self.lora_top_layers, 1, allow_none=True)
        check_count("lora_alpha", self.lora_alpha, 1, flag="--lora-alpha")
        from vlgap.cape.lm import parse_lora_layers, parse_lora_modules
        from vlgap.runtime import dtype_setting

        # canonical (bf16 and bfloat16 are one run), or auto until the run resolves it against its device
        object.__setattr__(self, "dtype", dtype_setting(self.dtype))
        parse_lora_layers(self.lora_layers), parse_lora_modules(self.lora_modules)
        if not self.generator_seeds:
            raise VlgapError("--seeds: need at least 1 generator seed per cell, e.g. --seeds 0,1,2")
        for s in self.generator_seeds:
            check_count("generator seed", s, 0)

    def resolved(self, device: Any = "cpu") -> tuple["CapeConfig", Any]:
        """This configuration with its LMs' number format resolved on `device` (`auto` -> bfloat16 or
        float32: vlgap.runtime.resolve_dtype), and that choice (what the run says and records)."""
        from vlgap.runtime import resolve_dtype

        choice = resolve_dtype(self.dtype, device, what="LMs")
        return replace(self, dtype=choice.dtype), choice

    def record(self) -> dict[str, Any]:
        """The configuration as run folders and stage keys record it: fields added later appear only when
        they differ from their default, so a folder of an older run keeps its key. Its dtype must be
        resolved (`resolved`): keys never hold "auto"."""
        if self.dtype == "auto":
            raise VlgapError("CapeConfig(dtype='auto') has no record before its run resolves the format against "
                             "its device: use CapeConfig.resolved(device) (run_experiment does)")
        d = asdict(self)
        return {**{k: v for k, v in d.items() if k not in ADDED_LATER or v != ADDED_LATER[k]}, **RETIRED}

    def key(self) -> str:
        return hashlib.sha256(json.dumps(self.record(), sort_keys=True).encode()).hexdigest()[:12]


#: CapeConfig fields added after run folders existed, with the default that means "as before"
ADDED_LATER = {"dtype": "float32", "sft_full": False, "lora_alpha": 32, "lora_layers": None, "lora_modules": None,
               "sft_length_buckets": False}

#: fields a published run recorded that CapeConfig no longer has, with the value they held there, so that
#: run keeps its key: the full run of commit ba2f074 (docs/results/cape-experiment.md) recorded
#: decode_dtype (the LM operators' precision when rewriting) as null; that idea is now `dtype`
RETIRED = {"decode_dtype": None}


PRESETS = {
    "full": CapeConfig(),
    # the full recipe's SFT data with fewer steps (4 steps left the PE valid on 2 of 12 prompts), the LMs in
    # auto: bfloat16 where the device computes it natively (~1.85x faster per decoded token on an
    # AVX512-BF16 CPU), float32 where it would be emulated (several times slower there), SFT batches bucketed by length (1.04x the real
    # tokens instead of 1.25x) and 10 generator-training captions (14 before: rewriting them by three LM
    # operators was the largest stage), 12 held-out prompts kept for the 2x2 (docs/results/cape-experiment.md)
    "demo": CapeConfig(sft_steps=24, n_train_videos=10, n_test=12, generator_seeds=(0,), dtype="auto",
                       sft_length_buckets=True,
                       n_bootstrap=1000, n_permutations=1000, gap_permutations=200, gap_bootstrap=200),
}


def _log(msg: str) -> None:
    print(f"[cape {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


from vlgap.cape.stages import LIBRARY_LOG, STAGE_FORMAT  # noqa: E402,F401  (re-exported)
from vlgap.cape.stages import digest as _digest, stage as _stage  # noqa: E402,F401


#: what a run folder holds that `force` starts over (vlgap's own outputs only)
STAGE_PATHS = ("sft", "rewrites", "cells", "mmd.json", "embeddings.npz", ".embeddings.npz.seal.json",
               ".mmd.json.seal.json", "results.json", "report.md", "data.json", "controls.json", "controls.md")


def claim_cape_folder(out: Path, cfg: "CapeConfig", *, force: bool = False,
                      log: Callable[[str], None] = print, formats: dict[str, Any] | None = None) -> None:
    """Record `cfg` in `out` (`vlgap.runs.open_run_folder`: another configuration is refused with the
    differences unless `force`); a folder that is new or taken over loses every stage output of an
    earlier run, so nothing (an HF checkpoint of other SFT settings, above all) is resumed into this one.
    formats: the LMs' number format as the run resolved it (recorded; `auto` resolved otherwise than in
    the folder's run is refused in words)."""
    open_run_folder(out, "cape-experiment", {**cfg.record(), "format": STAGE_FORMAT}, force=force,
                    legacy=("config.json",), log=log, clear=STAGE_PATHS, formats=formats,
                    results=tuple(p for p in STAGE_PATHS if p != "data.json"))


#: the run folder's log of everything the libraries print (trainer log dicts, warnings, progress bars)


def run_experiment(out_dir: str | Path, config: CapeConfig | None = None, *,
                   log: Callable[[str], None] = _log, force: bool = False, device: str = "cpu") -> dict[str, Any]:
    """Run (or resume) the whole design; returns the results dict also written to out_dir/results.json.
    `force`: start over in a folder that holds a run of another configuration (refused otherwise).
    `device` (vlgap.runtime, `spread` included): where the LMs train and rewrite; where a run happens is not
    part of its configuration (a run may resume on another device; the dtype is `config.dtype`, where
    `auto` is resolved on `device` when the run starts: said in one line and recorded).
    The three LM lanes (the PE's SFT and rewrites, the third operator's, the prompted rewriter's) run side by
    side in spawned worker processes where there are free cores for them (`vlgap.cape.lanes`;
    VLGAP_WORKERS=1: one after another in this process), with the same outputs; `log` gets the workers'
    lines prefixed with their lane. A script calling this needs `if __name__ == "__main__":` (the
    workers re-import it). The console keeps vlgap's own progress lines; what the libraries print goes to
    out_dir/library.log, named in the last progress line."""
    from vlgap.cape.runlog import library_output_to
    from vlgap.runtime import announce_formats, parse_device

    device = parse_device(device, spread=True)
    cfg, choice = (config or CapeConfig()).resolved(device)  # auto -> bfloat16 | float32 here, said once
    announce_formats([choice], log)
    out = Path(out_dir)
    claim_cape_folder(out, cfg, force=force, log=log, formats={"dtype": choice})
    with library_output_to(out / LIBRARY_LOG) as path:
        try:
            return _run_claimed(out, cfg, log, device)
        finally:
            log(f"library output (trainer logs, warnings, progress bars): {path}")


def _run_claimed(out: Path, cfg: CapeConfig, log: Callable[[str], None], device: str) -> dict[str, Any]:
    from vlgap.cape import operators as O

    atomic_write_json(out / "config.json", {"key": cfg.key(), **cfg.record()})
    t_start = time.perf_counter()
    timings: dict[str, float] = {}
    # CPU seconds of this process per stage (all its threads): on a shared machine the wall time says
    # how busy the machine was; the CPU time estimates the wall time on a quiet one (CPU s / threads used)
    cpu: dict[str, float] = {}

    # data: three disjoint sets of videos
    sft_videos = W.sample_videos(cfg.n_sft_videos, cfg.seed, cfg.camera_fraction, offset=0)
    train_videos = W.sample_videos(cfg.n_train_videos, cfg.seed, cfg.camera_fraction, offset=100_000)
    test_videos = W.sample_videos(cfg.n_test, cfg.seed, cfg.camera_fraction, offset=200_000)
    pairs = W.sft_pairs(sft_videos, tuple(cfg.sft_input_kinds))
    train_texts = [W.dense_source_of(v) for v in train_videos]
    test_prompts = [W.user_prompt(v) for v in test_videos]
    atomic_write_json(out / "data.json", {"sft_pairs": pairs, "train_captions": train_texts,
                                          "test_prompts": test_prompts,
                                          "train_videos": [v.to_dict() for v in train_videos],
                                          "test_videos": [v.to_dict() for v in test_videos]})

    # the three LM lanes (SFT pe + its rewrites; SFT third + its rewrites; the prompted rewriter's rewrites)
    # are independent: side by side in worker processes where there are cores for them (vlgap.cape.lanes)
    from vlgap.cape.lanes import TIMING_ORDER, LaneJob, lane_workers, run_lanes
    from vlgap.encoders.causal_lm import remote_code_allowed

    workers = lane_workers(device, torch_threads())
    t0 = time.perf_counter()
    lanes = run_lanes(LaneJob(out, cfg, device, pairs, train_texts, test_prompts, remote_code_allowed()), log,
                      workers)
    lane_times = {k: v for r in lanes.values() for k, v in r.timings.items()}
    lane_cpu = {k: v for r in lanes.values() for k, v in r.cpu.items()}
    timings.update({k: lane_times[k] for k in TIMING_ORDER if k in lane_times})
    cpu.update({k: lane_cpu[k] for k in TIMING_ORDER if k in lane_cpu})
    lanes_wall = time.perf_counter() - t0  # the lanes' stages overlap when workers > 1
    sft = {name: lanes[name].sft for name in ("pe", "third")}
    ops = ("pe", "third", "rewriter", "template")
    rewrites: dict[str, dict[str, list[dict[str, Any]]]] = {name: lanes[name].rewrites for name in ops[:3]}
    t0, c0 = time.perf_counter(), time.process_time()
    template = O.TemplateOperator()
    rewrites["template"] = {}
    for split, texts in (("test", test_prompts), ("train", train_texts)):
        log(f"rewriting {len(texts)} {split} texts with template")
        rewrites["template"][split] = O.rewrite(template, texts, cache_dir=out / "rewrites", batch_size=cfg.gen_batch)
    timings["rewrite_template"] = time.perf_counter() - t0
    cpu["rewrite_template"] = time.process_time() - c0
    timings["lm_lanes"] = lanes_wall

    validity = validity_by_input_kind(rewrites)

    from vlgap.cape.schema import six_part_text

    texts = {name: {split: [six_part_text(x) for x in rw] for split, rw in rewrites[name].items()} for name in ops}

    # MMD^2 diagnostics through vlgap.gap (length-matched, permutation p, bootstrap CI, witnesses)
    from vlgap.stats.text_sets import embed_texts, load_text_encoder

    encoder_box: list[Any] = []

    def text_encoder():  # MiniLM, loaded once for every gap call and the generators' embeddings
        if not encoder_box:
            # on the CPU whatever `device` says: its embeddings are cached by text across runs (a run may
            # resume elsewhere) and the generators' scores follow them bit for bit; 22M parameters take seconds
            encoder_box.append(load_text_encoder("minilm", device="cpu"))
        return encoder_box[0]

    def diagnostics() -> dict[str, Any]:
        from vlgap.stats.gap import gap

        pairs_ = {
            "user(pe) vs dense(pe)": (texts["pe"]["test"], texts["pe"]["train"]),
            "user(pe) vs dense(rewriter)": (texts["pe"]["test"], texts["rewriter"]["train"]),
            "user(rewriter) vs dense(rewriter)": (texts["rewriter"]["test"], texts["rewriter"]["train"]),
            "user(rewriter) vs dense(pe)": (texts["rewriter"]["test"], texts["pe"]["train"]),
            "user(pe) vs dense(third)": (texts["pe"]["test"], texts["third"]["train"]),
        }
        res = {}
        for label, (a, b) in pairs_.items():
            log(f"MMD^2 {label}")
            kw = dict(n_permutations=cfg.gap_permutations, n_bootstrap=cfg.gap_bootstrap, seed=cfg.seed, top_k=2,
                      encoder=text_encoder())
            g, note = None, None
            for width in ("auto", 8, 16):  # sets of very different lengths need wider bins to share any
                try:
                    g = gap(a, b, length_match=True, bin_width=width, **kw)
                    break
                except VlgapError as err:
                    note = str(err)
            if g is None:  # said in the report, never silent
                g = gap(a, b, length_match=False, **kw)
            d = g.to_dict()
            res[label] = {k: d.get(k) for k in ("mmd2_unbiased", "p_value", "ci", "ci_reason", "n_a", "n_b",
                                                   "length_match", "witness")}
            res[label]["verdict"] = g.verdict()
            if d.get("length_match") is None:
                res[label]["length_match_failed"] = note
        return res

    t0, c0 = time.perf_counter(), time.process_time()
    mmd = _stage(out / "mmd.json", diagnostics, {"what": "mmd", "texts": _digest(texts), "config": cfg.record()}, log)
    timings["mmd"] = time.perf_counter() - t0
    cpu["mmd"] = time.process_time() - c0

    # generators: one per training-caption operator and seed, scored under each inference operator
    from vlgap.cape.generator import score_attributes, train_generator

    t0, c0 = time.perf_counter(), time.process_time()
    import io

    from vlgap.reuse import read_verified, write_artefact

    emb_path = out / "embeddings.npz"
    emb_key = {"format": STAGE_FORMAT, "what": "embeddings", "encoder": "minilm"}  # entries keyed by their text
    all_texts = sorted({t for name in ops for ts in texts[name].values() for t in ts})
    raw = read_verified(emb_path, emb_key, what="CAPE embedding cache", report=log)
    known = {}
    if raw is not None:
        with np.load(io.BytesIO(raw), allow_pickle=False) as z:
            known = dict(zip(z["keys"].tolist(), z["x"]))
    missing = [t for t in all_texts if hashlib.sha256(t.encode()).hexdigest() not in known]
    if missing:
        x = embed_texts(missing, text_encoder()).array
        for t, v in zip(missing, x):
            known[hashlib.sha256(t.encode()).hexdigest()] = v
        keys = sorted(known)
        buf = io.BytesIO()
        np.savez(buf, keys=np.array(keys), x=np.stack([known[k] for k in keys]))
        write_artefact(emb_path, buf.getvalue(), emb_key)

    def emb(ts: list[str]) -> np.ndarray:
        return np.stack([known[hashlib.sha256(t.encode()).hexdigest()] for t in ts])

    train_attrs = [W.attributes_of(v) for v in train_videos]
    test_attrs = [W.attributes_of(v) for v in test_videos]
    design = [(a, b) for a in ("rewriter", "pe") for b in ("rewriter", "pe")]
    design += [("third", "pe"), ("template", "template")]
    scores: dict[tuple[str, str, int], list[float]] = {}
    per_attr: dict[str, dict[str, float]] = {}
    for train_op, infer_op in design:
        for s in cfg.generator_seeds:
            path = out / "cells" / f"{train_op}__{infer_op}__{s}.json"

            def make(train_op=train_op, infer_op=infer_op, s=s) -> dict[str, Any]:
                g = train_generator(emb(texts[train_op]["train"]), train_attrs, seed=s)
                pred = g.predict_embeddings(emb(texts[infer_op]["test"]))
                sc = score_attributes(pred, test_attrs)
                return {"train": train_op, "infer": infer_op, "seed": s, "item": sc["item"].tolist(),
                        "accuracy": sc["accuracy"], "overall": sc["overall"], "n": sc["n"],
                        "predictions": [{**p, "event_order": list(p["event_order"])} for p in pred]}

            cell = _stage(path, make, {"what": "cell", "train": train_op, "infer": infer_op, "seed": s,
                                        "texts": _digest([texts[train_op]["train"], texts[infer_op]["test"]]),
                                        "config": cfg.record()}, log)
            scores[(train_op, infer_op, s)] = cell["item"]
            acc = per_attr.setdefault(f"{train_op}/{infer_op}", {})
            for a, v in cell["accuracy"].items():
                acc[a] = acc.get(a, 0.0) + v / len(cfg.generator_seeds)
    timings["generators"] = time.perf_counter() - t0
    cpu["generators"] = time.process_time() - c0

    from vlgap.cape.analysis import two_by_two

    analysis = two_by_two({k: v for k, v in scores.items() if k[0] != "template"},
                          n_bootstrap=cfg.n_bootstrap, n_permutations=cfg.n_permutations, seed=cfg.seed)
    ref = np.mean([np.mean(v) for (t, _i, _s), v in scores.items() if t == "template"])
    from vlgap.cape.controls import experiment_controls

    t0, c0 = time.perf_counter(), time.process_time()
    control_texts = {name: {split: {"text": texts[name][split], "dense": [x.get("dense_caption") for x in rw]}
                            for split, rw in rewrites[name].items()} for name in ops}
    controls = experiment_controls(train_texts, control_texts, scores, emb, n_permutations=cfg.n_permutations,
                                   n_bootstrap=cfg.n_bootstrap, seed=cfg.seed)
    timings["controls"] = time.perf_counter() - t0
    cpu["controls"] = time.process_time() - c0
    results = {
        "config": cfg.record(), "config_key": cfg.key(),
        **analysis,
        "template_reference": float(ref),
        "per_attribute": per_attr,
        "validity": validity,
        "mmd": mmd,
        "controls": controls,
        "sft": {k: {kk: v[kk] for kk in ("steps", "batch_size", "n_pairs", "seconds", "samples_per_second",
                                         "train_loss", "lora_r", "seed")} | {
                    "lr": cfg.sft_lr, "input_kinds": list(cfg.sft_input_kinds),
                    "first_loss": v["history"][0]["loss"] if v["history"] else None,
                    "last_loss": v["history"][-1]["loss"] if v["history"] else None,
                    "loss_curve": [[h["step"], round(h["loss"], 4)] for h in v["history"]]}
                for k, v in sft.items()},
        "timings_s": {k: round(v, 1) for k, v in timings.items()},
        "cpu_s": {k: round(v, 1) for k, v in cpu.items()},
        "threads": torch_threads(),
        "lane_workers": workers,
        "seconds_this_run": round(time.perf_counter() - t_start, 1),
    }
    atomic_write_json(out / "results.json", results)
    from vlgap.cape.report import report_markdown

    atomic_write_text(out / "report.md", report_markdown(results))
    log(f"done in {results['seconds_this_run']} s; report: {out / 'report.md'}")
    return results


#: what each rewrite split holds (the validity table names the input kind, not the split)
SPLIT_INPUT_KIND = {"test": "pseudo user prompts (held out)", "train": "dense training captions"}


def validity_by_input_kind(rewrites: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, dict[str, Any]]:
    """Schema validity per operator and input kind ("pe/train" = the PE's rewrites of the dense training
    captions): n, counts and rates valid at the first (greedy) try and after the sampled retries, mean
    retries, and why the first tries that failed did ("budget:<part>", "loop:<part>", "schema"; see
    lm.failure_reason), counted over the outputs that record it."""
    from collections import Counter

    out: dict[str, dict[str, Any]] = {}
    for name, splits in rewrites.items():
        for split, r in splits.items():
            n = len(r)
            first = sum(bool(x["valid"]) and int(x["retries"]) == 0 for x in r)
            after = sum(bool(x["valid"]) for x in r)
            reasons = Counter(x["reasons"][0] for x in r if x.get("reasons")
                              and not (x["valid"] and x["retries"] == 0))
            out[f"{name}/{split}"] = {
                "operator": name, "split": split, "input_kind": SPLIT_INPUT_KIND.get(split, split), "n": n,
                "n_first_try_valid": first, "n_valid_after_retries": after,
                "first_try_valid": first / n if n else float("nan"),
                "valid_after_retries": after / n if n else float("nan"),
                "mean_retries": float(np.mean([x["retries"] for x in r])) if n else float("nan"),
                "first_try_failure_reasons": dict(sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))}
    return out


def one_thread_unless_set(log: Callable[[str], None] = _log) -> None:
    """The demo's torch threads: one intra-op thread unless OMP_NUM_THREADS says otherwise. On the 2-core
    machine of docs/results/cape-experiment.md one thread trained the demo's SFT in 35 CPU s (= wall on a
    free core) where two took ~50 s wall on the quiet machine, and two threads sharing cores with other
    jobs stalled each other (15-38 s per SFT step at load 9, against ~1.5 s quiet)."""
    import os

    if os.environ.get("OMP_NUM_THREADS"):
        return
    import torch

    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
        log("one torch thread (set OMP_NUM_THREADS to use more)")


def torch_threads() -> int | None:
    """The intra-op threads torch computes with (OMP_NUM_THREADS), recorded beside the timings."""
    try:
        import torch
    except ImportError:
        return None
    return int(torch.get_num_threads())


def preset(name: str, **overrides: Any) -> CapeConfig:
    if name not in PRESETS:
        raise VlgapError(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    return replace(PRESETS[name], **{k: v for k, v in overrides.items() if v is not None})
