"""Every option of every command, declared once: what a valid value is, checked at the door.

Before a command's body runs (before any model loads or any file, run_config.json included, is written),
`validate` checks each of its parameters against its declaration here: counts and sizes with ranges (and a
memory estimate where a size multiplies into an allocation), probabilities in (0, 1), choices, path kinds
(an input file that exists and, if text, is UTF-8; an input folder; an output file or folder of the right
kind, writable). A bad value is a one-line `VlgapError` naming the option (exit 2); a value of the wrong
type ("--k abc") is click's refusal, made one line by `VocabGroup`. The constraint classes are in
vlgap.cli.constraints; `VocabGroup` (vlgap.cli.group) installs the check on every command it resolves.

Lookup: `COMMANDS[command path][parameter name]` first (an option whose meaning is the command's own), then
`SHARED[parameter name]` (one declaration for --seed, --bootstrap, --confidence, --device, --cache-dir...
wherever they appear), then `FLAGS` (on/off flags, nothing to check).

How to declare a new option: add it to the command's function as usual, then one line here, either
- in `SHARED` if its parameter name means the same everywhere (`"lora_r": Count(0, 4096)`), or
- in `COMMANDS["<command path>"]` (`"cape rewrite": {"frames": Count(1, MAX_N_FRAMES), ...}`), or
- its name in `FLAGS` for a plain on/off flag.
tests/test_cli_common.py walks every option of the app and fails on one without a declaration, on a
declaration that does not fit its option's type, and on any invalid value of its kinds that is not
refused with exit 2 and one line naming it, with no file written.
"""
from __future__ import annotations

import functools
from typing import Any, Optional

from vlgap.cli.constraints import (Choice, Constraint, Count, Either, Flag, InputFile, InputFolder, NamedFiles, Output,
                                   Parsed, Real, Repeated, Text, file_or_folder_by_suffix)
from vlgap.errors import VlgapError

#: the most resamples or permutations a command computes (a larger count is a typo)
MAX_RESAMPLES = 10_000_000
#: seeds of numpy's and torch's generators
MAX_SEED = 2 ** 32 - 1
MAX_STEPS = 100_000_000
MAX_K = 1_000_000
#: captions joined per item (n_c); a video with fewer is refused by name
MAX_N_CAPTIONS = 1_000
#: the batch an encoder preprocesses at once when the command has no --batch-size (FeatureOptions' default)
DEFAULT_BATCH = 32


def _max_n_frames() -> int:
    from vlgap.cli.options import MAX_N_FRAMES

    return MAX_N_FRAMES


# ------------------------------------------------------------------------------------------------
# parsers: the API's own, with the option's name
# ------------------------------------------------------------------------------------------------

def _frame_counts(value, label, values):
    from vlgap.cli.options import frame_counts

    frame_counts(value, label)


def _caption_counts(value, label, values):
    from vlgap.cli.options import int_list

    vals = int_list(value, label)
    if max(vals) > MAX_N_CAPTIONS:
        raise VlgapError(f"{label} {max(vals)}: at most {MAX_N_CAPTIONS:,} captions per item")


def _one(limit):
    def parse(value, label, values):
        from vlgap.cli.options import one_int

        v = one_int(value, label)
        if v > limit():
            raise VlgapError(f"{label} {v}: at most {limit():,}")
    return parse


def _per_encoder_n_f(value, label, values):
    """"8", "best" or "name=8,other=4" (cross-vision --n-frames, cross-model-figures --n-f)."""
    from vlgap.probe.cross_figures import parse_n_f

    v = parse_n_f(value)
    for n in ([] if v is None else [v] if isinstance(v, int) else v.values()):
        if not 1 <= n <= _max_n_frames():
            raise VlgapError(f"{label} {value!r}: each n_f in [1, {_max_n_frames():,}]")


def _seeds(value, label, values):
    from vlgap.cli.options import seed_list

    if max(seed_list(value, label)) > MAX_SEED:
        raise VlgapError(f"{label} {value!r}: each seed at most {MAX_SEED:,}")


def _confidence(value, label, values):
    from vlgap.cli.options import check_confidence

    check_confidence(values["_command"], value)


def _ci_method(value, label, values):
    from vlgap.cli.options import check_ci_method

    check_ci_method(values["_command"], value)


