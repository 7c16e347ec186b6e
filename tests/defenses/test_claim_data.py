"""Review l12 2: another plugin of the training (a second defense's ``__init__`` here) writing into a DP defense's
data (``sigma`` made a float subclass whose products are zero) kept the epsilon of noise that never acted. When the
run is recorded, the defense's data must be what vflpriv's code makes of it (``vflpriv.runner.claims.altered``)."""

from __future__ import annotations

import gc
import math

import pytest
import torch
from torch import nn

from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.dp_gaussian import GaussianDP
from vflpriv.defenses.embedding_dp import EmbeddingDP
from vflpriv.defenses.embedding_dp_accounting import Counts
from vflpriv.defenses.max_norm import MaxNorm
from vflpriv.runner.claims import altered, foreign_accounting, made_types
from vflpriv.runner.execution import run
from vflpriv.runner.planning import plan_training


class _Silent(float):
    """A float whose products are zero: the noise term ``sigma * clip * noise`` vanishes, the accountant sees sigma."""

    def __mul__(self, other):
        return 0.0

    __rmul__ = __mul__


class _EqualToAll(type):
    """A metaclass answering ``==`` with True: ``type(x) in (str, float, ...)`` took its instances for plain data."""

    def __eq__(cls, other):
        return True

    __hash__ = type.__hash__


class _LooksPlain(metaclass=_EqualToAll):
    pass


def _gaussian() -> GaussianDP:
    return next(o for o in gc.get_objects() if type(o) is GaussianDP)


class SilencesSigma(MaxNorm):
    """Declares it reads nothing; its ``__init__`` makes the dp-gaussian built before it draw no noise."""

    reads_labels = reads_features = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        d = _gaussian()
        d.sigma = _Silent(d.sigma)


class SilencesClip(MaxNorm):
    """The same through dp-gaussian's options: ``clip`` made a float subclass past pydantic's assignment check."""

    reads_labels = reads_features = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        d = _gaussian()
        vars(d.options)["clip"] = _Silent(d.options.clip)


class RetypesEmbeddingDP(MaxNorm):
    """The same for embedding-dp, whose notes also state a claim for the test rows (review l14 3)."""

    reads_labels = reads_features = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        d = next(o for o in gc.get_objects() if type(o) is EmbeddingDP)
        d.strength = _Silent(d.strength)


@pytest.fixture(autouse=True)
def _plugins(monkeypatch):
    for name, cls in (("t-silences-sigma", SilencesSigma), ("t-silences-clip", SilencesClip),
                      ("t-retypes", RetypesEmbeddingDP)):
        monkeypatch.setitem(DEFENSES._extra, name, cls)


def _config(*defenses: dict) -> RunConfig:
    return RunConfig.model_validate({
        "partition": {"labeled": 100, "aux": 40}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 1, "batch_size": 32}, "attack": {"name": "mc", "prior": "none"},
        "defenses": list(defenses)})


def test_another_defense_writing_into_the_dp_defense_s_data_voids_its_claim():
    dp = {"name": "dp-gaussian", "strength": 64.0, "sweep": True}
    (alone,) = run(_config(dp))
    assert alone.status == "ok" and math.isfinite(alone.epsilon) and "its data holds" not in alone.notes
    (beside,) = run(_config(dp, {"name": "max-norm", "strength": 1.0}))
    assert beside.status == "ok" and beside.epsilon == alone.epsilon  # vflpriv's own neighbour: the claim stands
    for plugin, where in (("t-silences-sigma", "self.sigma (a _Silent, made a float)"),
                          ("t-silences-clip", "self.options.clip (a _Silent)")):
        (record,) = run(_config(dp, {"name": plugin, "strength": 1.0}))
        assert record.status == "ok" and math.isnan(record.epsilon)
        assert f"dp-gaussian: no epsilon recorded: dp-gaussian: its data holds what vflpriv's own code did not put " \
               f"there ({where})" in record.notes


def test_a_voided_feature_claim_states_no_test_row_claim_either():
    config = _config({"name": "embedding-dp", "strength": 8.0, "party": 1}, {"name": "t-retypes", "strength": 1.0})
    config = config.model_copy(update={"attack": config.attack.model_copy(update={"name": "fi-decoder"})})
    (record,) = run(RunConfig.model_validate(config.model_dump()))
    assert record.status == "ok" and math.isnan(record.epsilon_features), record.error
    assert "self.strength (a _Silent, made a float)" in record.notes and "DP for that test sample" not in record.notes


def test_data_deleted_retyped_or_nested_deep_is_named():
    (d,) = plan_training(_config({"name": "embedding-dp", "strength": 8.0, "party": 1}).training()).defenses
    made = made_types(d)
    assert altered(d, made) == ""
    d.released = Counts(4)  # a lazily set None becomes vflpriv's own state: as the mechanism does
    assert altered(d, made) == ""
    d.released.fold = _Silent(1.0)
    assert "self.released.fold (a _Silent)" in altered(d, made)
    d.released.fold, parties, generator = 1, d.parties, d.generator
    d.parties = (1,)
    assert "self.parties (a tuple, made a list)" in altered(d, made)
    del d.parties
    assert "self.parties (deleted)" in altered(d, made)
    d.parties, d.generator = parties, torch.Generator().manual_seed(0)  # review l14 2: a seed the adversary knows
    assert "self.generator (replaced)" in altered(d, made)
    d.generator, d.released.total = generator, nn.Linear(1, 1)  # review l14 1: a module is a model in the tape only
    assert "self.released.total (a Linear)" in altered(d, made)
    d.released.total, vars(d.options)["clip"] = torch.zeros(4), nn.Linear(1, 1)
    assert "self.options.clip (a Linear)" in altered(d, made)
    vars(d.options)["clip"], d.extra = 1.0, {"k": _LooksPlain()}
    assert altered(d, made).endswith("(self.extra['k'] (a _LooksPlain)) beside vflpriv's accounting, so the epsilon it "
                                     "reports is its author's word, not a bound vflpriv computed")


class SecretsLookPlain(GaussianDP):
    reads_labels = reads_features = False
    anchor = _LooksPlain()


def test_a_metaclass_answering_equality_makes_no_plain_data():
    assert "SecretsLookPlain.anchor" in foreign_accounting(SecretsLookPlain, "d")
