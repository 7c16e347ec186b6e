"""The audit report from records only: verdicts, defense costs, communication, what could not run.

``audit_summary`` turns the audit's records (a DataFrame) into one JSON-able dict (``audit.json``);
``audit_markdown`` renders it (``audit.md``).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict

import pandas as pd

from vflpriv.common.console import plural
from vflpriv.reports.canaries import canary_controls, canary_markdown, canary_summary, without_prior
from vflpriv.reports.features import feature_defenses, feature_markdown, feature_verdicts, who
from vflpriv.reports.leakage import UNDEFENDED_AT_PRIOR
from vflpriv.reports.tables import cap_cell, falls_text, utility_label
from vflpriv.tradeoff.cap import cap_table, strength_label
from vflpriv.tradeoff.worst_case import WORST, unmeasured_text, with_worst_case
from vflpriv.tradeoff.variants import with_variants
from vflpriv.tradeoff.leakage import (
    FEATURE_MARGIN,
    SAMPLE_TEST_NAME,
    TEST_NAME,
    falls_to_prior,
    leakage_test,
    strength_verdicts,
    verdict_rule,
)


def _adversary(config_json: str) -> int:
    return int(json.loads(config_json)["partition"]["adversary"])


def _num(value: float) -> float | None:
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else float(value)


def _communication(baseline: pd.DataFrame) -> list[dict]:
    """MB and messages per (phase, direction, kind) of the undefended trainings, averaged over them."""
    totals: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    trainings = baseline.drop_duplicates("training_key")
    for text in trainings["traffic"]:
        for key, (size, count) in json.loads(text or "{}").items():
            totals[key][0] += size
            totals[key][1] += count
    n = max(len(trainings), 1)
    rows = []
    for key, (size, count) in sorted(totals.items()):
        phase, direction, kind = key.split("/")
        rows.append({"phase": phase, "direction": direction, "kind": kind, "mb": size / n / 1e6, "messages": count / n})
    return rows


def _verdict_line(attack: str, phase: str, test) -> str:
    per_sample = test.test == SAMPLE_TEST_NAME
    over = (f"per-target paired test on {test.n_targets} targets, {plural(test.n_seeds, 'seed')} as random effects"
            if per_sample
            else f"paired t-test over {test.n_seeds} seeds")
    if not per_sample and test.n_seeds < 2:
        return (f"{attack} ({phase}): leaks beyond the adversary's prior: inconclusive "
                f"(leakage {test.leakage:+.3f} on {test.n_seeds} seed; a paired test needs at least 2)")
    if test.verdict == "attack failed":
        return (f"{attack} ({phase}): attack failed: it scored below the adversary's prior (leakage "
                f"{test.leakage:+.3f}, 95% CI [{test.ci_low:+.3f}, {test.ci_high:+.3f}]; {over}), "
                f"so it says nothing about leakage; check its options")
    return (f"{attack} ({phase}): leaks beyond the adversary's prior: {test.verdict} "
            f"(leakage {test.leakage:+.3f}, 95% CI [{test.ci_low:+.3f}, {test.ci_high:+.3f}]; {over}, "
            f"one-sided p = {test.p_value:.3g})")


def _tuning(rows: pd.DataFrame) -> dict:
    """A tuned attack's oracle bound (mean over seeds) and the settings it selected per seed."""
    ok = rows[rows["status"] == "ok"]
    oracle = ok["attack_accuracy_oracle"] if "attack_accuracy_oracle" in ok else pd.Series(dtype=float)
    selected = [s for s in ok.get("attack_selected", pd.Series(dtype=str)) if isinstance(s, str) and s]
    return {"oracle": _num(oracle.mean()) if oracle.notna().all() and len(oracle) else None,
            "selected": selected}


def _worst_verdicts(verdicts: list[dict]) -> list[dict]:
    """Per (adversary, phase), the worst case: the verdict of the attack with the largest leakage (chosen on the
    targets' labels: the auditor's worst case over the attacks, not a choice an adversary could make)."""
    out = []
    for key in dict.fromkeys((v["adversary"], v["phase"]) for v in verdicts):
        found = [v for v in verdicts if (v["adversary"], v["phase"]) == key and v["leakage"] is not None
                 and v["verdict"] != "attack failed"]
        if len(found) < 2:
            continue
        top = max(found, key=lambda v: v["leakage"])
        out.append({**top, "attack": WORST, "strongest": top["attack"],
                    "line": f"{WORST}: the strongest attack is {top['line']}"})
    return out


