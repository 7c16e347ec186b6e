"""Privacy-utility plots from records only (x: utility, y: attack accuracy, one line per method)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from vflpriv.tradeoff.cap import strength_label  # noqa: E402


def tradeoff_plot(summary: pd.DataFrame, path: Path, *, title: str | None = None) -> Path:
    """One panel per (dataset, attack, defense, phase); points labelled with their strength (its axis);
    the adversary prior (mean over seeds) is the dashed horizontal line.

    ``summary`` is :func:`vflpriv.tradeoff.cap.strength_summary` output.
    """
    panels = list(summary.groupby(["dataset", "attack", "defense", "phase"]))
    fig, axes = plt.subplots(1, max(1, len(panels)), figsize=(5.5 * max(1, len(panels)), 4.5), squeeze=False)
    palette = dict(zip(sorted(summary["method"].unique()), sns.color_palette("colorblind", summary["method"].nunique())))
    for ax, ((dataset, attack, defense, phase), panel) in zip(axes[0], panels):
        for method, rows in panel.groupby("method"):
            rows = rows.sort_values("strength")
            color = palette[method]
            ax.errorbar(
                rows["utility_mean"], rows["attack_accuracy_mean"],
                xerr=rows["utility_std"], yerr=rows["attack_accuracy_std"],
                marker="o", color=color, label=method, capsize=2,
            )
            for _, r in rows.iterrows():
                ax.annotate(strength_label(r["strength_axis"], r["strength"]), (r["utility_mean"], r["attack_accuracy_mean"]),
                            textcoords="offset points", xytext=(4, 4), fontsize=8, color=color)
        prior = panel["prior_accuracy_mean"].mean()
        if pd.notna(prior):
            ax.axhline(prior, linestyle="--", color="grey", label="adversary prior")
        ax.set_xlabel(f"utility ({_metric(panel)})")
        ax.set_ylabel(f"{attack} attack accuracy")
        ax.set_title(f"{dataset}: {defense} ({phase})")
        ax.legend(fontsize=8)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def _metric(panel: pd.DataFrame) -> str:
    return str(panel["utility_metric"].iloc[0]) if "utility_metric" in panel else "utility"
