"""Attacks on a trained federation: the adversary's view, the attack's inference (tuned or not), its prior.

Each attack gets its own :class:`AdversaryView` of the one training (the inbox holds what any attack
of the training asked for); only the runner reads the targets' labels, to score what came back
(``runner.scoring``).
"""

from __future__ import annotations

import copy
import json

import torch

from vflpriv.attacks.search import SearchResult, search
from vflpriv.common import metrics
from vflpriv.common.errors import ProtocolError
from vflpriv.common.seeding import generator
from vflpriv.config.keys import code_mark
from vflpriv.config.registry import ATTACKS
from vflpriv.data.load import data_of
from vflpriv.data.scenario import Scenario
from vflpriv.engine import Federation
from vflpriv.engine.adversary import AdversaryHooks, AdversaryView, ObservedStep
from vflpriv.models.training import apply_in_batches, require_finite
from vflpriv.runner.handed import changed_in_place, tensors_digest
from vflpriv.runner.planning import AttackPlan
from vflpriv.runner.prior import prior_predictions
from vflpriv.runner.scoring import hits, odds_ratio, record_search, score_attack, score_canaries
from vflpriv.store.records import RunRecord


def adversary_view(fed: Federation, scenario: Scenario, encoder, phase: str, gen: torch.Generator,
                   steps: tuple[ObservedStep, ...] = ()) -> AdversaryView:
    """The adversary's holdings: never its targets' labels, only its auxiliary ones (and the steps of its own
    training it recorded)."""
    party = fed.parties[scenario.adversary]
    aux = scenario.aux.to(fed.device)
    aux_y = scenario.dataset.y_train[scenario.aux].to(fed.device)
    train_ids = fed.labeled_aligned()
    train_ids = train_ids[~torch.isin(train_ids, aux)]  # aux labels are known, not inferred
    if encoder is not None:
        encoder = copy.deepcopy(encoder).eval().requires_grad_(False)
    return AdversaryView(
        party=party.index, phase=phase, num_classes=fed.num_classes, spec=party.spec, encoder=encoder,
        local_x=party.x_train[party.local_ids], aux_x=party.x_train[aux], aux_y=aux_y, aux_ids=aux,
        targets={"test": party.x_test.clone(), "train": party.x_train[train_ids]}, target_ids={"train": train_ids},
        inbox=fed.channel.inbox, generator=gen, device=fed.device, steps=steps, recipe=fed.finetune,
    )


def _truth(scenario: Scenario, view: AdversaryView) -> dict[str, torch.Tensor]:
    """The true labels of every target set: read here, by the runner, never handed to the attack."""
    ds = scenario.dataset
    return {"test": ds.y_test, "train": ds.y_train[view.target_ids["train"].cpu()]}


def run_attack(a: AttackPlan, fed: Federation, scenario: Scenario, encoder, record: RunRecord, *,
               delta: float = 0.0) -> None:
    """Run the planned attack from the adversary's view of ``encoder`` and score it (and its prior) into ``record``;
    its guesses of the random-label canaries, if any, are scored against their drawn labels apart from the rest, with
    the empirical epsilon they certify at ``delta`` (the training's DP claim's).

    Non-finite encoder outputs, attack outputs or prior outputs raise :class:`DivergedError`.
    """
    attack, cfg = a.attack, a.config
    phase = cfg.attack.phase
    if attack.needs_encoder and encoder is None:
        raise ProtocolError(f"method '{cfg.method.name}' declares no {phase} snapshot of the adversary's encoder")
    adversary = getattr(fed.hooks, "adversary", None)
    steps = adversary.steps_for(attack.observation()) if isinstance(adversary, AdversaryHooks) else ()
    view = adversary_view(fed, scenario, encoder, phase, generator(cfg.seed, "attack"), steps)
    if view.encoder is not None:
        require_finite(apply_in_batches(view.encoder, view.aux_x), f"the adversary's {phase} encoder outputs")
    read = (view.local_x, view.aux_x, view.aux_y, view.aux_ids, view.targets, view.target_ids)  # the inbox: run()'s
    before = tensors_digest(*read)
    found = tuned(a, view, canary_key=scenario.canary_key) if a.space is not None else None
    inferences = found.inferences if isinstance(found, SearchResult) else attack.infer(view)
    if tensors_digest(*read) != before:  # its prior reads the view after it, and the inbox is every attack's
        raise ProtocolError(changed_in_place(attack, cfg.attack.name, "its view (its features, auxiliary labels or "
                                             "ids), which its prior reads after it"))
    truth = _truth(scenario, view)
    canary = torch.isin(view.target_ids["train"].cpu(), scenario.canaries)
    hidden = {"train": canary}
    covered = score_attack(record, inferences, truth, hidden)
    y = truth[record.attack_target][covered]
    record.attack_hits = hits(inferences[record.attack_target].predictions.cpu()[covered], y)
    if isinstance(found, SearchResult):
        record_search(record, found, truth, hidden)
    elif isinstance(found, str):
        record.notes = "; ".join(filter(None, [record.notes, f"attack {cfg.attack.name} not tuned: {found}"]))
    prior = prior_predictions(a.prior, view, attack, truth) if a.prior.kind != "none" else None
    if prior is not None:
        predicted = prior[record.attack_target]
        record.prior_accuracy = metrics.accuracy(predicted[covered], y)
        record.prior_hits = hits(predicted[covered], y)
        record.leakage = record.attack_accuracy - record.prior_accuracy
        record.leakage_multiplicative = odds_ratio(record.attack_hits, record.prior_hits)
    if bool(canary.any()) and "train" in inferences:
        positions = canary.nonzero().flatten()
        labels = _canary_labels(scenario, view.target_ids["train"].cpu()[positions])
        score_canaries(record, inferences["train"], positions, labels, classes=record.canary_classes, delta=delta,
                       prior=prior["train"][positions] if prior is not None else None)


def _canary_labels(scenario: Scenario, ids: torch.Tensor) -> torch.Tensor:
    """The drawn labels of the canaries ``ids`` (in that order)."""
    return scenario.canary_labels[torch.searchsorted(scenario.canaries, ids)]


def tuned(a: AttackPlan, view: AdversaryView, *, canary_key: str = "", reply=None) -> SearchResult | str:
    """The attack tuned on the adversary's auxiliary labels over its planned space (``attacks.search``), trials
    cached per training and its data (``data_of``), per canary key (the canaries' labels change the training) and per
    revision and plugin code (``code_mark``); ``reply`` checks each trial's reply (``attacks.search.search``)."""
    cfg, attack = a.config, a.attack
    mark = code_mark(ATTACKS, cfg.attack.name)
    key = json.dumps([cfg.training_key(), data_of(cfg), cfg.attack.name, cfg.attack.phase,
                      attack.options.model_dump(mode="json"), *([canary_key] if canary_key else []),
                      *([mark] if mark else [])], sort_keys=True)
    return search(attack, view, budget=cfg.attack.search_budget, seed=cfg.seed, key=key, space=a.space, reply=reply)


def prior_alone(a: AttackPlan, fed: Federation, scenario: Scenario) -> float:
    """The prior's test accuracy when there is no federation to attack (a non-federated method)."""
    cfg = a.config
    view = adversary_view(fed, scenario, None, cfg.attack.phase, generator(cfg.seed, "attack"))
    truth = _truth(scenario, view)
    return metrics.accuracy(prior_predictions(a.prior, view, a.attack, truth)["test"], truth["test"])
