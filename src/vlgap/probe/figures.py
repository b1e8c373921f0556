"""Figures shared by the temporal probes (matplotlib on the Agg backend, imported only when drawing)."""
from __future__ import annotations

import numpy as np


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def paired_difference_figure(rows: list[dict], labels: list[str], title: str, xlabel: str, label_b: str | None = None):
    """Left: both conditions' scores with intervals and chance per row; right: the difference A - B."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, max(2.5, 0.45 * len(rows) + 1.5)), sharey=True,
                             gridspec_kw={"wspace": 0.05})
    for r_i, r in enumerate(rows):
        for val, ci, mk, off, name in ((r["score_a"], r["ci_a"], "o", -0.12, r["name_a"]),
                                       (r["score_b"], r["ci_b"], "s", 0.12, label_b or r["name_b"])):
            err = [[val - ci[0]], [ci[1] - val]] if ci else None
            axes[0].errorbar([val], [r_i + off], xerr=err, fmt=mk, color="C0" if mk == "o" else "C3", capsize=3,
                             label=name if r_i == 0 else None)
        axes[0].plot([r["chance"]], [r_i], "|", color="grey", ms=12, label="chance k/(N-1)" if r_i == 0 else None)
        ci = r["ci"]
        err = [[r["difference"] - ci[0]], [ci[1] - r["difference"]]] if ci else None
        axes[1].errorbar([r["difference"]], [r_i], xerr=err, fmt="D", color="k", capsize=3)
    axes[0].set_yticks(np.arange(len(rows)), labels, fontsize=8)
    axes[0].invert_yaxis()
    axes[0].set_xlabel("mutual k-NN alignment (95% CI)")
    axes[0].legend(fontsize=7)
    axes[1].axvline(0, color="grey", lw=1)
    axes[1].set_xlabel(xlabel)
    fig.suptitle(title, fontsize=10)
    return fig