def _device(value, label, values):
    """The device's spelling (vlgap.runtime's vocabulary); whether this machine has it is the API's check.
    `spread` only where the command's --device offers it (its help says so)."""
    import re

    from vlgap.runtime import invalid

    spread = "spread" in (values["_helps"].get(values["_name"]) or "")
    text = str(value).strip().lower()
    if text == "spread" and not spread:
        raise invalid("device", value, "only loaders of large text models and LMs spread a model over GPUs")
    if not re.fullmatch(r"cpu|auto|mps|spread|cuda(:\d+)?", text):
        raise invalid("device", value, spread=spread)


def _dtype(value, label, values):
    from vlgap.runtime import dtype_setting

    dtype_setting(value)  # auto is valid: the command resolves it against its device


def _text_dtype(value, label, values):
    from vlgap.runtime import parse_text_dtype

    parse_text_dtype(value, keep_auto=True)


def _temporal_pooling(value, label, values):
    from vlgap.features.temporal_pooling import parse_mode

    parse_mode(value)


def _frame_samplings(value, label, values):
    from vlgap.data.sampling import parse_frame_samplings

    parse_frame_samplings(value)


def _encoding(value, label, values):
    from vlgap.paths import check_encoding

    check_encoding(value, label)


def _frame_rule(value, label, values):
    from vlgap.captions.frame_rules import parse_frame_rule

    parse_frame_rule(value)


def _image_pattern(value, label, values):
    from vlgap.captions.pictures import check_pattern

    check_pattern(value)


def _frame_sampling(value, label, values):
    from vlgap.data.sampling import parse_frame_sampling

    parse_frame_sampling(value)


def _shard(value, label, values):
    from vlgap.features.extract import parse_shard

    parse_shard(value)


def _caption_metrics(value, label, values):
    from vlgap.captions.registry import parse_metrics

    parse_metrics(value)


def _lora_layers(value, label, values):
    from vlgap.cape.finetune import parse_lora_layers

    parse_lora_layers(value)


def _lora_modules(value, label, values):
    from vlgap.cape.finetune import parse_lora_modules

    parse_lora_modules(value)


def _latent_grid(value, label, values):
    parts = str(value).lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and 1 <= int(p) <= 4096 for p in parts):
        raise VlgapError(f"{label} {value!r}: give frames x height x width, each in [1, 4096], e.g. 8x8x8")


def _bin_width(value, label, values):
    if value != "auto" and not (str(value).isdigit() and int(value) >= 1):
        raise VlgapError(f"{label} {value!r}: give a whole number >= 1 or 'auto'")


def _encoders(modality: str | None, many: bool = True):
    """Encoder names or specs (vlgap.encoders.registry), of the modality the option takes where the name alone
    tells it (`--text mobilenet_v2` and `--text tv:resnet18` are vision encoders). A name the registry does
    not know may still name features already in the cache, so whether it loads is the API's check."""

    def parse(value, label, values):
        from vlgap.encoders.registry import expected_shape

        names = [s.strip() for s in str(value).split(",")] if many else [str(value).strip()]
        if not any(names) or not all(names):
            raise VlgapError(f"{label} {value!r}: give " + ("a comma list of encoders" if many else "an encoder")
                             + ", e.g. mobilenet_v2 (see `vlgap encoders`)")
        twice = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if twice is not None:
            raise VlgapError(f"{label} {value!r}: {twice!r} is given twice; name each encoder once")
        for name in names:
            shape = expected_shape(name)
            if modality and shape and shape["modality"] != modality:
                raise VlgapError(f"{label} {name!r}: a {shape['modality']} encoder; {label} takes {modality} "
                                 "encoders (see `vlgap encoders`)")
    return parse


def _encoder_option(modality: str | None, many: bool = True) -> Parsed:
    good = {"vision": "mobilenet_v2", "text": "minilm", None: "minilm"}[modality]
    other = {"vision": "minilm", "text": "mobilenet_v2", None: None}[modality]
    bad = [("empty", ""), ("an empty name", "a,,b" if many else " ")] + ([("other modality", other)] if other else []) \
        + ([("repeated", f"{good},{good}")] if many else [])
    return Parsed(_encoders(modality, many), bad=bad, good=good)


def _shapes_n(n, values):
    from vlgap.data.shapes.write import MAX_VIDEOS

    if n > MAX_VIDEOS:
        raise VlgapError(f"--n {n}: at most {MAX_VIDEOS:,} videos per run (the paper uses 1024)")


