"""FedHSSL's central claim at the paper's scale (FedHSSL paper Table IV, Fig. 5 and 6): FedHSSL-SimSiam above
FedLocalSimSiam and FedSplitNN with 200 labels, and FedCSSL < FedGSSL < FedHSSL, on full Fashion-MNIST (two 28x14
halves) and on fashion-mnist-views (each party a full view of each item through its own camera: the paper's premise
of independent views), with the ablations of issue 39: the guidance target in eval mode, PMA without BatchNorm
statistics, PMA on the head only, and the finetune without BatchNorm re-estimation.

Meant for a CUDA machine (the paper's budget: 40 global iterations, batch 512, 60k rows, CNN encoders; about 10 s
per FedHSSL pretraining on an H100); on a CPU lower it with ``--max-samples`` and ``--iterations``:

    python benchmarks/fedhssl_full_scale.py --device cuda --jobs 6 --record benchmarks/results/fedhssl_full_scale.md
    python benchmarks/fedhssl_full_scale.py --device cpu --max-samples 6000 --iterations 10 --seeds 0,1,2

Every run goes into one store (``--out``/results.sqlite: rerun to resume); the record holds utility mean +- std
over seeds per dataset, method and ablation, and each claim with a one-sided Welch t-test over seeds.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pandas as pd
from scipy import stats

from vflpriv.common.console import make_console
from vflpriv.config.parse import merged
from vflpriv.config.presets import load as load_preset
from vflpriv.store.folders import default_store
from vflpriv.tradeoff.grid import expand
from vflpriv.workflows.experiment import run_grid

#: The paper's name of each method of the grid.
NAMES = {"splitnn": "FedSplitNN", "local-simsiam": "FedLocalSimSiam", "cssl-simsiam": "FedCSSL",
         "gssl-simsiam": "FedGSSL", "fedhssl-simsiam": "FedHSSL"}


def methods(iterations: int) -> list[dict]:
    """The grid's methods: the paper's, then FedHSSL's ablations (eval-mode guidance, PMA without BN statistics, PMA
    on the CNN's head only instead of conv2, conv3 and the head)."""
    fed = {"global_iterations": iterations}
    return [{"name": "splitnn"}, {"name": "local-simsiam", "options": {"epochs": iterations}},
            *({"name": n, "options": fed} for n in ("cssl-simsiam", "gssl-simsiam", "fedhssl-simsiam")),
            {"name": "fedhssl-simsiam", "options": {**fed, "guidance_mode": "eval"}},
            {"name": "fedhssl-simsiam", "options": {**fed, "pma_statistics": False}},
            {"name": "fedhssl-simsiam", "options": {**fed, "pma_top_blocks": 1}}]


#: (name, a-beats-b) claims of the paper, on the default finetune.
CLAIMS = [("FedHSSL > FedLocalSimSiam", "FedHSSL", "FedLocalSimSiam"),
          ("FedHSSL > FedSplitNN", "FedHSSL", "FedSplitNN"),
          ("FedGSSL > FedCSSL", "FedGSSL", "FedCSSL"), ("FedHSSL > FedGSSL", "FedHSSL", "FedGSSL")]


def label(config: str) -> str:
    """The row's method by the paper's name, with its ablation."""
    method = json.loads(config)["method"]
    options = method.get("options", {})
    name = NAMES.get(method["name"], method["name"])
    if options.get("guidance_mode") == "eval":
        return f"{name}, eval-mode guidance"
    if options.get("pma_statistics") is False:
        return f"{name}, PMA without BN statistics"
    if options.get("pma_top_blocks") == 1:
        return f"{name}, PMA on the head only"
    return name


def welch_p(a: pd.Series, b: pd.Series) -> float:
    """One-sided p of mean(a) > mean(b) (NaN with fewer than two seeds on a side)."""
    if len(a) < 2 or len(b) < 2:
        return math.nan
    return float(stats.ttest_ind(a, b, equal_var=False, alternative="greater").pvalue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--datasets", default="fashion-mnist,fashion-mnist-views")
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--iterations", type=int, default=40, help="global iterations (FedLocal: epochs)")
    parser.add_argument("--max-samples", type=int, default=None, help="training rows (default: all 60k)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("fedhssl-full-scale"))
    parser.add_argument("--record", type=Path, help="write the Markdown record here")
    args = parser.parse_args()
    data = [{"name": d, **({"max_samples": args.max_samples} if args.max_samples else {})}
            for d in args.datasets.split(",")]
    results = []
    for recalibrate in (True, False):
        grid = {"methods": methods(args.iterations), "datasets": data, "attacks": ["mc"], "attack": {"prior": "none"},
                "defenses": [], "seeds": [int(s) for s in args.seeds.split(",")], "jobs": args.jobs,
                "device": args.device, "finetune": {"bn_recalibrate": recalibrate},
                "model": {"encoder": "cnn"}}  # auto would give the 28x14 halves the MLP (the CNN needs 16 px a side)
        g = expand(merged(load_preset("fedhssl-paper"), grid), must_match=set())
        runs = run_grid(g, args.out, store_path=default_store(args.out), console=make_console(quiet=True),
                        show_progress=True, overwrite=True)
        results.append(runs.assign(recalibrated=recalibrate))
    frame = pd.concat(results, ignore_index=True)
    frame = frame[frame["status"] == "ok"].assign(label=lambda f: f["config"].map(label))
    lines = [f"# FedHSSL at scale: {args.datasets}, {args.max_samples or 'all'} training rows, {args.iterations} "
             f"iterations, seeds {args.seeds}, device {args.device}", "",
             "Utility (test accuracy) mean +- std over seeds; the fedhssl-paper preset (finetune batch 128 for "
             "images, BatchNorm re-estimated unless the column says not).", "",
             "| dataset | method | utility | without BN re-estimation | seeds |", "| --- | --- | --- | --- | --- |"]
    for (dataset, name), part in frame.groupby(["dataset", "label"], sort=False):
        cells = [part[part["recalibrated"] == r]["utility"] for r in (True, False)]
        shown = [f"{c.mean():.3f} +- {c.std(ddof=1):.3f}" if len(c) > 1 else (f"{c.mean():.3f}" if len(c) else "")
                 for c in cells]
        lines.append(f"| {dataset} | {name} | {shown[0]} | {shown[1]} | {len(cells[0])} |")
    lines += ["", "| dataset | claim | difference | one-sided Welch p | held (p < 0.05) |",
              "| --- | --- | --- | --- | --- |"]
    main_runs = frame[frame["recalibrated"]]
    for dataset, part in main_runs.groupby("dataset", sort=False):
        for claim, a, b in CLAIMS:
            ua, ub = (part[part["label"] == x]["utility"] for x in (a, b))
            p = welch_p(ua, ub)
            lines.append(f"| {dataset} | {claim} | {ua.mean() - ub.mean():+.3f} | {p:.3g} | "
                         f"{'held' if p < 0.05 else 'not held'} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.record:
        args.record.write_text(text)


if __name__ == "__main__":
    main()
