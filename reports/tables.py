"""Console tables from records (rich): per-strength numbers and CAP.

Columns that hold one value for the whole table (e.g. the dataset) move into the title, so the
table stays readable in an 80-column terminal.
"""

from __future__ import annotations

from rich.table import Table

from vflpriv.common.lazy import Lazy
from vflpriv.common.secret_kinds import CLAIM_FIELDS, FEATURES, LABELS

pd = Lazy("pandas")  # imported at the first table: a command's header (utility_label) runs before its sweep
cap = Lazy("vflpriv.tradeoff.cap")  # strength_label; the module imports numpy and pandas

CONTEXT = ["method", "dataset", "attack", "defense", "phase"]

#: Said beside a strength where no undefended run of the configuration was recorded: the attack may not have leaked
#: without the defense either, so the strength credits the defense with nothing proven (review fin2 G3).
NOT_COMPARED = "; no undefended run of this configuration to compare"


#: What a measured strength's own test said where no strength falls to the prior (``tradeoff.leakage.falls_to_prior``).
NOT_FALLEN = {"yes": "leaks beyond the prior", "inconclusive": "inconclusive",
              "no": "within the margin, a stronger one leaks", "attack failed": "below the prior, a stronger one leaks"}


def falls_text(falls: dict | None, axis: str, verdicts: list[tuple[float, str]], *, unit: str = "", digits: int = 4,
               compared: bool = True, failed: str = "n/a: every defended run failed") -> str:
    """A defense's "falls to the prior at" cell (the audit's, the report's, ``vflpriv table``'s, both secrets): the
    weakest strength with its leakage and utility (and that nothing compares it where no undefended run does), else
    each measured strength's verdict (``tradeoff.leakage.strength_verdicts``), else ``failed``."""
    if falls:
        return (f"{cap.strength_label(falls['axis'], falls['strength'])} (leakage {falls['leakage']:+.{digits}f}{unit}"
                f", utility {falls['utility']:.3f}{'' if compared else NOT_COMPARED})")
    if verdicts:
        return "not at the prior: " + ", ".join(f"{cap.strength_label(axis, s)} {NOT_FALLEN[v]}" for s, v in verdicts)
    return failed


def mean_std(mean: float, std: float | None, *, n: int, sign: bool = False, digits: int = 3) -> str:
    """"mean ± std" over ``n`` seeds (or trainings); of one there is no spread to show, so the mean alone."""
    if mean is None or pd.isna(mean):
        return "n/a"
    shown = f"{mean:{'+' if sign else ''}.{digits}f}"
    return shown if n < 2 or std is None or pd.isna(std) else f"{shown} ± {std:.{digits}f}"


def cap_cell(cap: float | None, cap_std: float | None, *, n: int, status: str, dagger: bool = False) -> str:
    """A CAP cell: "mean ± std", with its status beside it where it covers fewer seeds than ran (``partial: seeds 0
    left out ...``); the status alone where there is no CAP ("n/a†" for a non-federated one with ``dagger``)."""
    if cap is None or pd.isna(cap):  # no number: why (an "ok" without one, e.g. 0/0 MSEs, is no score: n/a)
        return "n/a†" if dagger and str(status).startswith("n/a") else "n/a" if status == "ok" else str(status)
    shown = mean_std(cap, cap_std, n=n)
    return shown if status == "ok" else f"{shown} ({status})"


def _split_context(frame: pd.DataFrame) -> tuple[list[str], str]:
    varying = [c for c in CONTEXT if frame[c].nunique() > 1]
    fixed = ", ".join(f"{c} {frame[c].iloc[0]}" for c in CONTEXT if c not in varying)
    return varying, fixed


def claim_fields(secret: str) -> tuple[str, str]:
    """The (epsilon, delta) a row about ``secret`` may show: a label claim says nothing of the features and the
    reverse (review hunt2 N1: a feature attack's rows showed a label defense's epsilon)."""
    return CLAIM_FIELDS[secret]


def row_secret(r) -> str:
    """The secret a summary row is about (label-only summaries have no ``secret`` column)."""
    return str(getattr(r, "secret", LABELS))


def claims_shown(summary: pd.DataFrame, secret: str) -> bool:
    """Whether some row of ``summary``, a table about ``secret``, claims that secret's epsilon."""
    seeds = f"{claim_fields(secret)[0]}_seeds"
    return seeds in summary and bool((summary[seeds] > 0).any())