def _shapes_size(size, values):
    """make-data shapes / test-of-time and wsv eval-set: even, >= 16, and one video's frames within memory."""
    kind = str(values.get("kind", "shapes")).lower().replace("_", "-")
    if kind not in ("shapes", "test-of-time"):
        return
    from vlgap.data.shapes.render import parse_frame_size
    from vlgap.data.shapes.write import check_video_request

    try:
        hw = parse_frame_size(size)
    except VlgapError as err:
        raise VlgapError(f"--size {size}: {err}") from None
    if kind == "test-of-time":
        from vlgap.data.test_of_time import N_FRAMES as frames
    else:
        frames = values.get("n_frames") or 1
    check_video_request(frames, hw)


def _batch_memory(size, values):
    """One batch of preprocessed frames: float32, 3 channels, `size` x `size` px."""
    batch = values.get("batch_size") or DEFAULT_BATCH
    return batch * 3 * size * size * 4, f"a batch of {batch} frames at {size} x {size} px"


def _clip_memory(size, values):
    """A batch of float32 clips of n_frames x 3 x size x size (WSV's latents)."""
    batch, frames = values.get("batch_size") or DEFAULT_BATCH, values.get("n_frames") or 16
    return batch * frames * 3 * size * size * 4, f"a batch of {batch} clips of {frames} frames at {size} x {size} px"


# ------------------------------------------------------------------------------------------------
# the declarations
# ------------------------------------------------------------------------------------------------

class _NF(Count):
    """n_f as one integer: at most MAX_N_FRAMES (read when checked, so it cannot drift)."""

    def check(self, value, label, values):
        self.maximum = _max_n_frames()
        return super().check(value, label, values)


SEED = Count(0, MAX_SEED)
RESAMPLES = Count(0, MAX_RESAMPLES, api="n_bootstrap")
PERMUTATIONS = Count(0, MAX_RESAMPLES, api="n_permutations")
MANIFEST = InputFile(text=True, sample=".jsonl", sample_text='{"id": "v1", "video": "v1.mp4", "captions": ["a"]}\n')
FEATURES = InputFile(text=False, sample=".npy")
FEATURES_OR_CAPTIONS = InputFile(text="auto", sample=".txt")
CSV = InputFile(text=True, sample=".csv", sample_text="a,b\n1,2\n")
JSON = InputFile(text=True, sample=".json", sample_text="[]\n")
TEXT_FILE = InputFile(text=True, sample=".txt")
FOLDER_OUT, FILE_OUT = Output("folder"), Output("file")
RUN_FOLDER = InputFolder(writable=True)
FRACTION = Real(0, 1, closed=True, example=0.5)
IMAGE_SIZE = Count(16, memory=_batch_memory)  # vlgap.encoders.registry.get_encoder: at least 16
N_FRAMES_LIST = Parsed(_frame_counts, bad=[("zero", "0"), ("negative", "-1"), ("huge", "1000000000"),
                                           ("wrong type", "a,b"), ("repeated", "1,1")], good="1,2")
N_FRAMES_ONE = Parsed(_one(_max_n_frames), bad=[("zero", "0"), ("huge", "1000000000"), ("wrong type", "abc"),
                                               ("a list", "1,2")], good="8")
N_CAPTIONS_ONE = Parsed(_one(lambda: MAX_N_CAPTIONS), bad=[("zero", "0"), ("huge", "1000000"),
                                                           ("wrong type", "abc")], good="1")
PER_ENCODER_N_F = Parsed(_per_encoder_n_f, bad=[("zero", "0"), ("huge", "1000000000"), ("wrong type", "abc"),
                                                ("negative pair", "a=-1")], good="8")
TEXT_POOLING = Choice(("mean", "last"))
STYLE = Choice(lambda: tuple(__import__("vlgap.data.shapes.style", fromlist=["STYLES"]).STYLES))

