"""Option parsing shared by every CLI command, so that one idea has one option name and one type everywhere.

The CLI's vocabulary (docs/getting-started.md, "Option vocabulary"; tests/test_cli_vocabulary.py walks every
command and fails on a second spelling of these ideas):
- `--bootstrap N` / `--permutations N`: resample counts (the API's `n_bootstrap` / `n_permutations`).
- `--confidence L`: the level of every interval a command prints (0.95); on every command with --bootstrap.
- `--ci-method M`: how a bootstrap interval is made, one vocabulary for all commands (CI_METHODS): basic |
  percentile | bca | simultaneous | centred. Each command declares the methods that apply to it once
  (COMMAND_CI_METHODS) and refuses the others by name; a command whose intervals are of a fixed kind says
  which in FIXED_INTERVALS.
- `--seed N`: one seed; `--seeds 0,1,2`: a list of seeds (parsed by `seed_list`).
- `--threads N`: threads (torch CPU threads; `--decode-threads`: video-decoding threads); `--workers N`:
  processes; `--ray-workers N`: Ray actors.
- `--lm SPEC`: the causal LM a command uses; a second LM is named on it (`--rewriter-lm`, `--endpoint-lm`).
- `-o/--out PATH`: where a command writes: a folder for run outputs, a file only where the command writes
  exactly one file; every `--out` help says which ("folder" / "file").
- `--cache-dir DIR`: the cache root (features, latents, rewrites).
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
- Paths: a file or folder option is checked by vlgap.paths before any work (`input_file` / `input_folder`:
  "is a folder, expected a file" and the reverse; `output_file` / `output_folder`: of the right kind and
  writable; `read_text_utf8`: non-UTF-8 bytes named by file, line and byte). `--n-frames` is at most
  MAX_N_FRAMES (`frame_counts`).

What a valid value of each option is (a range, a choice, a path kind) is declared once per option in
vlgap.cli.declarations and checked before the command's body runs (tests/test_cli_common.py).

Old spellings (RENAMES) are refused with their new name before a command parses its options
(`vlgap.cli.group.VocabGroup`, the class of every command group): `vlgap cape rewrite --cache d` exits 2 with
"--cache is now --cache-dir".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

import typer

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
    """"1,2,4,8" -> [1, 2, 4, 8] (distinct positive integers, `vlgap.counts.count_list`); a one-line error
    naming the flag otherwise."""
    from vlgap.counts import count_list

    return count_list(name.lstrip("-").replace("-", "_"), text, 1, flag=name, what="positive integers")


#: the most frames `--n-frames` samples per video (an hour at 30 fps): a larger n_f is a typo, and its index
#: arrays would be allocated before any video's length is known
MAX_N_FRAMES = 108_000


def frame_counts(text: str, name: str = "--n-frames") -> list[int]:
    """`int_list` of n_f values, each at most MAX_N_FRAMES (refused with the limit stated)."""
    vals = int_list(text, name)
    if max(vals) > MAX_N_FRAMES:
        raise VlgapError(f"{name} {max(vals)}: at most {MAX_N_FRAMES:,} frames per video (an hour at 30 fps); a "
                         "video shorter than n_f is refused by name")
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


# ------------------------------------------------------------------------------------------------
# lists of seeds
# ------------------------------------------------------------------------------------------------

def seed_list(text: str, name: str = "--seeds") -> list[int]:
    """"0,1,2" -> [0, 1, 2]: distinct integers >= 0 (0 is a seed); a one-line error naming the flag otherwise."""
    from vlgap.counts import count_list

    return count_list(name.lstrip("-").replace("-", "_"), text, 0, flag=name, example="0,1,2")


# ------------------------------------------------------------------------------------------------
# interval methods and levels: one vocabulary, each command's methods declared once
# ------------------------------------------------------------------------------------------------

#: every interval method a command may offer, and what it is
CI_METHODS = {
    "basic": "the re-selected bootstrap estimates reflected around the estimate (2T - q_hi, 2T - q_lo)",
    "percentile": "the quantiles of the bootstrap estimates",
    "bca": "bias-corrected and accelerated percentile",
    "simultaneous": "a band over every layer pair at once (conservative under many near-tied pairs)",
    "centred": "the estimate plus the quantiles of the centred bootstrap estimates (paired differences)",
}

#: the methods each command offers, its default first; the others are refused by name
COMMAND_CI_METHODS: dict[str, tuple[str, ...]] = {
    "align": ("basic", "percentile", "simultaneous"),
    "layer-search": ("basic", "percentile", "simultaneous"),
    "caption-eval": ("bca", "percentile"),
    "compare": ("bca", "percentile"),
    "gap": ("bca", "percentile"),
    "fit-scaling": ("percentile",),
    "intrinsic-dim": ("percentile",),
    "downstream": ("percentile",),
    "cross-vision": ("basic",),
    "temporal": ("centred",),
    "caption-diversity": ("centred",),
}

#: commands with --bootstrap whose intervals are of several fixed kinds (so no --ci-method to choose one)
FIXED_INTERVALS: dict[str, str] = {
    "sweep": "basic per cell; with --caption-draws, items and draws together (vlgap.metrics.draws)",
    "test-of-time": "alignment per k and group-bootstrap fractions of the nearest related caption",
    "cross-model-figures": "bootstrap over models for the Fig 7 line, t for its slope, basic per matrix cell",
    "wsv eval": "coco-caption metrics (bca) and attribute accuracies (percentile)",
    "wsv gap": "the falsifier's MMD2 interval, C2ST and FD as `vlgap gap`",
    "wsv invert": "coco-caption metrics (bca) and the paired synthetic - real difference (percentile)",
    "wsv experiment": "over items per seed and a t interval over seeds",
    "cape experiment": "the 2x2's effects, MMD2 and controls, each as its section says",
    "cape scores": "the 2x2's effects over prompts and the witness regression",
    "cape controls": "percentile bootstrap over prompts (all cells of a prompt move together)",
}

CONFIDENCE_HELP = "level of every interval printed (0.95: 95% intervals)"


def ci_method_option(command: str):
    """`--ci-method` of `command`: its methods from COMMAND_CI_METHODS, the first the default; any other
    method is refused by name (a one-line VlgapError) when the command line is parsed."""
    allowed = COMMAND_CI_METHODS[command]
    help = " | ".join(allowed) + (": " + "; ".join(f"{m}: {CI_METHODS[m]}" for m in allowed))
    return typer.Option(allowed[0], "--ci-method", help=help,
                        callback=lambda ctx, value: check_ci_method(command, value, typed=_typed(ctx, command)))


def check_ci_method(command: str, value: str, typed: Optional[str] = None) -> str:
    """`value` when `command` offers that interval method, else a VlgapError naming what it offers (and
    the command as `typed`: align's methods are layer-search's too)."""
    allowed = COMMAND_CI_METHODS[command]
    if value in allowed:
        return value
    use, typed = " | ".join(allowed), typed or command
    if value in CI_METHODS:
        raise VlgapError(f"--ci-method {value} does not apply to {typed}; use {use}")
    raise VlgapError(f"--ci-method {value!r} is not an interval method ({' | '.join(CI_METHODS)}); "
                     f"{typed} takes {use}")


def _typed(ctx, default: str) -> str:
    """The command's path as typed ("cape experiment"), from its click context."""
    return " ".join(_command_path(ctx)) or default


