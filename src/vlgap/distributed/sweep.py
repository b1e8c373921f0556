"""A sweep's (vision, text, n_f, n_c) cells as independent Ray tasks.

Each distinct feature set goes to the object store once; one task per feature set computes its
layer states (neighbour lists; `precompute_layers`), and one task per cell runs the layer search,
bootstrap and permutations from two such states with the sweep's seed (every cell the same resamples), as
the serial sweep does. So the table equals the serial sweep's, and cells finish in any order (the
driver writes each cell file as it arrives; a re-run skips finished cells). A worker that dies is
replaced and its task re-run (`max_retries`): every task is a pure function of its inputs.
"""
from __future__ import annotations

from typing import Callable, Iterator

import ray

from vlgap.distributed.cluster import TASK_OPTIONS, connect, unwrap



@ray.remote
def _side_task(layers, k, metric, for_bootstrap, device, preset, name):
    from vlgap.metrics.layer_search import precompute_layers

    return precompute_layers(layers, k=k, metric=metric, device=device, preset=preset, for_bootstrap=for_bootstrap,
                             name=name)


@ray.remote
def _cell_task(score_cell, ci, sx, sy, k, metric, n_bootstrap, n_permutations, seed, device, preset):
    return ci, score_cell(sx, sy, k=k, metric=metric, n_bootstrap=n_bootstrap, n_permutations=n_permutations, seed=seed,
                          device=device, preset=preset)


def score_cells(cfg, cells: list[tuple], todo: list[int], features: Callable, score_cell: Callable, *,
                ray: str | bool = "auto") -> Iterator[tuple[int, dict]]:
    """Yield (cell number, score_cell(...) result) for every cell in `todo`, as they finish.
    features(modality, name, value) -> the FeatureSet (already restricted to the common items);
    score_cell: `vlgap.probe.cell_score.score_cell` (passed in: that module calls this one)."""
    rt = connect(ray)
    opts = dict(TASK_OPTIONS, num_cpus=1)
    sides: dict[tuple, object] = {}

    def side(modality, name, value):
        key = (modality, name, value)
        if key not in sides:
            layers = rt.put(features(*key).layers)
            sides[key] = _side_task.options(**opts).remote(layers, cfg.k, cfg.metric, cfg.n_bootstrap > 0, cfg.device,
                                                           cfg.preset, f"{name} {modality}={value}")
        return sides[key]

    pending = []
    for ci in todo:
        v, t, nf, nc = cells[ci]
        pending.append(_cell_task.options(**opts).remote(
            score_cell, ci, side("v", v, nf), side("t", t, nc), cfg.k, cfg.metric, cfg.n_bootstrap, cfg.n_permutations,
            cfg.seed, cfg.device, cfg.preset))
    while pending:
        ready, pending = rt.wait(pending, num_returns=1)
        try:
            yield rt.get(ready[0])
        except rt.exceptions.RayError as err:
            raise unwrap(err) from None
