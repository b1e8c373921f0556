"""Features for the probes by (manifest, encoder, n_f or n_c, frame order): from the cache first, else
extracted with an encoder that is loaded at most once per name and only if something is missing.
`FeatureOptions` holds the extraction settings every probe shares (one object instead of the same
keyword arguments repeated on every probe)."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from vlgap.arguments import checked_class
from vlgap.errors import VlgapError
from vlgap.keywords import refused_keywords, renamed_notes


@checked_class
@dataclass(frozen=True)
class FeatureOptions:
    """How features are extracted and cached; part of the cache key where it changes the features
    (dtype, image_size, text_pooling, temporal_pooling), so two probes with the same options share
    cached features."""

    cache_dir: str | Path | None = None  # default: $VLGAP_CACHE or ~/.cache/vlgap
    device: str = "cpu"
    dtype: str = "float32"
    #: number format of the text encoders (None: `dtype`)
    text_dtype: str | None = None
    image_size: int | None = None  # vision input side (None: the encoder's default)
    text_pooling: str | None = None  # mean (default) | last
    #: image encoders on video: mean (default) | segments:S | meandiff (vlgap.features.temporal_pooling)
    temporal_pooling: str = "mean"
    batch_size: int = 32
    workers: int = 2  # video decoding threads
    skip_bad: bool = False  # skip unreadable items (reported in the record) instead of stopping
    #: keep videos with fewer frames than n_f (frames repeat; warned per item, listed in the record)
    allow_repeated_frames: bool = False
    progress: bool = True
    #: every encoder with random weights (speed tests; cached apart, labelled "random weights")
    random_weights: bool = False

    def __post_init__(self):
        from vlgap.features.temporal_pooling import parse_mode

        # a bad mode fails here, before any model loads; the canonical spelling is what gets recorded
        object.__setattr__(self, "temporal_pooling", parse_mode(self.temporal_pooling))
        if "auto" in (str(self.dtype).strip().lower(), str(self.text_dtype).strip().lower()):
            from vlgap.runtime import parse_dtype, parse_text_dtype

            # resolved once, against the device: cache keys hold bfloat16 or float32, never auto
            dtype = parse_dtype(self.dtype, device=self.device)
            object.__setattr__(self, "text_dtype", parse_text_dtype(self.text_dtype, dtype, device=self.device))
            object.__setattr__(self, "dtype", dtype)


#: FeatureOptions field names: old probe keywords with these names now go into the options object
FEATURE_OPTION_NAMES = tuple(f.name for f in fields(FeatureOptions))


class LazyEncoder:
    """Stands in for an encoder in `extract`; loads the real one on first attribute access (or `preload()`,
    e.g. ahead of use in another thread: the loader runs once, the other thread waits for it)."""

    def __init__(self, loader, name: str = "encoder"):
        import threading

        self._loader, self._obj, self._name = loader, None, name
        self._lock = threading.Lock()

    def preload(self):
        """The loaded encoder (loading it now if nobody has)."""
        if self._obj is None:
            with self._lock:
                if self._obj is None:
                    from vlgap.stage_times import stage

                    with stage(f"load {self._name}"):
                        self._obj = self._loader()
        return self._obj

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.preload(), name)


@checked_class
class FeatureSource:
    """Features by (manifest, encoder, n_f or n_c, frame order): from the cache, else extracted with an
    encoder that is loaded once per name (or taken from `encoders`, name -> loaded encoder)."""

    def __init__(self, options: FeatureOptions | None = None, *, encoders: dict[str, Any] | None = None):
        if options is not None and not isinstance(options, FeatureOptions):
            raise VlgapError(f"options must be a FeatureOptions, got {type(options).__name__}")
        self.options = options or FeatureOptions()
        self.encoders: dict[str, Any] = dict(encoders or {})
        #: items --skip-bad left out of a feature set ({id, reason, encoder, features}), each said on stderr
        self.skipped: list[dict] = []
        self._said: set[tuple[str, str]] = set()

    def _say_skipped(self, name: str, what: str, bad: list[dict]) -> None:
        """--skip-bad: the items an extraction left out, said once per feature set on stderr (the cache
        entry's bad_items.jsonl is not the only place that names them) and kept in `skipped`."""
        if not bad or (name, what) in self._said:
            return
        self._said.add((name, what))
        self.skipped += [{**b, "encoder": name, "features": what} for b in bad]
        from rich.markup import escape

        from vlgap.progress import stderr_console

        shown = "; ".join(f"{b['id']}: {b['reason']}" for b in bad[:5]) + (f"; and {len(bad) - 5} more" if len(bad) > 5 else "")
        stderr_console.print(f"[yellow]warning:[/] --skip-bad left {len(bad)} item(s) out of {escape(name)} {what}: "
                             f"{escape(shown)}", highlight=False, soft_wrap=True)

    @classmethod
    def of(cls, features: "FeatureSource | FeatureOptions | None") -> "FeatureSource":
        """A FeatureSource from what a probe was given: a source (shared, keeps loaded encoders), options,
        or None (defaults)."""
        if isinstance(features, FeatureSource):
            return features
        if features is None or isinstance(features, FeatureOptions):
            return cls(features)
        raise VlgapError(f"features must be a FeatureSource or FeatureOptions, got {type(features).__name__}")

    def random_weight_names(self, names) -> list[str]:
        """Which of these encoders run with random weights: all of them with random_weights, else the
        config: specs (random by definition). Probes label them in their results."""
        return [n for n in dict.fromkeys(names) if self.options.random_weights or str(n).startswith("config:")]

    @property
    def cache_dir(self):
        return self.options.cache_dir

    def _encoder(self, name: str, vision: bool):
        if name not in self.encoders:
            o = self.options

            def load():
                from vlgap.encoders.registry import get_encoder

                return get_encoder(name, device=o.device, dtype=o.dtype if vision else self.text_dtype,
                                   pooling=None if vision else o.text_pooling,
                                   image_size=o.image_size if vision else None, random_weights=o.random_weights)
            self.encoders[name] = LazyEncoder(load, name)
        return self.encoders[name]

    def _common(self) -> dict[str, Any]:
        o = self.options
        return dict(cache_dir=o.cache_dir, device=o.device, dtype=o.dtype, skip_bad=o.skip_bad,
                    allow_repeated_frames=o.allow_repeated_frames,
                    batch_size=o.batch_size, workers=o.workers, progress=o.progress, random_weights=o.random_weights)

    def vision(self, man, name: str, n_f: int, frame_order: str = "ordered", shard=None,
               frame_sampling: str = "uniform"):
        from vlgap.features.extract import extract

        res = extract(man, name, n_frames=[n_f], image_size=self.options.image_size, frame_order=frame_order,
                      frame_sampling=frame_sampling,
                      temporal_pooling=self.options.temporal_pooling, shard=shard,
                      loaded_encoder=self._encoder(name, True), **self._common())
        self._say_skipped(name, f"n_f={n_f}", res.bad_items)
        return res.features[n_f]

    def text(self, man, name: str, n_c: int = 1, caption_draw: tuple[int, int] | None = None):
        from vlgap.features.extract import extract

        res = extract(man, name, n_captions=[n_c], pooling=self.options.text_pooling, caption_draw=caption_draw,
                      loaded_encoder=self._encoder(name, False), **{**self._common(), "dtype": self.text_dtype})
        self._say_skipped(name, f"n_c={n_c}", res.bad_items)
        return res.features[n_c]

    @property
    def text_dtype(self) -> str:
        return self.options.text_dtype or self.options.dtype

    def is_cached(self, man, name: str, param: str, value: int) -> bool:
        from vlgap.features.extract import encoder_key
        from vlgap.features.store import Entry, FeatureKey
        from vlgap.io_utils import cache_root

        o = self.options
        key = FeatureKey(encoder_key(name, self.text_dtype if param == "n_c" else o.dtype, o.text_pooling if param == "n_c" else None,
                                     o.image_size if param == "n_f" else None,
                                     temporal_pooling=o.temporal_pooling if param == "n_f" else None,
                                     random_weights=o.random_weights),
                         man.fingerprint(), param, value)
        return Entry(key, cache_root(o.cache_dir)).is_complete()


def layer_names(fs) -> list[str]:
    """The encoder's layer names recorded with a FeatureSet (empty when the record has none)."""
    return list(fs.record.get("encoder", {}).get("layer_names") or [])


def layer_name(fs, i: int) -> str:
    """Name of layer i of a FeatureSet (its index as text when the record has no names)."""
    names = layer_names(fs)
    return names[i] if i < len(names) else str(i)


def common_ids(sets: list, ids: list[str]) -> list[str]:
    """The ids (in the order of `ids`) that every FeatureSet in `sets` holds (unreadable items dropped)."""
    keep = set(ids)
    for fs in sets:
        keep &= set(fs.ids)
    return [i for i in ids if i in keep]


def feature_options_moved(**renames: str) -> Callable:
    """Decorator for probes that take `features=`: a call with one of the keywords that moved into
    FeatureOptions (cache_dir=, device=, dtype=, image_size=, text_pooling=, ...) or with `encoders=`
    raises a VlgapError that names the new form instead of Python's bare TypeError; `renames` adds
    other old keyword -> new keyword pairs (e.g. source="features"). Built on vlgap.keywords, the one
    mechanism for refused keywords."""
    def explain(kwargs) -> list[str]:
        notes = renamed_notes(renames, kwargs)
        moved = [k for k in kwargs if k in FEATURE_OPTION_NAMES]
        if moved:
            notes.append(f"{', '.join(k + '=' for k in moved)} moved into features=FeatureOptions("
                         f"{', '.join(k + '=...' for k in moved)})")
        if "encoders" in kwargs:
            notes.append("encoders= is given through features=FeatureSource(options, encoders={...})")
        return notes
    return refused_keywords(explain)
