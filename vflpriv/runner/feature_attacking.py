"""A feature attack on a trained federation: the adversary's :class:`FeatureView`, its reconstructions (tuned or
not), the feature prior, and the scores only the runner can compute (it alone reads the victim's true features).

What the view holds (DESIGN.md, two secrets): the per-sample rows the adversary received from its victim in the
attacked phase (the latest per sample: the bottom as it was when it last sent it) and at inference (the test rows, in
order, finetuning only: a pretraining-phase attack has no model of the inference embeddings), its own features of
those samples, its own trained models, and the victim's features of its known samples (``partition.aux_features``)
only. Targets are the victim's other training samples it received rows of (``train``) and the test samples
(``test``); the record's ``attack_target`` names the set scored first (``test`` where there is one).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import torch
from torch import nn

from vflpriv.attacks.search import SearchResult
from vflpriv.common import feature_metrics as fm
from vflpriv.common.errors import ProtocolError, class_named, type_path
from vflpriv.common.seeding import generator
from vflpriv.data.scenario import Scenario
from vflpriv.engine import ACTIVE, INFERENCE, SERVER, Federation
from vflpriv.engine.adversary import FeatureView, Reconstruction
from vflpriv.models.training import require_finite
from vflpriv.runner.feature_prior import feature_prior
from vflpriv.store.records import FAILED, RunRecord


class Unscorable(Exception):
    """The attack has nothing to reconstruct from or nothing to learn on (its record fails with the reason)."""


def _latest_rows(inbox, kind: str, phase: str, victim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, rows): the last row the receiver got about each sample from ``victim`` in ``phase`` (ids sorted)."""
    got = [r for r in inbox.select(kind, phase) if r.sender == victim and r.sample_ids is not None]
    if not got:
        return torch.empty(0, dtype=torch.long), torch.empty(0)
    ids = torch.cat([r.sample_ids.cpu() for r in got])
    rows = torch.cat([r.payload.detach().flatten(1) for r in got])
    last = torch.full((int(ids.max()) + 1,), -1, dtype=torch.long).scatter_reduce(
        0, ids, torch.arange(ids.numel()), reduce="amax")
    kept = (last >= 0).nonzero().flatten()
    return kept, rows[last[kept].to(rows.device)]


def _test_rows(inbox, kind: str, victim: int) -> torch.Tensor | None:
    """The rows received at inference from ``victim`` about the test samples (no sample ids), in order."""
    got = [r.payload.detach().flatten(1) for r in inbox.select(kind, INFERENCE) if r.sender == victim and r.sample_ids is None]
    return torch.cat(got) if got else None


def _own(fed: Federation, party: int, ids: dict[str, torch.Tensor], test: bool) -> dict[str, torch.Tensor]:
    if party == SERVER:
        return {}
    p = fed.parties[party]
    own = {name: p.x_train[i.to(fed.device)] for name, i in ids.items()}
    return {**own, "test": p.x_test.clone()} if test else own  # a copy: x_test is the loaded dataset's own tensor


class FrozenCopies(Mapping):
    """Trained models, each deep-copied and frozen when an attack first reads it: the attack cannot change the
    training's models, and one that reads none (fi-decoder, fi-inversion) pays for no copy."""

    def __init__(self, models: dict[str, nn.Module]):
        self._models, self._copies = models, {}

    def __getitem__(self, name: str) -> nn.Module:
        if name not in self._copies:
            self._copies[name] = copy.deepcopy(self._models[name]).eval().requires_grad_(False)
        return self._copies[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._models)

    def __len__(self) -> int:
        return len(self._models)


def _models(trained, party: int, phase: str) -> Mapping[str, nn.Module]:
    """The adversary's own trained models after finetuning (its bottom; the active party's top too), frozen copies."""
    if party == SERVER or phase != "finetune":
        return {}
    return FrozenCopies({"bottom": trained.bottoms[party], **({"top": trained.top} if party == ACTIVE else {})})


@dataclass(frozen=True)
class Truth:
    """The victim's true features of every target set, min-max scaled to [0, 1] on the training data (the anchors'
    scale; read by the runner only), the values of each of its binary and categorical columns (the exact-match
    score's; none for images), and the two scales: the adversary's (``seen``, fitted on its known samples: the view's
    features and every guess are on it, as the training data's range would tell it about every target) and the
    scores' (``scale``)."""

    sets: dict[str, torch.Tensor]
    levels: dict[int, torch.Tensor]
    seen: tuple[torch.Tensor, torch.Tensor]
    scale: tuple[torch.Tensor, torch.Tensor]

    def scored(self, guess: torch.Tensor) -> torch.Tensor:
        """A guess on the adversary's scale put on the scores' scale."""
        return fm.rescaled(guess.cpu(), self.seen, self.scale)


