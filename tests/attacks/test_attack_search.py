"""Tuned attacks: selection on auxiliary labels only, successive halving, the refit, Optuna, resume."""

import dataclasses
import json

import pytest
import torch
from attack_helpers import gradient_view
from pydantic import Field

import vflpriv.data.load as load
from vflpriv.attacks.base import Attack
from vflpriv.attacks.search import SearchResult, grid, holdout_split, search
from vflpriv.config.options import CANDIDATE, Options
from vflpriv.config.schema import RunConfig
from vflpriv.engine.adversary import HOLDOUT, Inference
from vflpriv.runner.execution import run


class ToyOptions(Options):
    epochs: int = Field(40, ge=1)
    skill: float = Field(0.0, ge=0, le=1)
    noise: int = Field(0, ge=0)


class ToyAttack(Attack):
    """Guesses the first ``skill`` share of the holdout rows right (read from their features), the rest wrong; counts
    its calls; raises on call number ``fail_at``."""

    Options = ToyOptions
    search_space = {"skill": (0.25, 0.5, 1.0), "noise": (0, 1)}
    budget_option = "epochs"
    calls: list = []
    fail_at: int | None = None

    def infer(self, view):
        ToyAttack.calls.append((self.options.skill, self.options.noise, self.options.epochs))
        if ToyAttack.fail_at is not None and len(ToyAttack.calls) >= ToyAttack.fail_at:
            raise KeyboardInterrupt("interrupted")
        n = view.targets[HOLDOUT].shape[0]
        truth = ToyAttack.oracle_labels(view)
        good = torch.arange(n) < round(self.options.skill * n)
        guess = torch.where(good, truth, (truth + 1 + self.options.noise) % view.num_classes)
        return {HOLDOUT: Inference(predictions=guess),
                "train": Inference(predictions=torch.zeros(view.targets["train"].shape[0], dtype=torch.long))}

    @staticmethod
    def oracle_labels(view):
        """The test's stand-in for a learned model: the holdout rows' labels, decoded from their features (the toy
        view writes the label into feature 0, so it is a function of what the adversary holds)."""
        return view.targets[HOLDOUT][:, 0].round().long()


def toy_view(seed: int = 0):
    labels = torch.arange(40) % 4
    feats_aux = torch.randn(40, 3, generator=torch.Generator().manual_seed(seed))
    feats_aux[:, 0] = labels.float()
    view = gradient_view(torch.randn(20, 5), labels_aux=labels, feats_train=torch.randn(20, 3),
                         feats_aux=feats_aux, num_classes=4, seed=seed)
    return view


@pytest.fixture(autouse=True)
def _fresh_counts():
    ToyAttack.calls, ToyAttack.fail_at = [], None


def test_holdout_is_stratified_and_disjoint():
    y = torch.arange(40) % 4
    fit, held = holdout_split(y, generator=torch.Generator().manual_seed(1))
    assert set(fit.tolist()).isdisjoint(held.tolist()) and len(fit) + len(held) == 40
    assert torch.bincount(y[held], minlength=4).tolist() == [2, 2, 2, 2]
    assert holdout_split(torch.tensor([0, 1, 2]), generator=torch.Generator()) is None


def test_grid_puts_the_given_options_first():
    attack = ToyAttack(ToyOptions(skill=0.5))
    candidates = grid(attack, ToyAttack.search_space)
    assert candidates[0] == {} and len(candidates) == 6 and {"skill": 1.0} in candidates


def test_successive_halving_selects_the_best_and_stops_the_rest_early():
    attack = ToyAttack(ToyOptions())
    found = search(attack, toy_view(), budget=8, seed=0, refit=lambda winner: {"train": Inference(torch.zeros(2))})
    assert isinstance(found, SearchResult)
    assert found.selected == {"skill": 1.0}
    # 8 candidates (given skill 0 + 3 x 2), eta 4: 8 at 1/16 of the 40 epochs (2.5 -> 2), the best 2 at 1/4 = 10 trials
    epochs = [e for _, _, e in ToyAttack.calls]
    assert epochs.count(2) == 8 and epochs.count(10) == 2 and len(epochs) == 10
    assert max(t.aux_accuracy for t in found.trials) == 1.0


class SharpOptions(ToyOptions):
    sharp: bool = False
    sharpness: float = 1.0
    read_only_with = {"sharpness": ("sharp", (True,))}


