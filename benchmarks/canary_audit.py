"""Issue 35's record: the empirical epsilon of every defense at its audit strengths, from random-label canaries.

Runs ``vflpriv audit`` for splitnn and fedhssl on digits and breast-cancer with 100 and then 200 canaries (finetune
phase, every defense at its audit strengths, 3 seeds, attacks gc and mc, plus norm and direction on the binary task;
untuned attacks), then writes one Markdown file: per (method, dataset, canaries) the worst case over the attacks of
the pooled empirical epsilon at each defense strength, with the claimed epsilon where the defense has one, and what
the canaries cost. The partitions are widened so that 200 canaries leave real labels (digits: half the training rows
aligned, 400 labeled; breast-cancer: every row aligned, 380 labeled).

    python benchmarks/canary_audit.py --out benchmarks/results/canary_audit [--record benchmarks/results/canary_audit.md]
        [--canaries 100,200] [--defenses none,label-dp,...]

Each check of a claim is the audit's: the worst case over the planned attacks with its cap (every canary guessed right),
"untestable" at or above the cap, "rejected at the 95% level" from the worst case with Holm over the audit's claims.
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


def audit(method: str, dataset: str, canaries: int, out: Path, jobs: int, defenses: str | None) -> Path:
    folder = out / f"{method}-{dataset}-{canaries}"
    command = [sys.executable, "-m", "vflpriv", "audit", "--method", method, "--dataset", dataset, "--attacks",
               ATTACKS[dataset], "--phases", "finetune", "--seeds", "0,1,2", "--canaries", str(canaries),
               "--no-tune-attacks", "--jobs", str(jobs), "--out", str(folder), *SETTINGS[dataset],
               *(["--defenses", defenses] if defenses else [])]
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
             "| defense | strength | worst-case empirical ε (95%) | strongest attack | cap | claimed ε | check |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for row in canaries["rows"]:
        if row["attack"] != "worst-case":
            continue
        bound = "n/a" if row["epsilon_lower"] is None else f"{row['epsilon_lower']:.2f}"
        delta = row.get("epsilon_lower_delta") or 0.0
        bound += f" at δ {delta:.0e}" if delta else " (pure)"
        lines.append(f"| {row['defense']} | {row['strength']:g} | {bound} | {row.get('strongest', '')} | "
                     f"{row['cap']:.2f} | {_claimed(row)} | {_check(row)} |")
    return lines + [""]


def _claimed(row: dict) -> str:
    claimed = row.get("epsilon_claimed")
    if claimed is None:
        return "n/a (" + row["claim_note"] + ")" if row.get("claim_note") else ""
    delta = row.get("epsilon_claimed_delta") or 0.0
    return f"{claimed:.2f}" + (f" at δ {delta:.0e}" if delta else " (pure)")


def _check(row: dict) -> str:
    if row.get("epsilon_claimed") is None:
        return ""
    if not row.get("testable"):
        return f"untestable with {int(row['canaries'])} canaries"
    if row.get("rejected"):
        return (f"**rejected at the 95% level** ({row['rejecting_attack']}: {row['rejecting_right']} of "
                f"{row['rejecting_guesses']} right, adjusted p = {row['p_value']:.2g})")
    return f"not rejected (adjusted p = {row['p_value']:.2g})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results/canary_audit"))
    parser.add_argument("--record", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--canaries", default="100,200", help="canary counts, comma-separated")
    parser.add_argument("--defenses", default=None, help="defenses, comma-separated (default: every registered one)")
    args = parser.parse_args()
    counts = [int(c) for c in args.canaries.split(",")]
    folders = [audit(m, d, c, args.out, args.jobs, args.defenses) for c in counts for d in SETTINGS
               for m in ("splitnn", "fedhssl")]
    text = "\n".join(line for folder in folders for line in section(folder))
    print(text)
    if args.record:
        args.record.write_text(text + "\n")


if __name__ == "__main__":
    main()