def claimed_seeds(r) -> int:
    """How many seeds of a strength's row claim the epsilon of the row's secret."""
    return int(getattr(r, f"{claim_fields(row_secret(r))[0]}_seeds", 0))


def claim_cell(r) -> str:
    """The epsilon of its secret a strength's row claims (:func:`epsilon_cell` of the max over seeds), or ``n/a (k of
    n seeds claim)`` where some seeds recorded none: each training must hold its own claim."""
    epsilon, delta = claim_fields(row_secret(r))
    claimed, n = claimed_seeds(r), int(r.n_seeds)  # a row of iterrows or itertuples
    if 0 < claimed < n:
        return f"n/a ({claimed} of {n} seeds claim)"
    return epsilon_cell(getattr(r, f"{epsilon}_max", float("nan")), getattr(r, f"{delta}_max", float("nan")))


#: The footnote under a table that shows a claimed epsilon: what it assumes of the noise (review fe2 R5).
EPSILON_NOTE = ("each ε assumes the adversary does not know the mechanism's generator state, seeded from the run's "
                "seed (which every record holds) unless the run set options.secure_noise (a variant of its own); the "
                "records' notes say which")


def epsilon_cell(epsilon: float, delta: float) -> str:
    """A claimed epsilon with its delta (``0.998 at δ 1e-05``, ``2 (pure)``), n/a where none is claimed."""
    if pd.isna(epsilon):
        return "n/a"
    return f"{epsilon:.3g} " + (f"at δ {delta:.3g}" if pd.notna(delta) and delta > 0 else "(pure)")


def utility_label(metric: str) -> str:
    """What the utility number is: the federated model's metric on the test samples."""
    return "test " + {"accuracy": "accuracy", "auc": "AUC", "f1": "F1"}.get(metric, metric or "utility")


def who(adversary: str) -> str:
    """A record's adversary in words."""
    if adversary == "server":
        return "the server"
    if adversary == "any":
        return "any adversary"
    return f"party {adversary} ({'the active party' if adversary == '0' else 'a passive party'})"


def roles(frame: pd.DataFrame) -> list[str]:
    """The columns that tell feature attacks' rows apart beyond the attack: who ran it and on whose features (one
    attack run by the active party and by the server is two rows); none for label-only results."""
    if "secret" not in frame or not (frame["secret"] == "features").any():
        return []
    return [c for c in ("adversary", "victim") if c in frame]


def attack_roles(attack: str, values: dict) -> str:
    """``attack``, and for a feature attack its adversary and victim in words."""
    if values.get("secret") != "features" or "victim" not in values:
        return attack
    by = f" by {who(str(values['adversary']))}" if "adversary" in values else ""
    return f"{attack}{by} on party {values['victim']}'s features"


#: How each secret's attack and prior numbers read in a table: (attack column, prior column, leakage's definition).
SCORES = {"labels": ("attack acc", "prior acc", "leakage = attack − prior accuracy, per seed"),
          "features": ("attack MSE", "prior MSE", "leakage = prior − attack MSE on features scaled to [0, 1], per seed")}


#: ``strength_summary``'s columns a feature row holds as MSEs, and their names in ``strength_rows.csv``.
MSE_COLUMNS = {f"{c}_{s}": f"{n}_{s}" for c, n in (("attack_accuracy", "attack_mse"), ("prior_accuracy", "prior_mse"),
                                                   ("leakage", "leakage_mse")) for s in ("mean", "std")}


def strength_rows(summary: pd.DataFrame) -> pd.DataFrame:
    """``strength_summary`` as ``strength_rows.csv`` holds it: a feature row's attack MSE, prior MSE and leakage
    (prior - attack MSE) in columns of their own, its accuracy columns empty (a label row's the other way round); each
    row's claim columns only its own secret's (review misc2 M5: a feature row read the label epsilon as its own)."""
    features = summary["secret"] == "features" if "secret" in summary else pd.Series(False, index=summary.index)
    out = summary.copy()
    for secret, fields in CLAIM_FIELDS.items():  # the other secret's (epsilon, delta) says nothing of this row's
        mine = features if secret == FEATURES else ~features
        for column in [f"{f}_{end}" for f in fields for end in ("max", "seeds")]:
            if column in out:
                out[column] = out[column].where(mine)
    if not features.any():
        return out
    for accuracy, mse in MSE_COLUMNS.items():
        out.insert(out.columns.get_loc(accuracy) + 1, mse, summary[accuracy].where(features))
        out[accuracy] = summary[accuracy].where(~features)
    return out


