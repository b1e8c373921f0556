"""Caption metrics: vlgap vs pycocoevalcap 1.2, wall time in the same run, same inputs, same numbers.

Two corpora of N items x R references from tests/fixtures/captions/corpus.py: "coco" (plain
COCO-style captions) and "nasty" (the parity fixture: punctuation, numbers, quotes, unicode, ...).
For each: (1) tokenisation + BLEU-1..4 + ROUGE-L + CIDEr, pycocoevalcap (Java PTBTokenizer, two JVM
starts, pure-Python scorers) vs vlgap (pure-Python tokenizer, vectorised scorers); (2) METEOR, both
driving the same jar (cold: JVM start and paraphrase table included; vlgap also warm, i.e. a second
call on its long-lived process). The numbers are checked equal (1e-9; METEOR exactly) before the
times are reported.

    python benchmarks/caption_eval.py [--items 5000] [--refs 5] [--corpus coco,nasty] [--no-meteor]
"""
from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "captions"))
from corpus import make_corpus  # noqa: E402

from vlgap.captions.evaluate import score_items, tokenize_data  # noqa: E402
from vlgap.captions.io import load_captions  # noqa: E402


def _pycoco_inputs(refs, preds):
    keys = list(refs)
    gts = {k: [{"caption": c} for c in refs[k]] for k in keys}
    res = {k: [{"caption": preds[k]}] for k in keys}
    return gts, res


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the Java tokenizer): on a shared
    machine this is the work done, whatever share of the cores the run got."""
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def bench_python_metrics(refs, preds):
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    gts_raw, res_raw = _pycoco_inputs(refs, preds)
    c0, t0 = _cpu_s(), time.perf_counter()
    gts = PTBTokenizer().tokenize(gts_raw)
    res = PTBTokenizer().tokenize(res_raw)
    t_tok = time.perf_counter() - t0
    bleu, _ = Bleu(4).compute_score(gts, res, verbose=0)
    rouge, _ = Rouge().compute_score(gts, res)
    cider, _ = Cider().compute_score(gts, res)
    t_ref, c_ref = time.perf_counter() - t0, _cpu_s() - c0
    ref_scores = list(bleu) + [rouge, cider]

    c0, t0 = _cpu_s(), time.perf_counter()
    data = load_captions(preds, refs)
    tokenized = tokenize_data(data)
    t_tok_v = time.perf_counter() - t0
    tables = score_items(data, ["bleu", "rouge", "cider"], tokenized=tokenized)
    t_vl, c_vl = time.perf_counter() - t0, _cpu_s() - c0
    ours = tables["bleu"].estimates + tables["rouge"].estimates + tables["cider"].estimates
    err = float(np.max(np.abs(np.array(ours) - np.array(ref_scores))))
    if err > 1e-9:
        raise SystemExit(f"numbers differ from pycocoevalcap by {err:.3g}: not a valid benchmark")
    return {"pycocoevalcap_s": t_ref, "pycocoevalcap_tokenize_s": t_tok, "pycocoevalcap_cpu_s": c_ref,
            "vlgap_s": t_vl, "vlgap_tokenize_s": t_tok_v, "vlgap_cpu_s": c_vl, "max_abs_diff": err,
            "scores": dict(zip(["BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "ROUGE-L", "CIDEr"], ours)),
            "data": data, "tokenized": tokenized, "pycoco_tokens": (gts, res)}


def bench_meteor(run):
    from pycocoevalcap.meteor.meteor import Meteor

    from vlgap.captions.meteor import MeteorJar

    gts, res = run["pycoco_tokens"]
    t0 = time.perf_counter()
    ref_score, ref_items = Meteor().compute_score(gts, res)
    t_ref = time.perf_counter() - t0

    hyps, refs = run["tokenized"]
    jar = MeteorJar()
    t0 = time.perf_counter()
    score, items = jar.evaluate(jar.statistics(hyps, refs))
    t_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    jar.evaluate(jar.statistics(hyps, refs))
    t_warm = time.perf_counter() - t0
    jar.close()
    if score != ref_score or items != ref_items:
        raise SystemExit("METEOR differs from pycocoevalcap: not a valid benchmark")
    return {"pycocoevalcap_s": t_ref, "vlgap_cold_s": t_cold, "vlgap_warm_s": t_warm, "METEOR": score}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--refs", type=int, default=5)
    ap.add_argument("--corpus", default="coco,nasty")
    ap.add_argument("--no-meteor", action="store_true")
    args = ap.parse_args()
    print(f"# caption_eval benchmark: {args.items} items x {args.refs} references; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs visible, OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, "
          f"python {platform.python_version()}")
    for name in [c.strip() for c in args.corpus.split(",") if c.strip()]:
        refs, preds = make_corpus(args.items, args.refs, seed=0, nasty=(name == "nasty"))
        run = bench_python_metrics(refs, preds)
        ratio = run["pycocoevalcap_s"] / run["vlgap_s"]
        print(f"[{name}] tokenize+BLEU+ROUGE-L+CIDEr: pycocoevalcap {run['pycocoevalcap_s']:.2f} s, "
              f"vlgap {run['vlgap_s']:.2f} s -> {ratio:.1f}x faster (tokenize alone: {run['pycocoevalcap_tokenize_s']:.2f} s vs "
              f"{run['vlgap_tokenize_s']:.2f} s); "
              f"max |diff| {run['max_abs_diff']:.1e}; CIDEr {run['scores']['CIDEr']:.4f}, BLEU-4 {run['scores']['BLEU-4']:.4f}")
        print(f"[{name}]   CPU time (Java included): pycocoevalcap {run['pycocoevalcap_cpu_s']:.2f} s, "
              f"vlgap {run['vlgap_cpu_s']:.2f} s -> {run['pycocoevalcap_cpu_s'] / run['vlgap_cpu_s']:.1f}x; "
              f"load average at the end {os.getloadavg()[0]:.1f}")
        if not args.no_meteor:
            m = bench_meteor(run)
            print(f"[{name}] METEOR (same jar): pycocoevalcap {m['pycocoevalcap_s']:.2f} s, vlgap cold {m['vlgap_cold_s']:.2f} s "
                  f"({m['pycocoevalcap_s'] / m['vlgap_cold_s']:.1f}x), warm {m['vlgap_warm_s']:.2f} s "
                  f"({m['pycocoevalcap_s'] / m['vlgap_warm_s']:.1f}x); METEOR {m['METEOR']:.4f} identical")


if __name__ == "__main__":
    main()
