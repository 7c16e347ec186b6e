"""One run end to end: reproducible, and the attack's answer cannot depend on its targets' labels."""

import dataclasses
import os

import pytest
import torch

import vflpriv.data.load as load
from vflpriv.runner.execution import run


def test_same_config_and_seed_same_numbers(tiny):
    cfg = tiny(defenses=[{"name": "iso", "strength": 5.0, "sweep": True}])
    (a,), (b,) = run(cfg), run(cfg)
    for field in ("utility", "attack_accuracy", "attack_accuracy_train", "prior_accuracy", "comm_mb"):
        assert getattr(a, field) == getattr(b, field)
    assert a.status == "ok" and a.utility_metric == "accuracy" and a.strength == 5.0


def test_binary_task_reports_auc(tiny):
    (rec,) = run(tiny(dataset={"name": "breast-cancer"}, partition={"labeled": 60, "aux": 20}))
    assert rec.utility_metric == "auc" and 0.5 < rec.utility <= 1.0
    assert 0.0 <= rec.attack_auc <= 1.0 and 0.0 <= rec.attack_tpr_at_1fpr <= 1.0


def test_attack_predictions_do_not_depend_on_target_labels(tiny, monkeypatch):
    """Scramble the test labels the runner scores with: the attack's guesses must not move."""
    cfg = tiny()
    original = load.load_dataset(cfg.dataset, parties=2)
    guesses = []
    from vflpriv.attacks.labels.model_completion import ModelCompletion

    real_infer = ModelCompletion.infer

    def spy(self, view):
        out = real_infer(self, view)
        guesses.append(out["test"].predictions.clone())
        return out

    monkeypatch.setattr(ModelCompletion, "infer", spy)
    (first,) = run(cfg)
    perm = torch.randperm(original.y_test.numel(), generator=torch.Generator().manual_seed(0))
    scrambled = dataclasses.replace(original, y_test=original.y_test[perm])
    monkeypatch.setattr("vflpriv.runner.planning.load_dataset", lambda *_a, **_k: scrambled)
    (second,) = run(cfg)
    assert torch.equal(guesses[0], guesses[1])
    assert first.utility != second.utility or first.attack_accuracy != second.attack_accuracy


def test_attacking_pretraining_of_a_method_without_it_is_refused(tiny):
    from vflpriv.common.errors import IncompatibleError

    with pytest.raises(IncompatibleError, match="no pretraining"):
        run(tiny(attack={"phase": "pretrain"}))


@pytest.mark.parametrize(("attack", "target"), [("mc", "test"), ("gc", "train")])
def test_prior_is_scored_on_the_attack_own_targets(tiny, monkeypatch, attack, target):
    """Leakage = attack - prior compares like with like: gc's prior predicts the rows gc clusters."""
    import vflpriv.runner.prior as runner
    from vflpriv.runner.prior import PRIORS

    seen = []
    real = PRIORS["aux"]

    def spy(view, **k):
        out = real(view, **k)
        seen.append((view.target_ids["train"], out))
        return out

    monkeypatch.setitem(PRIORS, "aux", spy)
    monkeypatch.setattr(runner, "_PRIORS", {})
    cfg = tiny(attack={"name": attack, "options": {}, "prior": "aux", "prior_epochs": 5})
    (record,) = run(cfg)
    assert record.attack_target == target
    ds = load.load_dataset(cfg.dataset, parties=2)
    (train_ids, predictions), = seen
    truth = ds.y_train[train_ids] if target == "train" else ds.y_test
    assert predictions[target].shape == truth.shape
    assert record.prior_accuracy == pytest.approx(float((predictions[target] == truth).double().mean()))
    assert record.leakage == pytest.approx(record.attack_accuracy - record.prior_accuracy)


