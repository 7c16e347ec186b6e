"""Review eps F2: a defense whose code is not vflpriv's own is taken to read the labels and the features unless its
own class declares otherwise (``reads_labels``, ``reads_features``), as a method's undeclared code is; and a label
defense admits a label reader beside dp-gaussian only where it claims an epsilon at its strength."""

from __future__ import annotations

import math
from importlib.metadata import entry_points

import pytest
import torch

from vflpriv.common.errors import IncompatibleError
from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.base import Defense, LabelDefense, StrengthAxis
from vflpriv.defenses.dp_gaussian import GaussianDP
from vflpriv.defenses.embedding_dp import EmbeddingDP
from vflpriv.defenses.label_dp import LabelDP
from vflpriv.runner.execution import run
from vflpriv.runner.planning import plan

AXIS = StrengthAxis(name="lambda", stronger="higher", identity=0.0)


class _Tag(Defense):
    """Forwards the gradient unchanged (the review's LabelTag wrote the labels into it; what it does is unread here)."""

    axis = AXIS

    def transform(self, tensor, message):
        return tensor


class _DeclaredTag(_Tag):
    reads_labels = False
    reads_features = False


class _Keep(LabelDefense):
    """Keeps every label and claims nothing (the review's Smooth)."""

    axis = AXIS
    reads_labels = False

    def relabel(self, labels, *, num_classes):
        return labels.clone()


class _EmbeddingTag(_Tag):
    default_kinds = supported_kinds = ("embedding",)


class _DeclaredEmbeddingTag(_EmbeddingTag):
    reads_features = False
    reads_labels = False


for name, cls in {"t-tag": _Tag, "t-declared": _DeclaredTag, "t-keep": _Keep, "t-emb": _EmbeddingTag,
                  "t-declared-emb": _DeclaredEmbeddingTag}.items():
    DEFENSES.register(name, cls)


def _config(*defenses, **changes) -> RunConfig:
    data = {"partition": {"labeled": 100, "aux": 40}, "model": {"hidden": 32, "out_dim": 16},
            "finetune": {"epochs": 1, "batch_size": 32}, "attack": {"name": "gc", "prior": "none"},
            "defenses": list(defenses), **changes}
    return RunConfig.model_validate(data)


DP = {"name": "dp-gaussian", "strength": 4.0, "sweep": True}


def test_a_plugin_defense_declaring_nothing_is_refused_beside_dp_gaussian():
    with pytest.raises(IncompatibleError, match="t-tag reads the active party's labels around it"):
        plan(_config(DP, {"name": "t-tag", "strength": 1.0, "party": 0, "kinds": ["gradient"]}))
    p = plan(_config(DP, {"name": "t-declared", "strength": 1.0, "party": 0, "kinds": ["gradient"]}))
    assert p.defenses[0].uncovered == ""


def test_a_label_defense_claiming_nothing_does_not_admit_a_label_reader():
    marvell = {"name": "marvell", "strength": 1.0}
    binary = {"dataset": {"name": "breast-cancer"}, "partition": {"labeled": 60, "aux": 20}}
    with pytest.raises(IncompatibleError, match="marvell reads the active party's labels around it"):
        plan(_config(DP, {"name": "t-keep", "strength": 1.0}, marvell, **binary))
    plan(_config(DP, {"name": "label-dp", "strength": 2.0}, marvell, **binary))  # it claims 2: admitted, as before


def test_undeclared_plugin_code_voids_a_label_claim_and_no_epsilon_is_recorded():
    (record,) = run(_config({"name": "label-dp", "strength": 2.0, "sweep": True},
                            {"name": "t-tag", "strength": 1.0, "party": 0, "kinds": ["gradient"]}))
    assert math.isnan(record.epsilon) and "label-dp: no epsilon recorded: t-tag: its own code (_Tag.transform())" \
        in record.notes


