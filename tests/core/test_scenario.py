import pytest
import torch

from vflpriv.common.errors import ConfigError
from vflpriv.config.schema import PartitionConfig
from vflpriv.data.embedded import load_breast_cancer, load_digits
from vflpriv.data.scenario import build_scenario
from vflpriv.engine import ActiveParty, make_parties


@pytest.fixture(scope="module")
def digits():
    return load_digits(parties=2)


def _disjoint(a, b):
    return not torch.isin(a, b).any()


@pytest.mark.parametrize("mode", ["shared", "disjoint"])
def test_partition_invariants(digits, mode):
    part = PartitionConfig(aligned_fraction=0.2, labeled=200, aux=80, unaligned=mode)
    sc = build_scenario(digits, part, seed=3)
    n = digits.y_train.numel()
    assert sc.aligned.numel() == round(0.2 * n)
    assert sc.labeled.numel() == 200 and torch.isin(sc.labeled, sc.aligned).all()
    for k in range(2):
        assert _disjoint(sc.unaligned[k], sc.aligned)
        assert sc.local(k).unique().numel() == sc.local(k).numel()
    if mode == "disjoint":
        assert _disjoint(sc.unaligned[0], sc.unaligned[1])
        assert sc.unaligned[0].numel() + sc.unaligned[1].numel() + sc.aligned.numel() == n
    else:
        assert torch.equal(sc.unaligned[0], sc.unaligned[1])
    # aux: adversary-local, outside the labeled set, balanced per class
    assert torch.isin(sc.aux, sc.local(sc.adversary)).all() and _disjoint(sc.aux, sc.labeled)
    counts = torch.bincount(digits.y_train[sc.aux], minlength=10)
    assert counts.tolist() == [8] * 10


def test_same_seed_same_scenario_and_seeds_differ(digits):
    part = PartitionConfig()
    a, b, c = (build_scenario(digits, part, seed=s) for s in (0, 0, 1))
    assert torch.equal(a.labeled, b.labeled) and torch.equal(a.aux, b.aux)
    assert not torch.equal(a.labeled, c.labeled)


def test_aux_remainder_spread_over_classes():
    ds = load_breast_cancer(parties=2)
    sc = build_scenario(ds, PartitionConfig(labeled=50, aux=41), seed=0)
    assert sorted(torch.bincount(ds.y_train[sc.aux]).tolist()) == [20, 21]


def test_labels_reach_the_active_party_only(digits):
    sc = build_scenario(digits, PartitionConfig(), seed=0)
    parties = make_parties(sc, torch.device("cpu"))
    active, passive = parties[0], parties[1]
    assert isinstance(active, ActiveParty) and not isinstance(passive, ActiveParty)
    assert not any(isinstance(v, torch.Tensor) and v.dtype == torch.long and v.numel() == digits.y_train.numel()
                   and torch.equal(v, digits.y_train) for v in vars(passive).values())
    known = active.labels >= 0
    assert torch.equal(known.nonzero().squeeze(1), sc.labeled)
    assert torch.equal(active.labels[sc.labeled], digits.y_train[sc.labeled])


def test_vflhlp_setting_labels_every_local_sample_of_the_active_party(digits):
    """M1: the active party knows the labels of all its local samples, the aligned ones beyond labeled=200 too (on
    digits 287 aligned); the other sets are those of the same seed without the setting, the aux set unaligned."""
    plain = build_scenario(digits, PartitionConfig(), seed=0)
    sc = build_scenario(digits, PartitionConfig(), seed=0, active_labels_local=True)
    assert torch.equal(sc.labeled, sc.aligned) and sc.aligned.numel() == 287 and plain.labeled.numel() == 200
    assert torch.equal(sc.active_label_ids().sort().values, sc.local(0).sort().values)
    assert torch.equal(sc.aligned, plain.aligned) and all(torch.equal(a, b) for a, b in zip(sc.unaligned, plain.unaligned))
    assert not torch.isin(sc.aux, sc.aligned).any() and torch.isin(sc.aux, sc.unaligned[1]).all()


