"""Privacy-utility plots from records only (x: utility, y: attack accuracy, or a feature attack's MSE, one line per
method, and for a feature attack per adversary and victim).

One figure per (attack, defense, phase), one panel per dataset: each method (and variant) is a line
through its strengths, with error bars over seeds and each point labelled with its strength on the
defense's own axis, placed so that no two labels overlap (``vflpriv.reports.labels``); the adversary's prior
(mean over seeds) is the dashed line. ``by_defense``: one figure per (attack, phase) instead, a line per defense
(and method), the undefended training a star: every defense against one attack at a glance (the report's form).
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.colors import to_rgb  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from vflpriv.reports.labels import Label, place_labels  # noqa: E402
from vflpriv.reports.tables import utility_label  # noqa: E402
from vflpriv.tradeoff.cap import strength_label  # noqa: E402

CONTEXT = ["attack", "defense", "phase"]
FORMATS = ("png", "svg", "pdf")
#: The priors' line styles, one per adversary and victim on a panel.
PRIOR_STYLES = ("--", ":", "-.")
#: seaborn's "colorblind" palette (``seaborn.palettes.SEABORN_PALETTES``), the lines' colours up to 10 lines: seaborn
#: itself (its import brings scipy.stats, about 0.9 CPU s of a command's report) only for husl beyond that.
COLORBLIND = ("#0173B2", "#DE8F05", "#029E73", "#D55E00", "#CC78BC", "#CA9161", "#FBAFE4", "#949494", "#ECE133",
              "#56B4E9")
#: Above this many lines in a panel the points are not labelled (the report's table beside gives each strength).
MAX_LABELLED_LINES = 6


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


def _weak_to_strong(rows: pd.DataFrame) -> pd.DataFrame:
    """A line's points in the order of its defense's axis, weakest first (epsilon: the highest first)."""
    lower = "strength_stronger" in rows and bool((rows["strength_stronger"] == "lower").any())
    return rows.sort_values("strength", ascending=not lower)


def tradeoff_figures(
    summary: pd.DataFrame, out: Path, *, stem: str = "tradeoff", formats: tuple[str, ...] = FORMATS,
    by_defense: bool = False, dpi: int = 130,
) -> list[Path]:
    """Write the figures of ``summary`` (:func:`vflpriv.tradeoff.cap.strength_summary`); returns the files.

    With one figure the files are ``{stem}.{format}``, else ``{stem}_{attack}_{defense}_{phase}`` (``by_defense``:
    ``{stem}_{attack}_{phase}``, one line per defense and method).
    """
    summary = summary.assign(variant=summary["variant"] if "variant" in summary else "")
    summary = summary.assign(role=[_role(r) for r in summary.itertuples()])  # one line per adversary and victim
    context = ["attack", "phase"] if by_defense else CONTEXT
    groups = list(summary.groupby(context, sort=False))
    names = [_line(_name(m, v, d, summary, by_defense), "", role) for m, v, d, role in
             zip(summary["method"], summary["variant"], summary["defense"], summary["role"])]
    lines = sorted(set(names))
    colours = palette_of(len(lines))
    palette = dict(zip(lines, colours))
    summary = summary.assign(line=names)
    written = []
    for keys, part in groups:
        attack, phase = keys[0], keys[-1]
        part = summary.loc[part.index]
        datasets = list(dict.fromkeys(part["dataset"]))
        fig, axes = plt.subplots(1, len(datasets), figsize=(5.2 * len(datasets), 4.4), squeeze=False)
        labels: dict = {ax: [] for ax in axes[0]}
        for ax, dataset in zip(axes[0], datasets):
            panel = part[part["dataset"] == dataset]
            labelled = panel["line"].nunique() <= MAX_LABELLED_LINES
            for name, rows in sorted(panel.groupby("line", sort=False), key=lambda g: (g[1]["defense"].iloc[0] != "none",
                                                                                     g[0])):
                rows = _weak_to_strong(rows)
                undefended = rows["defense"].iloc[0] == "none"
                ax.errorbar(rows["utility_mean"], rows["attack_accuracy_mean"], xerr=rows["utility_std"],
                            yerr=rows["attack_accuracy_std"], marker="*" if undefended and by_defense else "o",
                            markersize=10 if undefended and by_defense else 5, color=palette[name], label=name,
                            capsize=2)
                if not undefended and labelled:  # no defense: one point per method, no strength to name
                    labels[ax] += [Label(strength_label(r.strength_axis, r.strength), r.utility_mean,
                                         r.attack_accuracy_mean, palette[name]) for r in rows.itertuples()]
            for i, (role, rows) in enumerate(panel.groupby("role", sort=False)):  # each adversary has its own prior
                prior = rows["prior_accuracy_mean"].mean()
                if pd.notna(prior):
                    ax.axhline(prior, linestyle=PRIOR_STYLES[i % len(PRIOR_STYLES)], color="grey",
                               label=f"prior: {role}" if role else "adversary prior")
            ax.set_xlabel(f"utility ({utility_label(panel['utility_metric'].iloc[0])})")
            ax.xaxis.set_major_locator(MaxNLocator(nbins=5))  # a narrow range's 0.87250-wide labels ran together
            features = "secret" in panel and (panel["secret"] == "features").all()
            ax.set_ylabel(f"{attack} reconstruction MSE (lower leaks more)" if features else f"{attack} attack accuracy")
            ax.set_title(f"{dataset}: {attack} ({phase})" if by_defense else f"{dataset}: {keys[1]} ({phase})")
            ax.legend(fontsize=6 if by_defense else 7, ncol=2 if panel["line"].nunique() > 8 else 1)
            ax.grid(alpha=0.3)
        fig.tight_layout()
        for ax, placed in labels.items():  # once the layout is final: labels avoid each other and the markers
            place_labels(ax, placed)
        name = stem if len(groups) == 1 else f"{stem}_{'_'.join(map(str, keys))}"
        out.mkdir(parents=True, exist_ok=True)
        for fmt in formats:
            path = out / f"{name}.{fmt}"
            fig.savefig(path, dpi=dpi)
            written.append(path)
        plt.close(fig)
    return written


def palette_of(n: int) -> list[tuple[float, float, float]]:
    """``n`` line colours: seaborn's ``color_palette("colorblind", n)`` up to 10, ``color_palette("husl", n)`` above."""
    if n <= len(COLORBLIND):
        return [to_rgb(c) for c in COLORBLIND[:n]]
    import seaborn as sns

    return sns.color_palette("husl", n)


def _name(method: str, variant: str, defense: str, summary: pd.DataFrame, by_defense: bool) -> str:
    """A line's legend entry: the method (and variant), with the defense where lines are per defense (alone where
    one method is drawn)."""
    if not by_defense:
        return _line(method, variant)
    defended = "no defense" if defense == "none" else defense
    one = summary[["method", "variant"]].drop_duplicates().shape[0] == 1
    return defended if one else f"{_line(method, variant)}: {defended}"
