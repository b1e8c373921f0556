"""CLI commands for datasets and features: import, make-data, extract, encoders, cache."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from vlgap.cli._app import app
from vlgap.cli.options import device_option, dtype_option, encoding_option
from vlgap.cli.options import (ALLOW_REPEATED_FRAMES_HELP, FRAME_SAMPLING_HELP, POOLING_HELP, RANDOM_WEIGHTS_HELP,
                               TEMPORAL_POOLING_HELP, TRUST_REMOTE_CODE_HELP, frame_counts, int_list)
from vlgap.errors import VlgapError

console = Console()


@app.command("import")
def import_cmd(
    dataset: str = typer.Argument(..., help="vatex | msrvtt | msvd | kinetics | ssv2 | folder (your own media "
                                  "and captions: docs/own-data.md)"),
    annotations: Path = typer.Argument(..., help="official annotation file (layouts: see docs/datasets.md); "
                                       "folder: a captions CSV (id,caption) or JSON"),
    video_dir: Path = typer.Argument(..., help="folder holding the video files, named by video id; folder: "
                                     "videos, pictures or frame folders named <id>"),
    out: Path = typer.Option(..., "--out", "-o", help="file: the manifest to write (JSONL)"),
    limit: Optional[int] = typer.Option(None, help="random subset of this many videos (the paper: 1024)"),
    seed: int = typer.Option(0, help="seed of the random subset"),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="skip malformed entries and videos without a file "
                                  "(each listed in <out>.skipped_items.jsonl and counted in the summary)"),
    split: Optional[str] = typer.Option(None, help="msrvtt: train | validate | test; vatex: the split the file "
                                        "holds (train | validation | public_test | private_test); msvd: train | "
                                        "validate | test of youtube_mapping.txt; kinetics: a value of the split "
                                        "column (train | val | test); ssv2: train | validation | test"),
    mapping: Optional[Path] = typer.Option(None, help="msvd: youtube_mapping.txt (clip -> vidN), found "
                                           "automatically beside the annotations or videos"),
    language: Optional[str] = typer.Option(None, help="msvd CSV: rows of this Language (default English)"),
    label_map: Optional[Path] = typer.Option(None, "--label-map", help="ssv2: labels.json (class name -> index), "
                                             "found automatically beside the annotations or videos"),
    id_column: Optional[str] = typer.Option(None, "--id-column", help="folder: the captions file's id column (or JSON "
                                            "key), when it is none of id, video_id, image_id, filename, file_name, "
                                            "file"),
    encoding: str = encoding_option(),
):
    """Import VATEX, MSR-VTT, MSVD, Kinetics or SSv2 annotations, or your own folder of videos or images
    with a captions CSV / JSON (`folder`), into a manifest, reporting every skip."""
    from vlgap.data.importers import import_dataset

    report = import_dataset(dataset, annotations, video_dir, out, limit=limit, seed=seed, skip_bad=skip_bad,
                            split=split, mapping=mapping, language=language, label_map=label_map, id_column=id_column)
    console.print(report.summary(), markup=False, highlight=False, soft_wrap=True)


@app.command("extract")
def extract_cmd(
    manifest: Path = typer.Argument(..., help="dataset manifest (JSONL)"),
    encoder: str = typer.Option(..., "--encoder", "-e", help="registry name (see `vlgap encoders`) or spec"),
    n_frames: Optional[str] = typer.Option(None, "--n-frames", help="vision: comma list of n_f, e.g. 1,2,4,8"),
    n_captions: Optional[str] = typer.Option(None, "--n-captions", help="text: comma list of n_c, e.g. 1,2,4,8"),
    cache_dir: Optional[Path] = typer.Option(None, help="cache root (default ~/.cache/vlgap or $VLGAP_CACHE)"),
    device: str = device_option("cpu", spread=True),
    dtype: str = dtype_option("float32"),
    pooling: Optional[str] = typer.Option(None, help=POOLING_HELP),
    image_size: Optional[int] = typer.Option(None, help="vision input size (default: the model's)"),
    temporal_pooling: str = typer.Option("mean", "--temporal-pooling", help=TEMPORAL_POOLING_HELP),
    frame_sampling: str = typer.Option("uniform", "--frame-sampling", help=FRAME_SAMPLING_HELP),
    caption_draw: Optional[int] = typer.Option(None, "--caption-draw", help="text: use random caption draw number R "
                                               "(0, 1, ...; seeded by --seed) instead of the first n_c captions"),
    seed: int = typer.Option(0, "--seed", help="seed of --caption-draw"),
    shard: Optional[str] = typer.Option(None, help="i/n: extract only the i-th of n contiguous slices"),
    skip_bad: bool = typer.Option(False, help="skip bad items (listed in bad_items.jsonl and the summary): "
                                  "undecodable ones, and videos with fewer frames than n_f unless "
                                  "--allow-repeated-frames"),
    allow_repeated_frames: bool = typer.Option(False, "--allow-repeated-frames", help=ALLOW_REPEATED_FRAMES_HELP),
    batch_size: int = typer.Option(32, help="frames or texts per forward pass"),
    decode_threads: int = typer.Option(2, "--decode-threads", help="background video-decoding threads"),
    threads: Optional[int] = typer.Option(None, help="torch CPU threads"),
    ray: Optional[str] = typer.Option(None, "--ray", help="run on Ray: auto (RAY_ADDRESS, a running cluster, "
                                      "else a local one) or a cluster address"),
    ray_workers: Optional[int] = typer.Option(None, "--ray-workers",
                                              help="encoder actors (default: one per GPU, or CPUs - 1)"),
    trust_remote_code: bool = typer.Option(False, "--trust-remote-code", help=TRUST_REMOTE_CODE_HELP),
    random_weights: bool = typer.Option(False, "--random-weights", help=RANDOM_WEIGHTS_HELP),
):
    """Extract per-layer features into the cache (resumable; finished work is reused)."""
    from vlgap.features.extract import extract

    from vlgap.counts import check_count

    check_count("batch_size", batch_size, flag="--batch-size", example=32)
    check_count("workers", decode_threads, flag="--decode-threads", example=2)
    check_count("threads", threads, flag="--threads", allow_none=True, example=2)
    check_count("ray_workers", ray_workers, flag="--ray-workers", allow_none=True, example=2)
    check_count("image_size", image_size, flag="--image-size", allow_none=True, example=160)
    from vlgap.paths import output_folder

    if cache_dir is not None:  # the manifest is read (and checked: folder, missing, non-UTF-8) by extract
        output_folder(cache_dir, "--cache-dir")
    if image_size is not None:  # one batch of preprocessed frames: float32, 3 channels
        from vlgap.counts import check_allocation

        check_allocation("--image-size", batch_size * 3 * image_size * image_size * 4,
                         f"a batch of {batch_size} frames at {image_size} x {image_size} px")
    res = extract(
        manifest, encoder,
        n_frames=frame_counts(n_frames, "--n-frames") if n_frames else None,
        n_captions=int_list(n_captions, "--n-captions") if n_captions else None,
        cache_dir=cache_dir, device=device, dtype=dtype, pooling=pooling, image_size=image_size,
        temporal_pooling=temporal_pooling, shard=shard, skip_bad=skip_bad,
        allow_repeated_frames=allow_repeated_frames, batch_size=batch_size, workers=decode_threads,
        threads=threads, ray=ray, ray_workers=ray_workers, trust_remote_code=trust_remote_code,
        random_weights=random_weights, frame_sampling=frame_sampling,
        caption_draw=None if caption_draw is None else (seed, caption_draw),
    )
    from rich.markup import escape

    console.print(f"[bold]{escape(res.label or encoder)}[/]: {res.n_requested} items requested, N={res.n} kept, {res.seconds:.1f} s")
    first = next(iter(res.features.values())).record if res.features else {}
    for line in encoder_facts(first.get("encoder", {}), weights_id=first.get("weights_id")) if res.features else []:
        console.print(line, highlight=False, markup=False, soft_wrap=True)
    console.print(res.summary(), highlight=False, markup=False, soft_wrap=True)


def encoder_facts(rec: dict, weights_id: str | None = None) -> list[str]:
    """What an extraction ran on, from its record: weights, pooling, n0, preprocessing (one line each).
    `weights_id`: the identity its cache key holds (vlgap.encoders.identity; a folder's covers its config
    and processor files too), else told from the record."""
    lines = []
    if rec.get("weights") or rec.get("weights_files") or rec.get("revision"):
        files = ", ".join(f"{n} (sha256 {h[:12]})" for n, h in (rec.get("weights_files") or {}).items())
        lines.append(f"weights: {rec.get('weights') or 'pretrained'}" + (f"; {files}" if files else ""))
    from vlgap.encoders.identity import identity_from_record

    ident = weights_id or identity_from_record(rec)  # every kind: a hub commit, else a content sha256
    if ident:
        kind, _, value = ident.partition(":")
        lines.append(f"revision: {value}" if kind == "revision" else
                     f"revision: sha256:{value[:16]} (the model files' content hash; no hub revision)")
    if rec.get("pooling"):
        lines.append(f"pooling: {rec['pooling']}" + (f" - {rec['pooling_detail']}" if rec.get("pooling_detail") else ""))
    if rec.get("modality") == "vision":
        lines.append(f"n0: {rec.get('n0', 1)} ({rec.get('kind', 'image')} model)")
    pre = rec.get("preprocess")
    if isinstance(pre, dict):
        keys = ("processor", "image_size", "size", "crop_size", "image_mean", "image_std", "resize_size", "mean",
                "std", "interpolation")
        lines.append("preprocessing: " + ", ".join(f"{k}={pre[k]}" for k in keys if k in pre))
    return lines


@app.command("make-data")
def make_data_cmd(
    kind: str = typer.Argument(..., help="shapes | test-of-time | real"),
    out: Path = typer.Option(..., "--out", "-o", help="folder to write (videos + manifest.jsonl); real: a .jsonl file or a folder"),
    n: int = typer.Option(256, help="shapes: number of videos"),
    seed: int = typer.Option(0, help="generator seed (deterministic)"),
    n_frames: int = typer.Option(32, help="shapes: frames per video"),
    size: int = typer.Option(128, help="frame height and width in pixels (even)"),
    photo_fraction: float = typer.Option(0.5, help="shapes: share of scenes on real scikit-image photos"),
    camera_fraction: float = typer.Option(0.0, help="shapes: share of scenes whose camera pans or zooms (0: all "
                                          "static, as earlier versions)"),
    style: str = typer.Option("synthetic", help="shapes: render style, synthetic (clean) | real (camera-like: shake, "
                              "photo textures, blur, noise, JPEG)"),
    caption_mode: str = typer.Option("diverse", "--caption-mode",
                                     help="shapes: diverse (ten captions of different facts, the default) | "
                                          "paraphrase (ten paraphrases of one fact set) | both (diverse captions, "
                                          "both groups in meta.caption_groups, plus manifest_paraphrase.jsonl)"),
    skip_bad: bool = typer.Option(False, "--skip-bad", help="real: leave out (and list) media whose package is missing"),
):
    """Write an embedded dataset: procedural shapes videos, the Test of Time set, or the small real set."""
    from rich.progress import Progress

    from vlgap.data import real, shapes, test_of_time

    from vlgap.counts import check_count
    from vlgap.paths import output_file, output_folder

    key = kind.lower().replace("_", "-")
    check_count("seed", seed, 0, flag="--seed", example=0)
    if key == "shapes":  # counts and sizes before any file: an absurd one is refused with its limit
        from vlgap.data.shapes.render import parse_frame_size
        from vlgap.data.shapes.write import check_video_request

        check_video_request(n_frames, parse_frame_size(size), n=n)
    elif key == "test-of-time":
        from vlgap.data.shapes.render import parse_frame_size
        from vlgap.data.shapes.write import check_video_request
        from vlgap.data.test_of_time import N_FRAMES

        check_video_request(N_FRAMES, parse_frame_size(size))
    if key in ("shapes", "test-of-time", "real"):  # real writes a .jsonl file or into a folder
        (output_file if key == "real" and out.suffix.lower() == ".jsonl" else output_folder)(out, "--out")
    if key != "shapes" and (camera_fraction or style != "synthetic"):
        raise VlgapError(f"--camera-fraction and --style apply to make-data shapes only, not {kind!r}")
    if key != "shapes" and caption_mode != "diverse":
        raise VlgapError(f"--caption-mode applies to make-data shapes only, not {kind!r}")
    if key == "real":
        path = real.write_real_manifest(out, skip_missing=skip_bad)
    elif key in ("shapes", "test-of-time"):
        with Progress(console=Console(stderr=True)) as prog:
            task = prog.add_task(f"rendering {key}", total=None)
            cb = lambda done, total: prog.update(task, completed=done, total=total)  # noqa: E731
            if key == "shapes":
                path = shapes.generate_shapes(out, n, seed=seed, n_frames=n_frames, size=size,
                                              photo_fraction=photo_fraction, camera_fraction=camera_fraction,
                                              style=style, caption_mode=caption_mode, progress=cb)
            else:
                path = test_of_time.generate_test_of_time(out, seed=seed, size=size, progress=cb)
    else:
        raise VlgapError(f"unknown dataset kind {kind!r}; choose shapes, test-of-time or real")
    from vlgap.data.manifest import read_manifest

    console.print(f"wrote {path} (N={len(read_manifest(path))} items)")


@app.command("encoders")
def encoders_cmd(as_json: bool = typer.Option(False, "--json")):
    """List the named encoders (bundled offline or installable), the generic spec forms, and the model
    families of the Dynamic Reflections paper with one working hf: spec each (pooling, n0, how tested)."""
    from rich.table import Table

    from vlgap.encoders.hf_families import family_table
    from vlgap.encoders.registry import list_encoders
    from vlgap.io_utils import to_json

    rows = list_encoders()
    families = family_table()
    if as_json:
        # one list, as before: family rows carry their spec as the name, plus their own fields
        print(to_json(rows + [{"name": r["spec"], "modality": "text" if r["kind"] == "text" else "vision",
                               "description": f"{r['family']} ({r['kind']})", "install": "", "installed": True,
                               **r} for r in families]))
        return
    table = Table(title="encoders")
    for col in ("name", "modality", "installed", "description"):
        table.add_column(col)
    for r in rows:
        table.add_row(str(r.get("name", "")), str(r.get("modality", "")), str(r.get("installed", "")),
                      str(r.get("description", "")))
    console.print(table)
    fam = Table(title="model families (hf:, transformers; the config's model_type decides)")
    for col in ("family", "spec", "kind", "pooling", "n0", "note"):
        fam.add_column(col, overflow="fold")
    for r in families:
        fam.add_row(r["family"], r["spec"], r["kind"], r["pooling"], r["n0"], r["note"])
    console.print(fam)
    console.print("tested: every hf: spec above on a tiny random-weight twin built from its own config, loaded from "
                  "a folder and by its hub id from an offline cache (tests/test_hf_families.py)", highlight=False)


@app.command("cache")
def cache_cmd(
    check: bool = typer.Option(True, "--check/--no-check", help="verify every entry's seal and checksum (default)"),
    prune: bool = typer.Option(False, "--prune", help="remove what is stale, corrupt or orphaned"),
    cache_dir: Optional[Path] = typer.Option(None, help="cache root (default ~/.cache/vlgap or $VLGAP_CACHE)"),
    runs: Optional[list[Path]] = typer.Option(None, "--run", help="a run folder (a sweep's or an experiment's "
                                              "--out) whose sealed cells, matrices and tables to verify too; "
                                              "repeat for several"),
    as_json: bool = typer.Option(False, "--json", help="print the result as JSON on stdout"),
):
    """Verify the cache: features, chunks, seals, leftovers of killed runs, converted models (and the cells
    of run folders given with --run); --prune removes what is stale, corrupt or orphaned. Exit code 1
    while such findings remain."""
    from vlgap.cache_check import check_cache
    from vlgap.io_utils import to_json

    if not (check or prune):
        raise VlgapError("nothing to do: --no-check without --prune")
    res = check_cache(cache_dir, prune=prune, runs=runs or ())
    if as_json:
        print(to_json(res.to_dict()))
    else:
        console.print(res.summary(), highlight=False, markup=False, soft_wrap=True)
    if res.remaining:
        raise typer.Exit(1)
