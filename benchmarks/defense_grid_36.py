"""Issue 36's record: every defense, old and new, and the free baseline of a deeper top, against mc, mc-mixmatch, gc,
similarity and dli on splitnn and fedhssl, digits and breast-cancer, 3 seeds, with each setting's empirical epsilon.

Runs ``vflpriv audit`` per (method, dataset): the finetune phase, every registered defense at its audit strengths,
untuned attacks, the audit's default canaries; then the same without a defense at ``finetune.top_depth`` 1 and 2.
Writes one Markdown file: per (method, dataset) the defenses ranked by worst-case CAP (the strongest applicable attack
at each strength and seed, the prior included), with DCS (worst case), the utility at the strongest audit strength,
the strength at which the worst case falls to the prior, and the worst-case empirical epsilon at the strongest
strength beside the claimed one; and the top_depth baselines' worst-case leakage and utility.

    python benchmarks/defense_grid_36.py --out /tmp/defense_grid_36 --record benchmarks/results/defense_grid_36.md
        [--elsewhere fedpass,peloss] [--skip nopeek,...] [--datasets breast-cancer]

``--elsewhere`` leaves defenses out of the audits and marks their rows as rerun under another issue (FedPass's key and
PELoss's normalisation change under issue 48b); ``--skip`` leaves defenses out with no row (the feature defenses of
issue 47, which defend no label); ``--datasets`` runs some of the halves. The empirical column is the audit's check:
the worst case's bound, its cap, and the claimed epsilon's check (untestable at or above the cap; rejected only from
the worst case, Holm over the audit's claims).
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd

ATTACKS = "mc,mc-mixmatch,gc,similarity,dli"


def defenses_but(elsewhere: list[str]) -> str:
    """Every registered defense but ``elsewhere``, comma-separated (what the audits run)."""
    from vflpriv.config.registry import DEFENSES

    return ",".join(n for n in DEFENSES.names() if n not in elsewhere)


def audit(method: str, dataset: str, out: Path, jobs: int, *extra: str) -> Path:
    command = [sys.executable, "-m", "vflpriv", "audit", "--method", method, "--dataset", dataset, "--attacks", ATTACKS,
               "--phases", "finetune", "--seeds", "0,1,2", "--no-tune-attacks", "--jobs", str(jobs), "--out", str(out),
               *extra]
    start = time.time()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    print(f"{out.name}: {time.time() - start:.0f} s", flush=True)
    return out


def _fmt(value, spec: str = "{:.3f}") -> str:
    return "n/a" if value is None or (isinstance(value, float) and not math.isfinite(value)) else spec.format(value)


def empirical(emp: dict) -> str:
    """The worst case's bound at the strongest strength, its cap, and the claim's check."""
    if not emp:
        return "n/a"
    delta = emp.get("epsilon_lower_delta") or 0.0
    text = f"{_fmt(emp.get('epsilon_lower'), '{:.2f}')} (cap {_fmt(emp.get('cap'), '{:.2f}')}"
    text += f", at δ {delta:.0e})" if delta else ", pure)"
    claimed = emp.get("epsilon_claimed")
    if claimed is None:
        return text
    cdelta = emp.get("epsilon_claimed_delta") or 0.0
    claim = f"claimed {claimed:.2f}" + (f" at δ {cdelta:.0e}" if cdelta else " (pure)")
    if not emp.get("testable"):
        return f"{text}; {claim}: untestable"
    return f"{text}; {claim}: " + ("**rejected at 95%**" if emp.get("rejected") else "not rejected")


def section(folder: Path, baselines: list[Path], elsewhere: list[str]) -> list[str]:
    summary = json.loads((folder / "audit.json").read_text())
    caps = pd.read_csv(folder / "tables" / "cap_tables.csv") if (folder / "tables" / "cap_tables.csv").exists() else None
    canaries = {(r["defense"], r["strength"]): r for r in (summary.get("canaries") or {}).get("rows", [])
                if r["attack"] == "worst-case"}
    frame = pd.read_csv(folder / "results.csv")
    rows = []
    for d in summary["defenses"]:
        if d["attack"] != "worst-case":
            continue
        strongest = d["strengths"][-1]
        at = frame[(frame["defense"] == d["defense"]) & (frame["strength"] == strongest) & (frame["status"] == "ok")]
        dcs = None
        if caps is not None:
            hit = caps[(caps["attack"] == "worst-case") & (caps["defense"] == d["defense"])]
            dcs = float(hit["dcs"].iloc[0]) if len(hit) and "dcs" in hit else None
        emp = canaries.get((d["defense"], strongest), {})
        rows.append((d["cap"] if d["cap"] is not None else -1, d["defense"], d, at["utility"].mean(), dcs, emp))
    lines = [f"### {summary['method']} on {summary['dataset']}", "",
             "| defense | worst-case CAP | DCS | utility at the strongest strength | falls to the prior at | "
             "empirical ε at the strongest (claimed) |", "| --- | --- | --- | --- | --- | --- |"]
    for _, name, d, utility, dcs, emp in sorted(rows, key=lambda r: -r[0]):
        lines.append(f"| {name} | {_fmt(d['cap'])} ± {_fmt(d['cap_std'])} | {_fmt(dcs)} | {_fmt(utility)} | "
                     f"{d['falls_to_prior_text']} | {empirical(emp)} |")
    lines += [f"| {name} | rerun under issue 48b | | | | |" for name in elsewhere]
    claims = [r for r in (summary.get("canaries") or {}).get("rows", [])
              if r["attack"] == "worst-case" and r.get("epsilon_claimed") is not None]
    if claims:
        lines += ["", "Every claimed epsilon of this audit, checked (worst case over the planned attacks, Holm over "
                      f"these {len(claims)} claims):", ""]
        lines += [f"- {r['defense']} {r['axis']}={r['strength']:g}: {empirical(r)}" + (
            f" (adjusted p = {r['p_value']:.2g})" if r.get("testable") else "") for r in claims]
    lines += ["", "Without a defense, by the depth of the active party's top (worst case over the attacks):", "",
              "| top_depth | utility | worst-case leakage | strongest attack |", "| --- | --- | --- | --- |"]
    for depth, path in enumerate([folder, *baselines]):
        verdicts = json.loads((path / "audit.json").read_text())["verdicts"]
        worst = next((v for v in verdicts if v["attack"] == "worst-case"), None)
        if worst is None and verdicts:
            worst = max(verdicts, key=lambda v: v["leakage"] or -1)
        lines.append(f"| {depth} | {_fmt(worst and worst['utility'])} | {_fmt(worst and worst['leakage'], '{:+.3f}')} | "
                     f"{(worst or {}).get('strongest', (worst or {}).get('attack', ''))} |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("/tmp/defense_grid_36"))
    parser.add_argument("--record", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--elsewhere", default="", help="defenses rerun under another issue, comma-separated")
    parser.add_argument("--skip", default="", help="defenses left out of the grid with no row, comma-separated")
    parser.add_argument("--datasets", default="digits,breast-cancer", help="which halves to run, comma-separated")
    args = parser.parse_args()
    elsewhere = [n for n in args.elsewhere.split(",") if n]
    skipped = [n for n in args.skip.split(",") if n]
    extra = ["--defenses", defenses_but(elsewhere + skipped)] if elsewhere or skipped else []
    text = []
    for dataset in args.datasets.split(","):
        for method in ("splitnn", "fedhssl"):
            main_audit = audit(method, dataset, args.out / f"{method}-{dataset}", args.jobs, *extra)
            subprocess.run([sys.executable, "-m", "vflpriv", "table", str(main_audit), "--out", str(main_audit / "tables")],
                           check=True, stdout=subprocess.DEVNULL)
            deeper = [audit(method, dataset, args.out / f"{method}-{dataset}-depth{d}", args.jobs, "--defenses", "none",
                            "--set", f"finetune.top_depth={d}") for d in (1, 2)]
            text += section(main_audit, deeper, elsewhere)
            print("\n".join(text), flush=True)
    if args.record:
        args.record.write_text("\n".join(text) + "\n")


if __name__ == "__main__":
    main()
