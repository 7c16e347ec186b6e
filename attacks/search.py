"""A tuned attack: the adversary selects its attack's settings with the labels it holds, never its targets'.

- Candidates: the attack's ``space()`` (each option's configured value is always a candidate value, and the options
  as given come first): the whole grid when it has at most ``budget`` points, else ``budget`` candidates proposed
  one after another by Optuna's TPE sampler (seeded; the optional ``search`` extra), the options as given first.
- Score: accuracy on :data:`HOLDOUT`, a stratified quarter of the auxiliary samples whose labels the candidate is
  not given (it trains on the other three quarters). The search never sees a target label: it has none. A feature
  attack (``secret`` ``features``) is scored the same way on a quarter of its known samples, whose victim features
  the candidate is not given: minus its MSE on them (:class:`FeatureHoldout`); its trials are not cached (they hold
  reconstructions, not labels, and cost a decoder's training each).
- Early stopping (grid with a ``budget_option``): successive halving (Jamieson & Talwalkar 2016) with eta =
  :data:`ETA` on that iteration count. Every candidate runs at ETA^-r of it (r = ceil(log_ETA n)), the best
  1/ETA of them at ETA times that, and so on; the best of the last round wins. Eight candidates: 8 at 1/16, the best
  2 at 1/4, so the search costs one run's worth of iterations (plus the refit) instead of 8. Why 4 and not 2:
  eta 2 cost 3 runs' worth, and the audit trains a tuned MixMatch per (defense, strength, seed), which at eta 2 did
  not fit the 5-minute audit; Hyperband (Li et al. 2018) uses 3 or 4.
- Refit: the winner on all the auxiliary labels, with the untuned attack's own random stream, so that when the
  options as given win, the tuned numbers are the untuned ones exactly.
- Rounds restart, they do not resume: a round's run is not the prefix of its next round's, so no state is carried
  over. Each (candidate, budget) draws its own stream (its init, batches and augmentations differ), the refit trains
  on other data, and MixMatch ramps lambda_u over the whole run ((t + 1) / T, T its step count).
- Every trial has a random stream of its own (from the seed and the candidate) and, given a ``key``, is cached
  (its guesses of every target set) under (key, candidate, budget): a rerun of an interrupted search resumes.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import math
from collections.abc import Callable
from dataclasses import dataclass

import torch

from vflpriv.attacks.base import Attack
from vflpriv.common.errors import ConfigError, DivergedError, ProtocolError, class_named
from vflpriv.common.secret_kinds import FEATURES, LABELS
from vflpriv.common.seeding import generator
from vflpriv.config.keys import config_hash
from vflpriv.config.options import CANDIDATE
from vflpriv.engine.adversary import HOLDOUT, AdversaryView, Inference
from vflpriv.store import cache

#: Share of each class's auxiliary samples held out to score candidates.
HOLDOUT_SHARE = 0.25
#: Successive halving's reduction factor: each round keeps the best 1/ETA at ETA times the iterations.
ETA = 4


@dataclass(frozen=True)
class Trial:
    """One candidate evaluated: its settings (differences from the options as given), the share of the budget
    option it ran with, its accuracy on the held-out auxiliary labels (a feature attack's: minus its MSE on the
    held-out known samples; higher is better either way), and its guesses of every target set."""

    options: dict
    fraction: float
    aux_accuracy: float
    inferences: dict[str, Inference]
    #: Why the candidate was discarded ('' if it was not): its training diverged, or its holdout score is not finite.
    diverged: str = ""

    def summary(self) -> dict:
        score = self.aux_accuracy if math.isfinite(self.aux_accuracy) else None
        return {"options": self.options, "fraction": self.fraction, "aux_accuracy": score,
                **({"diverged": self.diverged} if self.diverged else {})}


@dataclass(frozen=True)
class SearchResult:
    """The selected settings, the winner's guesses refitted on all auxiliary labels, and every trial."""

    selected: dict
    inferences: dict[str, Inference]
    trials: list[Trial]
    how: str


