"""`vlgap align` and `vlgap fit-scaling` on files, and the feature-file reader."""
import json

import numpy as np
import pytest
from safetensors.numpy import save_file
from typer.testing import CliRunner

from vlgap.cli import app
from vlgap.errors import VlgapError
from vlgap.features.arrays import read_layers
from vlgap.metrics.layer_search import layer_search

runner = CliRunner()
N = 120


@pytest.fixture()
def files(tmp_path):
    rng = np.random.default_rng(0)
    z = rng.normal(size=(N, 4))
    xs = [(z @ rng.normal(size=(4, 24)) + s * rng.normal(size=(N, 24))).astype(np.float32) for s in (0.5, 2.0)]
    ys = np.stack([z @ rng.normal(size=(4, 12)) + s * rng.normal(size=(N, 12)) for s in (1.0, 3.0, 0.7)])
    x_path, y_path = tmp_path / "x.safetensors", tmp_path / "y.npz"
    save_file({f"layer_{i:03d}": a for i, a in enumerate(xs)}, str(x_path),
              metadata={"ids": json.dumps([f"v{i}" for i in range(N)])})
    np.savez(y_path, features=ys)
    return x_path, y_path, xs, list(ys)


def test_align_json_matches_api(files):
    x_path, y_path, xs, ys = files
    out = runner.invoke(app, ["align", str(x_path), str(y_path), "--k", "5", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    ref = layer_search(xs, ys, k=5)
    assert np.array_equal(np.array(d["scores"]), ref.scores)
    assert d["best"] == {"score": ref.best_score, "x_layer": ref.x_layer, "y_layer": ref.y_layer}
    assert d["chance"] == pytest.approx(5 / (N - 1)) and d["n"] == N and d["k"] == 5


def test_align_with_uncertainty_and_rich_output(files):
    x_path, y_path, _, _ = files
    out = runner.invoke(app, ["align", str(x_path), str(y_path), "--k", "5", "--bootstrap", "30",
                              "--permutations", "30", "--seed", "3", "--json"])
    d = json.loads(out.stdout)
    assert d["ci"][0] <= d["best"]["score"] <= d["ci"][1] and 0 < d["p_value"] <= 1 and d["seed"] == 3
    out = runner.invoke(app, ["align", str(x_path), str(y_path), "--k", "5"])
    assert out.exit_code == 0 and "chance" in out.stdout and "best" in out.stdout


def test_fit_scaling_cli(tmp_path):
    p = tmp_path / "grid.csv"
    rows = ["n_f,n_c,score"] + [f"{a},{b},{0.4 - 0.15 * a ** -0.7 - 0.1 * b ** -1.2:.6f}"
                                for a in (1, 2, 4, 8) for b in (1, 2, 4, 8)]
    p.write_text("\n".join(rows) + "\n")
    out = runner.invoke(app, ["fit-scaling", str(p), "--bootstrap", "20", "--json"])
    assert out.exit_code == 0, out.output
    d = json.loads(out.stdout)
    assert set(d["params"]) == {"S_inf", "C_f", "C_c", "alpha", "beta"}
    assert {"r2", "heldout", "alternatives"} <= set(d)
    assert d["params"]["alpha"] == pytest.approx(0.7, rel=0.01)
    assert runner.invoke(app, ["fit-scaling", str(p), "--bootstrap", "10"]).exit_code == 0


def test_cli_errors_are_one_line(tmp_path, files):
    from vlgap.cli import main
    import sys

    x_path, _, _, _ = files
    p = tmp_path / "small.csv"
    p.write_text("n_f,n_c,score\n1,1,0.1\n2,2,0.2\n")
    for args in (["fit-scaling", str(p)], ["align", str(x_path), str(tmp_path / "nope.npz")]):
        old = sys.argv
        sys.argv = ["vlgap", *args]
        try:
            with pytest.raises(SystemExit) as exc:
                main()
        finally:
            sys.argv = old
        assert exc.value.code == 2


def test_read_layers_errors(tmp_path, files):
    x_path, y_path, xs, _ = files
    got = read_layers(x_path)
    assert len(got.layers) == 2 and got.ids[:2] == ["v0", "v1"]
    assert len(read_layers(y_path).layers) == 3
    gap = tmp_path / "gap.npz"
    np.savez(gap, layer_000=xs[0], layer_002=xs[1])
    with pytest.raises(VlgapError, match="missing layer_001"):
        read_layers(gap)
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, emb=xs[0])
    with pytest.raises(VlgapError, match="layer_000"):
        read_layers(wrong)
    ragged = tmp_path / "ragged.npz"
    np.savez(ragged, layer_000=xs[0], layer_001=xs[1][:-3])
    with pytest.raises(VlgapError, match="layer_001 has 117 items"):
        read_layers(ragged)
    with pytest.raises(VlgapError, match="unknown feature file type"):
        read_layers(tmp_path / "x.txt") if (tmp_path / "x.txt").write_text("1") else None