def test_size_errors(digits):
    with pytest.raises(ConfigError, match="exceeds the 287 aligned"):
        build_scenario(digits, PartitionConfig(labeled=288), seed=0)
    with pytest.raises(ConfigError, match="lower partition.aux"):
        build_scenario(digits, PartitionConfig(aux=5000), seed=0)
    with pytest.raises(ConfigError, match="parties"):
        build_scenario(digits, PartitionConfig(parties=4), seed=0)


def test_digits_halves_and_quadrants():
    two, four = load_digits(parties=2), load_digits(parties=4)
    assert [tuple(x.shape[1:]) for x in two.x_train] == [(1, 8, 4), (1, 8, 4)]
    assert [tuple(x.shape[1:]) for x in four.x_train] == [(1, 4, 4)] * 4
    full = torch.cat([torch.cat(four.x_train[:2], dim=3), torch.cat(four.x_train[2:], dim=3)], dim=2)
    assert torch.equal(full, torch.cat(two.x_train, dim=3))


def test_aux_from_the_labeled_set_is_balanced_and_left_out_of_the_train_targets(digits, tiny):
    """aux_source=labeled: the adversary knows a few training labels (Li et al.); it is not scored on them."""
    from vflpriv.engine import Channel, Federation, Inbox
    from vflpriv.runner.attacking import adversary_view

    part = PartitionConfig(labeled=200, aux=80, aux_source="labeled")
    sc = build_scenario(digits, part, seed=2)
    assert torch.isin(sc.aux, sc.labeled).all()
    assert torch.bincount(digits.y_train[sc.aux], minlength=10).tolist() == [8] * 10
    cfg = tiny()
    fed = Federation(make_parties(sc, torch.device("cpu")), sc.aligned, Channel([], Inbox(owner=1)), 10, cfg.model,
                     cfg.finetune, torch.Generator(), torch.device("cpu"))
    view = adversary_view(fed, sc, None, "finetune", torch.Generator())
    assert view.target_ids["train"].numel() == 200 - 80 and _disjoint(view.target_ids["train"], sc.aux)
    unlabeled = build_scenario(digits, PartitionConfig(labeled=200, aux=80), seed=2)
    assert torch.equal(unlabeled.labeled, sc.labeled) and _disjoint(unlabeled.aux, unlabeled.labeled)
    with pytest.raises(ConfigError, match="labeled ones"):
        build_scenario(digits, PartitionConfig(labeled=20, aux=80, aux_source="labeled"), seed=0)


def test_aux_positive_ratio_draws_that_share_of_positives_on_binary_tasks_only(digits):
    cancer = load_breast_cancer(parties=2)
    sc = build_scenario(cancer, PartitionConfig(labeled=60, aux=20, aux_positive_ratio=0.3), seed=1)
    y = cancer.y_train[sc.aux]
    assert y.numel() == 20 and int(y.sum()) == 6  # round(0.3 * 20) positives, the rest negatives
    balanced = build_scenario(cancer, PartitionConfig(labeled=60, aux=20), seed=1)
    assert int(cancer.y_train[balanced.aux].sum()) == 10
    with pytest.raises(ConfigError, match="binary tasks"):
        build_scenario(digits, PartitionConfig(aux=20, aux_positive_ratio=0.3), seed=1)