def test_same_attack_prior_reruns_the_attack_without_the_federation(tiny, monkeypatch, tmp_path):
    """same-attack: the attack on the adversary's own SimSiam encoder, inbox empty; so the prior does not
    depend on what the federation did (here: the defense strength), while the attack may."""
    import vflpriv.runner.prior as runner
    from vflpriv.attacks.labels.model_completion import ModelCompletion

    views = []
    real_infer = ModelCompletion.infer
    monkeypatch.setattr(ModelCompletion, "infer", lambda self, view: views.append(view) or real_infer(self, view))
    priors = []
    for strength in (0.0, 25.0):
        monkeypatch.setattr(runner, "_PRIORS", {})
        monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / f"cache-{strength}"))  # the prior is computed again
        cfg = tiny(attack={"prior": "same-attack", "options": {"epochs": 20}},
                   defenses=[{"name": "iso", "strength": strength, "kinds": ["embedding"], "party": 1, "sweep": True}])
        priors.append(run(cfg)[0].prior_accuracy)
    attacked, alone = views[0], views[1]
    assert alone.inbox.received == [] and alone.encoder is not attacked.encoder
    x = attacked.aux_x
    assert not torch.allclose(alone.encoder.eval()(x), attacked.encoder.eval()(x))
    assert priors[0] == priors[1]


def test_same_attack_prior_is_refused_for_an_attack_on_received_messages(tiny):
    from vflpriv.common.errors import IncompatibleError

    with pytest.raises(IncompatibleError, match="same-attack"):
        run(tiny(attack={"name": "gc", "options": {}, "prior": "same-attack"}))


def test_a_diverged_model_fails_the_run_instead_of_scoring_nan_as_guesses(tiny, monkeypatch):
    """NaN logits would argmax to class 0 and read as chance (perfect protection): the run fails instead."""
    from vflpriv.methods.finetune import TopModel
    from vflpriv.runner.execution import run_safely

    real = TopModel.forward
    monkeypatch.setattr(TopModel, "forward", lambda self, reps: real(self, reps) * float("nan"))
    (record,) = run_safely([tiny()])
    assert record.status == "failed" and "non-finite" in record.error


def test_the_priors_pretraining_budget_is_the_methods(tiny):
    """A_SimSiam pretrains as long, at the same batch and lr, with the same views as the SSL method it is
    compared with (an under-trained prior inflates leakage); for a method without SSL, the local defaults."""
    from vflpriv.methods.local_ssl import LocalOptions
    from vflpriv.runner.prior import prior_options

    fedhssl = tiny(method={"name": "fedhssl", "options": {"global_iterations": 3, "local_epochs": 2, "batch_size": 64,
                                                          "lr_per_256": 0.1, "clean_view": True,
                                                          "color_jitter": [0.3, 0.3, 0.3, 0.1], "blur_sigma": [0.1, 2]}})
    options = LocalOptions.model_validate(prior_options(fedhssl))
    assert (options.epochs, options.batch_size, options.clean_view) == (6, 64, True)
    assert (options.color_jitter, options.blur_sigma) == ((0.3, 0.3, 0.3, 0.1), (0.1, 2.0))
    assert options.base_lr() == pytest.approx(0.1 * 64 / 256)  # plain SimSiam: no guidance rescaling
    local = tiny(method={"name": "local-simsiam", "options": {"epochs": 7, "optimizer": "adam", "lr": 0.003}})
    options = LocalOptions.model_validate(prior_options(local))
    assert (options.epochs, options.optimizer, options.base_lr()) == (7, "adam", 0.003)
    assert prior_options(tiny()) == {}  # splitnn


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="with one CPU every native pool has one thread anyway")
def test_a_training_and_its_attacks_run_every_native_thread_pool_on_one_thread(tiny, monkeypatch):
    """scikit-learn's k-means and spectral clustering (OpenMP) and scipy's solvers (OpenBLAS) too, not only torch:
    the numbers then do not depend on the process a sweep runs them in, and a busy worker's core is not shared."""
    import threadpoolctl

    import vflpriv.runner.execution as execution

    seen, real = [], execution._execute

    def spy(p):
        seen.extend(pool["num_threads"] for pool in threadpoolctl.threadpool_info())
        return real(p)

    monkeypatch.setattr(execution, "_execute", spy)
    with threadpoolctl.threadpool_limits(limits=2):
        (rec,) = run(tiny())
        after = [pool["num_threads"] for pool in threadpoolctl.threadpool_info()]
    assert rec.status == "ok" and seen and set(seen) == {1} and max(after) == 2  # restored when it ends
