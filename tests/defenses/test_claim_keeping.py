"""Reviews l9 L9-1, L9-2, l10 1-4 and acc A1/A2: a plugin subclass of a DP defense keeps its epsilon only where it
adds declarations (``vflpriv.runner.claims.CLAIM_KEEPING``) and no code: listing the members that decide a count
missed some every time (embedding-dp's ``rows_checked``, dp-gaussian's ``backward``), and a verdict taken at planning
was cleared by the plugin's code while it ran. The claim is judged again when the run is recorded."""

from __future__ import annotations

import copy
import dataclasses
import math
import pickle

import pytest

from vflpriv.common.declarations import vflpriv_own
from vflpriv.config.registry import DEFENSES, METHODS
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.dp_gaussian import GaussianDP
from vflpriv.defenses.embedding_dp import EmbeddingDP
from vflpriv.defenses.label_dp import LabelDP
from vflpriv.defenses.marvell import Marvell
from vflpriv.runner.claims import foreign_accounting
from vflpriv.runner.execution import run


class HalfCount(GaussianDP):
    """Declares it reads nothing; the DP-SGD step unchanged, but each row charged for its first update only."""

    reads_labels = reads_features = False

    def backward(self, losses, params, leaves, ids, *, known=None):
        out = super().backward(losses, params, leaves, ids, known=known)
        self.uses.clamp_(max=1)
        return out


class ClearsVerdict(EmbeddingDP):
    """Declares it reads nothing; clears the verdict ``bind`` set (finetune.bn_recalibrate) before the bottom runs."""

    reads_labels = reads_features = False

    def passive_bottom(self, party, bottom):
        self.uncovered = ""
        return super().passive_bottom(party, bottom)


class Described(GaussianDP):
    """Declarations only: it keeps dp-gaussian's epsilon."""

    reads_labels = reads_features = False
    anchor = "a paper"
    cost = "none"


class WiderAxis(GaussianDP):
    """Data outside the declarations (the strength axis): its epsilon is its author's word."""

    axis = dataclasses.replace(GaussianDP.axis, high=1e9)


def _run(defense: dict, attack: str, **finetune):
    config = RunConfig.model_validate({
        "partition": {"labeled": 100, "aux": 40}, "model": {"hidden": 32, "out_dim": 16},
        "finetune": {"epochs": 1, "batch_size": 32, **finetune}, "attack": {"name": attack, "prior": "none"},
        "defenses": [{**defense, "sweep": True}]})
    (record,) = run(config)
    assert record.status == "ok", record.error
    return record


def test_a_subclass_counting_fewer_uses_records_no_epsilon():
    assert math.isfinite(_run({"name": "dp-gaussian", "strength": 0.5}, "mc").epsilon)
    record = _run({"name": "t-half-count", "strength": 0.5}, "mc")
    assert math.isnan(record.epsilon)
    assert "t-half-count: its class holds what vflpriv\'s own code does not (HalfCount.backward" in record.notes


def test_a_subclass_clearing_the_planned_verdict_while_it_runs_records_no_epsilon():
    record = _run({"name": "t-clears-verdict", "strength": 8.0, "party": 1}, "fi-decoder", bn_recalibrate=True)
    assert math.isnan(record.epsilon_features)
    assert "ClearsVerdict.passive_bottom" in record.notes


def test_declarations_alone_keep_the_epsilon_and_other_class_data_does_not():
    base = _run({"name": "dp-gaussian", "strength": 0.5}, "mc")
    assert _run({"name": "t-described", "strength": 0.5}, "mc").epsilon == base.epsilon
    record = _run({"name": "t-wider-axis", "strength": 0.5}, "mc")
    assert math.isnan(record.epsilon) and "WiderAxis.axis" in record.notes


class _SetOnRead:
    """A descriptor under a kept name: a set read on the class, code run on the instance (review l10 1)."""

    def __get__(self, obj, owner=None):
        return frozenset({"labels"})


class DescribedByCode(GaussianDP):
    reads_labels = reads_features = False
    secrets = _SetOnRead()


class ClearsAndLeaves(EmbeddingDP):
    """Clears the verdict, then deletes its own code: the class holds declarations only when the run is recorded."""

    reads_labels = reads_features = False

    def passive_bottom(self, party, bottom):
        self.uncovered = ""
        if "passive_bottom" in vars(type(self)):
            del type(self).passive_bottom
        return EmbeddingDP.passive_bottom(self, party, bottom)


class QuietMarvell(Marvell):
    """Declarations only: says Marvell's noise reads no labels (review l10 3)."""

    reads_labels = False


class MixedDP(Marvell, GaussianDP):
    """vflpriv's own classes only, with Marvell's mechanism mixed into dp-gaussian's (review l10 4)."""


def test_a_kept_declaration_counts_only_as_plain_data():
    record = _run({"name": "t-described-by-code", "strength": 0.5}, "mc")
    assert math.isnan(record.epsilon) and "DescribedByCode.secrets" in record.notes


def test_the_planned_verdict_holds_when_the_plugin_s_code_deletes_itself():
    record = _run({"name": "t-clears-and-leaves", "strength": 8.0, "party": 1}, "fi-decoder", bn_recalibrate=True)
    assert math.isnan(record.epsilon_features) and "ClearsAndLeaves.passive_bottom" in record.notes


def test_a_subclass_declares_a_read_its_class_makes_and_cannot_take_it_back():
    assert QuietMarvell.label_reads() == Marvell.label_reads() != ()


def test_a_vflpriv_mechanism_mixed_in_beside_the_accounting_voids_the_claim():
    reason = foreign_accounting(MixedDP.__new__(MixedDP), "t-mixed-dp")
    assert "Marvell (mixed in beside GaussianDP's accounting)" in reason


