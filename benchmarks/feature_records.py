"""Issue 46's records of feature leakage, from stores written by ``vflpriv evaluate``: one Markdown table per store
(mean ± std over seeds of utility, attack MSE, the feature prior's MSE and both its candidates', U(0,1) guesses',
VFLAIR's AP = 1 - MSE, PSNR and SSIM for images, leakage with the audit's verdict) and, for image victims, the grid
of targets, reconstructions and the prior's guesses (``reports.features.example_grids``).

    python benchmarks/feature_records.py STORE [STORE ...] --out benchmarks/results/features --title NAME \\
        --command "the command that wrote the stores"
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from vflpriv.reports.features import example_grids, who
from vflpriv.reports.results import load_results
from vflpriv.tradeoff.leakage import leakage_test

KEYS = ["method", "dataset", "attack", "adversary", "victim", "phase", "defense", "strength"]


def _ms(values: pd.Series, digits: int = 4) -> str:
    values = pd.to_numeric(values, errors="coerce").dropna()
    if values.empty:
        return "n/a"
    return f"{values.mean():.{digits}f} ± {values.std(ddof=0):.{digits}f}" if len(values) > 1 else \
        f"{values.mean():.{digits}f}"


def table(results: pd.DataFrame) -> list[str]:
    ok = results[(results["status"] == "ok") & (results["secret"] == "features")]
    lines = ["| method | attack | adversary → victim | phase | defense | seeds | utility | attack MSE | prior MSE "
             "(kind) | aux mean | ridge | U(0,1) | AP = 1 - MSE | PSNR | SSIM | leakage | verdict [95% CI] |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for keys, g in ok.groupby(KEYS, sort=False):
        row = dict(zip(KEYS, keys))
        test = leakage_test(g)
        kinds = "/".join(f"{k} {n}" for k, n in g["prior_kind"].value_counts().items())
        defense = "none" if row["defense"] == "none" else f"{row['defense']} {row['strength']:g}"
        lines.append(
            f"| {row['method']} | {row['attack']} | {who(str(row['adversary']))} → party {row['victim']} | "
            f"{row['phase']} | {defense} | {len(g)} | {_ms(g['utility'], 3)} | {_ms(g['feature_mse'])} | "
            f"{_ms(g['prior_mse'])} ({kinds}) | {_ms(g['prior_mse_mean'])} | {_ms(g['prior_mse_regressor'])} | "
            f"{_ms(g['prior_mse_random'])} | {_ms(g['feature_ap'])} | {_ms(g['feature_psnr'], 2)} | "
            f"{_ms(g['feature_ssim'], 3)} | {_ms(g['leakage'])} | {test.verdict} [{test.ci_low:+.4f}, "
            f"{test.ci_high:+.4f}] |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stores", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--title", required=True)
    parser.add_argument("--command", action="append", default=[])
    parser.add_argument("--note", default="")
    args = parser.parse_args()
    results = pd.concat([load_results(s) for s in args.stores], ignore_index=True)
    args.out.mkdir(parents=True, exist_ok=True)
    grids = example_grids(results, args.out)
    lines = [f"# {args.title}", "", "Reproduce:", "", *(f"    {c}" for c in args.command),
             f"    python benchmarks/feature_records.py {' '.join(map(str, args.stores))} --out {args.out} ...", "",
             args.note, "", *table(results), "", *(f"![{p.stem}]({p.name})" for p in grids)]
    (args.out / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
