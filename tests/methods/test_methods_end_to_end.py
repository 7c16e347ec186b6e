"""Every pretraining method runs end to end (attack mc, defense iso) on 2 and 4 parties; ISO in pretraining."""

from __future__ import annotations

import math

import pytest
import torch
from pretrain_helpers import TINY_MODEL, build_federation, pretrain_config, tiny_options

from vflpriv.common.errors import IncompatibleError
from vflpriv.common.seeding import generator
from vflpriv.config.registry import METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.engine import ACTIVE, EMBEDDING, PRETRAIN, SERVER, WEIGHTS
from vflpriv.methods.local_ssl import LocalOptions, local_ssl_encoder
from vflpriv.runner.execution import run

FLAVOURS = ("simsiam", "byol", "moco")
NAMES = ["fedhssl", *(f"{step}-{f}" for step in ("local", "cssl", "gssl", "fedhssl") for f in FLAVOURS),
         "vflhlp", "vflhlp-a", "vflhlp-p", "ssvfl-i", "ssvfl-c", "local-a", "centralized-lr", "centralized-gbdt",
         "oneshot", "fewshot"]
#: Methods that send nothing in pretraining: ISO there has nothing to protect and is refused.
LOCAL_PRETRAINING = ("local-", "vflhlp", "ssvfl-", "centralized-", "oneshot", "fewshot")
NOT_FEDERATED = ("local-a", "centralized-lr", "centralized-gbdt")
NO_PRETRAINING = (*NOT_FEDERATED, "oneshot", "fewshot")


def test_all_names_are_registered() -> None:
    assert set(NAMES) <= set(METHODS.names())
    assert METHODS.get("fedhssl") is METHODS.get("fedhssl-simsiam")


def _run_config(method: str, parties: int, phase: str, *, pretrain_defense: bool = True) -> RunConfig:
    pretrain_iso = {"name": "iso", "phase": "pretrain", "strength": 0.5, "kinds": ["embedding", "weights"]}
    finetune_iso = {"name": "iso", "phase": "finetune", "strength": 1.0, "sweep": True}
    return RunConfig.model_validate({  # disjoint unaligned rows: parties hold local sets of different sizes
        "partition": {"parties": parties, "labeled": 100, "aux": 40, "unaligned": "disjoint"},
        "model": TINY_MODEL,
        "method": {"name": method, "options": tiny_options(method)},
        "finetune": {"epochs": 1, "batch_size": 50},
        "attack": {"name": "mc", "phase": phase, "options": {"epochs": 5}, "prior": "none"},
        "defenses": [pretrain_iso, finetune_iso] if pretrain_defense else [finetune_iso],
    })


@pytest.mark.parametrize("parties", [2, 4])
@pytest.mark.parametrize("method", NAMES[1:])
def test_method_runs_end_to_end(method: str, parties: int) -> None:
    phase = "pretrain" if parties == 2 and method not in NO_PRETRAINING else "finetune"
    local = method.startswith(LOCAL_PRETRAINING)
    if local and method not in NOT_FEDERATED:  # pretraining sends nothing: ISO there would change nothing
        with pytest.raises(IncompatibleError, match="party 0 sends nothing"):
            run(_run_config(method, parties, phase))
    (record,) = run(_run_config(method, parties, phase, pretrain_defense=not local))
    assert 0.0 <= record.utility <= 1.0
    if method in NOT_FEDERATED:
        assert record.status == "n/a" and record.comm_messages == 0
        return
    assert record.status == "ok", record.error
    assert 0.0 <= record.attack_accuracy <= 1.0
    if local:
        assert record.comm_mb_pretrain == 0.0
    else:
        assert record.comm_mb_pretrain > 0.0


def _received(method: str, strength: float) -> list[tuple]:
    iso = {"name": "iso", "phase": "pretrain", "strength": strength, "kinds": ["embedding", "weights"]}
    plan, fed = build_federation(pretrain_config(method, defenses=[iso]))
    seen = []
    fed.channel.observers.append(lambda m, payload: seen.append((m, payload)))
    plan.method.pretrain(fed)
    return seen


def _changed(message, payload) -> bool:
    if isinstance(payload, torch.Tensor):
        return not torch.equal(payload, message.payload)
    return any(not torch.equal(payload[k], message.payload[k]) for k in payload)


def test_iso_in_pretraining_changes_what_the_active_party_exposes() -> None:
    seen = _received("fedhssl", 1.0)
    kinds = {(m.kind, m.sender) for m, _ in seen}
    assert {(EMBEDDING, ACTIVE), (EMBEDDING, 1), (WEIGHTS, ACTIVE), (WEIGHTS, 1), (WEIGHTS, SERVER)} <= kinds
    for message, payload in seen:
        protected = message.sender == ACTIVE and message.phase == PRETRAIN and message.kind in (EMBEDDING, WEIGHTS)
        assert _changed(message, payload) == protected, (message.kind, message.sender, message.receiver)


def test_iso_strength_zero_changes_nothing() -> None:
    seen = _received("fedhssl", 0.0)
    assert seen and not any(_changed(m, p) for m, p in seen)


def test_iso_noise_on_the_upload_reaches_the_average() -> None:
    clean = {(m.kind, m.sender, m.receiver): p for m, p in _received("fedhssl", 0.0)}
    noisy = {(m.kind, m.sender, m.receiver): p for m, p in _received("fedhssl", 1.0)}
    down = (WEIGHTS, SERVER, 1)
    assert any(not torch.equal(clean[down][k], noisy[down][k]) for k in clean[down])


def test_local_ssl_encoder_is_deterministic_and_sends_nothing() -> None:
    plan, fed = build_federation(pretrain_config("splitnn"))
    party = fed.parties[1]
    opts = LocalOptions(epochs=1, batch_size=256, projector_hidden=64, projector_dim=32, predictor_hidden=16)

    def encoder(seed: int):
        return local_ssl_encoder(party, model_config=fed.model, options=opts, generator=generator(seed, "prior"))

    a, b, c = encoder(0), encoder(0), encoder(1)
    assert a.out_dim == fed.model.out_dim and not a.training
    x = party.x_test[:7]
    assert torch.equal(a(x), b(x)) and not torch.equal(a(x), c(x))
    assert fed.channel.meter.total_messages() == 0
    # the same from a spec and raw features (the adversary's view)
    d = local_ssl_encoder(party.spec, party.x_train[party.local_ids], model_config=fed.model, options=opts,
                          generator=generator(0, "prior"))
    assert torch.equal(a(x), d(x))
    assert math.isfinite(float(a(x).detach().sum()))


def test_iso_in_the_pretrain_phase_protects_embeddings_and_weights_by_default() -> None:
    iso = {"name": "iso", "phase": "pretrain", "strength": 1.0, "sweep": True}  # what --phase pretrain builds
    plan, fed = build_federation(pretrain_config("fedhssl", defenses=[iso]))
    assert plan.defenses[0].kinds == {EMBEDDING, WEIGHTS}
    seen = []
    fed.channel.observers.append(lambda m, payload: seen.append((m, payload)))
    plan.method.pretrain(fed)
    assert any(_changed(m, p) for m, p in seen if m.kind == EMBEDDING)
    assert any(_changed(m, p) for m, p in seen if m.kind == WEIGHTS)
