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
    # the same arrays through the same code path; a tolerance all the same (JSON round trip)
    np.testing.assert_allclose(np.array(d["scores"]), ref.scores, rtol=0, atol=1e-12)
    assert (d["best"]["x_layer"], d["best"]["y_layer"]) == (ref.x_layer, ref.y_layer)
    assert d["best"]["score"] == pytest.approx(ref.best_score, abs=1e-12) and d["preset"] is None
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


def test_read_layers_every_format(tmp_path):
    import torch
    from safetensors.torch import save_file as save_torch

    rng = np.random.default_rng(1)
    stack = rng.normal(size=(3, 20, 6)).astype(np.float32)            # [L, N, D]
    layers = list(stack)
    np.save(tmp_path / "one.npy", stack[0])
    np.save(tmp_path / "three.npy", stack)
    np.savez(tmp_path / "unnamed.npz", stack)                             # stored as arr_0
    # any names, natural order: h.2 before h.10; "ids" is not a layer
    np.savez(tmp_path / "named.npz", **{"h.10": stack[2], "h.2": stack[1], "h.1": stack[0]},
             ids=np.array([f"i{j}" for j in range(20)]))
    save_torch({"block10": torch.from_numpy(stack[2]).to(torch.bfloat16), "block9": torch.from_numpy(stack[1]),
                "block1": torch.from_numpy(stack[0])}, str(tmp_path / "named.safetensors"))
    torch.save({"feats": torch.from_numpy(stack).permute(1, 0, 2).contiguous(), "num_params": 7},
               tmp_path / "platonic.pt")                                    # platonic-rep: [N, L, D]
    assert len(read_layers(tmp_path / "one.npy").layers) == 1
    for name in ("three.npy", "unnamed.npz", "named.npz", "platonic.pt"):
        got = read_layers(tmp_path / name)
        assert len(got.layers) == 3, name
        for a, b in zip(got.layers, layers):
            np.testing.assert_array_equal(a, b)   # stored values read back, no arithmetic
    assert read_layers(tmp_path / "named.npz").names == ["h.1", "h.2", "h.10"]
    assert read_layers(tmp_path / "named.npz").ids[:2] == ["i0", "i1"]
    st = read_layers(tmp_path / "named.safetensors")
    assert st.names == ["block1", "block9", "block10"] and st.layers[2].dtype == np.float32
    np.testing.assert_allclose(st.layers[2], stack[2], rtol=1e-2)        # bfloat16 -> float32


def test_read_layers_errors(tmp_path, files):
    import torch

    x_path, y_path, xs, _ = files
    got = read_layers(x_path)
    assert len(got.layers) == 2 and got.ids[:2] == ["v0", "v1"]
    assert len(read_layers(y_path).layers) == 3
    mixed = tmp_path / "mixed.npz"
    np.savez(mixed, a=xs[0], b=np.stack([xs[0], xs[0]]))
    with pytest.raises(VlgapError, match="'b' has shape"):
        read_layers(mixed)
    ragged = tmp_path / "ragged.npz"
    np.savez(ragged, layer_000=xs[0], layer_001=xs[1][:-3])
    with pytest.raises(VlgapError, match="layer_001 has 117 items"):
        read_layers(ragged)
    np.save(tmp_path / "flat.npy", np.zeros(5))
    with pytest.raises(VlgapError, match=r"shape \(5,\)"):
        read_layers(tmp_path / "flat.npy")
    bad = xs[0].copy()
    bad[4, 1] = np.inf
    np.save(tmp_path / "inf.npy", bad)
    with pytest.raises(VlgapError, match=r"NaN/Inf in item rows \[4\]"):
        read_layers(tmp_path / "inf.npy")
    torch.save({"features": torch.zeros(3, 2, 2)}, tmp_path / "other.pt")
    with pytest.raises(VlgapError, match="'feats'"):
        read_layers(tmp_path / "other.pt")
    (tmp_path / "x.txt").write_text("1")
    with pytest.raises(VlgapError, match=r"unknown feature file type '.txt'; accepted: .npy"):
        read_layers(tmp_path / "x.txt")


def test_align_reads_npy_and_platonic_pt_with_preset(tmp_path, files):
    import torch

    _, _, xs, ys = files
    np.save(tmp_path / "x.npy", xs[0])
    np.save(tmp_path / "y.npy", ys[0])
    out = runner.invoke(app, ["align", str(tmp_path / "x.npy"), str(tmp_path / "y.npy"), "--k", "5", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["best"]["score"] == pytest.approx(layer_search([xs[0]], [ys[0]], k=5).best_score,
                                                                     abs=1e-12)
    # platonic-rep feature files ([N, L, D] under 'feats'), its preparation, both command names
    torch.save({"feats": torch.from_numpy(np.stack(xs, axis=1))}, tmp_path / "x.pt")
    torch.save({"feats": torch.from_numpy(np.stack(ys, axis=1))}, tmp_path / "y.pt")
    ref = layer_search(xs, ys, k=5, preset="platonic-rep")
    for command in ("align", "layer-search"):
        out = runner.invoke(app, [command, str(tmp_path / "x.pt"), str(tmp_path / "y.pt"), "--k", "5",
                                  "--preset", "platonic-rep", "--json"])
        assert out.exit_code == 0, out.output
        d = json.loads(out.stdout)
        assert d["preset"] == "platonic-rep" and d["q"] == 0.95
        np.testing.assert_allclose(np.array(d["scores"]), ref.scores, rtol=0, atol=1e-12)
    out = runner.invoke(app, ["align", str(tmp_path / "x.pt"), str(tmp_path / "y.pt"), "--k", "5",
                              "--preset", "platonic-rep"])
    assert out.exit_code == 0 and "preset platonic-rep" in out.stdout


def test_count_list_options_one_rule():
    from vlgap.cli.options import int_list, one_int

    assert int_list("1, 2,4,8", "--n-frames") == [1, 2, 4, 8] and int_list("8", "--n-frames") == [8]
    assert one_int("8", "--n-frames") == 8
    with pytest.raises(VlgapError, match="--n-frames '1,2': this command runs at one value"):
        one_int("1,2", "--n-frames")
    with pytest.raises(VlgapError, match="positive"):
        int_list("0,2", "--n-captions")
    with pytest.raises(VlgapError, match="comma-separated"):
        int_list("a", "--n-captions")
