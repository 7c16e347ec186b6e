"""dp-gaussian: DP-SGD on the active party's label-dependent computation. Its clipping and noise by hand, its
accountant against the accountant library's own value for the same mechanism, every label use counted, and the
configurations its argument does not cover recorded without an epsilon."""

from __future__ import annotations

import math

import pytest
import torch
from opacus.accountants.analysis.rdp import compute_rdp, get_privacy_spent
from torch import nn

from vflpriv.common.errors import IncompatibleError
from vflpriv.config.registry import DEFENSES
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import build_federation, run
from vflpriv.runner.planning import plan

ORDERS = [1 + x / 10.0 for x in range(1, 100)] + list(range(12, 64))


def _defense(sigma: float, **options):
    cls = DEFENSES.get("dp-gaussian")
    return cls(strength=sigma, party=0, phase="finetune", kinds=None, options=cls.Options.model_validate(options),
               generator=torch.Generator().manual_seed(0))


def _bound(defense, rows: int = 10) -> None:
    defense.num_classes, defense.uses = 3, torch.zeros(rows, dtype=torch.long)


def _problem():
    """A top over [active embedding, received embedding] with per-sample losses; gradients known by autograd."""
    torch.manual_seed(0)
    top = nn.Linear(6, 3)
    own = nn.Parameter(torch.randn(5, 2) * 3)
    received = (torch.randn(5, 4) * 3).requires_grad_()
    y = torch.tensor([0, 1, 2, 1, 0])

    def losses():
        return nn.functional.cross_entropy(top(torch.cat([own, received], 1)), y, reduction="none")

    return top, own, received, losses


def test_each_sample_s_joint_gradient_is_clipped_and_the_update_and_rows_are_its_mean():
    top, own, received, losses = _problem()
    params = [*top.parameters(), own]
    per_sample = []
    for i in range(5):
        grads = torch.autograd.grad(losses()[i], [*params, received])
        per_sample.append(torch.cat([g.flatten() for g in grads[:-1]] + [grads[-1][i]]))
    norms = torch.stack(per_sample).norm(dim=1)
    clip = float(norms.min()) / 2  # every sample is clipped
    scale = clip / norms
    defense = _defense(1e-12, clip=clip)
    _bound(defense)
    defense.backward(losses(), params, {1: received}, torch.arange(5))
    expected_weight = sum(scale[i] * torch.autograd.grad(losses()[i], top.weight)[0] for i in range(5)) / 5
    assert torch.allclose(top.weight.grad, expected_weight, atol=1e-6)
    rows = torch.autograd.grad(losses().sum(), received)[0]
    assert torch.allclose(received.grad, scale[:, None] * rows / 5, atol=1e-6)
    clipped = torch.stack(per_sample) * scale[:, None]
    assert torch.allclose(clipped.norm(dim=1), torch.full((5,), clip))  # the joint vector, not each part


def test_the_noise_is_sigma_c_over_the_batch_size_on_every_coordinate():
    sigma, clip, n = 3.0, 0.5, 4
    weight = nn.Parameter(torch.zeros(200, 100))
    leaf = torch.zeros(n, 5000, requires_grad=True)
    defense = _defense(sigma, clip=clip)
    _bound(defense)
    losses = (weight.sum() * 0 + leaf.sum(1) * 0)  # zero gradients: what arrives is the noise alone
    defense.backward(losses, [weight], {1: leaf}, torch.arange(n))
    assert weight.grad.std().item() == pytest.approx(sigma * clip / n, rel=0.02)
    assert leaf.grad.std().item() == pytest.approx(sigma * clip / n, rel=0.02)


def _config(**changes) -> RunConfig:
    data = {"partition": {"labeled": 100, "aux": 40}, "model": {"hidden": 32, "out_dim": 16},
            "finetune": {"epochs": 3, "batch_size": 32}, "attack": {"name": "gc", "prior": "none"}}
    for key, value in changes.items():
        data[key] = {**data.get(key, {}), **value} if isinstance(value, dict) else value
    return RunConfig.model_validate(data)


@pytest.mark.parametrize("local_updates", [1, 2])
def test_every_label_use_is_charged_and_the_epsilon_is_the_libraries_for_that_mechanism(local_updates):
    """Each labeled sample's label is used epochs x local updates times, each a Gaussian of multiplier sigma / 2 (the
    sensitivity of a changed label is 2C) at sample rate 1; epsilon is Opacus' RDP conversion of exactly that."""
    sigma, delta = 4.0, 1e-5
    cfg = _config(finetune={"local_updates": local_updates},
                  defenses=[{"name": "dp-gaussian", "strength": sigma, "sweep": True, "options": {"delta": delta}}])
    p = plan(cfg)
    from vflpriv.runner.execution import train

    result = train(p)
    defense = p.defenses[0]
    labeled = result.fed.labeled_aligned().cpu()
    uses = 3 * local_updates
    assert set(defense.uses[labeled].tolist()) == {uses} and int(defense.uses.sum()) == uses * labeled.numel()
    rdp = compute_rdp(q=1.0, noise_multiplier=sigma / 2, steps=uses, orders=ORDERS)
    library, _ = get_privacy_spent(orders=ORDERS, rdp=rdp, delta=delta)
    assert defense.privacy_spent() == pytest.approx(library, rel=1e-6)
    closed = min(uses * 2 * a / sigma**2 + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1)
                 for a in ORDERS)  # the Gaussian's RDP, alpha * (2C)^2 / (2 (sigma C)^2) per use, converted
    assert defense.privacy_spent() == pytest.approx(closed, rel=1e-6)


