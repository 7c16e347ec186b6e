"""FedHSSL's steps pinned one by one against the authors' code (shared/FEDHSSL-CODE.md): the guidance target's mode,
gamma 0 turning guidance off, PMA averaging exactly the named parameters (BatchNorm statistics only when asked),
FedCSSL finetuning the cross encoder, and the finetune's BatchNorm re-estimation reading no labels."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace

import pytest
import torch
from pretrain_helpers import build_federation, pretrain_config
from torch import nn

from vflpriv.methods.pretraining import LocalSSL
from vflpriv.models.batchnorm import recalibrate_batchnorm


def _norm_stats(module: nn.Module) -> list[torch.Tensor]:
    return [b.clone() for n, b in module.named_buffers() if "running" in n]


def _states(method: str, seed: int = 3, **options):
    plan, fed = build_federation(pretrain_config(method, **options))
    cross, local = plan.method._towers(fed, seed=seed)
    states = [LocalSSL.create(plan.method.flavour, plan.method.options, t, p.x_train[p.local_ids], p.spec, seed=seed,
                              stream=f"s{p.index}", device=fed.device) for p, t in zip(fed.parties, local)]
    return plan, fed, cross, states


@pytest.mark.parametrize(("mode", "refreshed"), [("train", True), ("eval", False)])
def test_the_guidance_target_is_computed_in_train_mode_as_the_code_unless_asked(mode, refreshed):
    """Train mode (the code's set_train): the cross branch normalises by batch statistics and its running statistics
    are refreshed on the local rows; eval mode leaves them. Its parameters never change in step 2."""
    plan, fed, cross, states = _states("fedhssl")
    p, c = fed.parties[0], cross[0]
    stats, params = _norm_stats(c), [q.clone() for q in c.parameters()]
    states[0].epoch(p.x_train, p.local_ids, cross=c, gamma=0.5, guide_mode=mode)
    after = _norm_stats(c)
    assert stats and any(not torch.equal(a, b) for a, b in zip(stats, after)) is refreshed
    assert all(torch.equal(a, b) for a, b in zip(params, c.parameters()))
    assert c.training  # left in train mode for the next cross step


def test_fedhssl_defaults_to_the_code_s_train_mode_guidance_and_the_option_reaches_the_epoch(monkeypatch):
    plan, fed = build_federation(pretrain_config("fedhssl"))
    assert plan.method.options.guidance_mode == "train"
    seen = []
    epoch = LocalSSL.epoch

    def spy(self, *args, **kwargs):
        seen.append(kwargs.get("guide_mode"))
        return epoch(self, *args, **kwargs)

    monkeypatch.setattr(LocalSSL, "epoch", spy)
    build_federation(pretrain_config("fedhssl", guidance_mode="eval"))[0].method.pretrain(
        build_federation(pretrain_config("fedhssl", guidance_mode="eval"))[1])
    assert seen and set(seen) == {"eval"}


def test_gamma_zero_is_local_ssl_without_guidance_bit_for_bit():
    _, fed, cross, guided = _states("fedhssl")
    _, _, _, plain = _states("fedhssl")
    p = fed.parties[0]
    a = guided[0].epoch(p.x_train, p.local_ids, cross=cross[0], gamma=0.0)
    b = plain[0].epoch(p.x_train, p.local_ids)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert all(torch.equal(x, y) for x, y in zip(guided[0].tower.state_dict().values(),
                                                 plain[0].tower.state_dict().values()))


@pytest.mark.parametrize("statistics", [True, False])
def test_pma_averages_the_named_parameters_and_batchnorm_statistics_only_when_asked(statistics):
    plan, fed, _, states = _states("fedhssl", pma_statistics=statistics, pma_modules=["top"])
    method = plan.method
    tops = [s.tower.encoder.top for s in states]
    for i, t in enumerate(tops):  # each party's own statistics, as after local steps on its own data
        for name, buffer in t.named_buffers():
            if "running" in name:
                buffer.add_(float(i + 1))
    before = [{k: v.clone() for k, v in t.state_dict().items()} for t in tops]
    assert any("running" in k for k in before[0])
    heads = [{k: v.clone() for k, v in s.tower.projector.state_dict().items()} for s in states]
    method._aggregate(fed, states, it=0)
    for t, own in zip(tops, before):
        for key, value in t.state_dict().items():
            if not value.is_floating_point():
                continue
            average = 0.5 * (before[0][key] + before[1][key])
            if "running" in key and not statistics:
                assert torch.equal(value, own[key])  # FedBN-style: each party keeps its own
            else:
                assert torch.allclose(value, average)
    for s, own in zip(states, heads):  # not named: untouched
        assert all(torch.equal(s.tower.projector.state_dict()[k], v) for k, v in own.items())


def test_fedcssl_finetunes_the_cross_encoder_itself():
    plan, fed, cross, _ = _states("cssl-simsiam")
    encoders = plan.method._finetune_encoders(cross, [])
    assert all(e is c.encoder for e, c in zip(encoders, cross))


def test_batchnorm_is_re_estimated_as_the_mean_over_the_rows_and_the_module_keeps_its_mode():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(256, 4, generator=g) * torch.tensor([1.0, 2.0, 0.5, 3.0]) + torch.tensor([5.0, -1.0, 0.0, 2.0])
    net = nn.Sequential(nn.Dropout(0.5), nn.BatchNorm1d(4)).eval()
    recalibrate_batchnorm(net, x, batch_size=64)
    bn = net[1]
    assert not net.training and bn.momentum == 0.1
    assert torch.allclose(bn.running_mean, x.mean(0), atol=1e-5)  # equal batches: the mean of the batch means
    batch_vars = torch.stack([b.var(0, unbiased=True) for b in x.split(64)])
    assert torch.allclose(bn.running_var, batch_vars.mean(0), atol=1e-4)


def test_the_finetune_s_re_estimation_reads_no_labels_and_no_test_rows():
    from vflpriv.methods.finetune import recalibrate_bottoms

    def stats(scramble: bool) -> list[torch.Tensor]:
        _, fed = build_federation(pretrain_config("splitnn"))
        parties = list(fed.parties)
        if scramble:  # other labels and other test rows (copies: the cached dataset stays as it is)
            active = parties[0]
            labels = active.labels.clone()
            labels[labels >= 0] = labels[labels >= 0].flip(0)
            parties = [dataclasses.replace(p, x_test=torch.randn_like(p.x_test)) for p in parties]
            parties[0] = dataclasses.replace(parties[0], labels=labels)
        view = SimpleNamespace(parties=parties, finetune=fed.finetune)
        bottoms = [nn.Sequential(nn.Flatten(), nn.Linear(p.x_train[0].numel(), 8), nn.BatchNorm1d(8))
                   for p in parties]
        for b in bottoms:
            torch.nn.init.constant_(b[1].weight, 0.1)
            torch.nn.init.zeros_(b[1].bias)
        recalibrate_bottoms(view, bottoms)
        return [t for b in bottoms for t in _norm_stats(b)]

    plain, scrambled = stats(False), stats(True)
    assert all(torch.equal(a, b) for a, b in zip(plain, scrambled))
    assert not torch.equal(plain[0], torch.zeros(8))  # it did re-estimate