#: commands with --bootstrap whose API computes its intervals at one level (it takes no `confidence` yet):
#: --confidence is offered there and refuses any other level by name
FIXED_LEVEL: dict[str, float] = {
    "sweep": 0.95, "wsv gap": 0.95, "wsv invert": 0.95, "wsv experiment": 0.95,
    "cape experiment": 0.95, "cape scores": 0.95,
}


def encoding_option():
    """`--encoding`: the encoding of the text files the command reads (captions, prompts, annotations). The
    command's declaration checks it and the command group decodes every text file of the run with it
    (vlgap.paths.text_encoding), so a command takes it as a parameter it does not use itself."""
    return typer.Option("utf-8", "--encoding", help="encoding of the text files read (captions, prompts, "
                        "annotations): utf-8 (default; a UTF-16 byte-order mark is honoured), cp1252, latin-1, ...")


def confidence_option(command: str, default: float = 0.95):
    """`--confidence` of `command`: any level in (0, 1), or only its API's level where FIXED_LEVEL says so."""
    fixed = FIXED_LEVEL.get(command)
    help = CONFIDENCE_HELP if fixed is None else f"level of the intervals printed: {fixed:g} only (the API's)"
    return typer.Option(default if fixed is None else fixed, "--confidence", help=help,
                        callback=lambda ctx, value: check_confidence(command, value, typed=_typed(ctx, command)))


def check_confidence(command: str, value: Optional[float], typed: Optional[str] = None) -> Optional[float]:
    """`value` when it is a level `command` computes, else a one-line VlgapError."""
    if value is not None and not 0 < value < 1:
        raise VlgapError(f"--confidence {value!r}: an interval level in (0, 1), e.g. 0.95")
    fixed = FIXED_LEVEL.get(command)
    if value is not None and fixed is not None and value != fixed:
        raise VlgapError(f"--confidence {value:g} does not apply to {typed or command}: its intervals are at "
                         f"{fixed:g} only")
    return value