def test_a_candidate_may_leave_unread_an_option_another_candidate_reads():
    """Review lo3 F3: sharpness=2 fixed beside a search over sharp: the sharp=false candidates run (a candidate is
    validated as one, the whole space was judged in planning), where the same options given alone are refused."""
    class Sharp(ToyAttack):
        Options = SharpOptions
        search_space = {"sharp": (False, True)}

    with pytest.raises(ValueError, match="sharpness=2.0 is read only with sharp=true"):
        SharpOptions(sharpness=2.0)
    attack = Sharp(SharpOptions.model_validate({"sharpness": 2.0}, context=CANDIDATE))
    found = search(attack, toy_view(), budget=8, seed=0, refit=lambda winner: {"train": Inference(torch.zeros(2))})
    assert isinstance(found, SearchResult) and len(ToyAttack.calls) == 2


def test_attack_without_space_is_not_tuned():
    class Fixed(ToyAttack):
        search_space = {}
        untunable = "a fixed rule"

    assert search(Fixed(ToyOptions()), toy_view(), budget=8, seed=0) == "a fixed rule"


def test_optuna_searches_a_space_past_the_budget_reproducibly():
    pytest.importorskip("optuna")
    space = {"skill": (0.1, 0.2, 0.3, 0.5, 0.8, 1.0), "noise": (0, 1, 2)}
    runs = []
    for _ in range(2):
        ToyAttack.calls = []
        found = search(ToyAttack(ToyOptions(epochs=3)), toy_view(), budget=5, seed=3, space=space,
                       refit=lambda winner: {})
        runs.append((found.selected, [t.options for t in found.trials]))
        assert len(found.trials) == 5 and found.trials[0].options == {} and "Optuna" in found.how
    assert runs[0] == runs[1]


def test_resume_of_an_interrupted_search_computes_nothing_twice(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path))
    ToyAttack.fail_at = 6
    with pytest.raises(KeyboardInterrupt):
        search(ToyAttack(ToyOptions()), toy_view(), budget=8, seed=0, key="run-1", refit=lambda w: {})
    done = ToyAttack.calls[:5]  # the sixth raised before it was stored
    ToyAttack.calls, ToyAttack.fail_at = [], None
    found = search(ToyAttack(ToyOptions()), toy_view(), budget=8, seed=0, key="run-1", refit=lambda w: {})
    assert len(ToyAttack.calls) == 10 - 5 and not set(done) & set(ToyAttack.calls[:1])
    assert len(found.trials) == 10
    ToyAttack.calls = []
    search(ToyAttack(ToyOptions()), toy_view(), budget=8, seed=0, key="run-1", refit=lambda w: {})
    assert ToyAttack.calls == []  # a complete search reruns from the cache alone


def _tuned_run(**attack):
    return RunConfig.model_validate({
        "dataset": {"name": "digits"}, "partition": {"labeled": 60, "aux": 40},
        "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2, "batch_size": 32},
        "attack": {"name": "mc", "options": {"epochs": 16}, "prior": "none", **attack},
    })


def test_selection_never_reads_target_labels(tmp_path, monkeypatch):
    """Poisoned targets: the labels the runner scores with are scrambled; the search (its trials' holdout scores and
    its choice) is unchanged, only the scores of the target guesses move."""
    cfg = _tuned_run(tune=True)
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "a"))
    (clean,) = run(cfg)
    original = load.load_dataset(cfg.dataset, parties=2)
    perm = torch.randperm(original.y_test.numel(), generator=torch.Generator().manual_seed(0))
    poisoned = dataclasses.replace(original, y_test=original.y_test[perm])
    monkeypatch.setattr("vflpriv.runner.planning.load_dataset", lambda *_a, **_k: poisoned)
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "b"))  # nothing from the first run's cache
    (dirty,) = run(cfg)
    assert clean.status == dirty.status == "ok"
    assert clean.attack_selected == dirty.attack_selected
    assert json.loads(clean.attack_trials) == json.loads(dirty.attack_trials)
    assert clean.attack_accuracy != dirty.attack_accuracy
    assert clean.attack_accuracy_oracle >= clean.attack_accuracy


def test_the_given_options_alone_reproduce_the_untuned_attack(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path))
    one = {"head": ["linear"], "train_bottom": [False], "lr": [0.005]}
    (plain,) = run(_tuned_run())
    (tuned,) = run(_tuned_run(tune=True, search_space=one))
    assert tuned.attack_selected == "{}" and tuned.attack_accuracy == plain.attack_accuracy
    assert plain.attack_accuracy_oracle != plain.attack_accuracy_oracle  # NaN: an untuned run has no oracle


def test_the_holdout_takes_a_quarter_of_each_class_at_least_one_and_none_of_a_single_sample():
    y = torch.tensor([0] * 8 + [1] * 2 + [2] * 3 + [3])
    fit, held = holdout_split(y, generator=torch.Generator().manual_seed(0))
    assert torch.bincount(y[held], minlength=4).tolist() == [2, 1, 1, 0]
    assert torch.bincount(y[fit], minlength=4).tolist() == [6, 1, 2, 1]


