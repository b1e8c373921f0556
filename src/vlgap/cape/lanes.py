"""The CAPE experiment's three LM lanes, side by side in worker processes where there are cores for them.

    lane "pe":       SFT of the anchored PE (LoRA seed pe_seed), then its rewrites of the held-out user
                     prompts and of the generator's training captions
    lane "third":    SFT of the third operator (LoRA seed third_seed), then its rewrites of the training captions
    lane "rewriter": the prompted rewriter's rewrites of the held-out prompts and the training captions

No lane reads what another writes (sft/pe, sft/third; rewrites/pe.json, third.json, rewriter.json), and every
step in a lane is seeded by the configuration alone (LoRA init, data order, dropout, sampled retries), so a
lane's outputs are the same whichever process runs it and whatever ran before it there. `run_lanes` runs
them in `lane_workers()` processes (spawned; each computes with the calling process's torch threads) as
`PARTS`: the prompted rewriter's two splits are two parts (it has no SFT to wait for, and its rewrites of
one split never read the other's), handed out after the two SFT lanes, so two workers run pe + rewriter
test and third + rewriter train, about half the LM work each, instead of pe and third + rewriter.
With one worker (`VLGAP_WORKERS=1`, or a single free core) the lanes run one after another in this process.
The two parts of a lane write the same rewrite cache, which keeps both's entries (`operators.RewriteCache`).

Each stage writes its files as before (`stages.stage`, the rewrite cache per batch), so a killed run
resumes where each lane stopped. Workers send their progress lines to the caller's `log`, prefixed with
the lane's name, and their library output to the run folder's library log; a worker whose parent died
stops at its next progress line.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from vlgap.errors import VlgapError
from vlgap.memory import reuse_freed_memory

#: the lanes (the demo on one thread: pe ~73 s, rewriter ~67 s, third ~62 s)
LANES = ("pe", "rewriter", "third")
#: what a lane rewrites, in the order its results list them: the third operator only writes training
#: captions (the falsifier trains on them and infers with the deployed PE; its own test rewrites would add
#: a cell the question does not need)
LANE_SPLITS = {"pe": ("test", "train"), "rewriter": ("test", "train"), "third": ("train",)}
#: the parts workers take, in this order: each lane's SFT with its rewrites, the rewriter split in two (on
#: two workers, CPU s of the demo: pe, then rewriter test ~ 74 + 30; third, then rewriter train ~ 64 + 40)
PARTS = (("pe", ("test", "train")), ("third", ("train",)), ("rewriter", ("train",)), ("rewriter", ("test",)))
#: the stage timings' order, as the serial run always recorded them
TIMING_ORDER = ("sft_pe", "sft_third", "rewrite_pe", "rewrite_third", "rewrite_rewriter")


@dataclass(frozen=True)
class LaneJob:
    """What every lane reads: picklable, so a worker process gets it whole."""
    out: Path
    cfg: Any  # experiment.CapeConfig
    device: str
    pairs: list
    train_texts: list
    test_prompts: list
    remote_code: bool = False  # the command's --trust-remote-code (a context variable: not inherited)


@dataclass
class LaneResult:
    name: str
    sft: dict[str, Any] | None  # the SFT stage's info (sft.json); None for the rewriter
    rewrites: dict[str, list[dict[str, Any]]]  # split -> one result per text
    timings: dict[str, float] = field(default_factory=dict)  # wall s of the stages computed in this run
    cpu: dict[str, float] = field(default_factory=dict)  # CPU s of the lane's process per stage


def lane_workers(device: str = "cpu", threads: int | None = None) -> int:
    """Processes for the lanes: VLGAP_WORKERS when set (1: one after another in this process); else on the
    CPU as many as the free cores hold at `threads` torch threads each (at most one per part), else 1."""
    from vlgap.parallel import workers_setting
    from vlgap.runs.claims import available_cores

    given = workers_setting()
    if given is not None:
        return min(given, len(PARTS))
    if device != "cpu":
        return 1
    if threads is None:
        import torch

        threads = torch.get_num_threads()
    return max(1, min(len(PARTS), available_cores() // max(1, threads)))


def _operator_options(job: LaneJob) -> dict[str, Any]:
    # every LM operator's per-part token budgets are sized from the captioner targets it imitates
    # (lm.budgets_from_targets, in its own tokenizer's tokens)
    cfg = job.cfg
    return dict(device=job.device, dtype=cfg.dtype, batch_size=cfg.gen_batch, max_retries=cfg.max_retries,
                seed=cfg.seed, budget_targets=sorted({t for _x, t in job.pairs}))


def sft_stage(job: LaneJob, name: str, seed: int, log: Callable[[str], None], timings: dict[str, float],
              cpu: dict[str, float]) -> dict[str, Any]:
    """The SFT of operator `name` (the anchored PE and the third operator differ only in the LoRA seed:
    init + data order), read from its stage file when there; an adapter changed since is trained again."""
    from vlgap.cape.stages import digest as _digest, stage as _stage
    from vlgap.cape.lm import check_folder, load_lm, sft_key, train_lora

    cfg, out, pairs = job.cfg, job.out, job.pairs
    info_path = out / "sft" / name / "sft.json"
    # the SFT key holds the base model's hash, known only once it is loaded: the stage file is keyed
    # by the configuration, and the adapter's files by the SFT key recorded in it
    stage_key = {"what": "sft", "name": name, "seed": seed, "pairs": _digest(pairs), "config": cfg.record()}

    def make() -> dict[str, Any]:
        t0, c0 = time.perf_counter(), time.process_time()
        lm = load_lm(cfg.base, device=job.device, dtype=cfg.dtype)
        top_layers = None if cfg.lora_layers is not None else cfg.lora_top_layers
        options = dict(full=cfg.sft_full, lora_alpha=cfg.lora_alpha, lora_layers=cfg.lora_layers,
                       lora_modules=cfg.lora_modules, length_buckets=cfg.sft_length_buckets)
        key = sft_key(pairs, base_model_hash=lm.model_hash, steps=cfg.sft_steps, batch_size=cfg.sft_batch,
                      lr=cfg.sft_lr, seed=seed, r=cfg.lora_r, top_layers=top_layers, max_length=cfg.sft_max_length,
                      save_every=10, **options)
        how = "full SFT" if cfg.sft_full else "LoRA"
        log(f"SFT {name}: {len(pairs)} pairs, {cfg.sft_steps} steps x batch {cfg.sft_batch}, {how} seed {seed}")
        info = train_lora(lm.model, lm.tokenizer, pairs, out / "sft" / name, steps=cfg.sft_steps,
                          batch_size=cfg.sft_batch, lr=cfg.sft_lr, seed=seed, r=cfg.lora_r,
                          top_layers=top_layers, max_length=cfg.sft_max_length, log=log, key=key, **options)
        info["base_model_hash"] = lm.model_hash
        info["sft_key"] = key
        timings[f"sft_{name}"] = time.perf_counter() - t0
        cpu[f"sft_{name}"] = time.process_time() - c0
        return info

    info = _stage(info_path, make, stage_key, log)
    problems = check_folder(out / "sft" / name / ("model" if cfg.sft_full else "adapter"), info.get("sft_key"))
    if problems:  # the adapter changed after its SFT: train it again
        log(f"SFT {name}: adapter not reused ({problems[0]}); training again")
        from vlgap.reuse import discard

        discard(info_path)
        info = _stage(info_path, make, stage_key, log)
    return info


def run_lane(job: LaneJob, name: str, log: Callable[[str], None],
             splits: tuple[str, ...] | None = None) -> LaneResult:
    """One lane in this process, or the part of it that rewrites `splits` (default: all of the lane's): its
    SFT (pe, third), then its rewrites, each stage resumed from its files."""
    from vlgap.cape import operators as O

    if name not in LANES:
        raise VlgapError(f"unknown CAPE lane {name!r}; valid: {', '.join(LANES)}")
    splits = LANE_SPLITS[name] if splits is None else splits
    if not set(splits) <= set(LANE_SPLITS[name]):
        raise VlgapError(f"CAPE lane {name!r} rewrites {', '.join(LANE_SPLITS[name])}, not {', '.join(splits)}")
    cfg = job.cfg
    timings: dict[str, float] = {}
    cpu: dict[str, float] = {}
    seeds = {"pe": cfg.pe_seed, "third": cfg.third_seed}
    sft = sft_stage(job, name, seeds[name], log, timings, cpu) if name in seeds else None
    on = _operator_options(job)
    if name == "rewriter":
        op = O.prompted_operator("rewriter", model=cfg.rewriter_model, **on)
    else:
        op = O.anchored_operator(name, job.out / "sft" / name / ("model" if cfg.sft_full else "adapter"),
                                 base=cfg.base, **on)
    t0, c0 = time.perf_counter(), time.process_time()
    texts_of = {"test": job.test_prompts, "train": job.train_texts}
    rw = {}
    for split, texts in ((sp, texts_of[sp]) for sp in LANE_SPLITS[name] if sp in splits):
        log(f"rewriting {len(texts)} {split} texts with {name}")
        rw[split] = O.rewrite(op, texts, cache_dir=job.out / "rewrites", batch_size=cfg.gen_batch,
                              progress=lambda d, n, sp=split: log(f"  {name} {sp}: {d}/{n}"))
    timings[f"rewrite_{name}"] = time.perf_counter() - t0
    cpu[f"rewrite_{name}"] = time.process_time() - c0
    if hasattr(op, "_lm"):
        op._lm = None  # free the model before the next lane loads its own
    return LaneResult(name, sft, rw, timings, cpu)


# ------------------------------------------------------------------------------------------------ workers

_WORKER: dict[str, Any] = {}


def _init_worker(queue: Any, threads: int, parent: int) -> None:
    import torch

    torch.set_num_threads(threads)  # the caller's (the demo's one thread), whatever OMP_NUM_THREADS says here
    # an SFT step frees and allocates activations and gradients of tens of MB: keep them in the
    # process instead of a fresh mmap each (demo SFT, 4 steps: 0.80 M page faults -> 0.36 M)
    reuse_freed_memory()
    _WORKER.update(queue=queue, parent=parent)


def _worker_log(name: str) -> Callable[[str], None]:
    def log(msg: str) -> None:
        if os.getppid() != _WORKER["parent"]:  # the run was killed: stop here; its rerun resumes from the files
            os._exit(1)
        _WORKER["queue"].put((name, msg))
    return log


def _lane_in_worker(job: LaneJob, name: str, splits: tuple[str, ...]) -> LaneResult:
    from vlgap.cape.stages import LIBRARY_LOG
    from vlgap.cape.runlog import library_output_to
    from vlgap.encoders.causal_lm import allow_remote_code

    allow_remote_code(job.remote_code)
    with library_output_to(job.out / LIBRARY_LOG):
        return run_lane(job, name, _worker_log(name), splits)


def merge_parts(parts: list[LaneResult]) -> dict[str, LaneResult]:
    """The parts' results as one per lane, in `LANES` order: the rewrites in the lane's split order, the
    stage times (wall and CPU s) summed over its parts."""
    merged: dict[str, LaneResult] = {}
    for name in LANES:
        mine = [p for p in parts if p.name == name]
        if not mine:
            continue
        rw = {sp: r for sp in LANE_SPLITS[name] for p in mine for s, r in p.rewrites.items() if s == sp}
        timings: dict[str, float] = {}
        cpu: dict[str, float] = {}
        for p in mine:
            for k, v in p.timings.items():
                timings[k] = timings.get(k, 0.0) + v
            for k, v in p.cpu.items():
                cpu[k] = cpu.get(k, 0.0) + v
        merged[name] = LaneResult(name, next((p.sft for p in mine if p.sft is not None), None), rw, timings, cpu)
    return merged


def run_lanes(job: LaneJob, log: Callable[[str], None], workers: int = 1) -> dict[str, LaneResult]:
    """Every lane's result by name, its `PARTS` computed in `workers` processes (1: here, one after another).
    A part that fails stops the parts not yet started; those running finish (their stages are kept for the
    rerun) and the first error is raised."""
    if workers <= 1:  # whole lanes: one model load per lane
        return merge_parts([run_lane(job, name, log) for name in LANES])
    import multiprocessing
    import queue as queue_mod
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    import torch

    ctx = multiprocessing.get_context("spawn")
    lines = ctx.Queue()

    def relay(timeout: float) -> None:
        try:
            name, msg = lines.get(timeout=timeout)
        except queue_mod.Empty:
            return
        log(f"[{name}] {msg}")
        while True:
            try:
                name, msg = lines.get_nowait()
            except queue_mod.Empty:
                return
            log(f"[{name}] {msg}")

    log(f"LM lanes {', '.join(LANES)} in {min(workers, len(PARTS))} worker processes "
        f"({torch.get_num_threads()} torch thread(s) each; VLGAP_WORKERS=1 runs them one after another)")
    pool = ProcessPoolExecutor(max_workers=min(workers, len(PARTS)), mp_context=ctx, initializer=_init_worker,
                               initargs=(lines, torch.get_num_threads(), os.getpid()))
    failed: BaseException | None = None
    try:
        futures = {part: pool.submit(_lane_in_worker, job, *part) for part in PARTS}
        while not all(f.done() for f in futures.values()):
            relay(0.5)
            if failed is None:
                failed = next((f.exception() for f in futures.values()
                               if f.done() and not f.cancelled() and f.exception()), None)
                if failed is not None:
                    for f in futures.values():
                        f.cancel()  # those not started
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        relay(0.1)  # the lines the workers sent last
    if isinstance(failed, BrokenProcessPool):  # a worker died (killed, out of memory, or never started)
        raise VlgapError("a CAPE lane's worker process died before it finished (killed, out of memory, or a "
                         "script that calls the experiment outside `if __name__ == \"__main__\":`, which "
                         "spawned workers re-import); rerun (finished stages are kept) or set VLGAP_WORKERS=1") \
            from failed
    if failed is not None:
        raise failed
    return merge_parts([f.result() for f in futures.values()])
