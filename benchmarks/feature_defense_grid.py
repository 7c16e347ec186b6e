"""Issue 47's record: every defense that acts on what a feature attack reads, at its default strengths, against every
feature attack (fi-decoder, grn, fi-inversion by the active party on party 1's features), 3 seeds, on digits and
breast-cancer (splitnn), and the image analogue at a CPU-affordable scale (Fashion-MNIST halves, 3000 training rows,
MLP bottoms as ``encoder=auto`` picks for 28 x 14 halves, the four feature defenses against fi-decoder only: grn and
fi-inversion there were estimated at 76 minutes of the shared 2 cores; the CNN bottom is the ResSFL claim's,
``feature_defense_claims.py ressfl``).

Made by audits into one store (``COMMANDS``, the audit file ``results/feature_defense_grid/audit.yaml``); this script
reads the store and writes ``benchmarks/results/feature_defense_grid.md`` (per dataset: the undefended verdicts, per
defense and attack the feature CAP and the weakest strength at which the attack falls to the prior, the defenses
ranked, and utility / attack MSE / leakage at each strength) and ``feature_defense_grid.csv`` (every run).

    python benchmarks/feature_defense_grid.py --store /path/to/feature_defense_grid.sqlite
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from vflpriv.reports.features import feature_defenses, feature_verdicts
from vflpriv.reports.results import load_results
from vflpriv.tradeoff.cap import strength_label

RESULTS = Path(__file__).resolve().parent / "results"
AUDIT = "benchmarks/results/feature_defense_grid/audit.yaml"
COMMANDS = [f"VFLPRIV_CACHE=... vflpriv audit --method splitnn --config {AUDIT} --dataset D --out OUT/audit-D "
            "--store OUT/feature_defense_grid.sqlite --jobs 2   (D in digits, breast-cancer)",
            f"VFLPRIV_CACHE=... vflpriv audit --method splitnn --config {AUDIT} --dataset fashion-mnist --set "
            "dataset.max_samples=3000 --attacks fi-decoder,grn,fi-inversion "
            "--defenses nopeek,mid-sender,fi-adversarial,embedding-dp --out OUT/audit-fashion "
            "--store OUT/feature_defense_grid.sqlite --jobs 2",
            "python benchmarks/feature_defense_grid.py --store OUT/feature_defense_grid.sqlite"]
ATTACKS = ["fi-decoder", "grn", "fi-inversion"]
#: What the csv keeps of each run (the per-target errors and configs stay in the store).
COLUMNS = ["key", "training_key", "method", "dataset", "attack", "defense", "phase", "strength", "strength_axis", "seed",
           "adversary", "victim", "status", "error", "utility", "utility_metric", "attack_target", "n_targets",
           "feature_mse", "feature_mse_train", "prior_mse", "prior_kind", "prior_mse_mean", "prior_mse_regressor",
           "prior_mse_random", "leakage", "feature_psnr", "feature_ssim", "feature_exact_match", "epsilon_features",
           "epsilon_features_delta", "train_seconds", "attack_seconds"]


def _pm(values: pd.Series, fmt: str) -> str:
    values = pd.to_numeric(values, errors="coerce").dropna()
    spread = fmt.replace("+", "")
    return "n/a" if values.empty else f"{fmt.format(values.mean())} ± {spread.format(values.std(ddof=0))}"


def dataset_section(frame: pd.DataFrame, dataset: str) -> list[str]:
    part = frame[frame["dataset"] == dataset]
    attacks = [a for a in ATTACKS if a in set(part["attack"])]  # the image analogue runs fi-decoder only
    ok = part[part["status"] == "ok"]
    baseline, defended = ok[ok["defense"] == "none"], ok[ok["defense"] != "none"]
    verdicts = feature_verdicts(baseline)
    lines = [f"## {dataset}", "", f"{len(ok)} runs ok, {len(part) - len(ok)} failed; "
             f"undefended test utility {_pm(baseline.drop_duplicates('training_key')['utility'], '{:.3f}')}.", "",
             "Undefended (leakage = prior MSE - attack MSE; per-target paired test over the seeds):", ""]
    lines += [f"- {v['line']}" for v in verdicts if v["attack"] != "worst-case"]
    rows = feature_defenses(defended, verdicts=verdicts)
    lines += ["", "### Feature CAP (mean ± std over seeds) / the weakest strength at which the attack falls to the "
              "prior", "", "| defense | " + " | ".join(attacks) + " |", "|---|" + "---|" * len(attacks)]
    for defense in sorted({r["defense"] for r in rows}):
        cells = []
        for attack in attacks:
            r = next((r for r in rows if r["defense"] == defense and r["attack"] == attack), None)
            cells.append("" if r is None or r["cap"] is None else
                         f"{r['cap']:.3f} ± {r['cap_std'] or 0:.3f} / {r['falls_to_prior_text']}")
        lines.append(f"| {defense} | " + " | ".join(cells) + " |")
    ranked = []
    for attack in attacks:
        caps = sorted(((r["cap"], r["defense"]) for r in rows if r["attack"] == attack and r["cap"] is not None),
                      reverse=True)
        ranked.append(f"| {attack} | " + ", ".join(f"{d} {c:.3f}" for c, d in caps) + " |")
    lines += ["", "### Defenses ranked by feature CAP (higher: more utility kept and more of the prior's error "
              "restored)", "", "| attack | best first |", "|---|---|", *ranked]
    lines += ["", "### Per strength: test utility, attack MSE and leakage (mean ± std over seeds); the feature-DP ε "
              "where embedding-dp's claim holds", "",
              "| defense | strength | utility | " + " | ".join(f"{a} MSE / leakage" for a in attacks) + " | ε |",
              "|---|---|---|" + "---|" * len(attacks) + "---|"]
    keyed = ok.assign(defense=ok["defense"].where(ok["defense"] != "none", "none"))
    for (defense, strength), group in keyed.groupby(["defense", "strength"], sort=True):
        axis = str(group["strength_axis"].iloc[0]) if defense != "none" else ""
        cells = []
        for attack in attacks:
            g = group[group["attack"] == attack]
            cells.append(f"{_pm(g['feature_mse'], '{:.4f}')} / {_pm(g['leakage'], '{:+.4f}')}" if len(g) else "")
        eps = group["epsilon_features"] if "epsilon_features" in group else pd.Series(dtype=float)
        label = strength_label(axis, strength) if defense != "none" else "-"
        lines.append(f"| {defense} | {label} | {_pm(group.drop_duplicates('training_key')['utility'], '{:.3f}')} | "
                     + " | ".join(cells) + f" | {_pm(eps, '{:.3g}')} |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    frame = load_results(args.store)
    frame = frame[frame["secret"] == "features"]
    frame[[c for c in COLUMNS if c in frame]].to_csv(args.out / "feature_defense_grid.csv", index=False)
    lines = ["# Every feature defense against every feature attack (issue 47)", "",
             "Made with (2-vCPU VM shared with other jobs, torch CPU; attacks untuned, at their recipes):", "", "```",
             *COMMANDS, "```", "",
             "The active party attacks party 1's features; seeds 0, 1, 2; test rows scored; features min-max scaled "
             "to [0, 1]. Feature CAP = mean over the defense's default strengths of U x min(1, attack MSE / prior MSE) "
             "(U test accuracy on digits and Fashion-MNIST, AUC on breast-cancer). A defense is in the grid when it "
             "acts on what the attacks read (the audit's pairing by declaration and hook point); CAE, label DP and the "
             "gradient defenses touch no embedding and are not. A strength 'falls to the prior' when its own "
             "per-target paired test shows the leakage below 5% of the prior's MSE (verdict no) and no stronger one "
             "leaks; 'n/a: no leakage' where the attack does not beat the prior undefended.", ""]
    for dataset in dict.fromkeys(frame["dataset"]):
        lines += dataset_section(frame, dataset)
    (args.out / "feature_defense_grid.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {args.out / 'feature_defense_grid.md'}")


if __name__ == "__main__":
    main()