def test_target_epsilon_spends_that_epsilon_and_more_noise_spends_less():
    (target,) = run(_config(defenses=[{"name": "dp-gaussian", "options": {"target_epsilon": 3.0}}]))
    assert 0.97 * 3.0 <= target.epsilon <= 3.0 and target.epsilon_delta == 1e-5
    low, high = (run(_config(defenses=[{"name": "dp-gaussian", "strength": s, "sweep": True}]))[0] for s in (1.0, 8.0))
    assert 0 < high.epsilon < low.epsilon < float("inf")


def test_a_method_whose_pretraining_reads_labels_gets_no_epsilon_and_says_why():
    cfg = _config(method={"name": "vflhlp", "options": {"supervised_epochs": 1, "scarf_epochs": 1}},
                  defenses=[{"name": "dp-gaussian", "strength": 2.0, "sweep": True}])
    (record,) = run(cfg)
    assert record.status == "ok" and math.isnan(record.epsilon)
    assert "dp-gaussian: no epsilon recorded: its pretraining reads labels" in record.notes


def test_another_defense_at_the_active_party_s_training_is_refused_beside_it():
    with pytest.raises(IncompatibleError, match="cannot be combined with mixup"):
        plan(_config(defenses=[{"name": "dp-gaussian", "strength": 2.0, "sweep": True},
                               {"name": "mixup", "strength": 0.8}]))
    plan(_config(defenses=[{"name": "dp-gaussian", "strength": 2.0, "sweep": True},
                           {"name": "label-dp", "strength": 2.0}]))  # a label defense composes


def test_at_its_identity_the_loop_backpropagates_as_without_it():
    p = plan(_config(defenses=[{"name": "dp-gaussian"}]))
    fed = build_federation(p)
    assert not fed.hooks.backpropagates() and p.defenses[0].privacy_spent() is None


def test_records_of_the_per_message_mechanism_of_0_1_are_not_resumed_as_dp_sgd():
    from vflpriv.config.keys import config_hash

    cfg = _config(defenses=[{"name": "dp-gaussian", "strength": 1.0, "sweep": True}])
    dump = cfg.model_dump(mode="json", exclude={"device"})
    del dump["finetune"]["curve"], dump["partition"]["canaries"], dump["finetune"]["top_depth"]  # as 0.1 hashed it
    assert cfg.key() != config_hash(dump)


def test_samples_within_the_clip_bound_pass_unclipped():
    """A sample whose joint gradient is within C keeps it whole: the update and rows are the plain batch mean."""
    top, own, received, losses = _problem()
    params = [*top.parameters(), own]
    defense = _defense(1e-12, clip=1e6)
    _bound(defense)
    defense.backward(losses(), params, {1: received}, torch.arange(5))
    plain = torch.autograd.grad(losses().mean(), [top.weight, received])
    assert torch.allclose(top.weight.grad, plain[0], atol=1e-6) and torch.allclose(received.grad, plain[1], atol=1e-6)


def test_target_epsilon_is_spent_whatever_the_number_of_passive_parties():
    """The accountant charges each label use once per update, not once per passive party it sends rows to."""
    cfg = _config(partition={"parties": 4, "adversary": 2},
                  defenses=[{"name": "dp-gaussian", "options": {"target_epsilon": 2.0}}])
    (record,) = run(cfg)
    assert record.status == "ok", record.error
    assert 0.97 * 2.0 <= record.epsilon <= 2.0
    two = run(_config(defenses=[{"name": "dp-gaussian", "options": {"target_epsilon": 2.0}}]))[0]
    assert record.epsilon == pytest.approx(two.epsilon, rel=1e-9)  # the same sigma and uses as with two parties


def test_evaluate_with_a_target_epsilon_runs_that_setting_and_records_the_sigma_it_solved(tmp_path):
    import pandas as pd
    from typer.testing import CliRunner

    from vflpriv.cli import app

    out = tmp_path / "out"
    done = CliRunner().invoke(app, [
        "evaluate", "--defense", "dp-gaussian", "--set", "defenses.0.options.target_epsilon=2", "--seeds", "0",
        "--attack", "gc", "--set", "attack.prior=none", "--set", "finetune.epochs=3", "--set", "partition.labeled=100",
        "--set", "partition.aux=40", "--out", str(out), "--jobs", "1"])
    assert done.exit_code == 0, done.output
    (record,) = pd.read_csv(out / "results.csv").to_dict("records")
    ft = RunConfig().finetune
    sigma = 2.0 * _solved(2.0, steps=3 * ft.local_updates)
    assert record["strength"] == pytest.approx(sigma) and 0.97 * 2 <= record["epsilon"] <= 2
    assert "at target_epsilon=2" in done.output


