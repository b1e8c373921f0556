"""One keyword per idea (issue 23): no public function spells an idea two ways.

The public functions are the `_API` names of `vlgap` plus every public function defined in the
modules of vlgap.stats, vlgap.metrics and vlgap.captions. Each synonym group below is one idea; its
first name is the only spelling allowed in a signature. `method` is allowed only where it is not an
interval method (gap()/mmd_test(): the MMD estimator); an interval method is always `ci_method`.

Different ideas that look alike, and stay:
  bootstrap_method (fit_scaling: what is resampled, residual | case), p_value_method (c2st: how the
  p-value is computed), fd_bootstrap / for_bootstrap / c2st_permutations (which part is resampled, or
  a bool), use_intervals (whether the fit weights cells by their intervals), and
  `GapResult.verdict(alpha=)` / `vlgap gap --alpha` (a test's significance level, not an interval's
  confidence; a method, so outside the walk). On the CLI the same ideas are --bootstrap,
  --permutations, --confidence, --ci-method, --seed; `vlgap gap --method` is the MMD estimator, and
  `vlgap fit-scaling --bootstrap-method` (was --method) what its bootstrap resamples.
"""
from __future__ import annotations

import importlib
import inspect
import pkgutil

import numpy as np
import pytest

import vlgap
from vlgap.errors import VlgapError

SYNONYMS = {
    "n_bootstrap": {"n_bootstrap", "n_resamples", "n_boot", "bootstrap", "n_bootstraps", "num_bootstrap",
                    "bootstrap_samples", "n_bootstrap_samples", "resamples"},
    "n_permutations": {"n_permutations", "permutations", "n_perm", "n_perms", "num_permutations",
                       "permutation_samples"},
    "ci_method": {"ci_method", "interval", "interval_method", "ci_type", "ci_kind"},
    "confidence": {"confidence", "confidence_level", "level", "ci_level", "alpha", "cl"},
    "seed": {"seed", "random_state", "random_seed", "rng_seed"},
}
INTERVAL_METHODS = {"bca", "percentile", "basic", "simultaneous", "normal", "studentized"}


def public_functions() -> dict[str, object]:
    funcs = {f"vlgap.{name}": getattr(vlgap, name) for name in vlgap._API}
    for package in ("vlgap.stats", "vlgap.metrics", "vlgap.captions"):
        pkg = importlib.import_module(package)
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name.startswith("_"):
                continue
            module = importlib.import_module(f"{package}.{info.name}")
            for name, obj in vars(module).items():
                if (not name.startswith("_") and inspect.isfunction(obj)
                        and getattr(obj, "__module__", None) == module.__name__):
                    funcs[f"{module.__name__}.{name}"] = obj
    return {k: f for k, f in funcs.items() if inspect.isfunction(f) or inspect.isfunction(getattr(f, "__wrapped__", None))}


def _second_spellings(funcs: dict[str, object]) -> list[str]:
    wrong = []
    for where, func in sorted(funcs.items()):
        for name, param in inspect.signature(func).parameters.items():
            for canonical, group in SYNONYMS.items():
                if name in group and name != canonical:
                    wrong.append(f"{where}({name}=): spell it {canonical}")
            if name == "method" and str(param.default) in INTERVAL_METHODS:
                wrong.append(f"{where}(method={param.default!r}): an interval method is ci_method")
    return wrong


def test_walk_finds_the_functions_it_must_check():
    funcs = public_functions()
    for name in ("vlgap.bootstrap_ci", "vlgap.caption_eval", "vlgap.layer_search", "vlgap.gap",
                 "vlgap.stats.resampling.paired_bootstrap", "vlgap.metrics.uncertainty.bootstrap_best_pair",
                 "vlgap.captions.intervals.sum_statistic_intervals"):
        assert name in funcs
    assert len(funcs) > 100


def test_no_public_function_spells_one_idea_two_ways():
    assert _second_spellings(public_functions()) == []


def test_the_check_catches_a_second_spelling():
    def f(x, *, n_resamples=10, method="bca", level=0.9):
        return x

    def g(x, *, method="auto"):  # an estimator, not an interval method: allowed
        return x

    assert _second_spellings({"f": f, "g": g}) == [
        "f(n_resamples=): spell it n_bootstrap", "f(method='bca'): an interval method is ci_method",
        "f(level=): spell it confidence"]


@pytest.mark.parametrize("call, old, new", [
    (lambda: vlgap.bootstrap_ci(np.arange(5.0), n_resamples=10), "n_resamples", "n_bootstrap"),
    (lambda: vlgap.bootstrap_ci(np.arange(5.0), method="percentile"), "method", "ci_method"),
    (lambda: vlgap.compare(np.arange(5.0), np.arange(5.0), method="percentile"), "method", "ci_method"),
    (lambda: vlgap.caption_eval({"a": "x"}, {"a": ["x"]}, method="percentile"), "method", "ci_method"),
    (lambda: vlgap.compare_captions({"a": "x"}, {"a": "y"}, {"a": ["x"]}, method="bca"), "method", "ci_method"),
    (lambda: vlgap.layer_search([np.eye(4)], [np.eye(4)], k=1, interval="basic"), "interval", "ci_method"),
])
def test_old_spellings_are_refused_with_the_new_name(call, old, new):
    with pytest.raises(VlgapError, match=f"the keyword '{old}' is now {new}"):
        call()


def test_new_spellings_work():
    iv = vlgap.bootstrap_ci(np.arange(20.0), n_bootstrap=200, ci_method="percentile", seed=1)
    assert iv.method == "percentile" and iv.n_resamples == 200 and iv.low < 9.5 < iv.high


def test_cli_old_flags_are_refused_with_the_new_flag(tmp_path):
    from typer.testing import CliRunner

    from vlgap.cli import app  # main() turns the VlgapError into exit code 2
    x = tmp_path / "x.npy"
    np.save(x, np.random.default_rng(0).normal(size=(1, 12, 3)))
    res = CliRunner().invoke(app, ["layer-search", str(x), str(x), "--interval", "basic"])
    assert "--interval basic is now --ci-method basic" in str(res.exception)
    grid = tmp_path / "grid.csv"
    grid.write_text("n_f,n_c,score\n1,1,0.1\n")
    res = CliRunner().invoke(app, ["fit-scaling", str(grid), "--method", "case"])
    assert "--method case is now --bootstrap-method case" in str(res.exception)
