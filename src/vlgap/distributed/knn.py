"""Exact k-NN over N items in row blocks across Ray workers, and layer states for `layer_search(ray=...)`.

Each task takes whole row blocks of `vlgap.metrics.knn.row_blocks` (the blocks the single-process
`topk_neighbours` uses) and runs the same `topk_block` on them against all N items, so every
similarity block is the same matrix product and the merged lists are the single-process lists
(ties: larger similarity first, then smaller index). The per-pair agreement (mutual k-NN look-ups,
bootstrap, permutations) then runs in the driver on the merged lists.

Memory per worker, with b = 4 (float32) or 8 (float64) bytes, D the layer width, m the list depth
(k, or 4k + 32 when a bootstrap follows) and B = chunk_bytes / (12 N) rows per block:

    N x D x b            the layer's features (a private copy; plus one shared copy per node in
                         Ray's object store)
  + B x N x 12           one similarity block with its masks (<= chunk_bytes, 256 MiB by default)
  + B x m x (8 + b)      the block's lists

e.g. N = 10^6, D = 768, float32: 3.1 GB + 256 MiB (B = 22 rows) + small. The driver keeps
N x m x (8 + b) per layer for the merged lists and the prepared features of at most
`LAYERS_IN_FLIGHT` layers. Cost: O(N^2 D) multiply-adds per layer, spread over the workers.
"""
from __future__ import annotations

import warnings

import numpy as np
import ray
import torch

from vlgap.distributed import faults
from vlgap.distributed.cluster import TASK_OPTIONS, connect, unwrap
from vlgap.memory import reuse_freed_memory
from vlgap.metrics.knn import row_blocks, topk_block
from vlgap.metrics.prepare import DEFAULT_CHUNK_BYTES


#: layers whose features sit in the object store at once (the next layer's blocks queue behind)
LAYERS_IN_FLIGHT = 2


def _tensor(arr: np.ndarray, device: str) -> torch.Tensor:
    """A private copy of an object-store array: matrix products read shared-memory pages ~1.5x slower
    here (measured), and the copy costs one pass over N x D."""
    with warnings.catch_warnings():  # a read-only view of the object store; copied before use
        warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
        t = torch.from_numpy(arr)
    return t.to(device) if str(device).startswith("cuda") else t.clone()


@ray.remote
def _blocks_task(feats: np.ndarray, blocks: list[tuple[int, int]], depth: int, device: str, keep_sims: bool,
                 fault: str | None, first_block: int):
    faults.maybe_kill(fault, "knn", first_block)
    reuse_freed_memory()
    x = _tensor(feats, device)
    out = [topk_block(x, s, e, depth) for s, e in blocks]
    ids = np.concatenate([i.cpu().numpy() for i, _ in out])
    sims = np.concatenate([v.cpu().numpy() for _, v in out]) if keep_sims else None
    return ids, sims


@ray.remote
def _state_task(engine, feats: np.ndarray, device: str):
    reuse_freed_memory()
    return engine.layer_state(_tensor(feats, device))


def _task_options(device: str) -> dict:
    return dict(TASK_OPTIONS, num_gpus=1) if str(device).startswith("cuda") else dict(TASK_OPTIONS, num_cpus=1)


def _submit(feats: torch.Tensor, depth: int, *, chunk_bytes: int, device: str, keep_sims: bool,
            blocks_per_task: int, fault: str | None) -> list:
    ref = ray.put(np.ascontiguousarray(feats.detach().cpu().numpy()))
    blocks = row_blocks(feats.shape[0], chunk_bytes)
    opts = _task_options(device)
    return [_blocks_task.options(**opts).remote(ref, blocks[i:i + blocks_per_task], depth, str(device), keep_sims,
                                                fault, i)
            for i in range(0, len(blocks), blocks_per_task)]


def _gather(refs: list, like: torch.Tensor, keep_sims: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    try:
        parts = ray.get(refs)
    except ray.exceptions.RayError as err:
        raise unwrap(err) from None
    ids = torch.from_numpy(np.concatenate([p[0] for p in parts])).to(like.device)
    sims = torch.from_numpy(np.concatenate([p[1] for p in parts])).to(like.device) if keep_sims else None
    return ids, sims


def topk_neighbours(feats: torch.Tensor, k: int, *, chunk_bytes: int = DEFAULT_CHUNK_BYTES, ray: str | bool = "auto",
                    device: str = "cpu", blocks_per_task: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """`vlgap.metrics.knn.topk_neighbours(feats, k)` (no groups) computed in row blocks on Ray workers:
    the same (indices [N, k], similarities [N, k]). device: where the workers compute ("cuda": one
    GPU per task); blocks_per_task: row blocks per task (larger on GPUs, to upload features less)."""
    from vlgap.errors import VlgapError

    n = feats.shape[0]
    if not 1 <= k <= n - 1:
        raise VlgapError(f"k={k}: need 1 <= k <= {n - 1} (N={n} items, self excluded)")
    connect(ray)
    refs = _submit(feats, k, chunk_bytes=chunk_bytes, device=device, keep_sims=True,
                   blocks_per_task=blocks_per_task, fault=faults.plan())
    return _gather(refs, feats, True)


def layer_states(engine, feats, *, ray: str | bool = "auto", device: str = "cpu",
                 blocks_per_task: int = 1) -> list:
    """Every layer's metric state for `precompute_layers(..., ray=...)`.

    k-NN metrics: the neighbour lists of each layer in row blocks across workers (at most
    LAYERS_IN_FLIGHT layers queued at once), turned into states by the engine exactly as
    `engine.layer_state` would. Other metrics (CKA, SVCCA): one task per layer."""
    rt = connect(ray)
    fault = faults.plan()
    n_layers = len(feats)
    if not hasattr(engine, "state_from_lists"):
        refs = [_state_task.options(**_task_options(device)).remote(
            engine, np.ascontiguousarray(feats[i].detach().cpu().numpy()), str(device)) for i in range(n_layers)]
        try:
            states = rt.get(refs)
        except rt.exceptions.RayError as err:
            raise unwrap(err) from None
        like = feats.raw[0]
        return [_to_device(s, like.device) for s in states]
    keep = bool(engine.keep_sims)
    depth = engine.list_depth(feats.raw[0].shape[0])
    submitted: dict[int, tuple[list, torch.Tensor]] = {}
    states = []

    def submit(i):
        x = feats[i]
        submitted[i] = (_submit(x, depth, chunk_bytes=engine.chunk_bytes, device=device, keep_sims=keep,
                                blocks_per_task=blocks_per_task, fault=fault), x)

    for i in range(min(LAYERS_IN_FLIGHT, n_layers)):
        submit(i)
    for i in range(n_layers):
        refs, x = submitted.pop(i)
        if i + LAYERS_IN_FLIGHT < n_layers:
            submit(i + LAYERS_IN_FLIGHT)
        ids, sims = _gather(refs, x, keep)
        states.append(engine.state_from_lists(ids, sims))
    return states


def _to_device(state, device):
    """States from tasks come back on the CPU; move their tensors next to the caller's features."""
    if isinstance(state, torch.Tensor):
        return state.to(device)
    if isinstance(state, dict):
        return {k: _to_device(v, device) for k, v in state.items()}
    if isinstance(state, (list, tuple)):
        return type(state)(_to_device(v, device) for v in state)
    if hasattr(state, "__dict__"):
        for k, v in vars(state).items():
            setattr(state, k, _to_device(v, device))
    return state
