"""Two audits of one method compared (issue 49): does the cheaper audit measure what 0c34d33's measured?

For every verdict, CAP and empirical epsilon of ``audit.json``, the two values and whether they agree within their
own 95% confidence intervals:

- a verdict's leakage: the difference of the two, z-tested with the standard errors read off each 95% interval;
- a CAP: the difference, Welch-tested over the seeds of each (mean, std, seeds);
- an empirical epsilon: the canary accuracies it comes from (Newcombe's interval for the difference of two
  proportions, from Wilson's);

and, from the two stores, each attack's accuracy per (defense, strength) compared target by target on the same
trainings (``tradeoff.leakage.sample_paired_leakage``: the new run's hits against the old's, as attack against
prior), so that a cheaper recipe is shown to reach the same accuracy on every training of the grid. Where two
values differ it says why, from what the change between the two audits touched (``--why``).

    python benchmarks/compare_audits.py BASE_OUT NEW_OUT [--record FILE]
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import statistics
import sys
from collections import defaultdict
from pathlib import Path

from scipy import stats

from vflpriv.store.folders import STORE_NAME, default_store
from vflpriv.tradeoff.leakage import sample_paired_leakage

Z = 1.959963984540054

#: What changed between 0c34d33 and this branch that can move a number, and where (attack or defense names): issue
#: 49's changes, and main's since 0c34d33 (issues 46, 48, 50), which changed some defaults of the audit.
CAE_WHY = ("CAE's autoencoder: its gradients written out (issue 49; float rounding, carried through its 4700 Adam "
           "steps: another autoencoder of the same recipe)")
WHY = {
    "mc-active": "the active-adversary policy (issue 49: its CAP is not computed where it ran at the weakest "
                 "strength only)",
    "cae": CAE_WHY,
    "dcae": CAE_WHY,
    "label-dp": "label-dp's audit strengths eps 4, 2, 1 (were 8, 2, 1) and LP-2ST's stage share (issue 48)",
    "alibi": "alibi's audit strengths eps 4, 2, 1 (were 8, 2, 1) and its model prior (issue 48)",
    "dp-gaussian": "dp-gaussian's audit strengths: the sigma spending eps 4, 2, 1 (issue 48)",
    "peloss": "PELoss's normalisation and audit strengths alpha 0.5, 2, 8 (issue 48)",
    "fedpass": "FedPass's one-row key (issue 48)",
    "bli": "bli left out of the default audit under a trained top (issue 50)",
    "worst-case": "the worst case over the attacks, among them those changed here",
}

def why(*names: str) -> str:
    reasons = [WHY[n] for n in names if n in WHY]
    return "; ".join(dict.fromkeys(reasons)) or ("none of its defaults changed since 0c34d33, its trainings did "
                                                 "(canary labels from a secret key, issue 48a): a new draw")


def wilson(k: float, n: int) -> tuple[float, float]:
    if n == 0:
        return 0.0, 1.0
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return centre - half, centre + half


def newcombe(p1: float, n1: int, p2: float, n2: int) -> tuple[float, float]:
    """95% interval of p1 - p2 (Newcombe 1998, method 10)."""
    l1, u1 = wilson(p1 * n1, n1)
    l2, u2 = wilson(p2 * n2, n2)
    d = p1 - p2
    return d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2), d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)


def welch(m1, s1, n1, m2, s2, n2) -> tuple[float, float]:
    """95% interval of m1 - m2 from two means over seeds (Welch-Satterthwaite degrees of freedom)."""
    v1, v2 = (s1 or 0.0) ** 2 / n1, (s2 or 0.0) ** 2 / n2
    if v1 + v2 == 0:
        return m1 - m2, m1 - m2
    df = (v1 + v2) ** 2 / ((v1 ** 2 / (n1 - 1) if n1 > 1 else 0) + (v2 ** 2 / (n2 - 1) if n2 > 1 else 0) or 1e-12)
    half = stats.t.ppf(0.975, max(df, 1.0)) * math.sqrt(v1 + v2)
    return m1 - m2 - half, m1 - m2 + half


def status(a, b, interval) -> str:
    if a == b:
        return "identical"
    low, high = interval
    return "agrees" if low <= 0 <= high else "DIFFERS"


def verdicts(base: dict, new: dict) -> list[dict]:
    old = {(v["adversary"], v["attack"], v["phase"]): v for v in base["verdicts"]}
    rows = []
    for v in new["verdicts"]:
        key = (v["adversary"], v["attack"], v["phase"])
        o = old.get(key)
        if o is None or o["leakage"] is None or v["leakage"] is None:
            rows.append({"what": key, "base": o and o["verdict"], "new": v["verdict"], "status": "only one side"})
            continue
        se = math.hypot((o["ci_high"] - o["ci_low"]) / (2 * Z), (v["ci_high"] - v["ci_low"]) / (2 * Z))
        d = v["leakage"] - o["leakage"]
        st = status(o["leakage"], v["leakage"], (d - Z * se, d + Z * se))
        rows.append({"what": key, "base": f"{o['verdict']} {o['leakage']:+.3f} [{o['ci_low']:+.3f}, {o['ci_high']:+.3f}]",
                     "new": f"{v['verdict']} {v['leakage']:+.3f} [{v['ci_low']:+.3f}, {v['ci_high']:+.3f}]",
                     "status": st + ("" if o["verdict"] == v["verdict"] else " (verdict changed)"),
                     "why": "" if st == "identical" else why(v["attack"], v.get("strongest") or "")})
    return rows


def caps(base: dict, new: dict) -> list[dict]:
    old = {(d["adversary"], d["attack"], d["phase"], d["defense"]): d for d in base["defenses"]}
    rows = []
    for d in new["defenses"]:
        variant = d.get("variant") or ""
        key = (d["adversary"], d["attack"], d["phase"], d["defense"] + (f" {variant}" if variant else ""))
        # 0c34d33 ran each defense in its default configuration only (a configuration's rows were not named then):
        # a variant on the embeddings is new, never its old namesake on the gradients
        o = None if variant == "on embedding" else old.get((d["adversary"], d["attack"], d["phase"], d["defense"]))
        if o is None or o["cap"] is None or d["cap"] is None:
            rows.append({"what": key, "base": o and (o["cap"] if o["cap"] is not None else o["cap_status"]),
                         "new": d["cap"] if d["cap"] is not None else d["cap_status"],
                         "status": "not compared", "why": why(d["attack"], d["defense"]) if d["cap"] is None else ""})
            continue
        interval = welch(d["cap"], d["cap_std"], d["seeds"], o["cap"], o["cap_std"], o["seeds"])
        st = status(o["cap"], d["cap"], interval)
        rows.append({"what": key, "base": f"{o['cap']:.4f} ± {o['cap_std'] or 0:.4f}",
                     "new": f"{d['cap']:.4f} ± {d['cap_std'] or 0:.4f}", "status": st,
                     "why": "" if st == "identical" else why(d["attack"], d["defense"])})
    return rows


def accuracy(row: dict) -> float:
    """A canary row's accuracy of the guesses its epsilon comes from (``canary_accuracy`` at 0c34d33, the selected
    entry's since issue 48a)."""
    value = row.get("canary_accuracy_selected", row.get("canary_accuracy"))
    return 0.0 if value is None or value != value else value


