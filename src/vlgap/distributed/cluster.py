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


#: what a local cluster that vlgap starts itself runs with (docs/cluster.md, "One small machine"): no
#: dashboard, and its workers at niceness 0, the priority of the single process they stand in for. Ray's
#: own default, 15, keeps its daemons and drivers responsive under heavy workers; on a machine shared with
#: other work it makes the encoder actor yield its core to every process of normal priority in its
#: scheduling group (the Ray daemons and the driver of its own run included) where a single-process
#: extraction would share it evenly. A cluster started by `ray start` keeps the settings it was started
#: with (`RAY_worker_niceness=0 ray start --head ...` sets the same).
LOCAL_CLUSTER: dict[str, Any] = {"include_dashboard": False, "_system_config": {"worker_niceness": 0}}


def _existing_cluster(ray) -> bool | None:
    """Whether `ray.init()` would join a cluster (RAY_ADDRESS, or this machine's last `ray start`) rather
    than start one; None where this Ray does not say (its private helper moved)."""
    try:
        from ray._private.services import canonicalize_bootstrap_address
    except ImportError:  # pragma: no cover - a future Ray
        return None
    return canonicalize_bootstrap_address(None) is not None


def connect(spec: str | bool = "auto"):
    """An initialised `ray` module. spec: True or "auto" (a cluster this process already joined, else
    RAY_ADDRESS, else the cluster of the last `ray start` on this machine, else a new local one sized
    to this machine: Ray's own `ray.init()` rule, which never joins some other process's private local
    cluster), "local" (always a new local one) or an address ("ray://...", "host:6379"). A local cluster
    started here runs with `LOCAL_CLUSTER`'s settings."""
    ray = require_ray()
    if ray.is_initialized():
        return ray
    spec = "auto" if spec is True else str(spec)
    quiet = {"logging_level": "WARNING", "log_to_driver": True}
    try:
        if spec == "auto":
            joins = _existing_cluster(ray)
            if joins is None:  # pragma: no cover - a future Ray: its own rule, its own settings
                ray.init(include_dashboard=False, **quiet)
            elif joins:
                ray.init(**quiet)
            else:
                ray.init(address="local", **LOCAL_CLUSTER, **quiet)
        elif spec == "local":
            ray.init(address="local", **LOCAL_CLUSTER, **quiet)
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
