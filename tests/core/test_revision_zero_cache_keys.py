"""vflpriv's own attacks at revision 0 keep every cache key they had before attacks gained ``revision`` and a plugin's
code in their keys (``vflpriv.config.keys.code_mark``): the tuned trials', the priors' (same-attack, simsiam, aux,
tuned or not) and the training's, pinned as digests of the keys 775bdf4 built (``fixtures/cache-keys-775bdf4.json``),
so a change that moves them (a revision mark written at 0, a code digest of vflpriv's own class) fails here instead of
silently recomputing every user's cached trials and priors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from vflpriv.config.registry import ATTACKS
from vflpriv.config.schema import RunConfig
from vflpriv.runner import attacking
from vflpriv.runner.planning import AttackPlan
from vflpriv.runner.prior import PriorPlan, prior_key

PINNED = json.loads((Path(__file__).parent / "fixtures" / "cache-keys-775bdf4.json").read_text())


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def keys_of(name: str, phase: str, tune: bool, monkeypatch, partition: dict | None = None) -> dict[str, str]:
    """The digests of every key one attack's run is cached under (the reviewer's script of the revision change), on
    the default partition with ``partition``'s settings."""
    seen: dict[str, str] = {}
    monkeypatch.setattr(attacking, "search", lambda attack, view, **kw: seen.__setitem__("key", kw["key"]))
    cfg = RunConfig.model_validate({"attack": {"name": name, "phase": phase, **({"tune": True} if tune else {})},
                                    "partition": partition or {}})
    ids = torch.arange(4)
    view = SimpleNamespace(target_ids={"test": ids}, aux_ids=ids)
    row = {"key": cfg.key(), "training": cfg.training_key()}
    attacking.tuned(AttackPlan(config=cfg, attack=SimpleNamespace(options=ATTACKS.get(name).Options()), prior=None),
                    None)
    row["tuned"] = _digest(seen["key"])
    for kind in ("same-attack", "simsiam", "aux"):
        for tuned in (False, True):
            row[f"prior-{kind}-{tuned}"] = _digest(prior_key(PriorPlan(cfg, kind, tuned, {}, False), view))
    return row


#: Attacks revised since 775bdf4, whose pinned keys are their earlier revision's: mc-mixmatch's sharpening in log
#: space (review lo5 F1), which mc-active inherits.
REVISED = ("mc-mixmatch", "mc-active")


@pytest.mark.parametrize("case", sorted(c for c in PINNED if c.split("/")[0] not in REVISED))
def test_a_revision_0_attack_keeps_its_cache_keys(case, monkeypatch):
    name, phase, tune = case.split("/")
    assert keys_of(name, phase, tune == "tuned", monkeypatch) == PINNED[case]


@pytest.mark.parametrize("case", sorted(c for c in PINNED if c.split("/")[0] in REVISED))
def test_a_revised_attack_recomputes_what_its_earlier_revision_stored(case, monkeypatch):
    """Its run, tuned trials and same-attack priors are keyed anew, its training too where it acts (mc-active); the
    simsiam and aux priors, which every attack of a training shares, are not the attack's."""
    name, phase, tune = case.split("/")
    now = keys_of(name, phase, tune == "tuned", monkeypatch)
    for key, before in PINNED[case].items():
        shared = key.startswith(("prior-simsiam", "prior-aux")) or (key == "training" and not ATTACKS.get(name).acts)
        assert (now[key] == before) == shared, key


@pytest.mark.parametrize("case", ["mc/finetune/untuned", "mc/pretrain/tuned", "bli/finetune/tuned"])
def test_a_label_attack_keeps_them_with_aux_features_which_only_feature_attacks_read(case, monkeypatch):
    name, phase, tune = case.split("/")
    assert keys_of(name, phase, tune == "tuned", monkeypatch, {"aux_features": 5}) == PINNED[case]
