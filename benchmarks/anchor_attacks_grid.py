"""Issue 28's record: every attack x methods and protocols x ISO strengths, from the store the grids wrote.

The grids are ``benchmarks/results/anchor_attacks/grid_*.yaml``, run with the commands in ``COMMANDS`` into one
store; this script reads that store and writes ``anchor_attacks.md`` (per dataset: no defense, then the ISO
sweep) and ``anchor_attacks.csv`` (every run) beside the grid files.

    python benchmarks/anchor_attacks_grid.py --store /path/to/anchor_attacks.sqlite

Each method variant is the method with the protocol settings that differ (``finetune.top``,
``finetune.local_updates``, ``model.out_dim``); each attack cell is mean over seeds of the attack accuracy, the
prior's (A_SimSiam, on the same targets), leakage and the federation's utility. ``gc (spectral)`` is gc with
``method=spectral``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pandas as pd

from vflpriv.reports.results import load_results
from vflpriv.workflows.experiment import STORE_ONLY

HERE = Path(__file__).resolve().parent / "results" / "anchor_attacks"
GRIDS = ["grid_splitnn", "grid_methods", "grid_pretrain", "grid_dli_trained_top", "grid_dli_trained_top_binary",
         "grid_gc_spectral", "grid_bli_default"]
COMMANDS = [f"VFLPRIV_CACHE=... vflpriv sweep benchmarks/results/anchor_attacks/{g}.yaml --out OUT/{g} "
            f"--store OUT/anchor_attacks.sqlite --jobs 2" for g in GRIDS]
ATTACK_ORDER = ["mc", "mc-mixmatch", "mc-active", "similarity", "gc", "gc (spectral)", "dli", "bli", "bli (200 it.)",
                "norm", "direction", "exploit"]


def _variant(config: str) -> str:
    c = json.loads(config)
    ft, parts = c["finetune"], [c["method"]["name"]]
    if ft["top"] != "linear":
        parts.append(f"top={ft['top']}")
    if ft["local_updates"] != 1:
        parts.append(f"Q={ft['local_updates']}")
    if c["model"]["out_dim"] in (2, 10):
        parts.append(f"out_dim={c['model']['out_dim']}")
    return " ".join(parts)


def _attack(config: str) -> str:
    c = json.loads(config)["attack"]
    if c["name"] == "bli" and "iterations" not in c["options"]:
        return "bli (200 it.)"
    return c["name"] + (" (spectral)" if c["options"].get("method") == "spectral" else "")


def frame(store: Path) -> pd.DataFrame:
    runs = load_results(store)
    runs = runs.assign(variant=runs["config"].map(_variant), attack=runs["config"].map(_attack))
    return runs


def _pm(values: pd.Series) -> str:
    return f"{values.mean():.3f} ± {values.std(ddof=0):.3f}" if len(values) else ""


def no_defense(ok: pd.DataFrame, dataset: str, phase: str) -> list[str]:
    here = ok[(ok["dataset"] == dataset) & (ok["strength"] == 0.0) & (ok["phase"] == phase)]
    if here.empty:
        return []
    attacks = [a for a in ATTACK_ORDER if a in set(here["attack"])]
    lines = [f"### {dataset}, attacked phase {phase}, no defense: attack accuracy (leakage over the prior)", "",
             "| method | utility | " + " | ".join(attacks) + " | strongest |",
             "|---|---|" + "---|" * len(attacks) + "---|"]
    for variant, rows in sorted(here.groupby("variant")):
        cells, leaks = [], {}
        for a in attacks:
            r = rows[rows["attack"] == a]
            if r.empty:
                cells.append("n/a")
                continue
            leaks[a] = r["leakage"].mean()
            cells.append(f"{r['attack_accuracy'].mean():.3f} ({leaks[a]:+.3f})")
        strongest = max(leaks, key=leaks.get) if leaks else ""
        utility = rows[~rows["training_under_attack"]]["utility"]
        lines.append(f"| {variant} | {_pm(utility)} | " + " | ".join(cells) + f" | {strongest} |")
    return lines + [""]


def sweep_table(ok: pd.DataFrame, dataset: str, phase: str) -> list[str]:
    here = ok[(ok["dataset"] == dataset) & (ok["phase"] == phase)]
    if here.empty:
        return []
    strengths = sorted(here["strength"].unique())
    lines = [f"### {dataset}, {phase}: attack accuracy / prior / utility at each ISO strength (mean ± std over seeds)",
             "", "| method | attack | targets | " + " | ".join(f"λ={s:g}" for s in strengths) + " |",
             "|---|---|---|" + "---|" * len(strengths)]
    for (variant, attack), rows in sorted(here.groupby(["variant", "attack"]),
                                          key=lambda g: (g[0][0], ATTACK_ORDER.index(g[0][1]))):
        cells = []
        for s in strengths:
            r = rows[rows["strength"] == s]
            cells.append("" if r.empty else f"{r['attack_accuracy'].mean():.3f} ± {r['attack_accuracy'].std(ddof=0):.3f}"
                         f" / {r['prior_accuracy'].mean():.3f} / {r['utility'].mean():.3f}")
        lines.append(f"| {variant} | {attack} | {int(rows['n_targets'].median())} | " + " | ".join(cells) + " |")
    return lines + [""]


def checks(ok: pd.DataFrame) -> list[str]:
    """The anchors' qualitative claims, read off the no-defense runs."""
    none = ok[ok["strength"] == 0.0]
    out = ["## The anchors' qualitative results", ""]
    for dataset in ("digits", "breast-cancer"):
        d = none[none["dataset"] == dataset]
        dli = d[(d["attack"] == "dli") & d["variant"].str.contains("top=sum")]
        bli = d[(d["attack"] == "bli") & d["variant"].str.contains("top=sum")]
        bli_full = d[d["attack"] == "bli (200 it.)"]
        bli_lin = d[(d["attack"] == "bli") & (d["variant"] == "splitnn")]
        dli_tr = d[(d["attack"] == "dli") & d["variant"].str.contains("out_dim")]
        active = d[(d["attack"] == "mc-active")]
        passive = d[(d["attack"] == "mc-mixmatch")]
        out.append(f"- {dataset}: DLI on aggVFL (top=sum), no defense: accuracy {_pm(dli['attack_accuracy'])} over "
                   f"{len(dli)} runs (min {dli['attack_accuracy'].min():.3f}); under a trained Linear top with one "
                   f"output per class: {_pm(dli_tr['attack_accuracy'])}.")
        out.append(f"- {dataset}: BLI on its batch under top=sum: {_pm(bli_full['attack_accuracy'])} at its default 200 "
                   f"iterations, {_pm(bli['attack_accuracy'])} at the audit's 50; under the default "
                   f"trained Linear top (classes named by the aux labels): {_pm(bli_lin['attack_accuracy'])}, "
                   f"Hungarian bound {_pm(bli_lin['attack_accuracy_hungarian'])}.")
        for variant in sorted(set(active["variant"])):
            a, p = active[active["variant"] == variant], passive[passive["variant"] == variant]
            out.append(f"- {dataset}, {variant}: mc-active {_pm(a['attack_accuracy'])} (leakage "
                       f"{a['leakage'].mean():+.3f}; utility under attack {_pm(a['utility'])}) vs passive mc-mixmatch "
                       f"{_pm(p['attack_accuracy'])} (leakage {p['leakage'].mean():+.3f}; utility {_pm(p['utility'])}).")
    return out + [""]


