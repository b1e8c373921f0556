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
from urllib.parse import urlparse

from vlgap.errors import VlgapError

#: how long the hub's host may take to accept a connection before it is called unreachable
HUB_PROBE_SECONDS = 1.5

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
