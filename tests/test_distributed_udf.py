"""`vlgap.distributed.EncoderUDF`: a vlgap encoder inside a user's own Ray Data pipeline gives the
features of `vlgap extract`, bit for bit, for the same encoder, dtype and torch threads, when a Ray
batch is one extract chunk (`chunk_rows`). Called directly (as Ray Data calls it on an actor) for
media files, decoded frames and captions; once through `Dataset.map_batches` on a local Ray."""
from __future__ import annotations

import numpy as np
import pytest

from vlgap.errors import VlgapError


def _extract(man, cache, encoder, **kw):
    from vlgap.features.extract import extract

    return extract(man, encoder, cache_dir=cache, threads=1, progress=False, **kw)


def _assert_rows_equal(result, rows, param, values, n_layers):
    """Every feature column of `rows` (by id) equals extract's row for that id, bit for bit."""
    from vlgap.distributed import feature_column

    by_id = {str(r["id"]): r for r in rows}
    for v in values:
        fs = result.features[v]
        assert sorted(by_id) == sorted(fs.ids)
        assert len(fs.layers) == n_layers
        for li, layer in enumerate(fs.layers):
            got = np.stack([np.asarray(by_id[i][feature_column(param, v, li)]) for i in fs.ids])
            assert got.dtype == layer.dtype == np.float32
            assert np.array_equal(got, layer), (v, li)


def _columns(rows):
    return {k: np.array([r[k] for r in rows], dtype=object) for k in rows[0]}


def test_chunk_rows_is_extracts_chunk():
    from vlgap.distributed import chunk_rows
    from vlgap.features.chunk_steps import CHUNK_FRAMES, CHUNK_TEXTS

    assert chunk_rows("mobilenet_v2", n_frames=[8, 32]) == CHUNK_FRAMES // 32
    assert chunk_rows("mobilenet_v2", n_frames=1) == 64  # at most 64 items per chunk
    assert chunk_rows("minilm", n_captions=[1, 4]) == CHUNK_TEXTS
    with pytest.raises(VlgapError, match="either n_frames"):
        chunk_rows("minilm")


def test_udf_vision_equals_extract_for_files_and_decoded_frames(tiny_dataset, tmp_path, one_thread):
    from vlgap.data.manifest import read_manifest
    from vlgap.data.video import read_frames
    from vlgap.distributed import EncoderUDF, chunk_rows

    values = [1, 3]
    ref = _extract(tiny_dataset, tmp_path / "c", "mobilenet_v2", n_frames=values, image_size=64)
    items = read_manifest(tiny_dataset).items
    assert chunk_rows("mobilenet_v2", n_frames=values) >= len(items)  # one chunk: one batch

    udf = EncoderUDF("mobilenet_v2", n_frames=values, image_size=64, threads=1, root=tiny_dataset.parent)
    n_layers = udf.info["num_layers"]
    # a manifest's own rows (relative paths under root), as ray.data.read_json would give them
    rows = [{"id": it.id, it.kind: str(it.media.relative_to(tiny_dataset.parent))} for it in items]
    batch = {"id": np.array([r["id"] for r in rows], dtype=object),
             "video": np.array([r.get("video") for r in rows], dtype=object),
             "image": np.array([r.get("image") for r in rows], dtype=object)}
    out = udf(batch)
    assert set(udf.columns) <= set(out) and "video" in out and len(udf.columns) == 2 * n_layers
    _assert_rows_equal(ref, [{k: out[k][i] for k in out} for i in range(len(items))], "n_f", values, n_layers)

    # frames decoded by the pipeline (every frame of each video), sampled as extract samples them
    decoded = [{"id": it.id, "kind": it.kind, "frames": read_frames(it)[0]} for it in items]
    out = udf({"id": np.array([d["id"] for d in decoded], dtype=object),
               "kind": np.array([d["kind"] for d in decoded], dtype=object),
               "frames": np.array([d["frames"] for d in decoded] + [None], dtype=object)[:-1]})
    assert "frames" not in out
    _assert_rows_equal(ref, [{k: out[k][i] for k in out} for i in range(len(items))], "n_f", values, n_layers)

    # the errors name the item and what would be valid
    with pytest.raises(VlgapError, match="relative media path .*root="):
        EncoderUDF.__call__(_without_root(udf), batch)
    with pytest.raises(VlgapError, match=r"item 'v0': 'frames' must be .* uint8"):
        udf({"id": np.array(["v0"], dtype=object), "frames": np.zeros((1, 2, 8, 8, 3), np.float32)})
    with pytest.raises(VlgapError, match="is a vision encoder: give n_frames"):
        EncoderUDF("mobilenet_v2", n_captions=[1], image_size=64)


def _without_root(udf):
    clone = object.__new__(type(udf))
    clone.__dict__.update(udf.__dict__, root=None)
    return clone


def test_udf_text_equals_extract(tiny_dataset, tmp_path, one_thread):
    from vlgap.data.manifest import read_manifest
    from vlgap.distributed import EncoderUDF

    values = [1, 3]
    ref = _extract(tiny_dataset, tmp_path / "c", "minilm", n_captions=values)
    items = read_manifest(tiny_dataset).items
    udf = EncoderUDF("minilm", n_captions=values, threads=1)
    rows = [{"id": it.id, "captions": list(it.captions)} for it in items]
    out = udf(_columns(rows))
    _assert_rows_equal(ref, [{k: out[k][i] for k in out} for i in range(len(items))], "n_c", values,
                       udf.info["num_layers"])
    # extract's own one-line message for an item with too few captions; nothing is dropped
    with pytest.raises(VlgapError, match=r"item 'v0' has 3 captions but n_c=4"):
        EncoderUDF("minilm", n_captions=[4], threads=1)(_columns(rows))
    # pandas batches (batch_format="pandas") work as well
    pd = pytest.importorskip("pandas")
    out_pd = udf(pd.DataFrame(rows))
    assert np.array_equal(np.stack(out_pd["n_c=3/layer_0"]), np.stack(out["n_c=3/layer_0"]))


@pytest.fixture(scope="module")
def ray_data():
    ray = pytest.importorskip("ray")
    # Ray Data needs pyarrow: the `ray` extra must bring `ray[data]`
    pytest.importorskip("pyarrow", reason="Ray Data needs pyarrow (pip install 'ray[data]')")
    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    yield ray
    if started:
        ray.shutdown()


@pytest.mark.serial  # starts Ray: make test runs it alone
@pytest.mark.slow  # > 5 s on 2 cores: make test-slow (the fast suite keeps a cheaper test of the same module)
def test_udf_in_a_ray_data_pipeline_equals_extract(ray_data, tiny_dataset, tmp_path, one_thread):
    from vlgap.data.manifest import read_manifest
    from vlgap.distributed import EncoderUDF, chunk_rows

    values = [1, 3]
    ref = _extract(tiny_dataset, tmp_path / "c", "mobilenet_v2", n_frames=values, image_size=64)
    items = read_manifest(tiny_dataset).items
    ds = ray_data.data.from_items([{"id": it.id, "path": str(it.media)} for it in items], override_num_blocks=1)
    feats = ds.map_batches(EncoderUDF, batch_size=chunk_rows("mobilenet_v2", n_frames=values),
                           compute=ray_data.data.ActorPoolStrategy(size=1),
                           fn_constructor_kwargs={"encoder": "mobilenet_v2", "n_frames": values, "image_size": 64,
                                                  "threads": 1})
    rows = feats.take_all()
    assert len(rows) == len(items)
    _assert_rows_equal(ref, rows, "n_f", values, len(ref.features[1].layers))