def communication(ok: pd.DataFrame) -> list[str]:
    base = ok[(ok["method"] == "splitnn") & (ok["strength"] == 0.0) & (ok["attack"] == "gc")]
    lines = ["## Messages per training (FedSplitNN, no defense)", "",
             "| dataset | method | finetune messages | finetune MB | inference messages |", "|---|---|---|---|---|"]
    for (dataset, variant), rows in sorted(base.groupby(["dataset", "variant"])):
        lines.append(f"| {dataset} | {variant} | {rows['comm_messages_finetune'].mean():g} | "
                     f"{rows['comm_mb_finetune'].mean():.3f} | {rows['comm_messages_inference'].mean():g} |")
    return lines + [""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, required=True)
    args = parser.parse_args()
    runs = frame(args.store)
    runs.drop(columns=STORE_ONLY).to_csv(HERE / "anchor_attacks.csv", index=False)
    ok = runs[runs["status"] == "ok"]
    lines = ["# The anchors' label attacks on every method and protocol (issue 28)", "",
             "Made with (on a 2-vCPU VM, torch CPU):", "", "```", *COMMANDS,
             "python benchmarks/anchor_attacks_grid.py --store OUT/anchor_attacks.sqlite", "```", "",
             f"{len(ok)} runs ok, {int((runs['status'] == 'failed').sum())} failed, "
             f"{int((runs['status'] == 'n/a').sum())} n/a. Prior: A_SimSiam, on the same targets as the attack "
             "(test samples for mc, mc-mixmatch, mc-active and similarity; the train samples whose gradients were "
             "received for the gradient attacks; BLI's one batch). Leakage = attack − prior accuracy. Quick options "
             "for the costly attacks (mc-mixmatch and mc-active 10 x 50 steps, BLI 50 iterations, ExPLoit 200 "
             "passes). Attack x method cells that cannot run were set aside by the planner with the reason (see "
             "each grid's skipped.csv).", ""]
    lines += checks(ok)
    lines += communication(ok)
    for phase in ("finetune", "pretrain"):
        for dataset in ("digits", "breast-cancer"):
            lines += no_defense(ok, dataset, phase)
    for phase in ("finetune", "pretrain"):
        for dataset in ("digits", "breast-cancer"):
            lines += sweep_table(ok, dataset, phase)
    (HERE / "anchor_attacks.md").write_text("\n".join(lines) + "\n")
    print((HERE / "anchor_attacks.md").read_text())


if __name__ == "__main__":
    main()