def audit_summary(results: pd.DataFrame, inapplicable: list[dict], *, margin: float, context: dict,
                  feature_margin: float = FEATURE_MARGIN) -> dict:
    """Everything the audit found, as plain JSON-able data: the label attacks' verdicts and defenses, and the feature
    attacks' in ``features`` (``vflpriv.reports.features``)."""
    features = results["secret"] == "features" if "secret" in results else pd.Series(False, index=results.index)
    undefended_features = results[features & (results["defense"] == "none")]  # their trainings' traffic counts too
    found = _features(results[features], margin=feature_margin)
    results = results[~features]
    frame = _named(results.assign(adversary=results["config"].map(_adversary)))
    canaries = canary_summary(frame)
    baseline = frame[(frame["defense"] == "none") & ~without_prior(frame)]  # the canary-free controls measure utility
    defended = frame[frame["defense"] != "none"]
    verdicts, defenses = [], []
    for (adversary, attack, phase), rows in baseline.groupby(["adversary", "attack", "phase"], sort=False):
        test = leakage_test(rows, margin=margin)
        verdicts.append({"adversary": int(adversary), "attack": attack, "phase": phase, **test.to_dict(),
                         "utility": _num(rows.loc[rows["status"] == "ok", "utility"].mean()), **_tuning(rows),
                         "line": _verdict_line(attack, phase, test)})
        if (rows["status"] == "n/a").all():  # nothing to attack (a method that is not federated): not "inconclusive"
            verdicts[-1].update(verdict="n/a", line=f"{attack} ({phase}): not applicable: {rows['error'].iloc[0]}")
    verdicts += _worst_verdicts(verdicts)
    parts = [with_worst_case(rows.drop(columns=["adversary"]), baseline[baseline["adversary"] == a]).assign(adversary=a)
             for a, rows in defended.groupby("adversary", sort=False)]
    defended = pd.concat(parts, ignore_index=True) if parts else defended
    caps = {a: cap_table(rows.drop(columns=["adversary"])) for a, rows in defended.groupby("adversary", sort=False)}
    for (adversary, attack, phase, defense, variant), rows in defended.groupby(
            ["adversary", "attack", "phase", "defense", "variant"], sort=False):
        table = caps[adversary]
        cap_row = table[(table["attack"] == attack) & (table["phase"] == phase) & (table["defense"] == defense)
                        & (table["variant"] == variant)]
        undefended = next((v["verdict"] for v in verdicts if (v["adversary"], v["attack"], v["phase"])
                           == (int(adversary), attack, phase)), None)
        falls = falls_to_prior(rows, margin=margin) if undefended not in UNDEFENDED_AT_PRIOR else None
        cap_value = _num(cap_row["cap"].iloc[0]) if len(cap_row) else None
        axis = str(rows["strength_axis"].iloc[0])
        strengths = sorted(rows["strength"].unique(), reverse=bool((rows["strength_stronger"] == "lower").any()))
        defenses.append({
            "adversary": int(adversary), "attack": attack, "phase": phase, "defense": defense, "variant": variant,
            "strengths": [float(s) for s in strengths], "axis": axis, "cap": cap_value,  # weak to strong
            "utility_metric": str(cap_row["utility_metric"].iloc[0]) if len(cap_row) else "",
            "cap_std": _num(cap_row["cap_std"].iloc[0]) if len(cap_row) else None,
            "seeds": int(cap_row["n_seeds"].iloc[0]) if len(cap_row) else 0,
            "cap_status": str(cap_row["status"].iloc[0]) if len(cap_row) else "no runs",
            "falls_to_prior": falls,
            "falls_to_prior_text": UNDEFENDED_AT_PRIOR.get(undefended) or falls_text(
                falls, axis, strength_verdicts(rows, margin=margin), digits=3, compared=undefended is not None,
                failed=f"n/a: {unmeasured_text(rows) or 'every defended run failed'} (see Failed runs)"),
        })
    failed = pd.concat([frame, found.pop("frame")])
    inapplicable = inapplicable + _not_applicable_runs(failed, inapplicable)
    failed = failed[failed["status"] == "failed"]
    return {
        **context, "margin": margin, "verdict_rule": verdict_rule(margin),
        "test": " / ".join(sorted({v["test"] for v in verdicts})) or TEST_NAME,
        "verdicts": verdicts, "defenses": defenses, "canaries": canaries,
        "communication": _communication(pd.concat([baseline, undefended_features])),
        "features": found, "inapplicable": inapplicable,
        "failed": [{"attack": r.attack, "defense": r.defense, "phase": r.phase, "strength": float(r.strength),
                    "seed": int(r.seed), "error": r.error} for r in failed.itertuples()],
    }