def epsilons(base: dict, new: dict) -> list[dict]:
    def index(summary):
        rows = (summary.get("canaries") or {}).get("rows", [])
        return {(r["defense"] + (f" {r['variant']}" if r.get("variant") else ""), r["strength"], r["phase"],
                 r["attack"]): r for r in rows}

    old, rows = index(base), []
    for key, r in index(new).items():
        o = old.get(key)
        if o is None:
            rows.append({"what": key, "base": None, "new": r["epsilon_lower"], "status": "only one side",
                         "why": why(r["attack"], r["defense"])})
            continue
        p1, n1 = accuracy(r), int(r["canary_guesses"] or 0)
        p2, n2 = accuracy(o), int(o["canary_guesses"] or 0)
        st = status((o["epsilon_lower"], p2, n2), (r["epsilon_lower"], p1, n1), newcombe(p1, n1, p2, n2))
        rows.append({"what": key, "base": f"{o['epsilon_lower']:.2f} ({p2:.3f} of {n2})",
                     "new": f"{r['epsilon_lower']:.2f} ({p1:.3f} of {n1})", "status": st,
                     "why": "" if st == "identical" else why(r["attack"], r["defense"], r.get("strongest") or "")})
    return rows


def records(path: Path) -> dict[tuple, dict]:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        found = {}
        for (text,) in db.execute("select record from runs"):
            r = json.loads(text)
            if r["status"] == "ok" and r.get("secret", "labels") == "labels":  # features: their verdicts above
                kinds = [",".join(d.get("kinds") or []) for d in json.loads(r["config"])["defenses"]]
                defense = r["defense"] + "".join(f" on {k}" for k in kinds if k)  # a configuration of its own
                found[(r["attack"], defense, r["phase"], r["strength"], r["canaries"], r["seed"])] = r
        return found


