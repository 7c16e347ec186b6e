"""What leaked of the victims' features, from records only: per attack, adversary, victim and phase the attack's and
the feature prior's reconstruction error, the leakage (prior - attack MSE on features scaled to [0, 1]) with the
audit's per-target paired test and verdict, the worst case over the feature attacks (per victim and phase, every
adversary), per defense the feature CAP and the strength at which the attack falls to the prior, and for image
victims a grid of targets, the attack's reconstructions and the prior's.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from vflpriv.common.console import plural
from vflpriv.reports.paper_tables import Table
from vflpriv.reports.tables import cap_cell, falls_text, who
from vflpriv.tradeoff.cap import cap_table, strength_label
from vflpriv.tradeoff.worst_case import WORST, unmeasured_text, with_worst_case
from vflpriv.tradeoff.leakage import FEATURE_MARGIN, falls_to_prior, leakage_test, strength_verdicts
from vflpriv.tradeoff.configurations import UNREAD_BY_FEATURES, digest
from vflpriv.tradeoff.variants import with_variants

KEYS = ["adversary", "victim", "attack", "phase"]
#: What tells a store's settings apart (a report reads every method, dataset and configuration of one store; an
#: audit's records have one method and dataset): each its own verdicts, never one leakage test's pooled seeds.
SETTING = ["method", "dataset", "variant"]


def _num(value) -> float | None:
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else float(value)


def _mean(rows: pd.DataFrame, column: str) -> float | None:
    return _num(pd.to_numeric(rows[column], errors="coerce").mean()) if column in rows else None


def feature_verdicts(baseline: pd.DataFrame, *, margin: float = FEATURE_MARGIN) -> list[dict]:
    """The undefended verdict of every (adversary, victim, feature attack, phase), then the worst case per (victim,
    phase): the attack (and adversary) with the largest leakage."""
    verdicts = []
    setting = [c for c in SETTING if c in baseline]
    several = len(baseline[setting].drop_duplicates()) > 1
    for keys, rows in baseline.groupby([*setting, *KEYS], sort=False, dropna=False):
        adversary, victim, attack, phase = keys[len(setting):]
        where = _setting(dict(zip(setting, keys))) if several else ""
        ok = rows[rows["status"] == "ok"]
        inapplicable = (rows["status"] == "n/a").all()  # nothing to attack (a method that is not federated)
        if ok.empty and not inapplicable:
            continue  # every run failed: the report lists them
        test = leakage_test(ok, feature_margin=margin)
        kinds = ", ".join(sorted(set(ok["prior_kind"].astype(str))))
        below = test.verdict == "no" and test.ci_high < -margin * test.prior_mean
        line = where + (f"{attack} by {who(str(adversary))} on party {victim}'s features ({phase}): "
                f"not applicable: {rows['error'].iloc[0]}" if inapplicable else
                f"{attack} by {who(str(adversary))} on party {victim}'s features ({phase}): leaks beyond the prior: "
                f"{test.verdict} (leakage {test.leakage:+.4f} MSE, 95% CI [{test.ci_low:+.4f}, {test.ci_high:+.4f}]; "
                f"attack MSE {test.attack_mean:.4f}, prior ({kinds}) {test.prior_mean:.4f}; per-target paired test on "
                f"{test.n_targets} targets, {plural(test.n_seeds, 'seed')} as random effects, "
                f"one-sided p = {test.p_value:.3g})"
                + ("; below the prior: its reconstruction is worse than the adversary's fallback" if below else ""))
        verdicts.append({
            "setting": where.removesuffix(": "), "adversary": str(adversary), "victim": str(victim), "attack": attack,
            "phase": phase, **test.to_dict(),
            **({"verdict": "n/a"} if inapplicable else {}),
            "prior_kind": kinds, "prior_mse_mean": _mean(ok, "prior_mse_mean"),
            "prior_mse_regressor": _mean(ok, "prior_mse_regressor"), "prior_mse_random": _mean(ok, "prior_mse_random"),
            "psnr": _mean(ok, "feature_psnr"), "ssim": _mean(ok, "feature_ssim"),
            "exact_match": _mean(ok, "feature_exact_match"), "oracle": _mean(ok, "feature_mse_oracle"),
            "target": str(ok["attack_target"].iloc[0]) if len(ok) else "", "utility": _mean(ok, "utility"),
            "place": _place(dict(zip(setting, keys))), "line": line,
            "configurations": settings(ok)})
    for (where, victim, phase) in dict.fromkeys((v["setting"], v["victim"], v["phase"]) for v in verdicts):
        found = [v for v in verdicts if (v["setting"], v["victim"], v["phase"]) == (where, victim, phase)
                 and v["leakage"] is not None]
        if len(found) >= 2:
            top = max(found, key=lambda v: v["leakage"])
            verdicts.append({**top, "attack": WORST, "strongest": f"{top['attack']} by {who(top['adversary'])}",
                             "line": f"{where + ': ' if where else ''}{WORST} on party {victim}'s features ({phase}): "
                                     f"the strongest attack is {top['line'].removeprefix(where + ': ')}"})
    return verdicts


def _place(values: dict) -> tuple[str, str]:
    """The (method, dataset) a verdict or a defense's row is of ('' where the records do not say)."""
    return str(values.get("method", "")), str(values.get("dataset", ""))