@pytest.mark.parametrize(("size", "rounds", "how"), [(1, 0, "grid of 1"), (2, 1, "successive halving"),
                                                      (4, 1, "successive halving"), (16, 2, "successive halving")])
def test_halving_runs_ceil_log4_rounds_and_a_single_candidate_runs_whole(size, rounds, how):
    space = {"skill": tuple(round(i / (size - 1), 3) for i in range(1, size))} if size > 1 else {"skill": ()}
    found = search(ToyAttack(ToyOptions(epochs=64)), toy_view(), budget=32, seed=0, space=space,
                   refit=lambda winner: {})
    assert how in found.how
    fractions = sorted({t.fraction for t in found.trials})
    assert fractions == ([1.0] if rounds == 0 else [4.0 ** (r - rounds) for r in range(rounds)])
    assert found.selected == ({"skill": 1.0} if size > 1 else {})  # the only candidate right on every holdout row


def test_ties_go_to_the_earlier_candidate_the_options_as_given_first():
    flat = {"noise": (0, 1, 2)}  # noise only changes which wrong class: every candidate scores the same
    for budget in (8, 2):  # halving (3 candidates) and, past the budget, Optuna
        if budget == 2:
            pytest.importorskip("optuna")
        found = search(ToyAttack(ToyOptions(skill=0.5)), toy_view(), budget=budget, seed=0, space=flat,
                       refit=lambda winner: {})
        assert found.selected == {} and len({t.aux_accuracy for t in found.trials}) == 1


def test_a_scaled_budget_never_drops_below_one_and_a_whole_one_is_untouched():
    from vflpriv.attacks.search import with_overrides

    assert with_overrides(ToyAttack(ToyOptions(epochs=10)), {}, 1 / 64).options.epochs == 1
    assert with_overrides(ToyAttack(ToyOptions(epochs=40)), {}, 1 / 64).options.epochs == 1
    assert with_overrides(ToyAttack(ToyOptions(epochs=40)), {"skill": 1.0}, 1.0).options.epochs == 40
    assert with_overrides(ToyAttack(ToyOptions(epochs=40)), {}, 0.25).options.epochs == 10


def test_optuna_trials_run_whole_budgets_and_start_from_the_options_as_given():
    pytest.importorskip("optuna")
    space = {"skill": (0.1, 0.2, 0.3, 0.5, 0.8, 1.0), "noise": (0, 1, 2)}
    found = search(ToyAttack(ToyOptions(epochs=3, skill=0.2)), toy_view(), budget=6, seed=1, space=space,
                   refit=lambda winner: {})
    assert found.trials[0].options == {} and {t.fraction for t in found.trials} == {1.0}
    assert all(e == 3 for _, _, e in ToyAttack.calls)
    best = max(found.trials, key=lambda t: t.aux_accuracy)
    assert found.selected == best.options and all(v != {"skill": 0.2}.get(k) for k, v in found.selected.items())


def test_a_whole_grid_without_a_budget_option_gives_ties_to_the_options_as_given():
    class Whole(ToyAttack):
        budget_option = None

    found = search(Whole(ToyOptions(skill=0.5)), toy_view(), budget=8, seed=0, space={"noise": (0, 1, 2)},
                   refit=lambda winner: {})
    assert found.how.startswith("grid of 3;") and len(found.trials) == 3
    assert found.selected == {} and len({t.aux_accuracy for t in found.trials}) == 1


def test_optuna_ties_go_to_the_options_as_given_among_trials_that_differ():
    pytest.importorskip("optuna")
    flat = {"noise": (0, 1, 2), "epochs": (1, 2, 3, 4)}  # 12 candidates that all score alike, 4 asked
    found = search(ToyAttack(ToyOptions(skill=0.5)), toy_view(), budget=4, seed=0, space=flat, refit=lambda w: {})
    assert any(t.options for t in found.trials) and len({t.aux_accuracy for t in found.trials}) == 1
    assert found.selected == {}


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_optuna_explores_the_space_and_selects_its_first_best_trial(seed):
    pytest.importorskip("optuna")
    space = {"skill": (0.1, 0.2, 0.3, 0.5, 0.8, 1.0), "noise": (0, 1, 2)}
    found = search(ToyAttack(ToyOptions(epochs=3, skill=0.2)), toy_view(), budget=6, seed=seed, space=space,
                   refit=lambda winner: {})
    assert len({json.dumps(t.options, sort_keys=True) for t in found.trials}) > 1  # other values than the given
    top = max(t.aux_accuracy for t in found.trials)
    assert found.selected == next(t.options for t in found.trials if t.aux_accuracy == top)
