"""CAP (FedHSSL Definition 1) and its aggregation over seeds.

CAP = (1/v) * sum_lambda U(lambda) * (1 - A(lambda)) over a protection sweep lambda_1..lambda_v.
Higher is better: useful models whose labels the attack cannot recover.

For a feature attack, 1 - A is its privacy score P = min(1, attack MSE / prior MSE) on the same targets (``scored``):
the share of the adversary's own error without the federation that the reconstruction keeps. P = 1 where the attack
does no better than the feature prior (the federation told it nothing it could use), 0 for an exact reconstruction;
clipped at 1, since an attack worse than the prior cannot make a defense better than no leak (the adversary falls back
on its prior). An MSE has no scale of its own (it depends on the features' spread), hence the ratio to the prior's,
which does not; the label score 1 - A is an accuracy, which has one. The worst case is taken per secret and victim.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import numpy as np
import pandas as pd

GROUP = ["method", "dataset", "attack", "defense", "phase"]
NAN = float("nan")
#: The attack name of the worst-case rows: at each strength and seed, the strongest applicable attack.
WORST = "worst-case"
#: What the worst case takes from one of its runs besides the accuracy (the rest of a record does not apply to it).
_WORST_KEEP = ["variant", "strength", "seed", "status", "utility", "utility_metric", "num_classes", "strength_axis",
               "strength_stronger", "strength_identity", "config", "epsilon", "epsilon_delta", "epsilon_features"]
#: DCS's weight of the utility loss against the attack performance (VFLAIR: 0.5).
DCS_BETA = 0.5


#: Columns that tell a feature attack's records apart: the worst case over attacks never mixes secrets or victims.
SECRET = ["secret", "victim"]
#: The worst case's adversary where its candidates came from several (it is the worst over every adversary).
ANY_ADVERSARY = "any"


def secret_columns(results: pd.DataFrame) -> list[str]:
    """:data:`SECRET` and the adversary where the results hold a feature attack's records (one attack run by two
    adversaries, e.g. the active party and the server, is two rows); label-only results keep their columns."""
    if "secret" not in results or not (results["secret"] == "features").any():
        return []
    return ["secret", *(["adversary"] if "adversary" in results else []), "victim"]


def scored(results: pd.DataFrame) -> pd.DataFrame:
    """The records with each feature attack's ``attack_accuracy`` set to its performance relative to its prior,
    A = 1 - min(1, feature MSE / prior MSE) (so 1 - A is the privacy score of the module's docstring), and its
    ``prior_accuracy`` to 0 (the prior's own performance on that scale); label records unchanged."""
    if "secret" not in results or not (results["secret"] == "features").any():
        return results
    features = results["secret"] == "features"
    ratio = (pd.to_numeric(results["feature_mse"], errors="coerce") /
             pd.to_numeric(results["prior_mse"], errors="coerce")).clip(lower=0, upper=1)
    out = results.copy()
    out.loc[features, "attack_accuracy"] = 1.0 - ratio[features]
    out.loc[features, "prior_accuracy"] = 0.0
    return out


def dcs(attack: np.ndarray, utility: np.ndarray, reference: np.ndarray, *, classes: int,
        beta: float = DCS_BETA, chance: float | None = None) -> np.ndarray:
    """VFLAIR's defense capability score, 1 / (1 + sqrt((1 - beta) dAP^2 + beta dMP^2)) (``src/metrics/
    data_process.py`` ``cal_dcs``): dMP = max(MP0 - MP, 0), the utility lost to the defense against the undefended
    ``reference``, and dAP = AP with AP the attack accuracy normalised by chance, max(0, (A - 1/C) / (1 - 1/C)).
    VFLAIR uses the raw accuracy, with which an attack at chance still costs 0.5 on a binary task and DCS barely
    separates defenses there; normalised, an attack no better than guessing costs nothing. A feature attack's AP is
    VFLAIR's max(0, 1 - MSE) as it is (``chance`` 0: a reconstruction has no chance level to normalise by)."""
    chance = 1.0 / classes if chance is None else chance
    ap = np.clip((np.asarray(attack, float) - chance) / (1.0 - chance), 0.0, None)
    dmp = np.clip(np.asarray(reference, float) - np.asarray(utility, float), 0.0, None)
    return 1.0 / (1.0 + np.sqrt((1.0 - beta) * ap**2 + beta * dmp**2))


def _undefended_key(config: str, attack: str, under_attack: bool) -> str:
    """What a defended run is compared with for DCS: its training settings without the defenses (and the attack,
    unless the attack acted in training), seed included."""
    data = json.loads(config)
    data.pop("defenses", None)
    attack_config = data.pop("attack", {})
    return json.dumps([data, attack_config if under_attack else None], sort_keys=True)


def reference_utility(results: pd.DataFrame) -> pd.Series:
    """Per run, the utility of the undefended training of its settings and seed (a run without a defense, or with
    the swept defense at its identity strength); NaN where the results hold none."""
    if "config" not in results or results.empty:
        return pd.Series(NAN, index=results.index)
    under = results["training_under_attack"] if "training_under_attack" in results else pd.Series(False, results.index)
    keys = [_undefended_key(c, a, bool(u)) if isinstance(c, str) and c else "" for c, a, u in
            zip(results["config"], results["attack"], under)]
    identity = results["strength_identity"] if "strength_identity" in results else pd.Series(0.0, results.index)
    undefended = (results["status"] == "ok") & ((results["defense"] == "none") | (results["strength"] == identity))
    table: dict[str, float] = {}
    for key, ok, utility in zip(keys, undefended, results["utility"]):
        if ok and key:
            table.setdefault(key, float(utility))
    return pd.Series([table.get(k, NAN) for k in keys], index=results.index)


def cap(utility: Sequence[float], attack: Sequence[float]) -> float:
    """Mean over the sweep of U x (1 - A); the sequences are aligned by strength."""
    u = np.asarray(utility, dtype=float)
    a = np.asarray(attack, dtype=float)
    if u.shape != a.shape or u.ndim != 1:
        raise ValueError(f"utility and attack must be equal-length sequences, got {u.shape} and {a.shape}")
    if u.size == 0:
        raise ValueError("CAP needs at least one strength")
    return float(np.mean(u * (1.0 - a)))


def seed_caps(results: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """CAP per ``by`` group and seed, over the strengths the group's records name: the ``by`` columns, ``seed``,
    ``cap``. A seed missing a successful run at one of them gets no row (its CAP would cover another sweep)."""
    rows = []
    for keys, group in scored(results).groupby(by, sort=False):
        expected = sorted(group["strength"].unique())
        ok = group[group["status"] == "ok"]
        for seed, runs in ok.groupby("seed", sort=True):
            runs = runs.drop_duplicates("strength").sort_values("strength")
            if list(runs["strength"]) == expected:
                rows.append((*keys, seed, cap(runs["utility"], runs["attack_accuracy"])))
    return pd.DataFrame(rows, columns=[*by, "seed", "cap"])


def worst_case_runs(results: pd.DataFrame, undefended: pd.DataFrame | None = None) -> pd.DataFrame:
    """One record per (method, dataset, defense, phase, strength, seed) of the strongest applicable attack: the
    largest accuracy over the attacks' successful runs and their prior (an adversary can always fall back on it),
    named in ``strongest``. Utility is the honest training's (an acting attack's run has a federation of its own).
    A failed attack, or one whose accuracy is not a number, is not among the candidates; where a defended attack that
    succeeded elsewhere in the sweep or without the defense in its configuration (``undefended``, by default the
    results' own undefended runs) has no such run, the record is ``failed`` and names it in ``unmeasured`` (the worst
    of the others is no worst case: review last3 F1); groups with no candidate and none missing get no record."""
    if results.empty or "attack" not in results:
        return results.iloc[0:0]
    results = scored(results)
    finite = np.isfinite(pd.to_numeric(results["attack_accuracy"], errors="coerce").astype(float))
    ok = narrowed(results[(results["status"] == "ok") & (results["attack"] != WORST) & finite], [
        *GROUP, *SECRET, "adversary", "variant", *_WORST_KEEP, "attack_accuracy", "prior_accuracy",
        "training_under_attack", "prior_mse", "feature_mse"])
    by = ([c for c in GROUP if c != "attack"] + [c for c in SECRET if c in ok] + (["variant"] if "variant" in ok else [])
          + ["strength", "seed"])
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
    for key, g in tried[tried["defense"] != "none"].groupby(by, sort=False) if missing else ():
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
    """Per worst-case group of the defended runs (``by``'s values), the attacks (by adversary, where several) that ran
    there but have no successful run (``measured``: the indices of those), among those that succeeded elsewhere in
    the sweep or without a defense in the configuration they ran (``tradeoff.configurations.digest``). Where an attack
    did not run is no gap: the audit runs an acting attack at some strengths only (the passive ones stand for it)."""
    found: dict[tuple, list[str]] = {}
    defended = tried[tried["defense"] != "none"]
    unmet = ~defended.index.isin(measured)
    lacking = set(defended[unmet].groupby(by[:-2]).groups) if unmet.any() else set()  # sweeps with a gap, or none
    for sweep, group in defended.groupby(by[:-2], sort=False) if lacking else ():
        if sweep not in lacking:
            continue
        several = "adversary" in group and group["adversary"].nunique() > 1
        for who, runs in group.groupby(["attack", *(["adversary"] if several else [])], sort=True):
            ran = set(runs[["strength", "seed"]].itertuples(index=False, name=None))
            done = set(runs.loc[runs.index.isin(measured), ["strength", "seed"]].itertuples(index=False, name=None))
            if ran - done and (done or _succeeded_undefended(runs, undefended)):
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


def narrowed(results: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
    """``results`` with only those of ``columns`` it has: a loop over groups then copies what it reads, not every
    column of a record (a feature attack's per-target errors among them)."""
    return results[[c for c in dict.fromkeys(columns) if c in results]]


def with_worst_case(results: pd.DataFrame, undefended: pd.DataFrame | None = None) -> pd.DataFrame:
    """The records and, where they hold several attacks, the worst-case records (:func:`worst_case_runs`, whose
    ``undefended`` runs tell which attacks it must take; the prior is among the candidates there; with one attack
    the tables stay that attack's)."""
    if results.empty or (results["attack"] == WORST).any() or results["attack"].nunique() < 2:
        return results
    worst = worst_case_runs(results, undefended)
    worst = worst[[c for c in worst.columns if c in results or c in ("strongest", "unmeasured", "error")]]
    return pd.concat([results, worst], ignore_index=True) if len(worst) else results


def _fmt(values) -> str:
    return ", ".join(f"{v:g}" for v in values)


def unmeasured_text(records: pd.DataFrame) -> str:
    """What a worst case's records could not take (:func:`worst_case_runs`): ``no successful run of mc at 1, 25``;
    '' where they took every attack."""
    found: dict[str, set] = {}
    for names, strength in zip(records.get("unmeasured", ()), records["strength"]):
        for name in names.split(", ") if isinstance(names, str) and names else ():
            found.setdefault(name, set()).add(strength)
    return "; ".join(f"no successful run of {name} at {_fmt(sorted(at))}" for name, at in sorted(found.items()))


def cap_table(results: pd.DataFrame) -> pd.DataFrame:
    """CAP per seed over its strengths, then mean and std over seeds, per (method, dataset, attack, defense, phase).

    CAP is defined over the whole sweep: the expected strengths are every strength the group's records
    name (whatever their status). ``status`` says what the number covers:

    - ``ok``: every seed succeeded at every strength;
    - ``partial: seeds S left out ...``: those seeds failed at some strength; CAP is over the others;
    - ``incomplete: strengths X failed``: no seed succeeded at X, so there is no CAP (NaN);
    - ``n/a: ...``: the attack does not apply (a non-federated method).

    ``dcs`` is VFLAIR's defense capability score (:func:`dcs`) per strength, averaged like CAP over the strengths
    and then over seeds (NaN when the results hold no undefended run of the settings to compare the utility with).
    A ``worst-case`` row per (method, dataset, defense, phase) takes, at each strength and seed, the strongest
    applicable attack (:func:`worst_case_runs`).
    ``utility_metric`` names what U is (test accuracy, AUC or F1: one per dataset). ``cap_optimistic`` is the same CAP from ``attack_accuracy_optimistic`` (the attack's best epoch selected
    on the targets' labels, as both public attack codes report and the FedHSSL paper's tables print), for
    comparison with printed numbers only; NaN unless every counted run has it (the attack's
    ``report_best_epoch_on_targets`` option).
    """
    rows = []
    by = GROUP + secret_columns(results) + (["variant"] if "variant" in results else [])
    results = scored(with_worst_case(results))
    results = narrowed(results.assign(reference_utility=reference_utility(results)), [
        *by, "strength", "status", "error", "num_classes", "seed", "utility", "utility_metric", "attack_accuracy",
        "attack_accuracy_optimistic", "secret", "feature_ap", "reference_utility", "unmeasured"])
    for keys, group in results.groupby(by, sort=False):
        expected = sorted(group["strength"].unique())
        metric = _metric(group)
        if (group["status"] == "n/a").all():
            rows.append((*keys, metric, NAN, NAN, NAN, NAN, NAN, 0,
                         "n/a: " + str(group["error"].iloc[0]) if "error" in group else "n/a"))
            continue
        ok = group[group["status"] == "ok"]
        failed = [s for s in expected if s not in set(ok["strength"])]
        caps, optimistic, scores, left_out = [], [], [], []
        classes = int(group["num_classes"].max()) if "num_classes" in group else 0
        for seed, runs in group.groupby("seed"):
            good = ok[ok["seed"] == seed].sort_values("strength")
            if sorted(good["strength"]) == expected:
                caps.append(cap(good["utility"], good["attack_accuracy"]))
                best = good.get("attack_accuracy_optimistic")
                if best is not None and best.notna().all():
                    optimistic.append(cap(good["utility"], best))
                features = "secret" in good and (good["secret"] == "features").all()
                if features and "feature_ap" in good and good["reference_utility"].notna().all():
                    scores.append(float(dcs(good["feature_ap"], good["utility"], good["reference_utility"],
                                            classes=classes, chance=0.0).mean()))
                elif not features and classes >= 2 and good["reference_utility"].notna().all():
                    scores.append(float(dcs(good["attack_accuracy"], good["utility"], good["reference_utility"],
                                            classes=classes).mean()))
            else:
                left_out.append(seed)
        missing = unmeasured_text(group)
        if failed:
            rows.append((*keys, metric, NAN, NAN, NAN, NAN, NAN, 0,
                         f"incomplete: strengths {_fmt(failed)} failed" + (f" ({missing})" if missing else "")))
            continue
        status = "ok"
        if left_out:
            status = (f"partial: seeds {_fmt(left_out)} left out (a strength failed for them"
                      f"{'; ' * bool(missing)}{missing})")
        if not caps:
            status = (f"incomplete: no seed succeeded at every strength (seeds {_fmt(left_out)}"
                      f"{'; ' * bool(missing)}{missing})")
        values = np.asarray(caps, dtype=float)
        complete = caps and len(scores) == len(caps)
        rows.append((*keys, metric, float(values.mean()) if caps else NAN, float(values.std()) if caps else NAN,
                     float(np.mean(optimistic)) if caps and len(optimistic) == len(caps) else NAN,
                     float(np.mean(scores)) if complete else NAN, float(np.std(scores)) if complete else NAN,
                     len(caps), status))
    return pd.DataFrame(rows, columns=[*by, "utility_metric", "cap", "cap_std", "cap_optimistic", "dcs", "dcs_std",
                                       "n_seeds", "status"])


def t_dcs(caps: pd.DataFrame) -> pd.DataFrame:
    """VFLAIR's T-DCS: per (method, dataset, defense, phase), the mean DCS over the attacks on one secret (and, for
    features, by one adversary on one victim: VFLAIR averages one attack type), with the attacks it averages."""
    by = ["method", "dataset", "defense", "phase"] + secret_columns(caps) + (["variant"] if "variant" in caps else [])
    scored = caps[caps["dcs"].notna() & (caps["attack"] != WORST)]
    return (scored.groupby(by, sort=False, dropna=False).agg(t_dcs=("dcs", "mean"), attacks=("attack", lambda a: ", ".join(a)))
            .reset_index())


def _metric(group: pd.DataFrame) -> str:
    """The utility metric of a group's CAP (one per dataset): its runs' metric, "" when none was scored."""
    if "utility_metric" not in group:
        return ""
    found = [m for m in group["utility_metric"].dropna().unique() if m]
    return str(found[0]) if found else ""


def shown(results: pd.DataFrame) -> pd.DataFrame:
    """The records as tables and plots show them: a feature attack's ``attack_accuracy`` and ``prior_accuracy``
    columns hold its and its prior's MSE (its ``leakage`` is already prior - attack MSE); label records unchanged."""
    if "secret" not in results or not (results["secret"] == "features").any():
        return results
    features = results["secret"] == "features"
    out = results.copy()
    out.loc[features, "attack_accuracy"] = pd.to_numeric(results.loc[features, "feature_mse"], errors="coerce")
    out.loc[features, "prior_accuracy"] = pd.to_numeric(results.loc[features, "prior_mse"], errors="coerce")
    return out


def strength_summary(results: pd.DataFrame) -> pd.DataFrame:
    """Mean and std over seeds of utility, attack and prior accuracy, leakage (attack - prior accuracy, per seed), and
    the epsilon a DP defense spent where every seed claims one (:func:`_claims`), at each strength (and its axis name
    and direction); worst-case rows name the strongest attack of each strength in ``strongest`` (several when seeds
    differ). Where the results hold feature attacks, ``secret`` and ``victim`` tell the rows apart and a feature row's
    attack and prior numbers are MSEs (:func:`shown`)."""
    ok = shown(with_worst_case(results))
    ok = ok[ok["status"] == "ok"]
    if "strength_axis" not in ok:
        ok = ok.assign(strength_axis="lambda")
    if "leakage" not in ok:
        ok = ok.assign(leakage=ok["attack_accuracy"] - ok["prior_accuracy"])
    if "strength_stronger" not in ok:
        ok = ok.assign(strength_stronger="higher")
    cols = ["utility", "attack_accuracy", "prior_accuracy", "leakage"]
    keys = GROUP + secret_columns(ok) + (["variant"] if "variant" in ok else []) + [
        "utility_metric", "strength_axis", "strength_stronger", "strength"]
    agg = ok.groupby(keys)[cols].agg(["mean", lambda c: c.std(ddof=0)])
    agg.columns = [f"{c}_{'mean' if s == 'mean' else 'std'}" for c, s in agg.columns]
    n = ok.groupby(keys)["seed"].count().rename("n_seeds")
    joined = agg.join(n).join(_claims(ok, keys, n))
    if "strongest" in ok:
        names = ok["strongest"].where(ok["strongest"].notna(), "").astype(str)
        joined = joined.join(names.groupby([ok[k] for k in keys]).agg(
            lambda s: ", ".join(sorted({v for v in s if v}))).rename("strongest"))
    return joined.reset_index()


def _claims(ok: pd.DataFrame, keys: list[str], n: pd.Series) -> pd.DataFrame:
    """Per strength, the epsilon (and delta) claimed: the max over seeds (each training holds its own claim; test the
    weakest), only where every seed recorded one, else NaN; ``epsilon_seeds`` (and the others'), how many did (review
    eps F4)."""
    claims = [c for c in ("epsilon", "epsilon_delta", "epsilon_features", "epsilon_features_delta") if c in ok]
    grouped = ok.groupby(keys)[claims]
    counted = grouped.count()
    return grouped.max().where(counted.eq(n, axis=0)).add_suffix("_max").join(counted.add_suffix("_seeds"))


def strength_label(axis: str, strength: float) -> str:
    """``λ=5`` for the default noise axis, ``epsilon=1`` for label DP: the value on its own axis."""
    return f"{'λ' if axis == 'lambda' else axis}={strength:g}"
