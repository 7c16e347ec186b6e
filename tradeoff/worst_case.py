"""The worst case over attacks: at each strength and seed of a defended sweep, the strongest applicable attack or the
prior (an adversary can always fall back on it), and the attacks a worst case could not take (review last3 F1)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from vflpriv.tradeoff.scores import GROUP, NAN, SECRET, listed, narrowed, scored

#: The attack name of the worst-case rows: at each strength and seed, the strongest applicable attack.
WORST = "worst-case"
#: What the worst case takes from one of its runs besides the accuracy (the rest of a record does not apply to it).
_WORST_KEEP = ["variant", "strength", "seed", "status", "utility", "utility_metric", "num_classes", "strength_axis",
               "strength_stronger", "strength_identity", "config", "epsilon", "epsilon_delta", "epsilon_features",
               "epsilon_features_delta"]
#: The worst case's adversary where its candidates came from several (it is the worst over every adversary).
ANY_ADVERSARY = "any"


def worst_case_runs(results: pd.DataFrame, undefended: pd.DataFrame | None = None) -> pd.DataFrame:
    """One record per (method, dataset, defense, phase, strength, seed) of the strongest applicable attack: the
    largest accuracy over the attacks' successful runs and their prior (an adversary can always fall back on it),
    named in ``strongest``. Utility is the honest training's (an acting attack's run has a federation of its own).
    A failed attack, or one whose accuracy is not a number, is not among the candidates; where an attack that
    succeeded elsewhere in its sweep (undefended too) or, under a defense, without it in its configuration
    (``undefended``, by default the results' own undefended runs) has no such run, the record is ``failed`` and names
    it in ``unmeasured`` (the worst of the others is no worst case: review last3 F1); groups with no candidate and
    none missing get no record."""
    if results.empty or "attack" not in results:
        return results.iloc[0:0]
    results = scored(results)
    finite = np.isfinite(pd.to_numeric(results["attack_accuracy"], errors="coerce").astype(float))
    ok = narrowed(results[(results["status"] == "ok") & (results["attack"] != WORST) & finite], [
        *GROUP, *SECRET, "adversary", "variant", *_WORST_KEEP, "attack_accuracy", "prior_accuracy",
        "training_under_attack", "prior_mse", "feature_mse"])
    by = ([c for c in GROUP if c != "attack"] + [c for c in SECRET if c in ok]
          + (["variant"] if "variant" in ok else []) + ["strength", "seed"])
    tried = narrowed(results[(results["attack"] != WORST) & (results["status"] != "n/a")], [*ok.columns, "config"])
    missing = unmeasured(tried, ok.index, by, tried[tried["defense"] == "none"] if undefended is None else undefended)
    attacks = pd.concat([ok[["attack"]].assign(secret=ok["secret"] if "secret" in ok else "labels"),
                         *(pd.DataFrame({"attack": names, "secret": key[by.index("secret")] if "secret" in by
                                         else "labels"}) for key, names in missing.items())])
    several = attacks.groupby("secret")["attack"].nunique() >= 2
    rows = []
    for key, g in ok.groupby(by, sort=False):
        if not several[g["secret"].iloc[0] if "secret" in g else "labels"] or key in missing:
            continue  # the only attack on its secret: its own rows stand; or one attack unmeasured: below
        rows.append(_strongest(g))
    for key, g in tried.groupby(by, sort=False) if missing else ():
        if key not in missing:
            continue
        first, names = g.iloc[0], missing[key]
        rows.append({**{c: first[c] for c in [*GROUP, *_WORST_KEEP, *SECRET, "adversary"] if c in first},
                     "attack": WORST, "status": "failed", "attack_accuracy": NAN, "prior_accuracy": NAN,
                     "leakage": NAN, "strongest": "", "training_under_attack": False, "unmeasured": ", ".join(names),
                     "error": f"no successful run of {', '.join(names)}: the worst case is not measured"})
    return pd.DataFrame(rows, columns=list(dict.fromkeys([*GROUP, *_WORST_KEEP, *SECRET, "adversary", "attack_accuracy",
                                                          "prior_accuracy", "leakage", "feature_mse", "prior_mse",
                                                          "feature_ap", "strongest", "training_under_attack",
                                                          "unmeasured", "error"])))


def _strongest(g: pd.DataFrame) -> dict:
    """The worst-case record of one (strength, seed) group of successful runs: the strongest of them or the prior."""
    several_adversaries = "adversary" in g and g["adversary"].nunique() > 1
    names = g["attack"] + " by " + g["adversary"].astype(str) if several_adversaries else g["attack"]
    candidates = list(zip(names, g["attack_accuracy"]))
    if "prior_accuracy" in g and g["prior_accuracy"].notna().any():
        prior = ("prior", float(g["prior_accuracy"].max()))
        # a feature attack no better than its prior (performance 0, clipped) does not beat it: the prior first
        candidates = [prior, *candidates] if "secret" in g and g["secret"].iloc[0] == "features" \
            else [*candidates, prior]
    name, accuracy = max(candidates, key=lambda c: c[1])
    honest = g[~g["training_under_attack"].astype(bool)] if "training_under_attack" in g else g
    first = (honest if len(honest) else g).iloc[0]
    row = {c: first[c] for c in [*GROUP, *_WORST_KEEP, *SECRET] if c in g}
    row.update(attack=WORST, attack_accuracy=accuracy, strongest=name, training_under_attack=False,
               prior_accuracy=float(g["prior_accuracy"].max()) if "prior_accuracy" in g else NAN, unmeasured="",
               error="")
    if "adversary" in g:
        row["adversary"] = ANY_ADVERSARY if several_adversaries else str(first["adversary"])
    row["leakage"] = accuracy - row["prior_accuracy"]
    if row.get("secret") == "features":  # errors, as a feature attack's record holds them
        strongest = g.loc[g["attack_accuracy"].idxmax()] if name != "prior" else None
        row["prior_mse"] = float(g["prior_mse"].min())
        row["feature_mse"] = row["prior_mse"] if strongest is None else float(strongest["feature_mse"])
        row["leakage"] = row["prior_mse"] - row["feature_mse"]
        row["feature_ap"] = max(0.0, 1.0 - row["feature_mse"])  # VFLAIR's AP, DCS's input
    return row


def unmeasured(tried: pd.DataFrame, measured: pd.Index, by: list[str], undefended: pd.DataFrame
               ) -> dict[tuple, list[str]]:
    """Per worst-case group of the runs (``by``'s values), the attacks (by adversary, where several) that ran there but
    have no successful run (``measured``: the indices of those), among those that succeeded elsewhere in the sweep or,
    under a defense, without one in the configuration they ran (``tradeoff.configurations.digest``). The undefended
    sweep counts too (a seed whose attack failed there has no baseline: lo4's note). Where an attack did not run is no
    gap: the audit runs an acting attack at some strengths only (the passive ones stand for it)."""
    found: dict[tuple, list[str]] = {}
    unmet = ~tried.index.isin(measured)
    lacking = set(tried[unmet].groupby(by[:-2]).groups) if unmet.any() else set()  # sweeps with a gap, or none
    for sweep, group in tried.groupby(by[:-2], sort=False) if lacking else ():
        if sweep not in lacking:
            continue
        several = "adversary" in group and group["adversary"].nunique() > 1
        defended = (group["defense"] != "none").any()
        for who, runs in group.groupby(["attack", *(["adversary"] if several else [])], sort=True):
            ran = set(runs[["strength", "seed"]].itertuples(index=False, name=None))
            done = set(runs.loc[runs.index.isin(measured), ["strength", "seed"]].itertuples(index=False, name=None))
            if ran - done and (done or defended and _succeeded_undefended(runs, undefended)):
                for point in sorted(ran - done):
                    found.setdefault((*sweep, *point), []).append(" by ".join(map(str, who)))
    return found


def _succeeded_undefended(runs: pd.DataFrame, undefended: pd.DataFrame) -> bool:
    """Whether one attack's defended ``runs`` have a successful undefended run of the same setting and configuration."""
    from vflpriv.tradeoff.configurations import digest  # imports the registries: only where an attack is missing

    same = [c for c in ("method", "dataset", "attack", "phase", *SECRET, "adversary") if c in runs and c in undefended]
    first = runs.iloc[0]
    mine = undefended[(undefended["status"] == "ok") & (undefended[same] == first[same]).all(axis=1)]
    if "config" not in runs or "config" not in mine:
        return len(mine) > 0
    return bool({digest(c) for c in runs["config"]} & {digest(c) for c in mine["config"]})


def with_worst_case(results: pd.DataFrame, undefended: pd.DataFrame | None = None) -> pd.DataFrame:
    """The records and, where they hold several attacks, the worst-case records (:func:`worst_case_runs`, whose
    ``undefended`` runs tell which attacks it must take; the prior is among the candidates there; with one attack
    the tables stay that attack's)."""
    if results.empty or (results["attack"] == WORST).any() or results["attack"].nunique() < 2:
        return results
    worst = worst_case_runs(results, undefended)
    worst = worst[[c for c in worst.columns if c in results or c in ("strongest", "unmeasured", "error")]]
    return pd.concat([results, worst], ignore_index=True) if len(worst) else results


def unmeasured_text(records: pd.DataFrame) -> str:
    """What a worst case's records could not take (:func:`worst_case_runs`): ``no successful run of mc at 1, 25``
    (undefended, no strength is named); '' where they took every attack."""
    found: dict[str, set] = {}
    for names, strength in zip(records.get("unmeasured", ()), records["strength"]):
        for name in names.split(", ") if isinstance(names, str) and names else ():
            found.setdefault(name, set()).add(strength)
    undefended = "defense" in records and (records["defense"] == "none").all()
    return "; ".join(f"no successful run of {name}" + ("" if undefended else f" at {listed(sorted(at))}")
                     for name, at in sorted(found.items()))
