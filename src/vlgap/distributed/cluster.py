"""Connecting to Ray, and the fault-tolerance settings every task and actor of vlgap uses."""
from __future__ import annotations

from typing import Any

from vlgap.errors import VlgapError

#: tasks (decoding, k-NN blocks, sweep cells) are pure functions of their inputs or write their output
#: atomically, so re-running one after its worker process or node died is always safe; Ray retries
#: only such system failures (a VlgapError raised by our code is not retried: it would fail again).
TASK_OPTIONS: dict[str, Any] = {"max_retries": 3, "retry_exceptions": False}
#: encoder actors: restart a dead actor (it reloads the model in __init__) and resubmit the calls that
#: were queued or running on it; every call writes one chunk atomically and is idempotent.
ACTOR_OPTIONS: dict[str, Any] = {"max_restarts": 3, "max_task_retries": 3}


def require_ray():
    try:
        import ray
    except ImportError as err:  # pragma: no cover - the `ray` extra is installed by `make`
        raise VlgapError(f"--ray needs Ray: pip install 'vlgap[ray]' ({err})") from None
    return ray


def connect(spec: str | bool = "auto"):
    """An initialised `ray` module. spec: True or "auto" (a cluster this process already joined, else
    RAY_ADDRESS, else the cluster of the last `ray start` on this machine, else a new local one sized
    to this machine: Ray's own `ray.init()` rule, which never joins some other process's private local
    cluster), "local" (always a new local one) or an address ("ray://...", "host:6379")."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    spec = "auto" if spec is True else str(spec)
    quiet = {"logging_level": "WARNING", "log_to_driver": True}
    try:
        if spec == "auto":
            ray.init(include_dashboard=False, **quiet)
        elif spec == "local":
            ray.init(address="local", include_dashboard=False, **quiet)
        else:
            ray.init(address=spec, **quiet)
    except ConnectionError as err:
        raise VlgapError(f"--ray {spec}: cannot reach a Ray cluster there ({err}); start one with "
                         "`ray start --head`, or use --ray auto for a local one") from None
    return ray


def unwrap(err: Exception) -> Exception:
    """A RayTaskError whose cause is one of our one-line errors becomes that error again."""
    cause = getattr(err, "cause", None)
    if isinstance(cause, VlgapError):
        return VlgapError(str(cause))
    return err


def cluster_cpus_gpus(ray) -> tuple[float, float]:
    res = ray.cluster_resources()
    return float(res.get("CPU", 0.0)), float(res.get("GPU", 0.0))
