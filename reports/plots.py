"""Privacy-utility plots from records only (x: utility, y: attack accuracy, or a feature attack's MSE, one line per
method, and for a feature attack per adversary and victim).

One figure per (attack, defense, phase), one panel per dataset: each method (and variant) is a line
through its strengths, with error bars over seeds and each point labelled with its strength on the
defense's own axis, placed so that no two labels overlap (``vflpriv.reports.labels``); the adversary's prior
(mean over seeds) is the dashed line.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from vflpriv.reports.labels import Label, place_labels  # noqa: E402
from vflpriv.reports.tables import utility_label  # noqa: E402
from vflpriv.tradeoff.cap import strength_label  # noqa: E402

CONTEXT = ["attack", "defense", "phase"]
FORMATS = ("png", "svg", "pdf")
#: The priors' line styles, one per adversary and victim on a panel.
PRIOR_STYLES = ("--", ":", "-.")


def _line(method: str, variant: str, role: str = "") -> str:
    name = f"{method} ({variant})" if variant else method
    return f"{name}: {role}" if role else name


def _role(row) -> str:
    """A feature attack's adversary and victim, as its line names them ("" for a label attack's)."""
    if getattr(row, "secret", "labels") != "features" or not hasattr(row, "victim"):
        return ""
    adversary = str(getattr(row, "adversary", ""))
    by = "server" if adversary == "server" else "any" if adversary == "any" else f"party {adversary}"
    return f"{by} → party {row.victim}"


def tradeoff_figures(
    summary: pd.DataFrame, out: Path, *, stem: str = "tradeoff", formats: tuple[str, ...] = FORMATS
) -> list[Path]:
    """Write the figures of ``summary`` (:func:`vflpriv.tradeoff.cap.strength_summary`); returns the files.

    With one (attack, defense, phase) the files are ``{stem}.{format}``, else ``{stem}_{attack}_{defense}_{phase}``.
    """
    summary = summary.assign(variant=summary["variant"] if "variant" in summary else "")
    summary = summary.assign(role=[_role(r) for r in summary.itertuples()])  # one line per adversary and victim
    groups = list(summary.groupby(CONTEXT, sort=False))
    lines = sorted({_line(m, v, r) for m, v, r in zip(summary["method"], summary["variant"], summary["role"])})
    palette = dict(zip(lines, sns.color_palette("colorblind", len(lines))))
    written = []
    for (attack, defense, phase), part in groups:
        datasets = list(dict.fromkeys(part["dataset"]))
        fig, axes = plt.subplots(1, len(datasets), figsize=(5.2 * len(datasets), 4.4), squeeze=False)
        labels: dict = {ax: [] for ax in axes[0]}
        for ax, dataset in zip(axes[0], datasets):
            panel = part[part["dataset"] == dataset]
            for (method, variant, role), rows in panel.groupby(["method", "variant", "role"], sort=False):
                rows = rows.sort_values("strength")
                name = _line(method, variant, role)
                ax.errorbar(rows["utility_mean"], rows["attack_accuracy_mean"], xerr=rows["utility_std"],
                            yerr=rows["attack_accuracy_std"], marker="o", color=palette[name], label=name, capsize=2)
                if defense != "none":  # no defense: one point per method, no strength to name
                    labels[ax] += [Label(strength_label(r.strength_axis, r.strength), r.utility_mean,
                                         r.attack_accuracy_mean, palette[name]) for r in rows.itertuples()]
            for i, (role, rows) in enumerate(panel.groupby("role", sort=False)):  # each adversary has its own prior
                prior = rows["prior_accuracy_mean"].mean()
                if pd.notna(prior):
                    ax.axhline(prior, linestyle=PRIOR_STYLES[i % len(PRIOR_STYLES)], color="grey",
                               label=f"prior: {role}" if role else "adversary prior")
            ax.set_xlabel(f"utility ({utility_label(panel['utility_metric'].iloc[0])})")
            features = "secret" in panel and (panel["secret"] == "features").all()
            ax.set_ylabel(f"{attack} reconstruction MSE (lower leaks more)" if features else f"{attack} attack accuracy")
            ax.set_title(f"{dataset}: {defense} ({phase})")
            ax.legend(fontsize=7)
            ax.grid(alpha=0.3)
        fig.tight_layout()
        for ax, placed in labels.items():  # once the layout is final: labels avoid each other and the markers
            place_labels(ax, placed)
        name = stem if len(groups) == 1 else f"{stem}_{attack}_{defense}_{phase}"
        out.mkdir(parents=True, exist_ok=True)
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            fig.savefig(path, dpi=130)
            written.append(path)
        plt.close(fig)
    return written
