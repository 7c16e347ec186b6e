"""Issue 26's cost check: one audit untuned and tuned (search budget 8), timed back to back in one run, each in a
fresh cache and store so neither reuses the other's trainings, priors or trials; prints the ratio and where the
attack time went.

    python benchmarks/tuned_audit.py                       # the default audit of splitnn on digits
    python benchmarks/tuned_audit.py --method fedhssl
    python benchmarks/tuned_audit.py --attacks mc,gc,similarity,mc-mixmatch --defenses iso,max-norm
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd


def audit(args: argparse.Namespace, out: Path, *, tuned: bool) -> float:
    """Wall seconds of one ``vflpriv audit`` in its own cache."""
    command = [sys.executable, "-m", "vflpriv", "audit", "--method", args.method, "--out", str(out),
               "--tune-attacks" if tuned else "--no-tune-attacks", "--search-budget", str(args.budget),
               "--jobs", str(args.jobs)]
    for flag in ("attacks", "defenses", "dataset", "seeds"):
        if getattr(args, flag):
            command += [f"--{flag}", getattr(args, flag)]
    env = {**os.environ, "VFLPRIV_CACHE": str(out / "cache")}
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def attack_seconds(out: Path) -> pd.Series:
    runs = pd.read_csv(out / "results.csv")
    return runs.groupby("attack")["attack_seconds"].sum()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--method", default="splitnn")
    parser.add_argument("--dataset")
    parser.add_argument("--attacks")
    parser.add_argument("--defenses")
    parser.add_argument("--seeds")
    parser.add_argument("--budget", type=int, default=8)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        plain, tuned = Path(tmp) / "untuned", Path(tmp) / "tuned"
        t_plain = audit(args, plain, tuned=False)
        t_tuned = audit(args, tuned, tuned=True)
        per_attack = pd.DataFrame({"untuned s": attack_seconds(plain), "tuned s": attack_seconds(tuned)})
    per_attack["ratio"] = per_attack["tuned s"] / per_attack["untuned s"]
    print(f"audit of {args.method} ({args.attacks or 'every attack'}; {args.defenses or 'every defense'}), "
          f"--jobs {args.jobs}, search budget {args.budget}")
    print(f"wall: untuned {t_plain:.1f} s, tuned {t_tuned:.1f} s, ratio {t_tuned / t_plain:.2f}x (target <= 3x)")
    print("attack CPU seconds summed over runs:")
    print(per_attack.round(2).to_string())


if __name__ == "__main__":
    main()