# ------------------------------------------------------------------------------------------------
# old spellings: refused with the new name
# ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Rename:
    """`old` is now `new` on `commands` (command paths as typed: "cape rewrite")."""
    old: str
    new: str
    commands: tuple[str, ...]
    #: the message repeats the value given ("--interval basic is now --ci-method basic")
    same_value: bool = False
    #: the old option was a flag (the token after it is not its value)
    flag: bool = False
    #: said after the message, e.g. how an old value is written now
    note: str = ""

    def message(self, value: Optional[str]) -> str:
        v = f" {value}" if self.same_value and value is not None else ""
        return f"{self.old}{v} is now {self.new}{v}" + (f" {self.note}" if self.note else "")


_CAPE_LM = ("cape rewrite", "cape train", "cape experiment", "cape export")

#: every renamed option, declared once; VocabGroup refuses them, tests/test_cli_vocabulary.py tries each
RENAMES: tuple[Rename, ...] = (
    Rename("--cache", "--cache-dir", ("cape rewrite", "cape export"), same_value=True),
    Rename("--interval", "--ci-method", ("align", "layer-search"), same_value=True),
    Rename("--method", "--bootstrap-method", ("fit-scaling",), same_value=True),
    Rename("--skip-missing", "--skip-bad", ("import",), flag=True,
           note="(the same flag as `vlgap extract`): it skips videos without a file and malformed entries, "
                "listing each in <out>.skipped_items.jsonl"),
    Rename("--skip-missing", "--skip-bad", ("make-data",), flag=True,
           note="(the same flag as `vlgap import` and `vlgap extract`)"),
    Rename("--generator-seeds", "--seeds", ("cape experiment",),
           note="(a comma list of seeds: --generator-seeds 3 is --seeds 0,1,2)"),
    Rename("--workers", "--decode-threads", ("extract",), same_value=True,
           note="(background decoding threads; --workers counts processes)"),
    Rename("--base", "--lm", _CAPE_LM, same_value=True),
    Rename("--rewriter-model", "--rewriter-lm", ("cape rewrite", "cape experiment", "cape export"), same_value=True),
    Rename("--model", "--endpoint-lm", ("cape rewrite", "cape export"), same_value=True),
    Rename("--with", "--lm", ("split-captions",), note="(--with lm:MODEL is now --lm MODEL; --with rule: leave out --lm)"),
    Rename("--run-dir", "--out", ("wsv demo",), same_value=True),
    Rename("--per-item", "--out", ("caption-eval",), same_value=True, note="(the per-item scores CSV)"),
    Rename("--baseline-out", "--out", ("caption-eval",), same_value=True,
           note="(with --bertscore-baseline build, the baseline file)"),
)


def refuse_old_spellings(command: str, args: Sequence[str]) -> None:
    """A VlgapError "OLD is now NEW" for the first old spelling (RENAMES) of `command` in `args`."""
    renames = {r.old: r for r in RENAMES if command in r.commands}
    if not renames:
        return
    for i, token in enumerate(args):
        if token == "--":
            return
        name, eq, value = token.partition("=")
        rename = renames.get(name)
        if rename is None:
            continue
        if not eq:
            nxt = args[i + 1] if i + 1 < len(args) else None
            value = None if rename.flag or nxt is None or nxt.startswith("-") else nxt
        raise VlgapError(rename.message(value))


def _command_path(ctx) -> list[str]:
    names = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name)
        ctx = ctx.parent
    return names[::-1]


def device_option(default: str | None = "cpu", *, spread: bool = False, what: str = ""):
    """The one `--device` declaration: the vocabulary of vlgap.runtime (`spread` listed where the command's
    loader can spread a model over GPUs). The value is parsed by the API the command calls
    (vlgap.runtime.parse_device), so the CLI and the API refuse a bad value with the same line."""
    from vlgap.runtime import DEVICE_HELP, SPREAD_DEVICE_HELP

    return typer.Option(default, "--device", help=(f"{what}: " if what else "") + (SPREAD_DEVICE_HELP if spread
                                                                                else DEVICE_HELP))


def text_dtype_option(default_help: str = ""):
    """The one `--text-dtype` declaration: the text encoders' format when it differs from --dtype.
    default_help: what leaving it out means, where that is not --dtype's format."""
    from vlgap.runtime import DTYPE_HELP

    return typer.Option(None, "--text-dtype", help="the text encoders' number format when it differs from --dtype "
                        "(e.g. auto text beside float32 vision: `vlgap demo`'s default): " + DTYPE_HELP
                        + (f". {default_help}" if default_help else ""))


def dtype_option(default: str | None = "float32", *, what: str = ""):
    """The one `--dtype` declaration (vlgap.runtime.parse_dtype: canonical names and their aliases)."""
    from vlgap.runtime import DTYPE_HELP

    return typer.Option(default, "--dtype", help=DTYPE_HELP + (f": {what}" if what else ""))