def feature_view(a, fed: Federation, scenario: Scenario, trained, gen: torch.Generator) -> tuple[FeatureView, Truth]:
    """The view of ``a``'s adversary, and the truth the runner scores it against."""
    adversary, phase = a.adversary, a.config.attack.phase
    kind = adversary.reads[0][0]
    victim = adversary.victim
    inbox = fed.channel.inboxes[adversary.party]
    ids, rows = _latest_rows(inbox, kind, phase, victim)
    known = torch.isin(ids, a.known)
    if int(known.sum()) < 2:
        raise Unscorable(f"the adversary received {kind} rows of {int(known.sum())} of its {a.known.numel()}"
                         f" known samples in {phase}: too few to learn a reconstruction from (it needs 2)")
    if not bool((~known).any()):
        raise Unscorable(f"the adversary received {kind} rows of its known samples only in {phase}: no target")
    sets = {"aux": ids[known], "train": ids[~known]}
    test = _test_rows(inbox, kind, victim) if any(at == INFERENCE for _, at in adversary.reads) else None
    ds = scenario.dataset
    if test is not None and test.shape[0] != ds.y_test.numel():
        test = None  # rows that are not one per test sample cannot be told apart
    x, spec = ds.x_train[victim], ds.specs[victim]
    image = spec.modality == "image"
    low, span = fm.fit_scale(x, image=image)
    seen = fm.fit_scale(x[sets["aux"]], image=image)
    truth = {name: fm.scaled(x[i], low, span) for name, i in sets.items() if name != "aux"}
    levels = {} if image else fm.discrete_levels(fm.scaled(x, low, span), categorical=spec.n_categorical)
    received = {"aux": rows[known].float(), "train": rows[~known].float()}
    if test is not None:
        truth["test"], received["test"] = fm.scaled(ds.x_test[victim], low, span), test.float()
    view = FeatureView(
        party=adversary.party, victim=victim, phase=phase, kind=kind, victim_spec=ds.specs[victim],
        spec=None if adversary.party == SERVER else ds.specs[adversary.party],
        received={k: v.to(fed.device) for k, v in received.items()}, own=_own(fed, adversary.party, sets, test is not None),
        aux_ids=sets["aux"], aux_victim=fm.scaled(x[sets["aux"]], *seen).to(fed.device),
        target_ids={"train": sets["train"]}, inbox=inbox, models=_models(trained, adversary.party, phase),
        generator=gen, device=fed.device)
    return view, Truth(truth, levels, seen, (low, span))


def run_feature_attack(a, fed: Federation, scenario: Scenario, trained, record: RunRecord, *, delta: float = 0.0
                       ) -> None:
    """Run the planned feature attack from its adversary's view and score it and the feature prior into ``record``.
    Non-finite reconstructions raise :class:`DivergedError`; an attack with nothing to learn on fails its record."""
    from vflpriv.runner.attacking import tuned  # the label runner's tuner, shared

    cfg = a.config
    try:
        view, truth = feature_view(a, fed, scenario, trained, generator(cfg.seed, "attack"))
    except Unscorable as exc:
        record.status, record.error = FAILED, str(exc)
        return
    prior = feature_prior(a.prior, view)  # before the attack reads the view: nothing it does there reaches the prior
    found = tuned(a, view, reply=_trial_reply(cfg.attack.name, a.attack)) if a.space is not None else None
    guesses = found.inferences if isinstance(found, SearchResult) else a.attack.infer(view)
    guesses = _reply(guesses, view, {k: tuple(y.shape) for k, y in truth.sets.items()}, cfg.attack.name, a.attack)
    if isinstance(found, SearchResult):
        record_feature_search(record, found, truth)
    elif isinstance(found, str):
        record.notes = "; ".join(filter(None, [record.notes, f"attack {cfg.attack.name} not tuned: {found}"]))
    score_features(record, guesses, truth, prior, view, image_scores=a.attack.image_scores(view.victim_spec))


def _trial_reply(name: str, attack):
    """The check of a tuned attack's trial reply on its own (fit) view: :func:`_reply`, each set one row per target it
    received, of the victim's sample shape; so a trial's wrong reply fails the run naming the plugin, as its last does."""
    def check(guesses, view: FeatureView) -> dict[str, Reconstruction]:
        sample = tuple(view.aux_victim.shape[1:])
        return _reply(guesses, view, {s: (view.received[s].shape[0], *sample) for s in view.targets}, name, attack)

    return check


