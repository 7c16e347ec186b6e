"""The audit's verdicts per target vs over seeds, on the same records (issue 26, item 2).

For every (attack, phase) of an audit's undefended runs: the per-target paired test the audit uses (McNemar's
variance per seed, DerSimonian-Laird random effects over seeds) and the paired t-test over seeds it replaced, each
with its 95% interval and verdict. Reads the audit's store only.

    python benchmarks/verdict_power.py AUDIT_OUT [--margin 0.02]
"""

from __future__ import annotations

import argparse
from pathlib import Path

from vflpriv import load_results
from vflpriv.store.folders import STORE_NAME
from vflpriv.tradeoff.leakage import MARGIN, leakage_test, paired_leakage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path, help=f"the audit's output directory (or its {STORE_NAME})")
    parser.add_argument("--margin", type=float, default=MARGIN)
    args = parser.parse_args()
    runs = load_results(args.out)
    plain = runs[(runs["defense"] == "none") & (runs["status"] == "ok")]
    print("| attack | phase | seeds | targets | per target: leakage [95% CI] | verdict | over seeds: [95% CI] "
          "| verdict |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for (attack, phase), rows in plain.groupby(["attack", "phase"]):
        rows = rows.sort_values("seed")
        sample = leakage_test(rows, margin=args.margin)
        seeds = paired_leakage(rows["attack_accuracy"].to_numpy(), rows["prior_accuracy"].to_numpy(),
                               margin=args.margin)
        print(f"| {attack} | {phase} | {len(rows)} | {sample.n_targets} | {sample.leakage:+.3f} "
              f"[{sample.ci_low:+.3f}, {sample.ci_high:+.3f}] | {sample.verdict} | "
              f"[{seeds.ci_low:+.3f}, {seeds.ci_high:+.3f}] | {seeds.verdict} |")


if __name__ == "__main__":
    main()
