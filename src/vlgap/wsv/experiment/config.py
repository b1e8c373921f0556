"""The WSV experiment's configuration: its systems, the documented defaults and `ExperimentConfig` (checked
in full before any cell runs), and how the configuration enters every key (`ExperimentConfig.record`)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vlgap.errors import VlgapError
from vlgap.wsv.parts import LEGACY_MOBILENET_GRID, MOBILENET_GRID, PART_DEFAULTS, SETTING_DEFAULTS

DEFAULT_SYSTEMS = ("wsv", "wsv_mmd", "no_polisher", "frozen_lm", "text_only", "oracle", "wsv+smollm2")
SYSTEM_NAMES = {"wsv": "WSV-offline", "wsv_mmd": "WSV + MMD-to-real polisher", "no_polisher": "no polisher",
                "frozen_lm": "frozen LM", "text_only": "text-only (CapDec/DeCap)",
                "oracle": "oracle ceiling (supervised on paired real-style videos)",
                "chance": "chance (a random training caption)"}
#: the systems that learn from text only (the oracle is supervised; chance is the floor)
TEXT_ONLY_SYSTEMS = ("wsv", "wsv_mmd", "no_polisher", "frozen_lm", "text_only")


def split_system(name: str) -> tuple[str, dict[str, Any]]:
    """An experiment row's system name -> (training system, WSVConfig overrides): "wsv" or, with another
    LM, "wsv+smollm2" (the bundled SmolLM2-135M with LoRA) / "wsv+hf:<folder>"."""
    base, _, lm = name.partition("+")
    if not lm:
        return base, {}
    if lm == "smollm2":
        return base, {"lm": lm, **SMOLLM2_TRAIN}
    return base, {"lm": lm[3:] if lm.startswith("hf:") else lm}


#: the SmolLM2-135M + LoRA row's own caption-stage settings (they replace the experiment's `train` values for
#: that row and are recorded in its cell config and key). A pretrained 30-layer LM costs far more than the
#: scratch LM per caption: one step of 32 captions took ~11.5 s of CPU in float32 here. bfloat16 autocast
#: halves it (the CPU has avx512_bf16), the loss projects only caption positions onto the 49k vocabulary, and
#: 8 captions per step make a step ~1.4 s of CPU. Its dtype "auto" is `ExperimentConfig.lm_dtype`: bfloat16
#: where the run's device computes it natively, float32 where bfloat16 would be emulated (slower there); the
#: cell config and key hold what it resolved to. A pretrained LM needs few steps: the held-out caption loss
#: falls 4.75 -> 2.08 -> 1.60 -> 1.41 -> 1.37 at 0/50/100/150/200 steps of the profile run; in the 0be5d04
#: experiment, 200 steps left the held-out loss still falling at the last step on 2 of 3 seeds, so at least 400
#: steps (about one pass over the 2,996-caption corpus) at lr 1e-3, then on until converged (at most 800), with
#: the lowest-validation-loss weights kept, as every other row (docs/results/wsv-experiment.md).
#: docs/wsv.md gives the profile. Checkpoints every 100 steps hold the adapters and the prompter, not the
#: 540 MB base LM (wsv.train.stored_state).
SMOLLM2_TRAIN: dict[str, Any] = {"batch_size": 8, "caption_steps": 400, "max_caption_steps": 800, "lr": 1e-3,
                                  "dtype": "auto", "checkpoint_every": 100}


def system_label(name: str) -> str:
    base, over = split_system(name)
    label = SYSTEM_NAMES.get(base, base)
    return f"{label}, LM {over['lm']} + LoRA" if "lm" in over else label


#: caption-stage steps of the documented experiment: at least CAPTION_STEPS, then on until the held-out loss
#: converged (wsv.convergence) or MAX_CAPTION_STEPS. The minimum: WSV-offline's held-out loss sits on a
#: plateau from about 1,500 to 1,900 steps and then falls another 3 % (best at 2,450 of a 3,000-step run), so
#: any rule judged from 1,500 steps stopped it on the plateau (docs/results/wsv-experiment.md)
CAPTION_STEPS = 3000
MAX_CAPTION_STEPS = 6000

#: the experiment's caption-stage learning rate: at 2e-3 the oracle on 3,000 scenes reaches in 1,500 steps the
#: held-out loss 1e-3 reaches in 3,000 (1.046 both; docs/results/wsv-latent-diagnosis.md), at half the cost
CAPTION_STAGE_LR = 2e-3

#: the documented experiment: `vlgap wsv experiment` with no options (README "The experiment"); the demo is
#: its seed 0, so both read their settings from here
EXPERIMENT_DEFAULTS: dict[str, Any] = dict(
    n_train=3000, captions_per_scene=1, latent_grid=MOBILENET_GRID, n_eval=60, n_unlabelled=20, n_val=10,
    seeds=(0, 1, 2), systems=DEFAULT_SYSTEMS,
    generators=("synthetic", "real"), second_generator_systems=("wsv",), n_bootstrap=300, n_permutations=300,
    c2st_permutations=30,
    train=dict(caption_steps=CAPTION_STEPS, max_caption_steps=MAX_CAPTION_STEPS, lr=CAPTION_STAGE_LR,
               head_steps=150, polisher_steps=150,
               lm_pretrain_steps=200, lm_dim=64, lm_layers=2, prompter_dim=32, checkpoint_every=50))


@dataclass
class ExperimentConfig:
    n_train: int = 150  # training scenes (x captions_per_scene captions = the corpus)
    # captions of each training scene in the corpus, drawn at random from its ten; fewer captions of more
    # scenes give the oracle (and a reader of the latent) more distinct scenes at the same corpus size
    captions_per_scene: int = 10
    # MobileNet latents' pooling grid (frames, height, width); (8, 8, 8) at 64 px keeps block 6's whole
    # 8 x 8 map (the objects of the shapes world are 1-2 cells wide), (8, 4, 4) averaged them away
    latent_grid: tuple[int, int, int] = MOBILENET_GRID
    n_eval: int = 60  # held-out real-style scenes
    n_unlabelled: int = 60  # unlabelled real-style scenes (distribution term only)
    n_val: int = 10  # validation scenes: their captions (never trained on) give the held-out caption loss
    world_seed: int = 0
    seeds: tuple[int, ...] = (0, 1, 2)
    systems: tuple[str, ...] = DEFAULT_SYSTEMS
    generators: tuple[str, ...] = ("synthetic", "real")  # render styles of the T2V generator
    second_generator_systems: tuple[str, ...] = ("wsv",)  # systems also run with generators[1:]
    eval_style: str = "real"
    n_frames: int = SETTING_DEFAULTS["n_frames"]
    size: int = SETTING_DEFAULTS["size"]
    n_bootstrap: int = 500
    n_permutations: int = 500
    c2st_permutations: int = 50
    train: dict[str, Any] = field(default_factory=dict)  # WSVConfig overrides (steps, sizes, lm, lora_r, dtype)
    # the parts (vlgap.wsv.parts), by spec: generator, latents, video_text, generator_steps; empty = the
    # offline defaults (shapes renderer in the `generators` styles, MobileNet latents, trained latent tower)
    parts: dict[str, Any] = field(default_factory=dict)
    metrics: tuple[str, ...] | None = None  # caption metrics (vlgap.captions names); None: all coco-caption ones
    # the number format of the rows whose LM settings say "auto" (SYSTEM+smollm2: SMOLLM2_TRAIN): auto resolves
    # on the run's device when it starts (`resolved`: bfloat16 where the device computes it natively, else
    # float32). It enters the keys of those rows' cells (their row settings), not the experiment's record
    lm_dtype: str = "auto"

    def __post_init__(self):
        from vlgap.counts import check_count

        self.latent_grid = tuple(self.latent_grid)
        if len(self.latent_grid) != 3 or any(int(g) < 1 for g in self.latent_grid):
            raise VlgapError(f"--latent-grid: give frames x height x width, e.g. 8x8x8; got {self.latent_grid}")
        if not 1 <= int(self.captions_per_scene) <= 10:
            raise VlgapError(f"--captions-per-scene must lie in 1..10 (each scene has ten captions), "
                             f"got {self.captions_per_scene}")
        for name, minimum in (("n_train", 1), ("n_eval", 2), ("n_unlabelled", 0), ("n_val", 0), ("n_frames", 1), ("size", 16),
                              ("n_bootstrap", 0), ("n_permutations", 0), ("c2st_permutations", 0)):
            setattr(self, name, check_count(name, getattr(self, name), minimum,
                                            flag="--bootstrap" if name == "n_bootstrap" else
                                            "--permutations" if name == "n_permutations" else
                                            "--" + name.replace("_", "-")))
        self.seeds = tuple(check_count("seed", s, 0, flag="--seeds", example=0) for s in self.seeds)
        if not self.seeds:
            raise VlgapError("--seeds: give at least one training seed, e.g. 0,1,2")
        for name in ("systems", "generators"):
            if not tuple(getattr(self, name)):
                raise VlgapError(f"--{name}: give at least one, e.g. {DEFAULT_SYSTEMS[0] if name == 'systems' else 'synthetic'}")
        from vlgap.wsv.train import SYSTEMS, WSVConfig

        unknown = [s for s in self.systems if split_system(s)[0] not in SYSTEMS]
        if unknown:
            raise VlgapError(f"--systems: unknown {unknown}; valid: {', '.join(SYSTEMS)}, each optionally with "
                             "another LM as SYSTEM+smollm2")
        unknown_parts = sorted(set(self.parts) - set(PART_DEFAULTS))
        if unknown_parts:
            raise VlgapError(f"experiment parts {unknown_parts} unknown; valid: {', '.join(PART_DEFAULTS)}")
        if not self.part("generator").startswith("shapes") and len(self.generators) != 1:
            raise VlgapError(f"--generators {','.join(self.generators)}: render styles belong to the shapes generator; "
                             f"with --generator {self.part('generator')} give one name (e.g. diffusers)")
        from vlgap.runtime import dtype_setting

        self.lm_dtype = dtype_setting(self.lm_dtype, option="lm_dtype")
        for s in self.systems:  # every training setting checked now, not after hours of other cells
            base, over = split_system(s)
            w = WSVConfig(system=base, **{**self.wsv_overrides(), **over})  # (auto: checked as on the CPU)
            if w.max_caption_steps and not self.n_val:
                raise VlgapError(f"--n-val 0 leaves no held-out caption loss, which {s}'s training until converged "
                                 "(--max-caption-steps) is judged on: give --n-val 10, or --max-caption-steps 0")

    def part(self, name: str):
        return self.parts.get(name, PART_DEFAULTS[name])

    def row_settings(self, system: str) -> dict[str, Any]:
        """A row's own WSVConfig settings (`split_system`), its "auto" dtype as `lm_dtype`, which must be
        resolved by then (`resolved`): cell keys and cell configs never hold "auto"."""
        over = split_system(system)[1]
        if over.get("dtype") == "auto":
            if self.lm_dtype == "auto":
                raise VlgapError(f"the row {system}'s number format is auto, resolved against the run's device when "
                                 "it starts: use ExperimentConfig.resolved(device) (run_experiment does)")
            over = {**over, "dtype": self.lm_dtype}
        return over

    def resolved(self, device: Any = "cpu") -> tuple["ExperimentConfig", dict[str, Any]]:
        """This configuration with its number formats resolved on `device` (vlgap.runtime.resolve_dtype:
        `auto` -> bfloat16 where the device computes it natively, else float32), and those choices by name
        (what the run says when it starts and records): "dtype", the models' (`train`'s, float32 by
        default), and "lm_dtype", the rows with an auto LM format (SYSTEM+smollm2), where there are such."""
        from dataclasses import replace

        from vlgap.runtime import resolve_dtype

        models = resolve_dtype(self.train.get("dtype", SETTING_DEFAULTS["dtype"]), device, what="models")
        train = {k: v for k, v in self.train.items() if k != "dtype"}
        if models.dtype != SETTING_DEFAULTS["dtype"] or ("dtype" in self.train and not models.auto):
            train["dtype"] = models.dtype  # (auto resolved to the default: the default's record and keys)
        formats: dict[str, Any] = {"dtype": models}
        rows = [s for s in self.systems if split_system(s)[1].get("dtype") == "auto"]
        if rows:
            formats["lm_dtype"] = resolve_dtype(self.lm_dtype, device, option="lm_dtype",
                                                what=f"LM rows ({', '.join(rows)})")
        lm_dtype = formats["lm_dtype"].dtype if rows else self.lm_dtype
        return replace(self, train=train, lm_dtype=lm_dtype), formats

    def wsv_overrides(self) -> dict[str, Any]:
        kind = "latent-tower" if self.part("video_text") == "latent-tower" else "clip"
        return {"video_text": kind, **self.train}

    def record(self) -> dict[str, Any]:
        """The configuration as keys hold it: without `parts` when it is empty (the offline defaults), so
        results computed before parts were selectable keep their keys."""
        d = asdict(self)
        del d["lm_dtype"]  # in the keys of the rows it applies to (their row settings), resolved
        if not d["parts"]:
            del d["parts"]
        # settings added later, left out at the value results were computed with before, so those keep their keys
        if d["captions_per_scene"] == 10:
            del d["captions_per_scene"]
        if d["train"].get("max_caption_steps") == 0:  # exactly caption_steps, as before the setting existed
            d["train"] = {k: v for k, v in d["train"].items() if k != "max_caption_steps"}
        d["latent_grid"] = list(d["latent_grid"])
        if d["latent_grid"] == list(LEGACY_MOBILENET_GRID):
            del d["latent_grid"]
        return d

    def cells(self) -> list[tuple[str, str, int]]:
        """Seed-major order: a run cut short still has every system for its first seeds."""
        out = []
        for seed in self.seeds:
            for gi, g in enumerate(self.generators):
                systems = self.systems if gi == 0 else tuple(s for s in self.systems
                                                             if s in self.second_generator_systems)
                out += [(g, s, seed) for s in systems]
        return out


def _log_default(msg: str) -> None:
    import sys

    print(f"wsv: {msg}", file=sys.stderr, flush=True)
