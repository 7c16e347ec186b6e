"""The runner's scores, each computed by hand: the multiplicative advantage, precision at the top, the canaries'
abstention menu and the bound it certifies, leak AUC without the hidden canaries, the Hungarian and best-threshold
accuracies' edges, the search's record."""

from __future__ import annotations

import json
import math

import pytest
import torch

from vflpriv.attacks.search import SearchResult, Trial
from vflpriv.common.empirical_epsilon import menu_lower
from vflpriv.engine.adversary import Inference
from vflpriv.runner.scoring import (
    best_threshold_accuracy,
    hungarian_accuracy,
    odds_ratio,
    precision_at_top,
    record_search,
    score_attack,
    score_canaries,
)
from vflpriv.store.records import RunRecord


def _record(**fields) -> RunRecord:
    return RunRecord(key="k", method="m", dataset="d", attack="a", defense="none", phase="finetune", strength=0.0,
                     seed=0, **fields)


def test_the_multiplicative_advantage_is_the_log_odds_ratio_with_add_half_smoothing():
    a, b = (3 + 0.5) / 5, (1 + 0.5) / 5  # 3 of 4 right against 1 of 4
    assert odds_ratio("1101", "0100") == pytest.approx(math.log(a / (1 - a)) - math.log(b / (1 - b)))
    assert odds_ratio("0100", "1101") == pytest.approx(-odds_ratio("1101", "0100"))
    assert odds_ratio("10", "01") == 0.0


@pytest.mark.parametrize(("n", "k"), [(3, 3), (40, 5), (100, 5), (101, 6), (400, 20)])
def test_precision_at_the_top_takes_the_top_five_percent_and_at_least_five(n, k):
    truth = torch.zeros(n, dtype=torch.long)
    predictions = torch.ones(n, dtype=torch.long)
    confidence = torch.arange(n, dtype=torch.float)
    predictions[-k:] = 0  # exactly the k most confident are right
    assert precision_at_top(predictions, truth, confidence) == (k, 1.0)
    predictions[-k] = 1
    assert precision_at_top(predictions, truth, confidence) == (k, (k - 1) / k)


def test_ties_in_confidence_keep_the_earlier_guesses():
    predictions, truth = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1]), torch.zeros(8, dtype=torch.long)
    assert precision_at_top(predictions, truth, torch.ones(8)) == (5, 1.0)
    many = torch.cat([torch.zeros(5), torch.ones(95)]).long()  # 100 tied guesses: the first 5 right
    assert precision_at_top(many, torch.zeros(100, dtype=torch.long), torch.ones(100)) == (5, 1.0)


def test_canary_guesses_tied_in_confidence_are_kept_in_order():
    labels = torch.zeros(100, dtype=torch.long)
    predictions = torch.cat([torch.zeros(10), torch.ones(90)]).long()
    record = _record(canaries=100)
    score_canaries(record, Inference(predictions=predictions, confidence=torch.ones(100)), torch.arange(100), labels,
                   classes=4, delta=0.0, prior=None)
    assert json.loads(record.canary_counts) == [[100, 10], [50, 10], [25, 10], [10, 10]]


def test_the_canaries_chosen_entry_is_the_bound_s_and_all_of_them_when_none_certifies():
    """The bound's entry need not be all right; with no bound at all, every guess is reported."""
    labels = torch.arange(40) % 4
    right = torch.tensor([True] * 9 + [False] + [True] * 5 + [False] * 25)  # 14 right, 9 of the 10 most confident
    predictions = torch.where(right, labels, (labels + 1) % 4)
    record = _record(canaries=40)
    score_canaries(record, Inference(predictions=predictions, confidence=torch.arange(40, 0, -1).float()),
                   torch.arange(40), labels, classes=4, delta=0.0, prior=None)
    counts = json.loads(record.canary_counts)
    bound, guesses = menu_lower(counts, canaries=40, classes=4)
    assert bound > 0 and (record.canary_guesses, record.epsilon_lower) == (guesses, bound)
    (entry,) = [c for c in counts if c[0] == guesses]
    assert entry[1] < entry[0] and record.canary_accuracy == entry[1] / entry[0]
    wrong = _record(canaries=40)
    score_canaries(wrong, Inference(predictions=(labels + 1) % 4, confidence=torch.arange(40).float()),
                   torch.arange(40), labels, classes=4, delta=0.0, prior=None)
    assert (wrong.epsilon_lower, wrong.canary_guesses, wrong.canary_accuracy) == (0.0, 40, 0.0)


def test_tpr_at_one_percent_fpr_and_non_finite_scores_are_refused():
    from vflpriv.common.errors import DivergedError

    truth = torch.cat([torch.zeros(200), torch.ones(2)]).long()
    scores = torch.cat([torch.linspace(0.1, 0.8, 200), torch.tensor([0.95, 0.05])])  # one positive above all
    record = _record()
    score_attack(record, {"test": Inference(predictions=(scores > 0.5).long(), scores=scores)}, {"test": truth})
    assert record.attack_tpr_at_1fpr == 0.5  # 2 negatives may pass at 1%: only the first positive is above them
    for field in ("scores", "confidence"):
        bad = Inference(predictions=torch.zeros(3).long(), **{field: torch.tensor([0.1, float("nan"), 0.2])})
        with pytest.raises(DivergedError, match=field.rstrip("s")):
            score_attack(_record(), {"test": bad}, {"test": torch.zeros(3).long()})