def test_a_plugin_on_the_victim_s_embeddings_voids_embedding_dp_s_claim_unless_it_declares():
    emb = {"name": "embedding-dp", "strength": 8.0, "party": 1}
    attack = {"attack": {"name": "fi-decoder"}}
    p = plan(_config(emb, {"name": "t-emb", "strength": 1.0, "party": 1}, **attack))
    assert "t-emb: its own code (_Tag.transform())" in p.defenses[0].uncovered
    assert p.defenses[0].read_around
    p = plan(_config(emb, {"name": "t-declared-emb", "strength": 1.0, "party": 1}, **attack))
    assert p.defenses[0].uncovered == "" and p.defenses[0].read_around == ""


class _CleanLDP(LabelDP):
    """label-dp whose randomised response keeps every label (mechanism replaced, nothing declared: review eps2 G1)."""

    def relabel(self, labels, *, num_classes):
        return labels.clone()


class _LeakyEDP(EmbeddingDP):
    """embedding-dp whose victim bottom is left unwrapped: no clipping, no noise (nothing declared)."""

    def passive_bottom(self, party, bottom):
        return bottom


class _QuietDP(GaussianDP):
    """dp-gaussian whose noise is zero (nothing declared)."""

    def _noise(self, shape, device):
        return torch.zeros(shape, device=device)


class _SecretlessLDP(_CleanLDP):
    """The same, naming no secret it protects: planning checks a class against the secrets it names (final14 F4)."""

    secrets = frozenset()


for name, cls in {"t-clean-ldp": _CleanLDP, "t-leaky-edp": _LeakyEDP, "t-quiet-dp": _QuietDP,
                  "t-secretless-ldp": _SecretlessLDP}.items():
    DEFENSES.register(name, cls)


def test_a_subclass_replacing_a_label_mechanism_keeps_no_epsilon():
    p = plan(_config({"name": "t-clean-ldp", "strength": 1.0, "sweep": True}))
    assert "t-clean-ldp: its own code (_CleanLDP.relabel())" in p.defenses[0].uncovered


def test_a_subclass_naming_no_secret_records_no_epsilon():
    (record,) = run(_config({"name": "t-secretless-ldp", "strength": 1.0, "sweep": True}))
    assert math.isnan(record.epsilon) and math.isnan(record.epsilon_features)
    # its undeclared code is judged against the secrets of the class that computes its epsilon (review eps6 E1)
    assert "t-secretless-ldp: its own code (_CleanLDP.relabel())" in record.notes  # beside its foreign code


def test_a_subclass_replacing_embedding_dp_s_mechanism_keeps_no_epsilon():
    p = plan(_config({"name": "t-leaky-edp", "strength": 8.0, "party": 1}, attack={"name": "fi-decoder"}))
    assert "t-leaky-edp: its own code (_LeakyEDP.passive_bottom())" in p.defenses[0].uncovered


def test_a_subclass_replacing_dp_gaussian_s_noise_runs_and_records_no_epsilon():
    (record,) = run(_config({"name": "t-quiet-dp", "strength": 4.0, "sweep": True}))
    assert math.isnan(record.epsilon)
    assert "t-quiet-dp: its own code (_QuietDP._noise())" in record.notes  # beside its foreign code


def test_a_feature_reader_around_embedding_dp_withholds_its_test_row_claim_too():
    """Review eps2 G5: where another defense reads the victim's features around embedding-dp, the notes hold no
    per-release epsilon for the test rows either (embedding_dp.notes' ``read_around``)."""
    (record,) = run(_config({"name": "embedding-dp", "strength": 8.0, "party": 1, "sweep": True},
                            {"name": "t-emb", "strength": 1.0, "party": 1}, attack={"name": "fi-decoder"}))
    assert math.isnan(record.epsilon_features)
    assert "no epsilon for the test rows either: t-emb: its own code (_Tag.transform())" in record.notes
    assert "each test row passed" not in record.notes