def test_the_sizes_at_their_limits_are_accepted(digits):
    """labeled = the classes, labeled = the aligned count, canaries = the labeled non-auxiliary samples but one (one
    must be left to score the attacks on), aux = every candidate of a class: each exactly fits."""
    assert build_scenario(digits, PartitionConfig(labeled=10, aux=20), seed=0).labeled.numel() == 10
    assert build_scenario(digits, PartitionConfig(labeled=287), seed=0).labeled.numel() == 287
    with pytest.raises(ConfigError, match="fewer than the 10 classes"):
        build_scenario(digits, PartitionConfig(labeled=9), seed=0)
    full = build_scenario(digits, PartitionConfig(aux_source="labeled", labeled=200, aux=50, canaries=149), seed=0)
    assert full.canaries.numel() == 149 and full.canary_labels.numel() == 149
    with pytest.raises(ConfigError, match="canaries=150 leaves no labeled training sample to score"):
        build_scenario(digits, PartitionConfig(aux_source="labeled", labeled=200, aux=50, canaries=150), seed=0)
    with pytest.raises(ConfigError, match="canaries=151 exceeds the 150"):
        build_scenario(digits, PartitionConfig(aux_source="labeled", labeled=200, aux=50, canaries=151), seed=0)
    labeled = build_scenario(digits, PartitionConfig(labeled=200), seed=0).labeled
    per_class = torch.bincount(digits.y_train[labeled], minlength=10)
    fewest = int(per_class.min())
    exact = build_scenario(digits, PartitionConfig(aux_source="labeled", aux=10 * fewest), seed=0)
    assert exact.aux.numel() == 10 * fewest
    with pytest.raises(ConfigError, match="lower partition.aux"):
        build_scenario(digits, PartitionConfig(aux_source="labeled", aux=10 * fewest + 10 * 1), seed=0)


def test_one_canary_is_one_canary_and_none_is_none(digits):
    one = build_scenario(digits, PartitionConfig(canaries=1), seed=0)
    assert one.canaries.numel() == 1 and one.canary_labels.numel() == 1
    none = build_scenario(digits, PartitionConfig(), seed=0)
    assert none.canaries.numel() == 0 and none.canary_labels.numel() == 0


def test_in_the_vflhlp_setting_the_active_party_labels_its_own_unaligned_samples_not_another_s(digits):
    sc = build_scenario(digits, PartitionConfig(unaligned="disjoint"), seed=0, active_labels_local=True)
    assert not torch.equal(sc.unaligned[0], sc.unaligned[1])
    assert torch.equal(sc.active_label_ids().sort().values, torch.cat([sc.labeled, sc.unaligned[0]]).sort().values)


@pytest.mark.parametrize(("source", "local", "moves"), [("unlabeled", False, set()),
                                                       ("labeled", False, {"canaries", "trained"}),
                                                       ("unlabeled", True, {"aux"})])
def test_one_trained_label_moves_the_partition_sets_only_where_the_label_dp_argument_says(digits, source, local, moves):
    """Label DP's relation holds given the partition's sets (dp_gaussian.py, "Neighbouring relation", review fe F1's
    label twin, fe2 R4): with the default auxiliary source and labels held by the labeled samples only, no set moves
    with a trained sample's label; with ``aux_source: labeled`` the canaries or the trained samples can; with
    ``active_labels_local`` the adversary's auxiliary samples (drawn per class among trained ones) do; as stated."""
    import dataclasses

    from vflpriv.defenses import dp_gaussian

    part = PartitionConfig(labeled=250, aux=40, aux_source=source, canaries=10)
    sc = build_scenario(digits, part, seed=0, validation=0.2, active_labels_local=local)
    trained = sc.active_label_ids()
    known = [sc.aux, sc.canaries] + ([sc.labeled] if local else [])  # local: one of its unaligned (aux pool) samples
    i = int(trained[~torch.isin(trained, torch.cat(known))][0])
    y = digits.y_train.clone()
    y[i] = (y[i] + 1) % digits.num_classes
    moved = build_scenario(dataclasses.replace(digits, y_train=y), part, seed=0, validation=0.2,
                           active_labels_local=local)
    sets = {"aux": (sc.aux, moved.aux), "canaries": (sc.canaries, moved.canaries),
            "trained": (trained, moved.active_label_ids())}
    changed = {name for name, (a, b) in sets.items() if not torch.equal(a, b)}
    assert (changed & moves if moves else changed) == moves
    stated = " ".join(dp_gaussian.__doc__.split())
    assert not moves or {"aux": "partition.active_labels_local", "canaries": "aux_source=labeled"}[min(moves)] in stated