class EmptyLabelDP(LabelDP):
    """Nothing of its own: it keeps label-dp's claim."""


def test_a_copied_or_pickled_instance_keeps_its_class_s_claim():
    """Review acc A1: the first copy or pickle of an instance adds ``__slotnames__`` to its class, which read as a
    member assigned since vflpriv defined it (label-dp 1: epsilon 1.0 -> nan, its key moved)."""
    for cls in (LabelDP, EmptyLabelDP):
        instance = cls.__new__(cls)
        copy.copy(instance)
        pickle.dumps(instance)
        assert "__slotnames__" in vars(cls)
        assert foreign_accounting(instance, "d") == "", cls
    method = METHODS.get("splitnn")
    copy.deepcopy(method(method.Options()))
    assert vflpriv_own(LabelDP) and vflpriv_own(method)


def test_data_assigned_to_the_hook_points_base_voids_the_claim(monkeypatch):
    """Review acc A2: ``DefensePoints`` kept no snapshot, so data assigned to it went unseen (functions were)."""
    from vflpriv.engine.hooks import DefensePoints

    instance = LabelDP.__new__(LabelDP)
    monkeypatch.setattr(DefensePoints, "planted", 1, raising=False)
    assert "DefensePoints.planted (assigned since vflpriv defined it)" in foreign_accounting(instance, "d")


class DictByCode(GaussianDP):
    """Python's own member name, holding a property: reading it runs plugin code (review l11 1)."""

    reads_labels = reads_features = False
    __dict__ = property(lambda self: {})


class ClearsAndRehashes(EmbeddingDP):
    """Clears the verdict, then deletes its code and its own hash: a verdict kept in a table keyed by the defense was
    filed under the hash and missed (review l11 2)."""

    reads_labels = reads_features = False

    def __hash__(self):
        return 7

    def passive_bottom(self, party, bottom):
        self.uncovered = ""
        for member in ("passive_bottom", "__hash__"):
            if member in vars(type(self)):
                delattr(type(self), member)
        return EmbeddingDP.passive_bottom(self, party, bottom)


def test_python_s_own_member_names_count_only_with_python_s_own_values():
    reason = foreign_accounting(DictByCode.__new__(DictByCode), "d")
    assert "DictByCode.__dict__" in reason


def test_the_planned_verdict_is_kept_by_the_plan_not_by_the_defense_s_hash():
    record = _run({"name": "t-clears-and-rehashes", "strength": 8.0, "party": 1}, "fi-decoder", bn_recalibrate=True)
    assert math.isnan(record.epsilon_features)


class EqualByType(GaussianDP):
    """Compares by value and so has no hash (review l11 2: planning crashed with 'unhashable type')."""

    def __eq__(self, other):
        return type(self) is type(other)


def test_a_defense_without_a_hash_is_planned_and_records_no_epsilon():
    record = _run({"name": "t-equal-by-type", "strength": 0.5}, "mc")
    assert math.isnan(record.epsilon) and "EqualByType.__eq__" in record.notes


class _Secrets(frozenset):
    """A frozenset of the secrets whose comparison is plugin code (review l12 1)."""

    def __le__(self, other):
        return super().__le__(other)


class SecretsByCode(GaussianDP):
    reads_labels = reads_features = False
    secrets = _Secrets({"labels"})


class BorrowedDict(GaussianDP):
    """Another class's ``__dict__`` slot: crashed planning with a TypeError (review l12 4)."""

    reads_labels = reads_features = False
    __dict__ = vars(type("_Other", (), {}))["__dict__"]


class LeavesInInit(GaussianDP):
    """Cuts its noise in ``__init__`` and deletes that code: judged after it ran, the class held declarations only."""

    reads_labels = reads_features = False

    def __init__(self, *args, **kwargs):
        GaussianDP.__init__(self, *args, **kwargs)
        self.sigma = self.sigma / 100
        if "__init__" in vars(LeavesInInit):
            del LeavesInInit.__init__


def test_kept_declarations_are_plain_data_all_the_way_down():
    assert "SecretsByCode.secrets" in foreign_accounting(SecretsByCode, "d")
    assert "BorrowedDict.__dict__" in foreign_accounting(BorrowedDict, "d")
    assert foreign_accounting(Described, "d") == ""


def test_a_class_is_judged_before_any_of_its_code_runs():
    """Review l12 3: the planner's first look, on the class, before ``__init__`` ran and deleted itself."""
    record = _run({"name": "t-leaves-in-init", "strength": 64.0}, "mc")
    assert math.isnan(record.epsilon) and "LeavesInInit.__init__" in record.notes


#: The plugins of this module, registered for each of its tests only: some delete their own code when they run, and a
#: registry naming them for good showed them to every later test of the worker.
PLUGINS = (("t-half-count", HalfCount), ("t-clears-verdict", ClearsVerdict), ("t-described", Described),
           ("t-wider-axis", WiderAxis), ("t-described-by-code", DescribedByCode),
           ("t-clears-and-leaves", ClearsAndLeaves), ("t-quiet-marvell", QuietMarvell), ("t-mixed-dp", MixedDP),
           ("t-dict-by-code", DictByCode), ("t-clears-and-rehashes", ClearsAndRehashes),
           ("t-equal-by-type", EqualByType), ("t-leaves-in-init", LeavesInInit))


@pytest.fixture(autouse=True)
def _plugins(monkeypatch):
    """Registers :data:`PLUGINS` for one test."""
    for name, cls in PLUGINS:
        monkeypatch.setitem(DEFENSES._extra, name, cls)
