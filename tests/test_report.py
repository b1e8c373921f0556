"""The report reads as a report: tables, "n/a (why)" where a value cannot exist, parameters at a bound
flagged "not identified", in the HTML page and in the console summaries (fit-scaling, sweep)."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from vlgap.formatting import interval, number
from vlgap.io_utils import atomic_write_json
from vlgap.probe.report import fit_console_line, write_report
from vlgap.scaling import fit_scaling, identification


def _law(nf, nc, step: bool):
    """beta -> its upper bound 10 when step: the score drops only at n_c = 1 (a step, no power law)."""
    nf, nc = np.asarray(nf, float), np.asarray(nc, float)
    cap = 0.1 * (nc == 1) if step else 0.12 * nc ** -0.8
    return 0.45 - 0.15 * nf ** -0.7 - cap


def _rows(vision: str, text: str, nfs, ncs, step: bool, seed: int, with_ci: bool = True) -> list[dict]:
    rng = np.random.default_rng(seed)
    rows = []
    for nf in nfs:
        for nc in ncs:
            s = float(_law(nf, nc, step) + rng.normal(0, 0.002))
            rows.append({"vision": vision, "text": text, "n_f": nf, "n_c": nc, "score": s,
                         "ci_lo": s - 0.02 if with_ci else float("nan"), "ci_hi": s + 0.02 if with_ci else float("nan"),
                         "p_value": float("nan"), "null_mean": float("nan"), "x_layer": 1, "y_layer": 2,
                         "x_layer_name": "", "y_layer_name": "", "n": 64, "k": 5, "chance": 5 / 63,
                         "metric": "mutual_knn"})
    return rows


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A sweep folder as `vlgap sweep` writes it: a 3 x 3 pair whose beta hits its bound (held-out
    check impossible) and a 4 x 4 pair with a proper power law (held-out check computed); no
    permutations were run, so p-values are missing."""
    from vlgap.probe.sweep import fit_pairs

    run = tmp_path_factory.mktemp("run")
    rows = (_rows("vis", "step", [1, 2, 4], [1, 2, 4], True, 0)
            + _rows("vis", "smooth", [1, 2, 4, 8], [1, 2, 4, 8], False, 1))
    atomic_write_json(run / "sweep.json", {"rows": rows, "description": "synthetic",
                                           "config": {"bootstrap": 50, "permutations": 0}})
    atomic_write_json(run / "scaling.json", fit_pairs(rows))
    return run


def test_identification_rules():
    ranges = dict(S_inf=0.4, C_f=0.1, C_c=0.1, alpha=0.7, beta=10.0)
    ident = identification(ranges)
    assert ident["beta"] == {"identified": False, "at_bound": "upper", "bounds": [1e-3, 10.0],
                             "why": "at its upper bound 10"}
    assert all(ident[k]["identified"] for k in ("S_inf", "C_f", "C_c", "alpha"))
    # an interval reaching a bound, a term switched off, a term confounded with S_inf
    ident = identification(dict(ranges, beta=3.0), {"beta": [1.0, 9.95]})
    assert not ident["beta"]["identified"] and "reaches the bound 10" in ident["beta"]["why"]
    ident = identification(dict(ranges, C_f=0.0))
    assert not ident["C_f"]["identified"] and ident["alpha"]["why"] == "no effect: C_f = 0"
    assert ident["S_inf"]["identified"]
    ident = identification(dict(ranges, alpha=1e-3))
    assert not ident["S_inf"]["identified"] and not ident["C_f"]["identified"]
    assert "only S_inf - C_f" in ident["C_f"]["why"]
    # the exponent only in part of the refits at its lower bound: S_inf and its C both confounded
    ident = identification(dict(ranges, alpha=1.2, beta=0.5), {"alpha": [1e-3, 10.0], "C_f": [0.001, 2.6]})
    assert not ident["S_inf"]["identified"] and "confounded with C_f" in ident["S_inf"]["why"]
    assert not ident["C_f"]["identified"] and "confounded with S_inf" in ident["C_f"]["why"]
    assert ident["C_c"]["identified"] and ident["beta"]["identified"]
    # 1 % of a bound is "at" it; 2 % is not
    assert identification(dict(ranges, beta=9.91))["beta"]["at_bound"] == "upper"
    assert identification(dict(ranges, beta=9.79))["beta"]["identified"]


