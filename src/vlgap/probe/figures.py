"""Figures shared by the temporal probes (matplotlib on the Agg backend, imported only when drawing)."""
from __future__ import annotations

import numpy as np


def pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def legend_outside(ax, where: str = "right", **kw):
    """The axes' legend placed off the data: to the right of the axes ("right", for the last or only
    panel) or below its x label ("below", for a panel with another to its right). Figures are saved with
    bbox_inches="tight", so the canvas grows to hold it. Returns the legend (None without labelled artists)."""
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        return None
    kw.setdefault("fontsize", 7)
    if where == "right":
        return ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kw)
    if where == "below":  # under the axes' tick and axis labels, centred on the axes (call after the layout)
        kw.setdefault("ncol", min(3, len(labels)))
        box = ax.get_position()
        anchor = ((box.x0 + box.x1) / 2, _bottom(ax.figure, [ax]))
        return ax.legend(handles, labels, loc="upper center", bbox_to_anchor=anchor,
                         bbox_transform=ax.figure.transFigure, borderaxespad=0.0, **kw)
    raise ValueError(f"legend_outside: where={where!r}; use 'right' or 'below'")


def _bottom(fig, axes) -> float:
    """The lowest point of the axes with their tick labels and axis labels, in figure coordinates (below
    0 where the labels hang under the figure's edge: saving with bbox_inches="tight" keeps them)."""
    renderer = fig.canvas.get_renderer()
    inverse = fig.transFigure.inverted()
    return min(ax.get_tightbbox(renderer).transformed(inverse).y0 for ax in axes) - 0.01


def figure_legend(fig, axes, **kw):
    """One legend for panels that share their labels, under the whole figure (off every panel's data);
    the first handle of each label across `axes` is shown. Returns the legend (None without labels)."""
    seen: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if not seen:
        return None
    kw.setdefault("fontsize", 7)
    kw.setdefault("ncol", min(4, len(seen)))
    return fig.legend(list(seen.values()), list(seen), loc="upper center", bbox_to_anchor=(0.5, _bottom(fig, axes)),
                      **kw)


def within_range(ax, values, bounds: tuple[float | None, float | None], axis: str = "y", pad: float = 0.05) -> None:
    """Limit an axis to the plotted values (points and interval ends) padded by `pad` of their span, and
    never past the metric's own range `bounds` (lower, upper; None: unbounded on that side): a score in
    [0, 1] is never drawn on an axis that runs to 1.4."""
    v = np.asarray([x for x in np.asarray(values, dtype=float).ravel() if np.isfinite(x)], float)
    if v.size == 0:
        return
    lo, hi = float(v.min()), float(v.max())
    span = (hi - lo) or max(abs(hi), 1.0) * 0.1
    lo, hi = lo - pad * span, hi + pad * span
    if bounds[0] is not None:
        lo = max(lo, float(bounds[0]))
    if bounds[1] is not None:
        hi = min(hi, float(bounds[1]))
    if hi <= lo:
        return
    (ax.set_ylim if axis == "y" else ax.set_xlim)(lo, hi)


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
    within_range(axes[0], [v for r in rows for v in (r["score_a"], r["score_b"], r["chance"], *(r["ci_a"] or []),
                                                     *(r["ci_b"] or []))], (0.0, 1.0), axis="x")
    legend_outside(axes[0], "below")
    axes[1].axvline(0, color="grey", lw=1)
    axes[1].set_xlabel(xlabel)
    fig.suptitle(title, fontsize=10)
    return fig