def _solved(epsilon: float, *, steps: int) -> float:
    from opacus.accountants.utils import get_noise_multiplier

    return get_noise_multiplier(target_epsilon=epsilon, target_delta=1e-5, sample_rate=1.0, steps=steps,
                                accountant="rdp")


def test_small_gradients_are_clipped_by_their_own_norm_below_one_too():
    """Joint clipping scales by C / ||g|| for any norm, also where ||g|| < 1 (no floor at 1)."""
    top, own, received, losses = _problem()
    small = lambda: losses() * 1e-3  # noqa: E731 - every gradient a thousand times smaller, norms well below 1
    params = [*top.parameters(), own]
    per_sample = [torch.cat([g.flatten() for g in torch.autograd.grad(small()[i], params)]
                            + [torch.autograd.grad(small()[i], received)[0][i]]) for i in range(5)]
    norms = torch.stack(per_sample).norm(dim=1)
    assert float(norms.max()) < 1
    clip = float(norms.min()) / 2
    defense = _defense(1e-12, clip=clip)
    _bound(defense)
    defense.backward(small(), params, {1: received}, torch.arange(5))
    rows = torch.autograd.grad(small().sum(), received)[0]
    assert torch.allclose(received.grad, (clip / norms)[:, None] * rows / 5, atol=1e-9)


def test_the_update_adds_to_a_gradient_already_there():
    top, own, received, losses = _problem()
    params = [*top.parameters(), own]
    defense = _defense(1e-12, clip=1e6)
    _bound(defense)
    earlier = torch.full_like(top.weight, 0.25)
    top.weight.grad = earlier.clone()
    defense.backward(losses(), params, {1: received}, torch.arange(5))
    plain = torch.autograd.grad(losses().mean(), top.weight)[0]
    assert torch.allclose(top.weight.grad, earlier + plain, atol=1e-6)


def test_a_parameter_the_losses_do_not_reach_gets_the_noise_alone():
    top, own, received, losses = _problem()
    unused = nn.Parameter(torch.zeros(300, 10))
    sigma, clip = 2.0, 0.5
    defense = _defense(sigma, clip=clip)
    _bound(defense)
    defense.backward(losses(), [*top.parameters(), own, unused], {1: received}, torch.arange(5))
    assert unused.grad.mean().abs().item() < 0.01 and unused.grad.std().item() == pytest.approx(sigma * clip / 5,
                                                                                                   rel=0.03)


def test_no_use_of_a_label_spends_nothing_and_one_use_spends_one_gaussian():
    sigma, delta = 3.0, 1e-5
    defense = _defense(sigma, delta=delta)
    _bound(defense)
    assert defense.privacy_spent() is None  # bound, never used: nothing is claimed
    defense.uses[2] = 1
    rdp = compute_rdp(q=1.0, noise_multiplier=sigma / 2, steps=1, orders=ORDERS)
    assert defense.privacy_spent() == pytest.approx(get_privacy_spent(orders=ORDERS, rdp=rdp, delta=delta)[0],
                                                    rel=1e-6)


def test_target_epsilon_counts_every_local_update():
    (record,) = run(_config(finetune={"local_updates": 2},
                            defenses=[{"name": "dp-gaussian", "options": {"target_epsilon": 3.0}}]))
    assert record.status == "ok", record.error
    assert 0.97 * 3.0 <= record.epsilon <= 3.0  # solved for epochs x local updates uses, and spends no more


def test_describe_says_the_delta_of_the_epsilons_its_audit_strengths_spend():
    """Every epsilon is printed with its delta: describe's audit strengths name the claims' delta (the option's)."""
    from typer.testing import CliRunner

    from vflpriv.cli import app

    result = CliRunner().invoke(app, ["describe", "dp-gaussian"])
    assert result.exit_code == 0 and "spends epsilon 4, 2, 1 at delta 1e-05 over" in " ".join(result.output.split())


def test_the_accountant_voids_the_claim_for_the_label_uses_covers_names():
    """The settings' void (``ACCOUNTANTS``' ``settings_void``) and ``GaussianDP.covers`` name the same label uses, for
    every built-in method and one with an undeclared finetune (one list: ``uses_outside_loop``)."""
    from vflpriv.config.registry import METHODS
    from vflpriv.defenses.dp_gaussian import GaussianDP
    from vflpriv.methods.splitnn import SplitNN
    from vflpriv.runner.accountants import ACCOUNTANTS

    peek = type("Peek", (SplitNN,), {"finetune": lambda self, fed, pretrained: None})
    dp, void = GaussianDP.__new__(GaussianDP), ACCOUNTANTS[GaussianDP].settings_void
    for cls in [*map(METHODS.get, METHODS.names()), peek]:
        method = cls(cls.Options())
        why = void(None, None, method)
        assert dp.covers(method) == (f"{why}: outside dp-gaussian's mechanism (only the shared finetuning loop is "
                                     "private), so its epsilon does not bound what the passive parties see"
                                     if why else ""), cls.__name__
