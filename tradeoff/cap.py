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

from vflpriv.tradeoff.scores import GROUP, NAN, listed, narrowed, scored, secret_columns, shown
from vflpriv.tradeoff.worst_case import WORST, unmeasured_text, with_worst_case

#: DCS's weight of the utility loss against the attack performance (VFLAIR: 0.5).
DCS_BETA = 0.5


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
                         f"incomplete: strengths {listed(failed)} failed" + (f" ({missing})" if missing else "")))
            continue
        status = "ok"
        if left_out:
            failed_for = "their run failed" if (group["defense"] == "none").all() else "a strength failed for them"
            status = f"partial: seeds {listed(left_out)} left out ({failed_for}{'; ' * bool(missing)}{missing})"
        if not caps:
            status = (f"incomplete: no seed succeeded at every strength (seeds {listed(left_out)}"
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
