"""`vlgap wsv` option defaults are the library's: one declaration per shared option, read from vlgap.wsv.parts,
WSVConfig, train_system and EXPERIMENT_DEFAULTS, so train and experiment cannot drift apart."""
import dataclasses
import inspect

import typer

from vlgap.cli._app import app
from vlgap.wsv.api import train_system
from vlgap.wsv.experiment import EXPERIMENT_DEFAULTS, PART_DEFAULTS, ExperimentConfig
from vlgap.wsv.parts import SETTING_DEFAULTS
from vlgap.wsv.train import WSVConfig


def _defaults(command: str) -> dict:
    wsv = typer.main.get_command(app).commands["wsv"]
    return {p.name: p.default for p in wsv.commands[command].params}


def test_train_defaults_are_train_system_and_wsvconfig_defaults():
    cli = _defaults("train")
    api = {k: p.default for k, p in inspect.signature(train_system).parameters.items()
           if p.default is not inspect.Parameter.empty}
    config = {f.name: f.default for f in dataclasses.fields(WSVConfig)}
    shared_with_api = sorted(set(cli) & set(api) - {"corpus", "cache_dir"})
    assert {"generator", "latents", "video_text", "lm", "lora_r", "n_frames", "size", "generator_steps", "device",
            "dtype", "seed", "n_train", "ray", "ray_workers"} <= set(shared_with_api)
    assert {k: cli[k] for k in shared_with_api} == {k: api[k] for k in shared_with_api}
    for name in ("lm", "lora_r", "video_text", "dtype", "caption_steps", "head_steps", "polisher_steps",
                 "lm_pretrain_steps", "batch_size", "checkpoint_every"):
        assert cli[name] == config[name], name


def test_experiment_defaults_are_the_documented_experiment_and_the_part_defaults():
    cli = _defaults("experiment")
    assert cli["seeds"] == ",".join(map(str, EXPERIMENT_DEFAULTS["seeds"]))
    for name in ("n_train", "captions_per_scene", "n_eval", "n_unlabelled", "n_val"):
        assert cli[name] == EXPERIMENT_DEFAULTS[name], name
    assert cli["latent_grid"] == "x".join(map(str, EXPERIMENT_DEFAULTS["latent_grid"]))
    assert cli["lr"] == EXPERIMENT_DEFAULTS["train"]["lr"]
    assert (cli["bootstrap"], cli["permutations"]) == (EXPERIMENT_DEFAULTS["n_bootstrap"],
                                                       EXPERIMENT_DEFAULTS["n_permutations"])
    for name in ("caption_steps", "head_steps", "polisher_steps", "lm_pretrain_steps", "lm_dim", "lm_layers",
                 "prompter_dim"):
        assert cli[name] == EXPERIMENT_DEFAULTS["train"][name], name
    for name, value in PART_DEFAULTS.items():
        assert cli[name] == value, name
    config = {f.name: f.default for f in dataclasses.fields(ExperimentConfig)}
    assert (cli["n_frames"], cli["size"]) == (config["n_frames"], config["size"])
    train = {f.name: f.default for f in dataclasses.fields(WSVConfig)}
    assert {k: cli[k] for k in ("lm", "lora_r", "dtype")} == {k: train[k] for k in ("lm", "lora_r", "dtype")}
    assert cli["device"] == _defaults("train")["device"] == SETTING_DEFAULTS["device"]


def test_commands_on_a_trained_model_default_to_its_recorded_parts():
    for command in ("caption", "gap", "invert"):
        cli = _defaults(command)
        assert cli["dtype"] is None and cli["latents"] is None, command
        assert cli["device"] == SETTING_DEFAULTS["device"], command
    assert _defaults("gap")["generator"] is None and _defaults("invert")["generator"] is None