def test_a_class_naming_a_vflpriv_module_is_not_taken_for_vflpriv_s_own():
    """Review eps2 G6: ``__module__`` is not taken at its word: a plugin class naming a vflpriv module (one that does
    not exist, or one that does not define it) still has its code judged; every built-in defense's and attack's
    classes are own."""
    from vflpriv.defenses.declarations import vflpriv_own

    for module in ("vflpriv.defenses.spoofed", "vflpriv.defenses.label_dp"):
        spoof = type("LabelDP", (_Tag,), {"__module__": module})
        assert not vflpriv_own(spoof) and spoof.label_reads()
    for group in ("vflpriv.defenses", "vflpriv.attacks"):  # the built-ins (other tests register plugins)
        for entry in entry_points(group=group):
            assert all(vflpriv_own(k) for k in entry.load().__mro__ if k.__module__.startswith("vflpriv.")), entry


class _DeclaredSpent(LabelDP):
    """Declares that it reads no labels, and reports an epsilon of its own (review final14 F8)."""

    reads_labels = False

    def privacy_spent(self):
        return 0.01


class _DeclaredDelta(GaussianDP):
    """Declares that it reads no labels, and a pure-epsilon claim."""

    reads_labels = False

    def privacy_delta(self):
        return 0.0


class _FewSteps(EmbeddingDP):
    """Declares that it reads no features, and counts no DP-SGD step in the composition (review eps5 R6)."""

    reads_features = False

    @property
    def steps(self):
        return None if self.stepped is None else torch.zeros_like(self.stepped.counts())


DEFENSES.register("t-declared-spent", _DeclaredSpent)
DEFENSES.register("t-declared-delta", _DeclaredDelta)
DEFENSES.register("t-few-steps", _FewSteps)


class _AnyData(EmbeddingDP):
    """Declares that it reads no features, and says its claim holds on any data (fitted preprocessing too)."""

    reads_features = False

    def covers_data(self, dataset):
        return ""


DEFENSES.register("t-any-data", _AnyData)


class _OwnBind(EmbeddingDP):
    """Declares that it reads no features, and binds itself (where embedding-dp sets its counting up: review l8 2)."""

    reads_features = False

    def bind(self, federation):
        super().bind(federation)


DEFENSES.register("t-own-bind", _OwnBind)


def test_an_epsilon_computed_by_a_plugin_s_accounting_is_not_recorded_whatever_it_declares():
    (record,) = run(_config({"name": "t-declared-spent", "strength": 1.0, "sweep": True}))
    assert math.isnan(record.epsilon) and "t-declared-spent: no epsilon recorded: t-declared-spent: its class holds " \
        "what vflpriv's own code does not (_DeclaredSpent.privacy_spent" in record.notes
    p = plan(_config({"name": "t-declared-delta", "strength": 4.0, "sweep": True}))
    assert "its class holds what vflpriv\'s own code does not (_DeclaredDelta.privacy_delta" in p.defenses[0].uncovered
    p = plan(_config({"name": "t-few-steps", "strength": 4.0, "sweep": True}))  # the count uses() composes
    assert "its class holds what vflpriv\'s own code does not (_FewSteps.steps" in p.defenses[0].uncovered
    p = plan(_config({"name": "t-any-data", "strength": 4.0, "sweep": True}))  # review fe F1's data check
    assert "its class holds what vflpriv\'s own code does not (_AnyData.covers_data" in p.defenses[0].uncovered
    p = plan(_config({"name": "t-own-bind", "strength": 4.0, "sweep": True}))
    assert "its class holds what vflpriv\'s own code does not (_OwnBind.bind" in p.defenses[0].uncovered
    binary = {"dataset": {"name": "breast-cancer"}, "partition": {"labeled": 60, "aux": 20}}
    with pytest.raises(IncompatibleError, match="marvell reads the active party's labels around it"):  # it vouches not
        plan(_config(DP, {"name": "t-declared-spent", "strength": 2.0}, {"name": "marvell", "strength": 1.0}, **binary))
