"""Issue 35's record: the empirical epsilon of every defense at its audit strengths, from random-label canaries.

Runs ``vflpriv audit`` for splitnn and fedhssl on digits and breast-cancer with 100 and then 200 canaries (finetune
phase, every defense at its audit strengths, 3 seeds, attacks gc and mc, plus norm and direction on the binary task;
untuned attacks), then writes one Markdown file: per (method, dataset, canaries) the worst case over the attacks of
the pooled empirical epsilon at each defense strength, with the claimed epsilon where the defense has one, and what
the canaries cost. The partitions are widened so that 200 canaries leave real labels (digits: half the training rows
aligned, 400 labeled; breast-cancer: every row aligned, 380 labeled).

    python benchmarks/canary_audit.py --out benchmarks/results/canary_audit [--record benchmarks/results/canary_audit.md]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

SETTINGS = {
    "digits": ["--set", "partition.aligned_fraction=0.5", "--set", "partition.labeled=400", "--set", "partition.aux=80"],
    "breast-cancer": ["--set", "partition.aligned_fraction=1.0", "--set", "partition.labeled=380",
                      "--set", "partition.aux=20"],
}
ATTACKS = {"digits": "gc,mc", "breast-cancer": "gc,mc,norm,direction"}


def audit(method: str, dataset: str, canaries: int, out: Path, jobs: int) -> Path:
    folder = out / f"{method}-{dataset}-{canaries}"
    command = [sys.executable, "-m", "vflpriv", "audit", "--method", method, "--dataset", dataset, "--attacks",
               ATTACKS[dataset], "--phases", "finetune", "--seeds", "0,1,2", "--canaries", str(canaries),
               "--no-tune-attacks", "--jobs", str(jobs), "--out", str(folder), *SETTINGS[dataset]]
    start = time.time()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    print(f"{folder.name}: {time.time() - start:.0f} s", flush=True)
    return folder


def section(folder: Path) -> list[str]:
    summary = json.loads((folder / "audit.json").read_text())
    canaries = summary["canaries"]
    w, wo = canaries["utility_with"], canaries["utility_without"]
    lines = [f"### {summary['method']} on {summary['dataset']}, {canaries['canaries']} canaries", "",
             f"utility without a defense: {w['mean']:.3f} ± {w['std']:.3f} with the canaries, "
             f"{wo['mean']:.3f} ± {wo['std']:.3f} without", "",
             "| defense | strength | worst-case empirical ε (95%) | strongest attack | claimed ε | claim |",
             "| --- | --- | --- | --- | --- | --- |"]
    for row in canaries["rows"]:
        if row["attack"] != "worst-case":
            continue
        claimed = row.get("epsilon_claimed")
        verdict = "" if claimed is None else ("**violated**" if row["violated"] else "holds")
        bound = "n/a" if row["epsilon_lower"] is None else f"{row['epsilon_lower']:.2f}"
        lines.append(f"| {row['defense']} | {row['strength']:g} | {bound} | {row.get('strongest', '')} | "
                     f"{'' if claimed is None else f'{claimed:.2f}'} | {verdict} |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/canary_audit"))
    parser.add_argument("--record", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    folders = [audit(m, d, c, args.out, args.jobs) for c in (100, 200) for d in SETTINGS for m in ("splitnn", "fedhssl")]
    text = "\n".join(line for folder in folders for line in section(folder))
    print(text)
    if args.record:
        args.record.write_text(text + "\n")


if __name__ == "__main__":
    main()
