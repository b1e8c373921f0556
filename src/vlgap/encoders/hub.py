"""A Hugging Face hub id, checked before transformers tries the network: cached, reachable, or refused at once.

Without this, a hub model that is neither cached nor reachable costs huggingface_hub's retries (about 30-60 s
of HEAD requests with back-off, 9 s with HF_HUB_OFFLINE=1) before an error that does not say how to get the
model. Before loading a hub id, `check_hub_model`:
  * looks in the local cache (`huggingface_hub.try_to_load_from_cache` of its config.json, the file every
    transformers repository has): cached and reachable, nothing changes; cached but the hub unreachable, this
    process reads the cache only from then on (huggingface_hub's offline mode), so the cached model loads at
    once instead of after the retries;
  * asks whether the hub (HF_ENDPOINT, or the HTTPS proxy when one is set) accepts a TCP connection within
    HUB_PROBE_SECONDS, once per process;
  * neither cached nor reachable (or HF_HUB_OFFLINE set): one VlgapError, in well under 2 s, saying how to get
    it (`hf download <id>` on a machine with network, then the cache copied here, or a local folder).
"""
from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from urllib.parse import urlparse

from vlgap.errors import VlgapError

#: how long the hub's host may take to accept a connection before it is called unreachable
HUB_PROBE_SECONDS = 1.0

_REACHABLE: dict[tuple[str, int], bool] = {}


def hub_address() -> tuple[str, int]:
    """(host, port) a download would connect to first: the HTTPS proxy when one is set, else HF_ENDPOINT's."""
    from huggingface_hub import constants

    proxy = os.environ.get("HTTPS_PROXY") or os.environ.get("https_proxy") or os.environ.get("ALL_PROXY") \
        or os.environ.get("all_proxy")
    url = urlparse(proxy if proxy else constants.ENDPOINT)
    default = 443 if (url.scheme or "https") == "https" else 80
    return url.hostname or "huggingface.co", url.port or default


def hub_reachable(timeout: float = HUB_PROBE_SECONDS) -> bool:
    """True when the hub's host (or the proxy) accepts a TCP connection within `timeout` seconds; asked once
    per process and address. Name resolution runs in a daemon thread, so a hanging resolver cannot stall it."""
    address = hub_address()
    if address not in _REACHABLE:
        answer: list[bool] = []

        def probe() -> None:
            try:
                with socket.create_connection(address, timeout=timeout):
                    answer.append(True)
            except OSError:
                answer.append(False)

        worker = threading.Thread(target=probe, name="vlgap-hub-probe", daemon=True)
        worker.start()
        worker.join(timeout)
        _REACHABLE[address] = bool(answer and answer[0])
    return _REACHABLE[address]


def hub_cached(repo_id: str, revision: str | None = None) -> bool:
    """True when the local Hugging Face cache holds `repo_id` at `revision` (its config.json is resolved)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        return try_to_load_from_cache(repo_id, "config.json", revision=revision) is not None
    except Exception:  # an id the hub's validator refuses: transformers' own error says what is wrong
        return False


def read_cache_only() -> None:
    """From now on this process reads the Hugging Face cache only (what HF_HUB_OFFLINE=1 does at start-up)."""
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = True


def how_to_get(repo_id: str, local_form: str) -> str:
    """The ways to get a hub model onto a machine that cannot reach the hub."""
    return (f"on a machine with network run `hf download {repo_id}` (`huggingface-cli download {repo_id}` with older "
            "huggingface_hub) and copy its Hugging Face cache here (or point HF_HOME at the copy), or run "
            f"`hf download {repo_id} --local-dir FOLDER` and give that folder ({local_form})")


def check_hub_model(repo_id: str, *, revision: str | None = None, what: str = "model", offline: bool = False,
                    local_form: str = "hf:FOLDER") -> None:
    """Before loading hub id `repo_id` (module doc): nothing when it can load; cache-only mode when it is cached
    but the hub is unreachable; a one-line VlgapError, without network retries, when it can come from nowhere.
    offline: downloads are switched off (HF_HUB_OFFLINE, VLGAP_OFFLINE)."""
    from huggingface_hub import constants

    offline = offline or bool(constants.HF_HUB_OFFLINE)
    cached = hub_cached(repo_id, revision)
    if cached and (offline or not hub_reachable()):
        read_cache_only()
        return
    if cached:
        return
    at = f" at revision {revision!r}" if revision else ""
    if offline:
        why = "downloads are switched off (HF_HUB_OFFLINE or VLGAP_OFFLINE is set)"
    elif not hub_reachable():
        host, port = hub_address()
        why = f"the hub cannot be reached ({host}:{port} did not answer within {HUB_PROBE_SECONDS:g} s)"
    else:
        return  # reachable: transformers downloads it (or says the repository does not exist)
    raise VlgapError(f"{what}: {repo_id!r}{at} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and {why}; "
                     + how_to_get(repo_id, local_form))


def offline_env() -> bool:
    """True when downloads must not be tried: VLGAP_OFFLINE, HF_HUB_OFFLINE or TRANSFORMERS_OFFLINE set to
    1/true/yes/on. (timm and transformers honour HF_HUB_OFFLINE themselves; torchvision has no such switch.)"""
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on")
               for v in ("VLGAP_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


HUB_PREFIXES = ("hf:", "hf-video:")


#: the towers an `hf:` spec may pick with '#' (two-tower checkpoints such as CLIP or SigLIP)
TOWERS = ("vision", "text")


def parse_hf_spec(rest: str) -> tuple[str, str | None, str | None]:
    """'org/name@rev#text' -> (source, revision, tower). A local path is taken whole when it exists."""
    tower = None
    head, sep, tail = rest.rpartition("#")
    if sep and tail in TOWERS:
        rest, tower = head, tail
    elif sep and not Path(rest).expanduser().exists():
        raise VlgapError(f"hf spec {rest!r}: after '#' write 'vision' or 'text' (the tower of a two-tower "
                         f"checkpoint such as CLIP or SigLIP), not {tail!r}")
    if "@" in rest and not Path(rest).expanduser().exists():
        src, revision = rest.split("@", 1)
        return src, revision or None, tower
    return rest, None, tower


def precheck_spec(spec: str) -> None:
    """Before torch or transformers load: an `hf:` / `hf-video:` encoder spec naming a hub id that is neither
    cached nor reachable is refused at once, in the words `check_hub_model` uses when the model loads, so the
    answer comes in about a second instead of after the imports. Folders, other adapters and ids the loader
    would refuse for other reasons pass through to it."""
    from pathlib import Path

    prefix = next((p for p in HUB_PREFIXES if spec.startswith(p)), None)
    if prefix is None:
        return
    try:
        src, revision, _ = parse_hf_spec(spec[len(prefix):])
    except VlgapError:
        return  # the loader says what is wrong with the spelling
    precheck_hub_id(src, revision, what=f"encoder {prefix + src!r}", local_form="hf:FOLDER")


def precheck_hub_id(src: str, revision: str | None, *, what: str, local_form: str) -> None:
    """`check_hub_model` for what may be a hub id, before anything heavy is imported: a folder or a path-like
    string passes through (the loader says what is wrong with it)."""
    if not src or src.startswith((".", "/", "~")) or src.count("/") != 1 or Path(src).expanduser().exists():
        return
    check_hub_model(src, revision=revision, what=what, offline=offline_env(), local_form=local_form)