#: options whose parameter name means the same on every command that has it
SHARED: dict[str, Constraint] = {
    "encoding": Parsed(_encoding, bad=[("not an encoding", "klingon"), ("a binary codec", "base64")], good="cp1252"),
    "seed": SEED,
    "seeds": Parsed(_seeds, bad=[("negative", "-1"), ("huge", str(2 ** 40)), ("wrong type", "a,b"),
                                 ("empty", ","), ("repeated", "0,0")], good="0,1"),
    "bootstrap": RESAMPLES,
    "permutations": PERMUTATIONS,
    "confidence": Parsed(_confidence, bad=[("zero", "0"), ("one", "1"), ("huge", "2"), ("negative", "-0.5")],
                         good="0.95", types=(float,)),
    "ci_method": Parsed(_ci_method, bad=[("not a choice", "bogus-method")], good="percentile"),
    "device": Parsed(_device, bad=[("not a device", "gpu9"), ("wrong type", "cuda:x")], good="cpu"),
    "dtype": Parsed(_dtype, bad=[("not a dtype", "int7")], good="float32"),
    "text_dtype": Parsed(_text_dtype, bad=[("not a dtype", "int7")], good="bfloat16"),
    "threads": Count(1, 4096),
    "decode_threads": Count(1, 1024),
    "workers": Count(1, 1024),
    "ray": Text(),
    "ray_workers": Count(1, 100_000),
    "cache_dir": FOLDER_OUT,
    "cache": FOLDER_OUT,  # cape rewrite/export --cache-dir
    "out": FOLDER_OUT,
    "batch_size": Count(1, 1_000_000),
    "image_size": IMAGE_SIZE,
    "n_frames": N_FRAMES_LIST,
    "n_captions": Parsed(_caption_counts, bad=[("zero", "0"), ("huge", "1000000"), ("wrong type", "x"),
                                               ("repeated", "2,2")],
                         good="1,2"),
    "k": Count(1, MAX_K),
    "metric": Choice(lambda: __import__("vlgap.metrics.alignment", fromlist=["METRIC_NAMES"]).METRIC_NAMES),
    "preset": Choice(lambda: tuple(__import__("vlgap.metrics.layer_search", fromlist=["PRESETS"]).PRESETS)),
    "text_pooling": TEXT_POOLING,
    "temporal_pooling": Parsed(_temporal_pooling, bad=[("not a mode", "median"), ("too few", "segments:1")],
                               good="mean"),
    "frame_sampling": Parsed(_frame_samplings, bad=[("not a strategy", "sideways"), ("zero", "stride:0")],
                             good="uniform"),
    "caption_draws": Count(1, 10_000),
    "manifest": MANIFEST,
    "vision": _encoder_option("vision"), "text": _encoder_option("text"), "encoder": _encoder_option("text", False),
    "lm": Text(), "base": Text(), "rewriter_model": Text(), "model": Text(), "endpoint": Text(),
    "generator": Text(), "latents": Text(), "video_text": Text(),
    "metrics": Parsed(_caption_metrics, bad=[("not a metric", "bogus-metric")], good="bleu"),
    "lr": Real(0, None, example=3e-3),
    "lora_r": Count(0, 65_536),
    "lora_alpha": Count(1, 1_000_000),
    "lora_layers": Parsed(_lora_layers, bad=[("not a layer list", "top:x")], good="all"),
    "lora_modules": Parsed(_lora_modules, bad=[("empty list", ",")], good="all-linear"),
    "generator_steps": Count(1, 100_000),
    "beam": Count(1, 1_000),
    "n_f": _NF(1, 108_000),
    "n_c": Count(1, MAX_N_CAPTIONS),
    "alignment_k": Count(1, MAX_K),
    "reorder_k": Count(1, MAX_K),
    "n_train": Count(1, 100_000_000),
    "caption_steps": Count(1, MAX_STEPS), "head_steps": Count(0, MAX_STEPS),
    "polisher_steps": Count(0, MAX_STEPS), "lm_pretrain_steps": Count(0, MAX_STEPS),
    "checkpoint_every": Count(1, MAX_STEPS),
    "operator": Choice(("template", "pe", "third", "rewriter", "precomputed", "openai-compatible")),
    "adapter": InputFolder(),
    "rewrites": JSON,
    "max_input_tokens": Count(1, 10_000_000),
    "layer": Text(),
    "pooling": TEXT_POOLING,
}