def per_training(base_store: Path, new_store: Path) -> list[dict]:
    """Per (attack, defense, strength): the new accuracy against the old, target by target on the same trainings."""
    old, new = records(base_store), records(new_store)
    groups: dict[tuple, list[tuple[dict, dict]]] = defaultdict(list)
    for key in sorted(set(old) & set(new), key=str):
        groups[key[:5]].append((old[key], new[key]))
    rows = []
    for (attack, defense, phase, strength, canaries), pairs in groups.items():
        usable = [(o, n) for o, n in pairs if o.get("attack_hits") and len(o["attack_hits"]) == len(n["attack_hits"] or "")]
        same = sum(o["training_key"] == n["training_key"] for o, n in pairs)
        row = {"attack": attack, "defense": defense, "phase": phase, "strength": strength, "canaries": canaries,
               "seeds": len(pairs), "same_training": same,
               "base": statistics.fmean(o["attack_accuracy"] for o, _ in pairs),
               "new": statistics.fmean(n["attack_accuracy"] for _, n in pairs)}
        if usable and all(o["attack_hits"] == n["attack_hits"] for o, n in usable):
            row.update(diff=0.0, low=0.0, high=0.0, status="identical")
        elif usable:
            test = sample_paired_leakage([n["attack_hits"] for _, n in usable], [o["attack_hits"] for o, _ in usable])
            row.update(diff=test.leakage, low=test.ci_low, high=test.ci_high,
                       status="agrees" if test.ci_low <= 0 <= test.ci_high else
                       ("higher" if test.ci_low > 0 else "LOWER"))
        rows.append(row)
    return rows


def tally(rows: list[dict]) -> str:
    counts = defaultdict(int)
    for r in rows:
        counts[r.get("status", "n/a").split(" (")[0]] += 1
    unexpected = sum("a new draw" in r.get("why", "") for r in rows
                     if r.get("status", "").startswith(("DIFFERS", "LOWER")))
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + (f" ({unexpected} with no default changed)" if unexpected
                                                                          else "")


def table(rows: list[dict], title: str) -> list[str]:
    lines = [f"## {title}", "", "| what | base | new | agreement | why |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        what = " / ".join(str(x) for x in r["what"])
        lines.append(f"| {what} | {r['base']} | {r['new']} | {r['status']} | {r.get('why', '')} |")
    counts = defaultdict(int)
    for r in rows:
        counts[r["status"].split(" (")[0]] += 1
    return lines + ["", "counts: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())), ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("base", type=Path, help=f"the older audit's --out (audit.json, {STORE_NAME})")
    parser.add_argument("new", type=Path, help="the newer audit's --out")
    parser.add_argument("--record", type=Path, default=None, help="also write the comparison to this file")
    args = parser.parse_args()
    base, new = (json.loads((d / "audit.json").read_text()) for d in (args.base, args.new))
    v, c, e = verdicts(base, new), caps(base, new), epsilons(base, new)
    lines = [f"# {new['method']} on {new['dataset']}: {args.base} against {args.new}", "",
             f"summary: verdicts {tally(v)}; CAPs {tally(c)}; empirical epsilons {tally(e)}", ""]
    lines += table(v, "Verdicts (leakage, 95% CI)")
    lines += table(c, "CAP per defense (mean ± std over seeds; Welch 95% CI of the difference)")
    lines += table(e, "Empirical epsilon (canary accuracy; Newcombe 95% CI of the difference)")
    lines += ["## Attack accuracy per training (new - base, per target on the same trainings, 95% CI)", "",
              "| attack | defense | phase | strength | seeds | same trainings | base | new | new - base [95% CI] | |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    rows = per_training(default_store(args.base), default_store(args.new))
    for r in rows:
        diff = f"{r['diff']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]" if "diff" in r else "n/a"
        lines.append(f"| {r['attack']} | {r['defense']} | {r['phase']} | {r['strength']:g} | {r['seeds']} | "
                     f"{r['same_training']} | {r['base']:.3f} | {r['new']:.3f} | {diff} | {r.get('status', '')} |")
    counts = defaultdict(int)
    for r in rows:
        counts[(r["attack"], r.get("status", "n/a"))] += 1
    lines += ["", "per attack: " + "; ".join(f"{a} {s} {n}" for (a, s), n in sorted(counts.items())), ""]
    lines[2] += f"; per-training attack accuracy {tally(rows)}"
    text = "\n".join(lines)
    print(text)
    if args.record:
        args.record.write_text(text + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