def strength_tables(summary: pd.DataFrame) -> list[Table]:
    """:func:`strength_table` per secret (label attacks' accuracies, feature attacks' MSEs)."""
    if "secret" not in summary:
        return [strength_table(summary)]
    return [strength_table(part, secret=str(secret)) for secret, part in summary.groupby("secret", sort=True)]


def strength_table(summary: pd.DataFrame, *, secret: str = "labels") -> Table:
    """Per strength (none without a defense): utility, attack and prior accuracy (a feature attack's: MSE), leakage,
    mean ± std over seeds."""
    varying, fixed = _split_context(summary)
    metric = summary["utility_metric"].iloc[0] if "utility_metric" in summary else ""
    defended = bool((summary["defense"] != "none").any())
    spent = claims_shown(summary, secret)
    strongest = "strongest" in summary and bool((summary["strongest"].fillna("") != "").any())
    spread = "mean ± std over seeds" if (summary["n_seeds"] > 1).any() else "one seed"
    attack, prior, leakage = SCORES[secret]
    victim = secret == "features" and "victim" in summary
    adversary = secret == "features" and "adversary" in summary
    table = Table(title=f"{fixed} ({spread}; {leakage})")
    columns = (*varying, *(["adversary"] if adversary else []), *(["victim"] if victim else []),
               *(["strength"] if defended else []),
               *(["ε spent (at δ)"] if spent else []), f"utility ({utility_label(metric)})", attack, prior, "leakage",
               "seeds",
               *(["strongest attack"] if strongest else []))
    for col in columns:
        table.add_column(col, justify="right")
    table.caption = EPSILON_NOTE if spent else None
    digits = 4 if secret == "features" else 3
    for _, r in summary.iterrows():
        n = int(r["n_seeds"])
        table.add_row(
            *(str(r[c]) for c in varying), *([who(str(r["adversary"]))] if adversary else []),
            *([f"party {r['victim']}"] if victim else []),
            *([cap.strength_label(r["strength_axis"], r["strength"])] if defended else []),
            *([claim_cell(r)] if spent else []),
            mean_std(r["utility_mean"], r["utility_std"], n=n),
            mean_std(r["attack_accuracy_mean"], r["attack_accuracy_std"], n=n, digits=digits),
            mean_std(r["prior_accuracy_mean"], r["prior_accuracy_std"], n=n, digits=digits),
            mean_std(r["leakage_mean"], r["leakage_std"], n=n, sign=True, digits=digits), str(n),
            *([str(r["strongest"]) if isinstance(r["strongest"], str) else ""] if strongest else []),
        )
    return table


def cap_rich_table(caps: pd.DataFrame) -> Table:
    """CAP mean ± std over seeds per (method, dataset, attack, defense, phase), or why there is none."""
    no_reference = "dcs" in caps and caps["dcs"].isna().all()
    extra = roles(caps)
    features = " (a feature attack's 1 − A: min(1, attack MSE / prior MSE))" if extra else ""
    table = Table(title=f"CAP = mean over the strengths of U × (1 − A){features}; DCS = VFLAIR's defense capability "
                        "score (chance-normalised A); both higher is better",
                  caption="DCS n/a: no undefended run of these settings among these results (DCS compares the "
                          "utility with it): run --defense none into the same store and read it with vflpriv table "
                          "(or sweep the identity strength 0, which CAP then includes)" if no_reference else None)
    for col in (*CONTEXT, *extra, "U", "CAP", "DCS", "seeds"):
        table.add_column(col)
    for _, r in caps.iterrows():
        n = int(r["n_seeds"])
        shown = cap_cell(r["cap"], r["cap_std"], n=n, status=r.get("status", "ok"))
        score = mean_std(r["dcs"], r["dcs_std"], n=n) if pd.notna(r.get("dcs", float("nan"))) else "n/a"
        shown_roles = [who(str(r["adversary"])) if c == "adversary" else f"party {r[c]}" if r.get("secret") ==
                       "features" else "" for c in extra]
        table.add_row(*(str(r[c]) for c in CONTEXT), *shown_roles, utility_label(r.get("utility_metric", "")), shown, score,
                      str(int(r["n_seeds"])))
    return table
