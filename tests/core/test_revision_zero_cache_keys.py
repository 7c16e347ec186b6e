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


@pytest.mark.parametrize("case", sorted(PINNED))
def test_a_revision_0_attack_keeps_its_cache_keys(case, monkeypatch):
    name, phase, tune = case.split("/")
    assert keys_of(name, phase, tune == "tuned", monkeypatch) == PINNED[case]


@pytest.mark.parametrize("case", ["mc/finetune/untuned", "mc/pretrain/tuned", "bli/finetune/tuned"])
def test_a_label_attack_keeps_them_with_aux_features_which_only_feature_attacks_read(case, monkeypatch):
    name, phase, tune = case.split("/")
    assert keys_of(name, phase, tune == "tuned", monkeypatch, {"aux_features": 5}) == PINNED[case]