#: plain on/off flags (nothing to check): their parameter names
FLAGS = frozenset({
    "as_json", "force", "skip_bad", "allow_repeated_frames", "trust_remote_code", "random_weights", "quiet", "full",
    "truncate", "length_match", "c2st", "fd", "factorial", "idf", "no_truncate", "polish", "synthetic_only",
    "summary_only", "encoder_matrix", "use_intervals", "check", "prune", "reorder", "frame_order", "dry_run",
    "list_only", "emscore_idf",
})

_SHAPES = {"n": Count(1, custom=_shapes_n), "n_frames": _NF(1, 108_000), "size": Count(1, custom=_shapes_size)}
_WSV_SIZE = {"n_frames": _NF(1, 108_000), "size": Count(1, memory=_clip_memory)}

#: options whose meaning is the command's own (looked up before SHARED)
COMMANDS: dict[str, dict[str, Constraint]] = {
    "import": {"dataset": Choice(lambda: tuple(__import__("vlgap.data.importers", fromlist=["IMPORTERS"]).IMPORTERS),
                               fold=str.lower),
               "annotations": TEXT_FILE, "video_dir": InputFolder(), "out": FILE_OUT,
               "limit": Count(1, 1_000_000_000), "split": Text(), "mapping": TEXT_FILE, "language": Text(),
               "label_map": JSON, "id_column": Text()},
    "extract": {"encoder": _encoder_option(None, False), "pooling": Choice(("auto", "cls", "mean", "last")),
                "frame_sampling": Parsed(_frame_sampling, bad=[("not a strategy", "sideways"),
                                                               ("a list", "uniform,random")], good="uniform"),
                "caption_draw": Count(0, 1_000_000),
                "shard": Parsed(_shard, bad=[("not i/n", "3"), ("past the end", "5/4")], good="0/1")},
    "make-data": {"kind": Choice(("shapes", "test-of-time", "real"), fold=lambda s: s.lower().replace("_", "-")),
                  "out": Output(file_or_folder_by_suffix((".jsonl",), lambda v: str(v.get("kind")) == "real")),
                  **_SHAPES, "photo_fraction": FRACTION, "camera_fraction": FRACTION,
                  "style": STYLE, "caption_mode": Choice(("diverse", "paraphrase", "both"))},
    "cache": {"cache_dir": InputFolder(), "runs": Repeated(InputFolder())},
    "align": {"x": FEATURES, "y": FEATURES, "q": FRACTION},
    "layer-search": {"x": FEATURES, "y": FEATURES, "q": FRACTION},
    "fit-scaling": {"grid": CSV, "vision": Text(), "text": Text(),  # row filters: names as sweep.csv has them
                     "bootstrap_method": Choice(("residual", "case"))},
    "gap": {"a": FEATURES_OR_CAPTIONS, "b": FEATURES_OR_CAPTIONS, "kernel": Choice(("rbf", "linear", "poly", "cmmd")),
            "bandwidth": Real(0, None, example=1.0), "method": Choice(("auto", "quadratic", "block")),
            "bin_width": Parsed(_bin_width, bad=[("zero", "0"), ("wrong type", "wide")], good="auto"),
            "length_unit": Choice(("whitespace", "tokenizer")), "c2st_permutations": PERMUTATIONS,
            "fd_bootstrap": Count(0, MAX_RESAMPLES), "top_k": Count(0, MAX_K), "alpha": Real(0, 1, example=0.05)},
    "compare": {"scores": CSV, "system_a": Text(), "system_b": Text()},
    "caption-eval": {"pred": JSON, "refs": JSON, "images": InputFolder(), "videos": MANIFEST,
                     "frames": Parsed(_frame_rule, bad=[("zero", "0"), ("not a rule", "every"), ("no count", "int-linspace:")],
                                     good="int-linspace:4"),
                     "image_pattern": Parsed(_image_pattern, bad=[("no field", "x.jpg"), ("unknown field", "{name}.jpg"),
                                                                  ("absolute", "/{id}.jpg")], good="{id:012d}.jpg"),
                     "clip": Text(), "clip_convention": Choice(("official", "hessel", "transformers", "torchmetrics")),
                     "emscore_convention": Choice(("official", "content-tokens")),
                     "clip_w": Real(0, None, example=2.5), "clip_prefix": Text(empty_ok=True),
                     "bertscore_model": _encoder_option("text", False), "bertscore_layer": Count(0, 10_000),
                     "bertscore_baseline": Either(("build",), JSON), "baseline_sentences": TEXT_FILE,
                     "baseline_pairs": Count(1, MAX_RESAMPLES, api="n_pairs"), "human": TEXT_FILE,
                     "human_pred": NamedFiles(), "out": FILE_OUT, "compare": JSON, "cider_df": JSON,
                     "on_missing": Choice(("error", "drop")), "on_duplicate": Choice(("error", "first")),
                     "on_empty": Choice(("error", "keep")), "meteor_jar": InputFile(text=False, sample=".jar")},
    "sweep": {},
    "report": {"run_dir": RUN_FOLDER},
    "demo": {"config": InputFile(text=True, sample=".toml", sample_text="[demo]\n"), "n_videos": Count(1, 1_000_000),
             "preset": Choice(("default", "dr-full"))},
    "test-of-time": {"n_frames": N_FRAMES_ONE},
    "temporal": {"source": MANIFEST, "n_frames": N_FRAMES_ONE, "n_captions": N_CAPTIONS_ONE,
                 "orders": Choice(("reversed", "shuffled"), multiple=True), "image_check": Count(1, 100_000_000),
                 "video_dir": InputFolder(), "video_template": Text(), "types": Text()},
    "cross-vision": {"n_frames": PER_ENCODER_N_F, "n_frames_from": InputFolder(), "n_captions": N_CAPTIONS_ONE},
    "cross-model-figures": {"run_dir": RUN_FOLDER, "n_f": PER_ENCODER_N_F, "n_c_low": Count(1, MAX_N_CAPTIONS),
                            "n_c_high": Count(1, MAX_N_CAPTIONS), "matrix_n_c": Count(1, MAX_N_CAPTIONS),
                            "matrix_bootstrap": RESAMPLES},
    "downstream": {"scores": CSV, "alignment": CSV, "labels": Text(), "text": Text(),  # a sweep.csv's name too
                   "task": Choice(("knn-classify", "linear-probe", "retrieval"), multiple=True),
                   "temperature": Real(0, None, example=0.07), "folds": Count(2, 100_000)},
    "caption-diversity": {"n_frames": N_FRAMES_ONE},
    "split-captions": {"out": FILE_OUT, "parts": Count(1, 10_000), "source": Choice(("longest", "first", "all")),
                       "tolerance": FRACTION, "on_invalid": Choice(("fallback", "skip", "error")),
                       "max_new_tokens": Count(1, 10_000_000)},
    "intrinsic-dim": {"source": FEATURES_OR_CAPTIONS, "method": Choice(("twonn", "twonn-mle", "levina-bickel")),
                      "k1": Count(1, MAX_K), "k2": Count(1, MAX_K), "sweep": InputFolder()},
    "wsv train": {"system": Choice(("wsv", "wsv_mmd", "no_polisher", "frozen_lm", "text_only", "oracle")),
                  "corpus": TEXT_FILE, **_WSV_SIZE},
    "wsv caption": {"model": InputFile(text=False, sample=".pt"), "out": FILE_OUT},
    "wsv eval": {"predictions": JSON, "references": MANIFEST},
    "wsv gap": {"model": InputFile(text=False, sample=".pt")},
    "wsv invert": {"model": InputFile(text=False, sample=".pt"), "captions": TEXT_FILE, "out": FILE_OUT},
    "wsv demo": {},
    "wsv experiment": {"captions_per_scene": Count(1, 10), "latent_grid": Parsed(_latent_grid, bad=[
                           ("wrong type", "8x8"), ("zero", "0x8x8")], good="8x8x8"),
                       "n_eval": Count(1, 100_000_000), "n_unlabelled": Count(0, 100_000_000),
                       "n_val": Count(0, 100_000_000), "max_caption_steps": Count(0, MAX_STEPS),
                       "lm_dim": Count(1, 1_000_000), "lm_layers": Count(1, 10_000), "prompter_dim": Count(1, 1_000_000),
                       "systems": Text(), "generators": Text(), "second_systems": Text(), **_WSV_SIZE},
    "wsv eval-set": {**_SHAPES, "style": STYLE},
    "cape rewrite": {"prompts": TEXT_FILE},
    "cape train": {"targets": InputFile(text=True, sample=".jsonl"), "n_videos": Count(1, 1_000_000),
                   "steps": Count(1, MAX_STEPS), "lora_r": Count(1, 65_536)},
    "cape demo": {},
    "cape experiment": {"n_test": Count(1, 1_000_000), "n_train": Count(1, 1_000_000), "sft_steps": Count(1, MAX_STEPS),
                        "lora_r": Count(1, 65_536)},
    "cape export": {"captions": InputFile(text=True, sample=".jsonl"), "out": FILE_OUT},
    "cape scores": {"specs": NamedFiles(name_optional=True), "fmt": Choice(("auto", "vbench", "compbench", "judge",
                                                                           "table")),
                    "captions": NamedFiles(), "prompt_rewrites": NamedFiles()},
    "cape controls": {"run": RUN_FOLDER},
}


