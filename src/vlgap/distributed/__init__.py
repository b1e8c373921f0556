"""Scale-out on a Ray cluster (`--ray` / `ray=`): the only package that imports Ray (not on import).

- `cluster`: connecting (`"auto"`: RAY_ADDRESS or a running cluster, else a local one) and the
  retry settings every task and actor uses;
- `extract`: decoding as Ray tasks, encoding on actors that load the model once, writing the same
  feature-store chunks as a single process (`vlgap.features.extract` owns the steps);
- `knn`: exact top-k neighbour lists in row blocks across workers, merged into the lists the
  single-process path produces; layer states for `layer_search(..., ray=...)`;
- `sweep`: every (vision, text, n_f, n_c) cell of a sweep as an independent task;
- `wsv`: WSV's generated latents on actors that load the text-to-video pipeline once, returned to the
  driver, which writes each caption's sealed file (`vlgap wsv train|experiment|gap --ray`);
- `udf`: `EncoderUDF`, a vlgap encoder as a callable class for a user's own Ray Data pipeline
  (`Dataset.map_batches`), with `chunk_rows` (the batch size that reproduces extract's chunks);
  it imports no Ray itself;
- `faults`: a test-only hook that SIGKILLs a worker process once, to prove the retries work.

Nothing here is a scheduler, a queue or a retry loop: Ray schedules, and Ray's `max_retries`
(tasks), `max_restarts` and `max_task_retries` (actors) retry work lost with a process or a node.
"""

from vlgap.distributed.udf import EncoderUDF, chunk_rows, feature_column  # noqa: E402 - imports no Ray

__all__ = ["EncoderUDF", "chunk_rows", "feature_column"]