def test_canaries_are_scored_over_the_abstention_menu_and_report_the_entry_of_the_bound():
    """40 canaries of 4 classes, guessed with confidence 40..1: the 12 most confident right, the rest wrong. The menu
    keeps 40, 20, 10 and 4 guesses (shares 1, 1/2, 1/4, 1/10, rounded up); the record is the entry of the best bound."""
    labels = torch.arange(40) % 4
    predictions = torch.cat([labels[:12], (labels[12:] + 1) % 4])
    inference = Inference(predictions=predictions, confidence=torch.arange(40, 0, -1).float())
    record = _record(canaries=40)
    score_canaries(record, inference, torch.arange(40), labels, classes=4, delta=0.0, prior=torch.zeros(40).long())
    counts = [[40, 12], [20, 12], [10, 10], [4, 4]]
    assert json.loads(record.canary_counts) == counts
    bound, guesses = menu_lower(counts, canaries=40, classes=4)
    assert (record.epsilon_lower, record.canary_guesses) == (bound, guesses) and bound > 0 and guesses == 10
    assert record.canary_accuracy == 1.0 and record.canary_prior_accuracy == 0.25


def test_without_a_confidence_every_canary_guess_counts_once():
    labels = torch.tensor([0, 1, 2, 3, 0, 1, 2, 3])
    predictions = torch.tensor([0, 1, 2, 0, 0, 0, 0, 0])
    record = _record(canaries=8)
    score_canaries(record, Inference(predictions=predictions, covered=torch.tensor([True] * 6 + [False] * 2)),
                   torch.arange(8), labels, classes=4, delta=0.0, prior=None)
    assert json.loads(record.canary_counts) == [[6, 4]]  # the two uncovered are not guesses
    assert (record.canary_guesses, record.canary_accuracy) == (6, pytest.approx(4 / 6))
    assert math.isnan(record.canary_prior_accuracy)


def test_leak_auc_leaves_the_hidden_canaries_out_of_each_batch():
    truth = torch.tensor([0, 1, 0, 1])
    scores = torch.tensor([0.1, 0.9, 0.95, 0.2])  # rows 2 and 3 are ranked below the other class
    inference = Inference(predictions=(scores > 0.5).long(), batch_scores=[(torch.arange(4), scores)])
    record = _record()
    score_attack(record, {"train": inference}, {"train": truth})
    assert record.attack_leak_auc == 0.5  # two of the four positive-negative pairs ordered right
    hidden = {"train": torch.tensor([False, False, True, True])}
    score_attack(record, {"train": inference}, {"train": truth}, hidden)
    assert record.attack_leak_auc == 1.0 and record.n_targets == 2


def test_every_target_set_is_scored_train_as_well_as_test():
    record = _record()
    score_attack(record, {"test": Inference(predictions=torch.tensor([1, 1])),
                          "train": Inference(predictions=torch.tensor([0, 1, 1]))},
                 {"test": torch.tensor([1, 0]), "train": torch.tensor([0, 1, 0])})
    assert (record.attack_target, record.attack_accuracy) == ("test", 0.5)
    assert record.attack_accuracy_train == pytest.approx(2 / 3)


def test_a_covered_mask_that_covers_nothing_or_has_the_wrong_shape_is_refused():
    from vflpriv.common.errors import ProtocolError

    for covered in (torch.zeros(3, dtype=torch.bool), torch.ones(2, dtype=torch.bool)):
        with pytest.raises(ProtocolError, match="covered mask"):
            score_attack(_record(), {"test": Inference(predictions=torch.zeros(3).long(), covered=covered)},
                         {"test": torch.zeros(3).long()})


def test_hungarian_and_best_threshold_edges():
    assert math.isnan(hungarian_accuracy(torch.tensor([]).long(), torch.tensor([]).long()))
    assert hungarian_accuracy(torch.tensor([2, 2, 0, 1]), torch.tensor([0, 0, 1, 2])) == 1.0
    assert hungarian_accuracy(torch.tensor([0, 0, 0]), torch.tensor([0, 1, 2])) == pytest.approx(1 / 3)
    assert math.isnan(best_threshold_accuracy(torch.tensor([]), torch.tensor([]).long()))
    # tied scores cannot be cut apart: the best cut of [0.5 (y0), 0.5 (y1), 0.9 (y1)] is below 0.5 or between 0.5 / 0.9
    assert best_threshold_accuracy(torch.tensor([0.5, 0.5, 0.9]), torch.tensor([0, 1, 1])) == pytest.approx(2 / 3)
    assert best_threshold_accuracy(torch.tensor([0.1, 0.5, 0.5]), torch.tensor([0, 0, 1])) == pytest.approx(2 / 3)
    assert best_threshold_accuracy(torch.tensor([0.9, 0.1]), torch.tensor([1, 0])) == 1.0
    assert best_threshold_accuracy(torch.tensor([0.9, 0.1]), torch.tensor([0, 0])) == 1.0  # every score below the cut


def test_the_search_record_names_its_choice_sorted_and_its_oracle_on_the_covered_targets():
    record = _record(attack_accuracy=0.25)
    truth = {"test": torch.tensor([0, 1, 1, 0])}
    trial = Trial({"lr": 1.0}, 1.0, 0.5, {"test": Inference(predictions=torch.tensor([0, 1, 0, 1]),
                                                           covered=torch.tensor([True, True, False, False]))})
    record_search(record, SearchResult({"lr": 0.1, "epochs": 5}, {}, [trial], "grid of 2"), truth)
    assert record.attack_selected == '{"epochs": 5, "lr": 0.1}'
    assert record.attack_accuracy_oracle == 1.0  # the trial is right on the two targets it covered
    assert json.loads(record.attack_trials) == {"how": "grid of 2", "trials": [
        {"options": {"lr": 1.0}, "fraction": 1.0, "aux_accuracy": 0.5}]}