def settings(rows: pd.DataFrame, *, unread: frozenset[str] = UNREAD_BY_FEATURES) -> list[str]:
    """The configurations ``rows`` ran, each a digest of its settings but the defenses, seed and device (a defended run
    and the undefended run it is judged against share them) and those the attack does not read (``unread``); one
    empty one where the records hold no configuration."""
    if "config" not in rows:
        return [""]
    return sorted({digest(config, unread=unread) for config in rows["config"]})


def _quiet(verdicts: list[dict], ran: list[str]) -> bool | None:
    """Whether the attack read "no" without a defense in every configuration a defended row ran (``ran``,
    :func:`settings`); None where one of them has no undefended run to judge it against."""
    judged = [v for v in verdicts if set(v.get("configurations", [""])) & set(ran)]
    if not judged or not set(ran) <= {c for v in judged for c in v.get("configurations", [""])}:
        return None
    return all(v["verdict"] == "no" for v in judged)


def _setting(values: dict) -> str:
    """A setting named in a verdict's line: ``splitnn on digits (partition.aux_features=5): ``."""
    variant = values.get("variant") or ""
    return f"{values.get('method')} on {values.get('dataset')}{f' ({variant})' if variant else ''}: "


def feature_defenses(defended: pd.DataFrame, *, margin: float = FEATURE_MARGIN, verdicts: list[dict] = (),
                     baseline: pd.DataFrame | None = None) -> list[dict]:
    """Per (method, dataset, adversary, victim, attack, phase, defense and its configuration, e.g. ISO on the
    embeddings and on the embeddings and weights): the feature CAP over the strengths (utility x min(1, attack MSE /
    prior MSE)) and the weakest strength at which the attack falls to the prior (n/a where the attack reads "no"
    without a defense: there is nothing for the defense to bring down; the worst case's names the attacks it lacks,
    those that succeeded in ``baseline`` with no successful run under the defense)."""
    undefended: dict[tuple, list[dict]] = {}
    for v in verdicts:
        undefended.setdefault((*v.get("place", ("", "")), v["adversary"], v["victim"], v["attack"], v["phase"]),
                              []).append(v)
    place = [c for c in ("method", "dataset") if c in defended]
    several = len(defended[place].drop_duplicates()) > 1
    out = []
    for keys, part in defended.groupby([*place, "adversary", "victim"], sort=False):
        where, (adversary, victim) = _place(dict(zip(place, keys))), keys[len(place):]
        part = with_worst_case(part, baseline)
        caps = cap_table(part)
        by = ["attack", "phase", "defense", *(["variant"] if "variant" in part else [])]
        for keys, rows in part.groupby(by, sort=False):
            (attack, phase, defense), variant = keys[:3], (keys[3] if len(keys) > 3 else "")
            row = caps[(caps["attack"] == attack) & (caps["phase"] == phase) & (caps["defense"] == defense)
                       & ((caps["variant"] == variant) if "variant" in caps else True)]
            quiet = _quiet(undefended.get((*where, str(adversary), str(victim), attack, phase), []), settings(rows))
            falls = falls_to_prior(rows, feature_margin=margin) if attack != WORST and quiet is not True else None
            axis = str(rows["strength_axis"].iloc[0])
            measured = strength_verdicts(rows, feature_margin=margin)
            missing = unmeasured_text(rows)
            out.append({
                "setting": f"{where[0]} on {where[1]}" if several else "", "place": where, "adversary": str(adversary),
                "victim": str(victim), "attack": attack, "phase": phase,
                "defense": defense, "variant": variant, "axis": axis,
                "strengths": sorted(float(s) for s in rows["strength"].unique()),
                "cap": _num(row["cap"].iloc[0]) if len(row) else None,
                "cap_std": _num(row["cap_std"].iloc[0]) if len(row) else None,
                "cap_status": str(row["status"].iloc[0]) if len(row) else "no runs",
                "seeds": int(row["n_seeds"].iloc[0]) if len(row) else 0,
                "falls_to_prior_text": ("n/a: no leakage beyond the prior without a defense" if quiet
                                        else f"n/a{': ' * bool(missing)}{missing}" if attack == WORST
                                        else falls_text(falls, axis, measured, unit=" MSE",
                                                        compared=quiet is not None))})
    return out


