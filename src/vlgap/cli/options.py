"""Option parsing shared by every CLI command, so that one flag name means one type everywhere.

Rules (the CLI's vocabulary):
- `--bootstrap N` / `--permutations N`: resample counts (the API's `n_bootstrap` / `n_permutations`).
- `--n-frames` and `--n-captions`: the number of frames sampled per video (n_f) and of captions
  joined per item (n_c), always a comma list of integers; a single number is a list of one.
  Commands that run at one value accept a list of exactly one.
- `--preset platonic-rep`: platonic-rep's feature preparation (vlgap.metrics.layer_search.PRESETS).
- `--temporal-pooling MODE`: how an image encoder's per-frame embeddings become one video vector
  (vlgap.features.temporal_pooling): mean (default) | segments:S | meandiff.
- `--frame-sampling S`: which frames make n_f (vlgap.data.sampling): uniform (the paper) | random |
  stride:S | keyframes; the sweep takes a comma list and runs the strategies side by side.
- `--caption-draws R`: R random draws of each item's n_c captions, scores averaged (1: the first n_c).
- `--trust-remote-code`: let an hf: model run code from its repository (VideoMAEv2); never implied.
"""
from __future__ import annotations

from vlgap.errors import VlgapError

TRUST_REMOTE_CODE_HELP = ("let an hf: model run code from its own repository (needed by VideoMAEv2); "
                          "never implied: only for code you trust")
FRAME_SAMPLING_HELP = ("which frames make n_f: uniform (the paper: spread evenly) | random (seeded per item) | "
                      "stride:S (S frames apart, centred) | keyframes (the container's key frames, completed by "
                      "scene-change scores)")
CAPTION_DRAWS_HELP = ("draw each item's n_c captions at random R times (seeded by --seed) and average the scores; "
                      "the interval adds the between-draw variance (1: the first n_c captions, as the paper)")
POOLING_HELP = ("auto (default: the paper's rule, CLS token where the model has one, else the mean over tokens) | "
                "mean | cls; text: mean (default) | last")


def int_list(text: str, name: str) -> list[int]:
    """"1,2,4,8" -> [1, 2, 4, 8] (positive integers); a one-line error naming the flag otherwise."""
    try:
        vals = [int(x) for x in str(text).replace(" ", "").split(",") if x]
    except ValueError:
        raise VlgapError(f"{name} must be a comma-separated list of positive integers, e.g. 1,2,4,8; "
                         f"got {text!r}") from None
    if not vals:
        raise VlgapError(f"{name} is empty")
    if min(vals) < 1:
        raise VlgapError(f"{name} {text!r}: every value must be a positive integer")
    return vals


def one_int(text: str, name: str) -> int:
    """A comma list holding exactly one integer (for commands that run at one value)."""
    vals = int_list(text, name)
    if len(vals) != 1:
        raise VlgapError(f"{name} {text!r}: this command runs at one value; give one number, e.g. {vals[0]}")
    return vals[0]


TEMPORAL_POOLING_HELP = ("image encoders on video: mean (default, order-blind) | segments:S (S contiguous "
                         "segments of the sampled frames, each averaged, concatenated) | meandiff (mean, last - first)")


RANDOM_WEIGHTS_HELP = ("build every encoder with random weights (seed 0) instead of its trained ones: for speed "
                       "tests only; cached apart and labelled \"random weights\" in the console, record.json, JSON "
                       "results and the report. Without it, weights that cannot be found are an error")

ALLOW_REPEATED_FRAMES_HELP = ("keep videos with fewer frames than n_f (frames repeat; each warned, counted in the "
                              "summary, listed in record.json); without it such a video is an error (or a "
                              "reported skip with --skip-bad)")


def device_option(default: str | None = "cpu", *, spread: bool = False, what: str = ""):
    """The one `--device` declaration: the vocabulary of vlgap.runtime (`spread` listed where the command's
    loader can spread a model over GPUs). The value is parsed by the API the command calls
    (vlgap.runtime.parse_device), so the CLI and the API refuse a bad value with the same line."""
    import typer

    from vlgap.runtime import DEVICE_HELP, SPREAD_DEVICE_HELP

    return typer.Option(default, "--device", help=(f"{what}: " if what else "") + (SPREAD_DEVICE_HELP if spread
                                                                                else DEVICE_HELP))


def dtype_option(default: str | None = "float32", *, what: str = ""):
    """The one `--dtype` declaration (vlgap.runtime.parse_dtype: canonical names and their aliases)."""
    import typer

    from vlgap.runtime import DTYPE_HELP

    return typer.Option(default, "--dtype", help=DTYPE_HELP + (f": {what}" if what else ""))
