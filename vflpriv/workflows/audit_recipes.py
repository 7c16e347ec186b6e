"""What the audit runs by default, and what its quick profile keeps (``audit.profile``).

The full audit (the default) runs every registered attack, every defense at its ``audit_strengths``, on every seed.
The quick profile (``vflpriv audit --quick``, ``audit.profile: quick``) is the development loop's smoke check, under a
minute on 2 cores for splitnn on digits: one seed (the first), the strongest attack of each kind
(``Attack.strongest_of_kind``: mc-mixmatch, gc, similarity, fi-decoder), untuned unless ``audit.tune`` is given, and
each defense at its middle audit strength. What a user names (``--attacks``, a defense's ``strengths``,
``--tune-attacks``) is kept as given; ``audit.md`` says what the profile left out.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from vflpriv.config.registry import ATTACKS, DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.tradeoff.variants import acts_on

if TYPE_CHECKING:
    import pandas as pd

FULL, QUICK = "full", "quick"


def default_attacks(profile: str) -> list[str]:
    """The attacks an audit runs when none are named: every registered one, or the strongest of each kind."""
    names = ATTACKS.names()
    return names if profile == FULL else [n for n in names if ATTACKS.get(n).strongest_of_kind]


def default_strengths(profile: str, strengths: Sequence[float] | None) -> tuple[float, ...] | None:
    """A defense's strengths when none are given: its audit strengths (weak to strong), or the middle one."""
    if strengths is None or profile == FULL or not strengths:
        return tuple(strengths) if strengths is not None else None
    return (strengths[len(strengths) // 2],)


def quick_seeds(seeds: list[int], *, given: bool) -> list[int]:
    """The quick profile's one seed: the first of the defaults, or the one given; several given are refused."""
    if given and len(seeds) > 1:
        raise ValueError(f"the quick profile runs one seed, but seeds {', '.join(map(str, seeds))} were given; give "
                         "one seed (--seeds 0), or leave out --quick (audit.profile) for the full audit")
    return seeds[:1]


def quick_note(*, default_seeds: Sequence[int], seeds: Sequence[int], attacks: Sequence[str], given_attacks: bool,
               defenses: dict[str, tuple[Sequence[float], Sequence[float]]], tuned: bool) -> str:
    """The ``audit.md`` line of a quick audit: what it ran and what it left out. ``defenses``: per defense, (its audit
    strengths, those that ran)."""
    parts = [f"seed {', '.join(map(str, seeds))} (the full audit's default: {', '.join(map(str, default_seeds))})"]
    if given_attacks:
        parts.append(f"attacks as given ({', '.join(attacks)})")
    else:
        left = [n for n in ATTACKS.names() if n not in attacks]
        parts.append(f"the strongest attack of each kind ({', '.join(attacks)}; left out: {', '.join(left) or 'none'})")
    cut = {name: ", ".join(f"{s:g}" for s in full if s not in ran) for name, (full, ran) in defenses.items()}
    left_out = "; ".join(f"{name} {strengths}" for name, strengths in cut.items() if strengths)
    parts.append("each defense at its middle strength" + (f" (left out: {left_out})" if left_out else ""))
    if not tuned:
        parts.append("untuned attacks (the full audit tunes each on the adversary's auxiliary labels; "
                     "--tune-attacks tunes them here too)")
    return ("quick: a smoke check for the development loop, not the audit (one seed, fewer attacks and strengths; "
            "run without --quick for the audit): " + "; ".join(parts))


# The active adversary: where an attack that acts (``Attack.acts``: mc-active's malicious optimiser) runs. Each of its
# runs trains a federation of its own, so at every strength of every defense it doubled the audit's trainings (and
# cost 29% of the default audit's time). ``audit.active: weakest`` (the default) runs it with no defense (its verdict)
# and at each defense's weakest strength, where an active adversary gains most over a passive one; at a defense's
# other strengths only where, at the weakest, it beat the strongest passive attack of its kind (same
# ``Attack.kind``) by more than the audit's margin. Elsewhere the passive attacks of its kind stand for it in the
# worst case, and its CAP is not computed (a CAP is defined over the whole sweep). ``every``: every strength.
WEAKEST, EVERY = "weakest", "every"


def _group(run: RunConfig) -> str:
    """The acting runs that share one defense sweep: adversary, phase, attack, and the swept defense but its strength."""
    swept = run.swept.model_dump(mode="json", exclude={"strength"})
    return json.dumps([run.partition.adversary, run.attack.phase, run.attack.name, swept], sort_keys=True)


def _sweep_key(defense: dict) -> str:
    """A swept defense's configuration but its strength, as :func:`_group` names it."""
    return json.dumps({k: v for k, v in defense.items() if k != "strength"}, sort_keys=True)


def _sweep(config: str) -> str:
    """The swept defense's configuration of a record (its strength left out; "" without one)."""
    swept = next((d for d in json.loads(config).get("defenses", []) if d.get("sweep")), None)
    return _sweep_key(swept) if swept else ""


def weakest_strength(name: str, strengths: Sequence[float]) -> float:
    """The strength of ``strengths`` that protects least, by the defense's declared axis."""
    return (min if DEFENSES.get(name).axis.stronger == "higher" else max)(strengths)


def defer_active(runs: list[RunConfig]) -> tuple[list[RunConfig], list[RunConfig]]:
    """(runs to run now, deferred runs): an acting attack's runs under a defense at any strength but its weakest are
    deferred to :func:`escalate`."""
    sweeps: dict[str, set[float]] = defaultdict(set)
    for run in runs:
        if run.attack_acts() and run.swept is not None:
            sweeps[_group(run)].add(run.swept.strength)
    now, deferred = [], []
    for run in runs:
        acting = run.attack_acts() and run.swept is not None
        keep = not acting or run.swept.strength == weakest_strength(run.swept.name, sweeps[_group(run)])
        (now if keep else deferred).append(run)
    return now, deferred


@dataclass(frozen=True)
class ActiveDecision:
    """Whether an acting attack ran at a defense's other strengths, and what decided it (means over seeds)."""

    adversary: int
    phase: str
    attack: str
    defense: str
    weakest: float
    active: float | None  #: its accuracy at the weakest strength
    passive: str  #: the strongest passive attack of its kind there, and its accuracy
    passive_accuracy: float | None
    escalated: bool
    deferred: int  #: runs at the other strengths (run when escalated)
    seconds: float | None  #: per run: its own training and the attack
    passive_seconds: float | None  #: per run of the passive attack: the attack alone (it shares its training)
    on: str = ""  #: what the defense's configuration acts on (``on embedding``): one defense's configurations apart

    def line(self, margin: float) -> str:
        if self.active is None or self.passive_accuracy is None:
            why = "no successful runs to compare at the weakest strength"
        else:
            why = (f"{self.active:.3f} against {self.passive} {self.passive_accuracy:.3f} at the weakest strength, "
                   f"{self.active - self.passive_accuracy:+.3f} ({'above' if self.escalated else 'within'} the margin "
                   f"{margin:g})")
        ran = f"ran at the other strengths ({self.deferred} runs)" if self.escalated else (
            f"not run at the other strengths ({self.deferred} runs saved)")
        cost = "" if self.seconds is None else f"; {self.seconds:.1f} s per run (its own training and the attack)" + (
            f" against {self.passive_seconds:.1f} s for {self.passive}" if self.passive_seconds is not None else "")
        on = f" {self.on}" if self.on else ""
        return f"{self.attack} x {self.defense}{on} ({self.phase}): {why}: {ran}{cost}"


def _mean(rows: pd.DataFrame) -> float | None:
    ok = rows[rows["status"] == "ok"]["attack_accuracy"].astype(float)
    return float(ok.mean()) if len(ok) and ok.notna().all() else None


def escalate(results: pd.DataFrame, deferred: list[RunConfig], *, margin: float
             ) -> tuple[list[RunConfig], list[ActiveDecision]]:
    """The deferred acting runs to run after all (those of the sweeps where, at the weakest strength, the acting
    attack beat the strongest passive attack of its kind by more than ``margin``, or could not be compared), and one
    decision per deferred sweep."""
    frame = results.assign(adversary=results["config"].map(lambda c: json.loads(c)["partition"]["adversary"]),
                           sweep=results["config"].map(_sweep))
    groups: dict[str, list[RunConfig]] = defaultdict(list)
    for run in deferred:
        groups[_group(run)].append(run)
    more, decisions = [], []
    for runs in groups.values():
        first = runs[0]
        name, phase, defense = first.attack.name, first.attack.phase, first.swept.name
        here = frame[(frame["adversary"] == first.partition.adversary) & (frame["phase"] == phase)
                     & (frame["sweep"] == _sweep_key(first.swept.model_dump(mode="json")))]  # this configuration
        ran = here[here["attack"] == name]
        weakest = float(ran["strength"].iloc[0]) if len(ran) else float("nan")
        at = here[here["strength"] == weakest]
        kind = ATTACKS.get(name).kind
        passive = {a: _mean(rows) for a, rows in at.groupby("attack")
                   if a in ATTACKS.names() and ATTACKS.get(a).kind == kind and not ATTACKS.get(a).acts}
        passive = {a: acc for a, acc in passive.items() if acc is not None}
        best = max(passive, key=passive.get) if passive else ""
        active = _mean(at[at["attack"] == name])
        escalated = active is None or not best or active - passive[best] > margin
        mine = at[(at["attack"] == name) & (at["status"] == "ok")]
        seconds = float((mine["train_seconds"] + mine["attack_seconds"]).mean()) if len(mine) else None
        theirs = at[(at["attack"] == best) & (at["status"] == "ok")]["attack_seconds"]
        decisions.append(ActiveDecision(int(first.partition.adversary), phase, name, defense, weakest, active, best,
                                        passive.get(best), escalated, len(runs), seconds,
                                        float(theirs.mean()) if len(theirs) else None,
                                        acts_on(defense, first.swept.phase, first.swept.kinds,
                                                method=first.method.name, party=first.swept.party)))
        if escalated:
            more += runs
    return more, decisions


POLICY = {WEAKEST: "each acting attack ran with no defense and at each defense's weakest strength; at a defense's other "
                   "strengths only where, at the weakest, it beat the strongest passive attack of its kind by more than "
                   "the margin (elsewhere those stand for it in the worst case, and its CAP is not computed)",
          EVERY: "each acting attack ran at every strength of every defense"}


def active_summary(policy: str, decisions: list[ActiveDecision], *, margin: float) -> dict:
    """The report's account of the acting attacks: the policy, and one line per deferred sweep."""
    return {"policy": policy, "rule": POLICY[policy], "margin": margin,
            "decisions": [{**asdict(d), "line": d.line(margin)} for d in decisions]}


def mark_partial(defenses: list[dict], decisions: list[ActiveDecision]) -> None:
    """No CAP for an acting attack's sweep that ran at its weakest strength only (CAP covers the whole sweep)."""
    partial = {(d.adversary, d.attack, d.phase, d.defense, d.on) for d in decisions if not d.escalated}
    for row in defenses:
        on = next((p for p in row.get("variant", "").split(", ") if p.startswith("on ")), None)  # of several
        if any(key[:4] == (row["adversary"], row["attack"], row["phase"], row["defense"]) and on in (None, key[4])
               for key in partial):
            text = row["falls_to_prior_text"]
            row.update(cap=None, cap_std=None, cap_status="not computed: run at the weakest strength only (see "
                       "Active adversary)", falls_to_prior_text=text if text.startswith("n/a") else
                       f"{text} (run at the weakest strength only)")
