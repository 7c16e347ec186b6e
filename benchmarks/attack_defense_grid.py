"""Every attack against every defense on FedSplitNN (issue 4's closing measurement).

On digits (10 classes): ``mc``, ``mc-mixmatch`` and ``gc`` (aux-named and Hungarian accuracy); on
breast-cancer (binary): the same plus ``norm`` and ``direction`` (Li et al.'s leak AUC); and the gradient
attacks on breast-cancer once more with ``partition.aux_source=labeled`` (Li et al.'s adversary, who
knows a few training labels and receives their gradients: direction's reference is then a real
auxiliary positive, and gc names its clusters by the auxiliary gradients themselves). Each under
``iso`` at lambda 0 (= no defense), 1, 5, 25 and under every other defense that applies at two
strengths; 3 seeds. Every cell is ``vflpriv.runner.execution.run(RunConfig)[0]`` with the registered defaults, so
its numbers are those of ``vflpriv evaluate`` with the same settings, except that the adversary prior
is skipped (``attack.prior=none``: it draws from its own random stream, so attack and utility numbers
are unchanged, and A_SimSiam pretraining per seed would dominate the time). Breast-cancer uses 50%
aligned samples (the default 20% holds only 91 < 200 labeled ones).

    python benchmarks/attack_defense_grid.py [--seeds 0,1,2] [--jobs 2] [--rerun mc-mixmatch]

Runs go to ``benchmarks/results/attack_defense_grid.sqlite`` as they finish (a rerun resumes).
``attack_defense_grid.csv`` holds one row per run, ``attack_defense_grid.md`` the mean +- std over
seeds and, per attack and defense, whether the attack fell as the defense strengthened: leakage is the
accuracy (mc, mc-mixmatch, gc) or |leak AUC - 0.5| (norm, direction), compared from no defense
through the weaker to the stronger strength.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from vflpriv.config.schema import RunConfig
from vflpriv.store.sqlite import Store
from vflpriv.tradeoff.sweep import sweep
from vflpriv.workflows.experiment import STORE_ONLY

RESULTS = Path(__file__).resolve().parent / "results"
#: setting -> (dataset, partition, attacks)
SETTINGS = {
    "digits": ("digits", {}, ["mc", "mc-mixmatch", "gc"]),
    "breast-cancer": ("breast-cancer", {"aligned_fraction": 0.5}, ["mc", "mc-mixmatch", "gc", "norm", "direction"]),
    "breast-cancer, aux from the labeled set": (
        "breast-cancer", {"aligned_fraction": 0.5, "aux_source": "labeled"}, ["gc", "norm", "direction"]),
}
# weaker -> stronger; label-dp's axis is epsilon (lower = stronger)
DEFENSES = {"iso": [1.0, 5.0, 25.0], "max-norm": [0.5, 1.0], "marvell": [1.0, 4.0], "sparsify": [95.0, 99.0],
            "label-dp": [4.0, 1.0]}
METRICS = {"mc": ["attack_accuracy"], "mc-mixmatch": ["attack_accuracy"],
           "gc": ["attack_accuracy", "attack_accuracy_hungarian"],
           "norm": ["attack_leak_auc", "attack_accuracy"], "direction": ["attack_leak_auc", "attack_accuracy"]}
TOLERANCE = 0.02  # changes smaller than this count as "no change"


def configs(seeds: list[int]) -> list[RunConfig]:
    out = []
    for dataset, partition, attacks in SETTINGS.values():
        settings = [("iso", 0.0)] + [(d, s) for d, ss in DEFENSES.items() for s in ss
                                     if d != "marvell" or dataset == "breast-cancer"]
        for attack in attacks:
            for defense, strength in settings:
                for seed in seeds:
                    out.append(RunConfig.model_validate({
                        "dataset": {"name": dataset}, "partition": partition, "seed": seed,
                        "attack": {"name": attack, "prior": "none"},
                        "defenses": [{"name": defense, "strength": strength, "sweep": True}],
                    }))
    return out


def leakage(metric: str, value: float) -> float:
    return abs(value - 0.5) if metric.endswith("auc") else value


def verdict(values: list[float]) -> str:
    """values: leakage at no defense, weaker, stronger (and more for iso)."""
    fell = values[-1] < values[0] - TOLERANCE
    monotone = all(b <= a + TOLERANCE for a, b in zip(values, values[1:]))
    return "yes" if fell and monotone else "partly" if fell else "no"


def summarise(df: pd.DataFrame) -> str:
    ok = df[df["status"] == "ok"]
    ft = RunConfig().finetune
    lines = ["# Attack x defense grid (FedSplitNN, mean ± std over seeds)", "",
             f"Finetuning: {ft.optimizer} lr {ft.lr:g}, {ft.epochs} epochs, batch {ft.batch_size} (the defaults "
             "when this was written). "
             f"Runs: {len(ok)} ok of {len(df)}. Seeds: {sorted(ok['seed'].unique().tolist())}. "
             "Strength 0 of iso is no defense. label-dp strength is epsilon (lower = stronger). "
             "gc, norm and direction are scored on the train targets (the labeled samples whose gradients "
             "the adversary received, minus its auxiliary ones when those come from the labeled set); mc and "
             "mc-mixmatch on the test samples. 'fell' compares leakage (accuracy, or |leak AUC - 0.5|) "
             f"from no defense to the strongest setting, with tolerance {TOLERANCE}: yes = fell and never "
             "rose on the way, partly = fell but not monotonically.", ""]
    aux_source = ok["config"].map(lambda c: json.loads(c)["partition"]["aux_source"])
    for title, (dataset, partition, attacks) in SETTINGS.items():
        here = ok[(ok["dataset"] == dataset) & (aux_source == partition.get("aux_source", "unlabeled"))]
        base = here[(here["defense"] == "iso") & (here["strength"] == 0.0)]
        lines += [f"## {title}", "", "| attack | metric | defense | " + " | ".join(["none", "s1", "s2", "s3"])
                  + " | fell? |", "|---|---|---|---|---|---|---|---|"]
        for attack in attacks:
            for metric in METRICS[attack]:
                none = base[base["attack"] == attack][metric]
                for defense, strengths in DEFENSES.items():
                    rows = here[(here["attack"] == attack) & (here["defense"] == defense)]
                    if rows.empty:
                        continue
                    cells, means = [f"{none.mean():.3f} ± {none.std(ddof=0):.3f}"], [none.mean()]
                    for s in strengths:
                        v = rows[rows["strength"] == s][metric]
                        cells.append(f"{s:g}: {v.mean():.3f} ± {v.std(ddof=0):.3f}")
                        means.append(v.mean())
                    cells += [""] * (4 - len(cells))
                    fell = verdict([leakage(metric, m) for m in means])
                    lines.append(f"| {attack} | {metric.removeprefix('attack_')} | {defense} | " + " | ".join(cells)
                                 + f" | {fell} |")
        util = here.groupby(["defense", "strength"])["utility"].agg(mean="mean", std=lambda u: u.std(ddof=0))
        lines += ["", f"Utility ({title}, over all attacks' runs):", ""]
        lines += [f"- {d} {s:g}: {r['mean']:.3f} ± {r['std']:.3f}" for (d, s), r in util.iterrows()]
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--rerun", default="", help="attacks whose stored runs are recomputed (after a code change)")
    args = parser.parse_args()
    rerun = set(filter(None, args.rerun.split(",")))
    seeds = [int(s) for s in args.seeds.split(",")]
    RESULTS.mkdir(parents=True, exist_ok=True)
    grid = configs(seeds)
    with Store(RESULTS / "attack_defense_grid.sqlite") as store:
        store.forget([c.key() for c in grid if c.attack.name in rerun])
        df = sweep(grid, store, jobs=args.jobs, on_done=lambda records: [print(
            f"{r.dataset} {r.attack} {r.defense}={r.strength:g} seed {r.seed}: {r.status} "
            f"acc {r.attack_accuracy:.3f} ({r.train_seconds + r.attack_seconds:.0f}s)", flush=True) for r in records])
    df.drop(columns=STORE_ONLY).to_csv(RESULTS / "attack_defense_grid.csv", index=False)
    (RESULTS / "attack_defense_grid.md").write_text(summarise(df))
    print((RESULTS / "attack_defense_grid.md").read_text())


if __name__ == "__main__":
    main()