def test_fit_flags_bound_parameter_and_says_why_heldout_is_missing():
    rows = _rows("v", "t", [1, 2, 4], [1, 2, 4], True, 0)
    fit = fit_scaling(rows, n_bootstrap=0)
    assert fit.identification["beta"]["at_bound"] == "upper" and "beta" in fit.not_identified
    assert fit.identification["alpha"]["identified"]
    assert "skipped" in fit.heldout and "2 distinct n_f" in fit.heldout["skipped"]
    for a in fit.alternatives.values():
        assert a["heldout_mean_abs_error"] is None and a["heldout_skipped"].startswith("too few cells")
    d = fit.to_dict()
    assert d["not_identified"] == fit.not_identified
    assert d["identification"]["S_inf"]["bounds"] == [None, None]   # no infinities in the JSON
    json.dumps(d)


def test_html_report_has_tables_reasons_and_flags(run_dir):
    page = write_report(run_dir).read_text()
    text = re.sub(r"<img[^>]*>", "", page)
    assert "{'" not in text and '{"' not in text              # no dict dumped into the page
    assert not re.search(r"\bnan\b", text, re.IGNORECASE)      # no bare nan anywhere
    # the step pair: beta at its bound, flagged; held-out impossible, said why, in both places
    assert "not identified</b>: at its upper bound 10" in text
    assert "Held-out check</b>: n/a (too few cells below the largest n_f, n_c to hold out" in text
    assert text.count("n/a (too few cells below the largest n_f, n_c to hold out)") >= 3  # alternatives
    # the smooth pair: the held-out check is a table of cells with an MAE row
    held = text[text.index("predicts the 7 cells"):]
    table = held[:held.index("</table>")]
    assert "<th>n_f</th><th>n_c</th><th>predicted</th><th>observed</th><th>abs error</th>" in table
    assert table.count("<tr>") == 1 + 7 + 2 and "<b>MAE</b>" in table
    # missing p-values carry their reason
    assert "n/a (no permutations)" in text
    assert "not identified: beta" in text                     # summary table column


def test_console_summaries(run_dir, tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from vlgap.cli import app, probe as probe_cli

    monkeypatch.setattr(probe_cli.console, "width", 250)  # wide enough that no table cell wraps

    fits = json.loads((run_dir / "scaling.json").read_text())
    line = fit_console_line(fits["vis|step"], "vis x step")
    assert "beta 10.000*" in line and "not identified: beta (at its upper bound 10)" in line
    assert "held-out MAE n/a (too few cells" in line
    smooth = fit_console_line(fits["vis|smooth"], "vis x smooth")
    assert "held-out MAE 0.0" in smooth and "(7 cells)" in smooth

    grid = tmp_path / "grid.csv"
    rows = _rows("v", "t", [1, 2, 4], [1, 2, 4], True, 0)
    grid.write_text("n_f,n_c,score\n" + "".join(f"{r['n_f']},{r['n_c']},{r['score']}\n" for r in rows))
    out = CliRunner().invoke(app, ["fit-scaling", str(grid), "--bootstrap", "0"])
    assert out.exit_code == 0, out.output
    assert "not identified: at its upper bound 10" in out.output
    assert "held-out check: n/a (too few cells below the largest n_f, n_c" in out.output
    assert out.output.count("n/a (too few cells below the largest n_f, n_c to hold out)") >= 3
    assert "n/a (no bootstrap)" in out.output
    assert not re.search(r"\bnan\b", out.output, re.IGNORECASE) and "{'" not in out.output


def test_number_formatting_is_one_rule():
    assert number(0.12345) == "0.123" and number(1.5e-5) == "1.5e-05" and number(None) == "n/a"
    assert number(float("nan")) == "n/a" and number(float("inf")) == "n/a" and number(np.int64(7)) == "7"
    assert number(np.float32(0.5), 2) == "0.50" and number(2.5e7) == "2.5e+07"
    assert interval([0.1, 0.2]) == "[0.100, 0.200]" and interval([0.1, float("nan")]) == "n/a"
    assert interval(None) == "n/a"


def test_interval_reaching_lower_exponent_bound_confounds_s_inf():
    base = dict(S_inf=0.4, C_f=0.1, C_c=0.1, alpha=0.7, beta=0.9)
    ci = {"S_inf": [0.3, 6.9], "C_f": [0.05, 6.6], "C_c": [0.08, 0.12], "alpha": [0.001, 2.0], "beta": [0.5, 1.5]}
    ident = identification(base, ci)
    assert not ident["S_inf"]["identified"] and "alpha's interval reaches its lower bound" in ident["S_inf"]["why"]
    assert not ident["alpha"]["identified"] and ident["beta"]["identified"] and ident["C_c"]["identified"]