def declaration(command: str, name: str) -> Optional[Constraint]:
    """The declaration of parameter `name` of `command` ("cape rewrite"), or None when it has none."""
    own = COMMANDS.get(command, {})
    if name in own:
        return own[name]
    if name in SHARED:
        return SHARED[name]
    return Flag() if name in FLAGS else None


def label(param) -> str:
    """How a message names a parameter: its long flag ("--out" for -o/--out), or an argument's metavar."""
    if getattr(param, "param_type_name", "") == "argument":
        return (param.name or "").upper()
    longs = [o for o in param.opts if o.startswith("--")]
    return max(longs, key=len) if longs else param.opts[0]


def validate(command: str, params, values: dict[str, Any]) -> None:
    """Check every value of `command` (its click `params`, `values` by parameter name) against its
    declaration, in the order of the command line's parameters; the first bad one is a VlgapError."""
    context = dict(values, _command=command, _helps={p.name: getattr(p, "help", None) for p in params},
                   _defaults={p.name: p.default for p in params})
    declared = [(p, declaration(command, p.name)) for p in params if p.name in values]
    declared = [(p, d) for p, d in declared if d is not None]  # tests/test_cli_common.py fails on a None
    for joint in (False, True):  # each value on its own first, then what depends on several
        for p, decl in declared:
            context["_name"] = p.name
            (decl.check_joint if joint else decl.check)(values[p.name], label(p), context)