def holdout_split(y: torch.Tensor, *, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(fit, holdout) positions: :data:`HOLDOUT_SHARE` of each class with at least two samples held out; None when
    nothing can be held out or the fit part would miss a class the auxiliary set has."""
    fit, held = [], []
    for c in y.unique().tolist():
        members = (y == c).nonzero().flatten()
        order = members[torch.randperm(members.numel(), generator=generator, device=generator.device).to(y.device)]
        k = max(1, math.floor(members.numel() * HOLDOUT_SHARE)) if members.numel() >= 2 else 0
        held.append(order[:k])
        fit.append(order[k:])
    fit_ids, held_ids = torch.cat(fit).sort().values, torch.cat(held).sort().values
    return (fit_ids, held_ids) if held_ids.numel() else None


def grid(attack: Attack, space: dict[str, tuple]) -> list[dict]:
    """Every combination of the space as overrides of the attack's options, the options as given first."""
    given = attack.options.model_dump(mode="json")
    axes = []
    for name, values in space.items():
        current = given[name]
        axes.append([(name, current)] + [(name, v) for v in values if v != current])
    combos = [dict(c) for c in itertools.product(*axes)] if axes else [{}]
    return [{k: v for k, v in combo.items() if v != given[k]} for combo in combos]


def _shares(count: int) -> list[float]:
    """The share of the budget option each round of successive halving over ``count`` candidates trains with."""
    rounds = max(1, math.ceil(math.log(count, ETA) - 1e-9))
    return [float(ETA) ** (r - rounds) for r in range(rounds)]


def tries(attack: Attack, candidates: list[dict]) -> list[tuple[dict, float]]:
    """Every (candidate, share of the budget option) a grid search over ``candidates`` may build: each whole (the
    exhaustive search, the winner), and under successive halving at every round's share (which candidates reach a
    round depends on their scores)."""
    halved = _shares(len(candidates)) if attack.budget_option and len(candidates) > 1 else []
    return [(c, share) for c in candidates for share in (1.0, *halved)]


def with_overrides(attack: Attack, overrides: dict, fraction: float) -> Attack:
    """The attack with ``overrides`` applied and its budget option scaled by ``fraction`` (at least 1)."""
    data = attack.options.model_dump(mode="json") | overrides
    if fraction < 1.0 and attack.budget_option:
        data[attack.budget_option] = max(1, round(data[attack.budget_option] * fraction))
    return type(attack)(type(attack.options).model_validate(data, context=CANDIDATE))


def _to_labels(inferences: dict[str, Inference]) -> dict[str, list[int]]:
    out = {}
    for name, inf in inferences.items():
        out[name] = inf.predictions.cpu().tolist()
        if inf.covered is not None:
            out[f"covered:{name}"] = inf.covered.long().cpu().tolist()
    return out


def _from_labels(labels: dict[str, list[int]]) -> dict[str, Inference]:
    return {name: Inference(predictions=torch.tensor(v, dtype=torch.long),
                            covered=torch.tensor(labels[f"covered:{name}"], dtype=torch.bool)
                            if f"covered:{name}" in labels else None)
            for name, v in labels.items() if not name.startswith("covered:")}


class LabelHoldout:
    """Candidates of a label attack scored by their accuracy on a stratified quarter of the auxiliary labels."""

    cacheable = True
    unsplittable = "too few auxiliary labels to hold any out (a class needs at least 2)"

    def __init__(self, view: AdversaryView, *, seed: int):
        self.split = holdout_split(view.aux_y, generator=generator(seed, "attack:holdout"))
        if self.split is not None:
            fit, held = self.split
            self.fit_view = dataclasses.replace(
                view, aux_x=view.aux_x[fit], aux_y=view.aux_y[fit], aux_ids=view.aux_ids[fit],
                targets={**view.targets, HOLDOUT: view.aux_x[held]},
                target_ids={**view.target_ids, HOLDOUT: view.aux_ids[held]})
            self.held_y = view.aux_y[held].cpu()

    def score(self, inferences: dict) -> float:
        held = inferences.pop(HOLDOUT).predictions
        if held.numel() != self.held_y.numel():
            raise ProtocolError("a cached trial's holdout guesses do not match the holdout")
        return float((held == self.held_y).double().mean())


class FeatureHoldout:
    """Candidates of a feature attack scored by minus their MSE on a random quarter of the known samples (at least
    one held out, at least two left to fit on)."""

    cacheable = False
    unsplittable = "too few known samples to hold any out (it needs at least 3)"

    def __init__(self, view, *, seed: int, name: str = HOLDOUT):
        n = view.aux_victim.shape[0]
        self.split, self.name = None, name
        if n >= 3:
            g = generator(seed, "attack:holdout" if name == HOLDOUT else f"attack:{name}")
            order = torch.randperm(n, generator=g, device=g.device).cpu()
            k = max(1, math.floor(n * HOLDOUT_SHARE))
            fit, held = order[k:].sort().values, order[:k].sort().values
            self.split = (fit, held)
            received = {**view.received, "aux": view.received["aux"][fit.to(view.device)],
                        name: view.received["aux"][held.to(view.device)]}
            own = {**view.own, "aux": view.own["aux"][fit.to(view.device)], name: view.own["aux"][held.to(view.device)]
                   } if view.own else {}
            self.fit_view = dataclasses.replace(view, received=received, own=own, aux_ids=view.aux_ids[fit],
                                                aux_victim=view.aux_victim[fit.to(view.device)])
            self.held = view.aux_victim[held.to(view.device)].cpu()

    def score(self, inferences: dict) -> float:
        guess = inferences.pop(self.name).features.cpu()
        if guess.shape != self.held.shape:
            raise ProtocolError("a trial's holdout reconstruction does not match the holdout")
        return -float((guess.double() - self.held.double()).pow(2).mean())


#: How a candidate is scored, by the secret the attack infers.
HOLDOUTS = {LABELS: LabelHoldout, FEATURES: FeatureHoldout}


class Search:
    """One tuned attack on one view: trials are run (or read from the cache) and scored on the holdout."""

    def __init__(self, attack: Attack, view: AdversaryView, *, seed: int, key: str | None, reply=None):
        self.attack, self.view, self.seed, self.key, self.reply = attack, view, seed, key, reply
        self.holdout = HOLDOUTS[attack.secret](view, seed=seed)
        self.split = self.holdout.split
        if self.split is not None:
            self.fit_view = self.holdout.fit_view
        self.trials: list[Trial] = []

    def trial(self, overrides: dict, fraction: float) -> Trial:
        """The candidate on the fit part of the auxiliary set, scored on the holdout (cached under the key)."""
        name = json.dumps([overrides, fraction], sort_keys=True)
        view = dataclasses.replace(self.fit_view, generator=generator(self.seed, f"attack:trial:{name}"))

        def run() -> dict:
            inferences = with_overrides(self.attack, overrides, fraction).infer(view)
            if self.reply is not None:  # the runner's contract check of a reply, on the trial's own view
                inferences = dict(self.reply(inferences, view))
            if HOLDOUT not in inferences:
                raise ProtocolError(f"attack {class_named(self.attack)} declares a search space but did not guess "
                                    f"the '{HOLDOUT}' target set")
            return inferences

        try:
            if not self.holdout.cacheable:
                inferences = run()
            elif self.key is None:
                inferences = _from_labels(_to_labels(run()))
            else:
                inferences = _from_labels(cache.cached_labels(
                    config_hash({"code": cache.code_version(), "trial": [self.key, name]}, 24),
                    lambda: _to_labels(run())))
            score, why = self.holdout.score(inferences), ""
            if not math.isfinite(score):
                why = "its holdout score is not finite"
        except DivergedError as exc:
            inferences, score, why = {}, -math.inf, str(exc)
        # the adversary sees a diverged candidate on its own holdout and discards it: the lowest score, never chosen
        # over a finite one (a NaN score would have sorted anywhere)
        found = Trial(overrides, fraction, score if not why else -math.inf, inferences if not why else {}, why)
        self.trials.append(found)
        return found

    def halving(self, candidates: list[dict]) -> dict:
        """Successive halving (eta :data:`ETA`) on the budget option: the best candidate of the last round."""
        alive = candidates
        for fraction in _shares(len(candidates)):
            scored = [(self.trial(c, fraction).aux_accuracy, -i, c) for i, c in enumerate(alive)]
            scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
            alive = [c for _, _, c in scored[:max(1, math.ceil(len(alive) / ETA))]]
        return alive[0]

    def exhaustive(self, candidates: list[dict]) -> dict:
        """Every candidate whole; the best (the earliest on ties: the options as given first)."""
        scores = [self.trial(c, 1.0).aux_accuracy for c in candidates]
        return candidates[max(range(len(candidates)), key=lambda i: (scores[i], -i))]

    def optuna(self, space: dict[str, tuple], budget: int) -> dict:
        """``budget`` candidates from Optuna's TPE sampler (seeded), the options as given first; the best wins."""
        try:
            import optuna  # the optional ``search`` extra: only a space larger than the budget needs it
        except ImportError:
            raise ConfigError("a search space larger than attack.search_budget is searched with Optuna: pip install "
                              "'vflpriv[search]', or raise attack.search_budget to the grid's size") from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        given = self.attack.options.model_dump(mode="json")
        choices = {k: [given[k]] + [v for v in vals if v != given[k]] for k, vals in space.items()}
        sampler = generator(self.seed, "attack:sampler")
        seed = int(torch.randint(2**31 - 1, (1,), generator=sampler, device=sampler.device))
        study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
        study.enqueue_trial({k: 0 for k in choices})
        best: tuple[float, int, dict] | None = None
        for i in range(budget):
            t = study.ask({k: optuna.distributions.CategoricalDistribution(list(range(len(v))))
                           for k, v in choices.items()})
            overrides = {k: choices[k][t.params[k]] for k in choices if choices[k][t.params[k]] != given[k]}
            score = self.trial(overrides, 1.0).aux_accuracy
            study.tell(t, score)
            if best is None or score > best[0]:
                best = (score, i, overrides)
        return best[2]


def search(attack: Attack, view: AdversaryView, *, budget: int, seed: int, key: str | None = None,
           space: dict[str, tuple] | None = None, refit: Callable[[Attack], dict[str, Inference]] | None = None,
           reply: Callable[[dict, AdversaryView], dict] | None = None) -> SearchResult | str:
    """Tune ``attack`` on ``view`` (see the module): the result, or why it cannot be tuned (a string). ``reply``
    checks each trial's reply on the trial's view (ProtocolError naming the plugin) before it is scored or kept."""
    space = attack.space() if space is None else space
    if not space:
        return attack.untunable or f"{class_named(attack)} declares no search space"
    s = Search(attack, view, seed=seed, key=key, reply=reply)
    if s.split is None:
        return s.holdout.unsplittable
    candidates = grid(attack, space)
    if len(candidates) > budget:
        selected, how = s.optuna(space, budget), f"Optuna TPE, {budget} of {len(candidates)} candidates"
    elif attack.budget_option and len(candidates) > 1:
        selected = s.halving(candidates)
        how = f"grid of {len(candidates)}, successive halving on {attack.budget_option}"
    else:
        selected, how = s.exhaustive(candidates), f"grid of {len(candidates)}"
    winner = with_overrides(attack, selected, 1.0)
    inferences = refit(winner) if refit is not None else winner.infer(view)
    return SearchResult(selected, inferences, s.trials, how + "; scored on a stratified quarter of the auxiliary labels")