NOTE = ("Leakage = prior MSE - attack MSE on the same targets (features min-max scaled to [0, 1] on the training "
        "data); the prior is the better, on the adversary's own known samples, of their mean and a ridge regression "
        "from its own features (U(0, 1) guesses for parity with the anchors). Verdict: yes when the 95% interval lies "
        "above 0; no when it lies below the margin ({margin:g} of the prior's MSE); inconclusive otherwise. A defense "
        "falls to the prior at the weakest strength whose own verdict is no with no stronger one yes. Feature "
        "CAP = mean over the strengths of U x min(1, attack MSE / prior MSE).")


def _cell(value, fmt: str = "{:.4f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def verdict_table(verdicts: list[dict], *, margin: float = FEATURE_MARGIN) -> Table | None:
    """The undefended feature verdicts as one table (the worst case naming its attack and adversary)."""
    if not verdicts:
        return None
    several = any(v.get("setting") for v in verdicts)
    rows = [[*([v.get("setting", "")] if several else []), who(v["adversary"]), f"party {v['victim']}",
             f"{v['attack']} ({v['strongest']})" if v.get("strongest") else v["attack"], v["phase"], v["target"],
             _cell(v["attack_mean"]), _cell(v["oracle"]),
             _cell(v["prior_mean"]) + (f" ({v['prior_kind']})" if v["prior_kind"] else ""),
             _cell(v["prior_mse_mean"]), _cell(v["prior_mse_random"]),
             f"{_cell(v['leakage'], '{:+.4f}')} [{_cell(v['ci_low'], '{:+.4f}')}, {_cell(v['ci_high'], '{:+.4f}')}]",
             _cell(v["psnr"], "{:.2f}"), _cell(v["ssim"], "{:.3f}"), _cell(v["exact_match"], "{:.3f}"), v["verdict"]]
            for v in verdicts]
    return Table("Feature leakage beyond the adversary's prior (no defense)",
                 [*(["setting"] if several else []), "adversary", "victim", "attack", "phase", "targets", "attack MSE",
                  "oracle", "prior MSE (kind)",
                  "mean", "U(0,1)", "leakage [95% CI]", "PSNR", "SSIM", "exact", "verdict"], rows, set(),
                 note=NOTE.format(margin=margin))


def defense_table(defenses: list[dict]) -> Table | None:
    """Per defense, the feature CAP and where the attack falls to the prior."""
    if not defenses:
        return None
    several = any(d.get("setting") for d in defenses)
    rows = [[*([d.get("setting", "")] if several else []), who(d["adversary"]), f"party {d['victim']}", d["attack"],
             d["phase"],
             f"{d['defense']} ({d['variant']})" if d.get("variant") else d["defense"],
             ", ".join(strength_label(d["axis"], s) for s in d["strengths"]),
             cap_cell(d["cap"], d["cap_std"], n=d["seeds"], status=d.get("cap_status") or ("ok" if d["cap"] is not None else "n/a")),
             d["falls_to_prior_text"]] for d in defenses]
    return Table("Feature attacks under the defenses that act on what they read",
                 [*(["setting"] if several else []), "adversary", "victim", "attack", "phase", "defense", "strengths",
                  "feature CAP",
                  "falls to the prior at"], rows, set())


def feature_markdown(summary: dict) -> list[str]:
    """The audit's section on the victims' features."""
    verdicts, margin = summary.get("verdicts", []), summary.get("margin", FEATURE_MARGIN)
    lines = ["", "## Features: what leaks of each victim's features", "", NOTE.format(margin=margin), ""]
    lines += [f"- {v['line']}" for v in verdicts] or [
        "- no feature attack ran (none of the audit's attacks infers features, or none applied: see Not applicable; "
        "or every run of those that applied failed: see Failed runs)"]
    for table in (verdict_table(verdicts, margin=margin), defense_table(summary.get("defenses", []))):
        if table is not None:
            lines += ["", *table.markdown().splitlines()[2:]]
    lines += ["", *(f"![reconstructions]({name})" for name in summary.get("grids", []))] if summary.get("grids") else []
    return lines


def judged(frame: pd.DataFrame, *, margin: float = FEATURE_MARGIN) -> tuple[list[dict], list[dict]]:
    """A store's feature runs (``frame``) judged: the undefended verdicts (:func:`feature_verdicts`) and each defense's
    row (:func:`feature_defenses`), as the report and ``vflpriv table`` both print them."""
    baseline = frame[frame["defense"] == "none"]
    if len(baseline):  # its configurations told apart (``tradeoff.variants``), as an audit's are
        baseline = pd.concat([with_variants(rows.drop(columns=["variant"], errors="ignore"))
                              for _, rows in baseline.groupby(["adversary", "victim"], sort=False)]).loc[baseline.index]
    verdicts = feature_verdicts(baseline, margin=margin)
    return verdicts, feature_defenses(frame[frame["defense"] != "none"], margin=margin, verdicts=verdicts,
                                      baseline=baseline)


def feature_html(results: pd.DataFrame, out: Path, *, margin: float = FEATURE_MARGIN) -> str:
    """The body of the report's section on the victims' features (its title is the section's): verdicts, the tables,
    the image grids (embedded)."""
    import base64
    import html

    if "secret" not in results or not (results["secret"] == "features").any():
        return ""
    frame = results[results["secret"] == "features"]
    verdicts, defended = judged(frame, margin=margin)
    parts = ["<ul>" + "".join(f"<li class='verdict'>{html.escape(v['line'])}</li>" for v in verdicts) + "</ul>"]
    for table in (verdict_table(verdicts, margin=margin), defense_table(defended)):
        if table is not None:
            parts.append(table.html())
    for path in example_grids(frame, out):
        data = base64.b64encode(path.read_bytes()).decode()
        parts.append(f"<img alt='{html.escape(path.stem)}' src='data:image/png;base64,{data}'>")
    return "".join(parts)


def example_grids(results: pd.DataFrame, out: Path) -> list[Path]:
    """For each image victim's (attack, adversary, phase) without a defense, a PNG grid from its first seed's record:
    the targets, the attack's reconstructions and the prior's, one column per target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if "feature_examples" not in results:
        return []
    rows = results[(results["status"] == "ok") & (results["defense"] == "none")
                   & results["feature_examples"].fillna("").astype(str).str.len().gt(0)]
    written = []
    for (method, dataset, attack, adversary, phase), part in rows.groupby(
            ["method", "dataset", "attack", "adversary", "phase"], sort=False):
        found = json.loads(part.sort_values("seed")["feature_examples"].iloc[0])
        shape = found["shape"]
        n = len(found["truth"])
        fig, axes = plt.subplots(3, n, figsize=(1.1 * n, 3.6), squeeze=False)
        for r, (label, key) in enumerate((("target", "truth"), (attack, "attack"), ("prior", "prior"))):
            for c in range(n):
                image = pd.Series(found[key][c]).to_numpy().reshape(shape)
                axes[r][c].imshow(image[0] if shape[0] == 1 else image.transpose(1, 2, 0), cmap="gray", vmin=0, vmax=1)
                axes[r][c].set_xticks([])
                axes[r][c].set_yticks([])
            axes[r][0].set_ylabel(label, fontsize=7)
        fig.suptitle(f"{method} / {dataset}: {attack} by {who(str(adversary))} ({phase})", fontsize=8)
        fig.tight_layout()
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"features_{method}_{dataset}_{attack}_{adversary}_{phase}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