def _reply(guesses, view: FeatureView, shapes: dict[str, tuple], name: str, attack) -> dict[str, Reconstruction]:
    """``guesses`` if they keep :meth:`FeatureAttack.infer`'s contract: a :class:`Reconstruction` of every target set
    of the view and of no other set, each a tensor of its set's shape in ``shapes`` (one row per target of the victim's
    shape); else :class:`ProtocolError` naming the attack and its class (a plugin's reply fails its run, not the
    training's)."""
    who = f"attack '{name}' ({type_path(type(attack))})"
    if not isinstance(guesses, Mapping):
        raise ProtocolError(f"{who} returned {class_named(guesses)}, not a mapping of target set names to "
                            f"Reconstructions ({', '.join(view.targets)})")
    asked, given = set(view.targets), set(guesses)
    if given != asked:
        raise ProtocolError(f"{who} returned reconstructions of {', '.join(sorted(given)) or 'no target set'}; it was "
                            f"given {', '.join(view.targets)}")
    for set_name, shape in shapes.items():
        found = guesses[set_name]
        features = getattr(found, "features", None)
        if not isinstance(found, Reconstruction) or not isinstance(features, torch.Tensor):
            raise ProtocolError(f"{who} returned {class_named(found)} for its {set_name} targets, not a "
                                "Reconstruction of a tensor")
        if tuple(features.shape) != shape:
            raise ProtocolError(f"{who} reconstructed its {shape[0]} {set_name} targets as shape "
                                f"{tuple(features.shape)}; the victim's features have shape {shape}")
    return guesses


def _checked(guesses: dict[str, Reconstruction], truth: Truth) -> dict[str, torch.Tensor]:
    """The reconstructions (of the contract :func:`_reply` checked) on the scores' scale, each checked finite."""
    return {name: truth.scored(require_finite(guesses[name].features,
                                              f"the attack's reconstruction of its {name} targets"))
            for name in truth.sets}


def score_features(record: RunRecord, guesses: dict[str, Reconstruction], found: Truth, prior,
                   view: FeatureView, *, image_scores: bool) -> None:
    """The reconstructions' scores and the prior's on the same targets (the primary set: ``test`` where there is one)."""
    truth = found.sets
    rec = _checked(guesses, found)
    primary = "test" if "test" in truth else "train"
    y, guess = truth[primary], rec[primary]
    record.attack_target, record.n_targets = primary, int(y.shape[0])
    errors = fm.per_target_mse(guess, y)
    record.feature_mse = float(errors.mean())
    record.feature_mse_train = fm.mse(rec["train"], truth["train"])
    record.feature_ap = fm.ap(record.feature_mse)
    record.feature_mse_per_feature = json.dumps(fm.per_feature_mse(guess, y).tolist())
    record.attack_errors = json.dumps(errors.tolist())
    image = image_scores and y.dim() == 4
    if image:
        record.feature_psnr = fm.psnr(record.feature_mse)
        record.feature_ssim = float(fm.ssim(guess, y).mean())
    else:
        record.feature_exact_match = fm.exact_match(guess, y, found.levels)[0]
    mine = {kind: found.scored(require_finite(prior.of(kind)[primary], f"the feature prior's {kind} guesses"))
            for kind in prior.guesses}
    prior_errors = fm.per_target_mse(mine[prior.chosen], y)
    record.prior_kind = prior.chosen
    record.prior_mse = float(prior_errors.mean())
    record.prior_mse_mean = fm.mse(mine["mean"], y)
    record.prior_mse_regressor = fm.mse(mine["regressor"], y) if "regressor" in mine else math.nan
    record.prior_mse_random = fm.mse(mine["random"], y)
    if image:
        record.prior_psnr = fm.psnr(record.prior_mse)
        record.prior_ssim = float(fm.ssim(mine[prior.chosen], y).mean())
    record.prior_errors = json.dumps(prior_errors.tolist())
    record.leakage = record.prior_mse - record.feature_mse
    if image:
        record.feature_examples = examples(y, guess, mine[prior.chosen])


#: How many targets an image victim's record keeps, for the report's grid.
EXAMPLES = 8


def examples(truth: torch.Tensor, attack: torch.Tensor, prior: torch.Tensor) -> str:
    """The first :data:`EXAMPLES` targets' features and both guesses, rounded to 1e-4 (JSON)."""
    def rows(t: torch.Tensor) -> list:
        return [[round(v, 4) for v in r] for r in t[:EXAMPLES].flatten(1).clamp(0, 1).tolist()]

    return json.dumps({"shape": list(truth.shape[1:]), "truth": rows(truth), "attack": rows(attack),
                       "prior": rows(prior)})


def record_feature_search(record: RunRecord, found: SearchResult, truth: Truth) -> None:
    """The search's choice and trials, and the oracle: the lowest MSE on the targets of anything it trained (a bound
    no adversary reaches, never used for a verdict)."""
    primary = "test" if "test" in truth.sets else "train"
    y = truth.sets[primary]
    tried = [found.inferences[primary], *(t.inferences[primary] for t in found.trials if primary in t.inferences)]
    record.attack_selected = json.dumps(found.selected, sort_keys=True)
    record.attack_trials = json.dumps({"how": found.how, "trials": [t.summary() for t in found.trials]})
    record.feature_mse_oracle = min(fm.mse(truth.scored(r.features), y) for r in tried)
