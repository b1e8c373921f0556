"""The experiment's corpus (captions per training scene) and latent grid: what they select, how they enter the
keys of results, and their errors."""

import numpy as np
import pytest
from typer.testing import CliRunner

from vlgap.errors import VlgapError
from vlgap.wsv.experiment import EXPERIMENT_DEFAULTS, ExperimentConfig, prepare
from vlgap.wsv.parts import LEGACY_MOBILENET_GRID, MOBILENET_GRID, parts_of_model

SMALL = dict(n_train=6, n_eval=3, n_unlabelled=0, n_val=1, n_frames=4, size=32, seeds=(0,), systems=("oracle",),
             generators=("synthetic",))


def test_settings_added_later_stay_out_of_the_keys_at_their_old_values():
    old = ExperimentConfig(captions_per_scene=10, latent_grid=LEGACY_MOBILENET_GRID).record()
    assert "captions_per_scene" not in old and "latent_grid" not in old  # cells computed before keep their keys
    new = ExperimentConfig(captions_per_scene=1, latent_grid=(8, 8, 8)).record()
    assert new["captions_per_scene"] == 1 and new["latent_grid"] == [8, 8, 8]
    assert ExperimentConfig().latent_grid == MOBILENET_GRID
    # the two settings add their own entries and change nothing else in the key
    assert {k: v for k, v in new.items() if k not in ("captions_per_scene", "latent_grid")} == old


def test_captions_per_scene_draws_that_many_distinct_captions_of_every_scene(tmp_path):
    from vlgap.data.shapes import item_rng, sample_spec, write_captions

    prep = prepare(ExperimentConfig(**SMALL, captions_per_scene=2, latent_grid=(4, 2, 2)), cache_dir=tmp_path,
                   log=lambda m: None)
    by_scene: dict[str, list[int]] = {}
    for cid in prep.corpus_ids:
        scene, k = cid.rsplit("_c", 1)
        by_scene.setdefault(scene, []).append(int(k))
    assert len(by_scene) == 6 and all(len(ks) == 2 and len(set(ks)) == 2 for ks in by_scene.values())
    for cid, text in zip(prep.corpus_ids, prep.corpus):  # each id names the scene's caption it holds
        scene, k = cid.rsplit("_c", 1)
        rng = item_rng(0, int(scene.split("_")[1]))
        spec = sample_spec(rng)
        assert write_captions(spec, int(rng.integers(2**31 - 1)))[int(k)] == text
    assert prep.hygiene["captions_per_scene"] == 2 and prep.hygiene["corpus_captions"] == len(prep.corpus) == 12
    assert prep.hygiene["oracle_video_scenes"] == 6
    again = prepare(ExperimentConfig(**SMALL, captions_per_scene=2, latent_grid=(4, 2, 2)), cache_dir=tmp_path,
                    log=lambda m: None)
    assert again.corpus_ids == prep.corpus_ids  # the draw is fixed by the world seed
    assert prep.real.shape[2:] == (4, 2, 2)  # the latent grid reaches the encoder
    every = prepare(ExperimentConfig(**SMALL, captions_per_scene=10, latent_grid=(4, 2, 2)), cache_dir=tmp_path,
                    log=lambda m: None)
    assert len(every.corpus) + every.hygiene["train_captions_identical_to_eval_references_removed"] == 60


@pytest.mark.parametrize("over, match", [({"captions_per_scene": 0}, "1..10"), ({"captions_per_scene": 11}, "1..10"),
                                         ({"latent_grid": (8, 8)}, "frames x height x width"),
                                         ({"latent_grid": (8, 0, 8)}, "frames x height x width")])
def test_bad_corpus_or_grid_settings_are_refused(over, match):
    with pytest.raises(VlgapError, match=match):
        ExperimentConfig(**over)


def test_cli_refuses_a_malformed_latent_grid(tmp_path):
    from vlgap.cli import app

    r = CliRunner().invoke(app, ["wsv", "experiment", "--out", str(tmp_path / "x"), "--latent-grid", "8xbig"])
    # the CLI's entry point prints a VlgapError as one line; the app itself raises it
    assert isinstance(r.exception, VlgapError) and "--latent-grid '8xbig'" in str(r.exception)
    assert "8x8x8" in str(r.exception)


def test_models_recorded_without_a_grid_rebuild_the_grid_they_were_trained_with():
    old = parts_of_model({"generator": {"style": "synthetic"}, "latent_encoder": {"image_size": 64}})
    assert old["latents"]["grid"] == list(LEGACY_MOBILENET_GRID)
    assert np.prod(MOBILENET_GRID) > np.prod(LEGACY_MOBILENET_GRID)


def test_cli_passes_lr_grid_and_corpus_to_the_experiment_and_defaults_to_the_documented_run(monkeypatch, tmp_path):
    import vlgap.wsv.experiment as xp
    from vlgap.cli import app

    seen = []

    def fake_run(out, cfg, **kw):
        seen.append(cfg)
        raise SystemExit(0)

    monkeypatch.setattr(xp, "run_experiment", fake_run)
    runner = CliRunner()
    runner.invoke(app, ["wsv", "experiment", "--out", str(tmp_path / "a"), "--lr", "0.003", "--latent-grid", "4x8x8",
                        "--captions-per-scene", "2", "--n-train", "40"])
    runner.invoke(app, ["wsv", "experiment", "--out", str(tmp_path / "b")])
    given, default = seen
    assert given.train["lr"] == 0.003 and given.latent_grid == (4, 8, 8) and given.captions_per_scene == 2
    assert given.n_train == 40
    assert default.train["lr"] == EXPERIMENT_DEFAULTS["train"]["lr"] != 0.003
    assert default.record() == ExperimentConfig(**EXPERIMENT_DEFAULTS).record()  # the CLI's defaults = the documented run


def test_a_rows_own_settings_are_in_its_cells_key(monkeypatch):
    import vlgap.wsv.experiment as xp

    monkeypatch.setenv("VLGAP_NATIVE_BF16", "1")  # auto resolves to bfloat16, as on the machine of the results
    cfg, formats = ExperimentConfig(**EXPERIMENT_DEFAULTS).resolved("cpu")
    assert formats["lm_dtype"].dtype == cfg.lm_dtype == "bfloat16" and formats["dtype"].dtype == "float32"
    assert cfg.record() == ExperimentConfig(**EXPERIMENT_DEFAULTS).record()  # the experiment's record is unchanged
    plain = xp._row_cell_key(cfg, "synthetic", "wsv", 0)
    assert plain == xp._cell_key(cfg, "cell", generator="synthetic", system="wsv", seed=0)  # earlier keys kept
    smol = xp._row_cell_key(cfg, "synthetic", "wsv+smollm2", 0)
    # the row's settings as the published cells hold them: bfloat16, never the word auto
    assert smol["row_settings"] == {"lm": "smollm2", **xp.SMOLLM2_TRAIN, "dtype": "bfloat16"}
    with pytest.raises(VlgapError, match=r"auto, resolved against the run's device.*resolved\(device\)"):
        xp._row_cell_key(ExperimentConfig(**EXPERIMENT_DEFAULTS), "synthetic", "wsv+smollm2", 0)
    monkeypatch.setitem(xp.SMOLLM2_TRAIN, "caption_steps", xp.SMOLLM2_TRAIN["caption_steps"] + 1)
    assert xp._row_cell_key(cfg, "synthetic", "wsv+smollm2", 0) != smol  # a changed row setting recomputes the row