def refuse_empty_paths(command: str, params, raw: dict[str, Any]) -> None:
    """An empty path typed for a path option or argument (`--out ''`) is refused by name: click would make
    it ".", the current folder, written into (or read) without a word."""
    for p in params:
        decl = declaration(command, p.name)
        inner = decl.each if isinstance(decl, Repeated) else decl.other if isinstance(decl, Either) else decl
        if not isinstance(inner, (Output, InputFile, InputFolder)):
            continue
        typed = raw.get(p.name)
        if any(str(v).strip() == "" for v in (typed if isinstance(typed, (list, tuple)) else [typed])
               if v is not None):
            raise VlgapError(f"{label(p)}: an empty path; name a file or folder (\".\" for the current folder)")


def _call_body(callback, args, kwargs):
    """The command's own function, run once its values passed `validate` (a test replaces this to stop there)."""
    return callback(*args, **kwargs)


def guard(command, path: str) -> None:
    """Make click's leaf `command` (its path as typed) validate its values before its body runs."""
    if getattr(command, "_vlgap_guarded", False) or command.callback is None:
        return
    body = command.callback

    @functools.wraps(body)
    def checked(*args, **kwargs):
        from vlgap.caveats import collecting
        from vlgap.cli.tables import print_warnings
        from vlgap.paths import check_encoding, text_encoding

        encoding = kwargs.get("encoding")  # --encoding: every text file of the run, its door checks included
        if encoding is not None:
            check_encoding(encoding)
        with text_encoding(encoding):
            validate(path, command.params, kwargs)
            with collecting(process_wide=True) as found:
                try:
                    return _call_body(body, args, kwargs)
                finally:  # the run's caveats (vlgap.caveats), once each, on stderr: --json stays parseable
                    print_warnings(found)

    command.callback = checked
    command._vlgap_guarded = True


def undeclared(commands: dict[str, Any]) -> list[str]:
    """"COMMAND PARAM" for every parameter of `commands` (path -> click command) without a declaration."""
    return [f"{path} {p.name}" for path, cmd in sorted(commands.items()) for p in cmd.params
            if declaration(path, p.name) is None]


__all__ = ["COMMANDS", "FLAGS", "SHARED", "declaration", "guard", "label", "refuse_empty_paths", "undeclared",
           "validate"]
