"""An auditor plugin's guesses are scored only where they are one finite guess per canary: a guess tensor of another
length (a single guess would broadcast over every canary), confidences of another length, or float labels leave the
training without an auditor bound, with the reason in its notes, as non-finite scores do."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from vflpriv.common.empirical_epsilon import KEEP
from vflpriv.common.errors import IncompatibleError
from vflpriv.runner.auditing import auditor_menu, score_auditor
from vflpriv.store.records import RunRecord

LABELS = torch.tensor([3, 1, 4, 1, 5, 9, 2, 6])
SCENARIO = SimpleNamespace(canary_labels=LABELS, canaries=torch.arange(8),
                           canary_candidates=torch.arange(10).expand(8, -1))


class Plugin:
    def __init__(self, guess, confidence):
        self.guess, self.confidence = guess, confidence

    def guesses(self):
        return self.guess, self.confidence


def _record() -> RunRecord:
    return RunRecord(key="k", method="splitnn", dataset="digits", attack="gc", defense="dp-gaussian",
                     phase="finetune", strength=1.0, seed=0, canaries=8)


def test_one_guess_per_canary_is_scored():
    record = _record()
    score_auditor([record], "plugin", Plugin(LABELS.clone(), torch.linspace(1, 0, 8)), SCENARIO, delta=0.0)
    assert record.auditor_guesses == 8 and record.auditor_accuracy == 1.0 and record.auditor_epsilon_lower > 0


@pytest.mark.parametrize("guess, confidence, problem", [
    (torch.tensor([3]), torch.ones(1), "one guess per canary"),
    (LABELS[:5], torch.ones(5), "one guess per canary"),
    (LABELS.clone(), torch.ones(3), "one guess per canary"),
    (LABELS.float(), torch.ones(8), "integer"),
    (LABELS.clone(), torch.full((8,), float("nan")), "not finite")])
def test_guesses_that_are_not_one_per_canary_certify_nothing(guess, confidence, problem):
    record = _record()
    score_auditor([record], "plugin", Plugin(guess, confidence), SCENARIO, delta=0.0)
    assert record.auditor_counts == "" and record.auditor_guesses == 0
    assert f"auditor plugin: its" in record.notes and problem in record.notes and "certifies nothing" in record.notes



class MenuPlugin(Plugin):
    def __init__(self, menu, *, method: bool = True):
        super().__init__(LABELS.clone(), torch.linspace(1, 0, 8))
        self.shares = menu
        if not method:
            self.menu = menu

    def menu(self):
        return self.shares


@pytest.mark.parametrize("menu", [(), (1.0, 2.0), (1.0, 0.0), (1.0, float("nan")), [1.0, 0.5], (True,), ("0.5",)])
def test_an_auditor_menu_that_is_no_tuple_of_shares_in_0_1_is_refused_in_planning(menu):
    with pytest.raises(IncompatibleError, match="finetune.auditor=plugin: its menu must be a method returning"):
        auditor_menu(MenuPlugin(menu), "plugin")


def test_a_menu_that_is_an_attribute_not_a_method_is_refused_not_scored_with_the_standard_menu():
    with pytest.raises(IncompatibleError, match="its menu must be a method"):
        auditor_menu(MenuPlugin((1.0, 0.01), method=False), "plugin")


def test_a_plugin_without_a_menu_is_scored_with_the_standard_one_and_a_menu_is_read_once_in_planning():
    assert auditor_menu(Plugin(LABELS.clone(), torch.ones(8)), "plugin") == KEEP
    plugin = MenuPlugin((1.0, 0.25))
    shares = auditor_menu(plugin, "plugin")
    plugin.shares = (1.0, 0.125)  # what it says after training is not what it is scored with
    record = _record()
    score_auditor([record], "plugin", plugin, SCENARIO, delta=0.0, shares=shares)
    assert record.auditor_counts == "[[8, 8], [2, 2]]"