def _not_applicable_runs(frame: pd.DataFrame, planned: list[dict]) -> list[dict]:
    """The pairs whose runs were recorded not applicable (an attack on a method that is not federated), for the
    report's "Not applicable" beside those left out in planning (``planned``)."""
    known = {(i["attack"], i["defense"], i["phase"]) for i in planned}
    runs = frame[frame["status"] == "n/a"].drop_duplicates(["attack", "defense", "phase"])
    return [{"attack": r.attack, "defense": r.defense, "phase": r.phase, "reason": r.error} for r in runs.itertuples()
            if (r.attack, r.defense, r.phase) not in known]


def _named(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its variants named per adversary (``tradeoff.variants``: a defense's two configurations, e.g.
    on the gradients and on the embeddings, are two settings), the canary-free controls left out of the naming."""
    controls = canary_controls(frame)
    parts = [with_variants(rows.drop(columns=["variant"], errors="ignore"))
             for _, rows in frame[~controls].groupby("adversary", sort=False)]
    return pd.concat([*parts, frame[controls].assign(variant="")]).loc[frame.index]


def _features(frame: pd.DataFrame, *, margin: float) -> dict:
    """The feature attacks' part of the summary (their records kept in ``frame`` for the failed runs)."""
    if frame.empty:
        return {"verdicts": [], "defenses": [], "margin": margin, "frame": frame}
    frame = pd.concat([with_variants(rows.drop(columns=["variant"], errors="ignore"))  # a defense's configurations
                       for _, rows in frame.groupby(["adversary", "victim"], sort=False)]).loc[frame.index]
    baseline, defended = frame[frame["defense"] == "none"], frame[frame["defense"] != "none"]
    verdicts = feature_verdicts(baseline, margin=margin)
    return {"verdicts": verdicts,
            "defenses": feature_defenses(defended, margin=margin, verdicts=verdicts, baseline=baseline),
            "margin": margin, "frame": frame}


def _strongest(verdicts: list[dict], keys: tuple[str, ...]) -> list[dict]:
    """Per value of ``keys``, the worst-case verdict where there is one, else the one attack's."""
    out = []
    for key in dict.fromkeys(tuple(v[k] for k in keys) for v in verdicts):
        mine = [v for v in verdicts if tuple(v[k] for k in keys) == key]
        out.append(next((v for v in mine if v["attack"] == WORST), mine[0]))
    return out


def what_leaks(summary: dict) -> list[str]:
    """The audit's answer first: per secret (and adversary or victim) and attacked phase, the worst verdict."""
    lines = [f"- labels ({v['phase']}), adversary party {v['adversary']}: {v['verdict']} "
             f"({v.get('strongest') or v['attack']}, leakage {_cell(v['leakage'], '{:+.3f}')})"
             for v in _strongest(summary["verdicts"], ("adversary", "phase"))]
    lines += [f"- party {v['victim']}'s features ({v['phase']}): {v['verdict']} "
              f"({v.get('strongest') or v['attack'] + ' by ' + who(v['adversary'])}, leakage "
              f"{_cell(v['leakage'], '{:+.4f}')} MSE)"
              for v in _strongest(summary.get("features", {}).get("verdicts", []), ("victim", "phase"))]
    return ["## What leaks", "", *lines] if lines else []


def _options(values: dict) -> str:
    """Resolved options as ``k=v`` (JSON values; a None reads "unset", as everywhere else)."""
    return ", ".join(f"{k}={'unset' if v is None else json.dumps(v)}" for k, v in values.items()) or \
        "none (it takes no options)"


def _cell(value, fmt: str = "{:.3f}") -> str:
    return "n/a" if value is None else fmt.format(value)


def active_markdown(active: dict | None) -> list[str]:
    """The report's section on the attacks that act (``audit.active``): which of their runs ran, and why."""
    if not active:
        return []
    lines = ["", "## Active adversary", "", f"Policy `{active['policy']}`: {active['rule']}.", ""]
    return lines + ([f"- {d['line']}" for d in active["decisions"]] or ["- no acting attack under a defense"])


def audit_markdown(summary: dict) -> str:
    """``audit.md``: verdicts first, then what each defense costs, communication, and what could not run."""
    lines = [f"# Audit of `{summary['method']}` on {summary['dataset']}", ""]
    lines += [f"- {k}: {v}" for k, v in summary.get("settings", {}).items()]
    options = summary.get("options", {})
    if options:
        lines.append(f"- method options: {_options(options.get('method', {}))}")
        lines += [f"- {name} options: {_options(values)}" for name, values in options.get("attacks", {}).items()]
    lines += ["", *what_leaks(summary)]
    lines += _label_markdown(summary)
    lines += canary_markdown(summary.get("canaries"))
    lines += active_markdown(summary.get("active"))
    lines += feature_markdown(summary.get("features", {}))
    lines += ["", "## Communication (no defense, per training)", "", "| phase | direction | kind | MB | messages |",
              "| --- | --- | --- | --- | --- |"]
    lines += [f"| {c['phase']} | {c['direction']} | {c['kind']} | {c['mb']:.3f} | {c['messages']:g} |"
              for c in summary["communication"]]
    lines += ["", "## Not applicable", ""]
    lines += [f"- {i['attack']} x {i['defense']} ({i['phase']}): {i['reason']}"
              for i in summary["inapplicable"]] or ["- none"]
    if summary["failed"]:
        lines += ["", "## Failed runs", ""]
        lines += [f"- {f['attack']} x {f['defense']}={f['strength']:g} ({f['phase']}), seed {f['seed']}: {f['error']}"
                  for f in summary["failed"]]
    return "\n".join(lines) + "\n"


def _label_markdown(summary: dict) -> list[str]:
    """The label attacks' verdicts and defenses; an audit of feature attacks alone says so in one line, without the
    label rules and empty tables."""
    if not summary["verdicts"] and not summary["defenses"]:
        return ["", "## Labels: verdicts (no defense)", "", "- no label attack ran"]
    lines = ["", f"Leakage = attack accuracy - adversary prior ({summary.get('prior', 'prior')}) on the same seed; "
             f"{summary['test']}; verdict margin {summary['margin']:g}.", "",
             f"Verdict rule: {summary.get('verdict_rule', verdict_rule(summary['margin']))}.", "",
             "## Labels: verdicts (no defense)", ""]
    lines += [f"- adversary party {v['adversary']}: {v['line']}" for v in summary["verdicts"]] or ["- no attack applies"]
    lines += ["", "attack acc: the tuned attack's settings selected on the adversary's auxiliary labels (what an adversary "
              "reaches); oracle: the best of everything the search trained, chosen on the targets' labels (an upper bound "
              "no adversary reaches, never in CAP); worst-case: the attack with the largest leakage.", "",
              "| adversary | attack | phase | attack acc | oracle | prior acc | leakage [95% CI] | p | utility | verdict |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for v in summary["verdicts"]:
        ci = f"[{_cell(v['ci_low'], '{:+.3f}')}, {_cell(v['ci_high'], '{:+.3f}')}]"
        name = f"{v['attack']} ({v['strongest']})" if v.get("strongest") else v["attack"]
        lines.append(f"| {v['adversary']} | {name} | {v['phase']} | {_cell(v['attack_mean'])} | "
                     f"{_cell(v.get('oracle'))} | {_cell(v['prior_mean'])} | {_cell(v['leakage'], '{:+.3f}')} {ci} | "
                     f"{_cell(v['p_value'], '{:.3g}')} | {_cell(v['utility'])} | {v['verdict']} |")
    lines += ["", "## Defenses", "", "CAP = mean over the strengths of U × (1 − attack accuracy), U the utility named. "
              "Falls to the prior at: the weakest strength whose own paired test reads no (or attack failed) with no "
              "stronger one yes; else each strength's verdict.",
              "", "| adversary | attack | phase | defense | strengths | U | CAP | falls to the prior at |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for d in summary["defenses"]:
        cap = cap_cell(d["cap"], d["cap_std"], n=d["seeds"], status=d["cap_status"])  # partial: which seeds, why
        strengths = ", ".join(strength_label(d["axis"], s) for s in d["strengths"])
        defense = f"{d['defense']} ({d['variant']})" if d.get("variant") else d["defense"]
        lines.append(f"| {d['adversary']} | {d['attack']} | {d['phase']} | {defense} | {strengths} | "
                     f"{utility_label(d.get('utility_metric', ''))} | {cap} | {d['falls_to_prior_text']} |")
    return lines
