"""FedHSSL pretraining: PMA, message counts, losses, determinism (FedHSSL Algorithm 1, REFERENCE §4)."""

from __future__ import annotations

import pytest
import torch
from pretrain_helpers import build_federation, pretrain_config

from vflpriv.common.errors import ConfigError
from vflpriv.engine import EMBEDDING, HEAD_WEIGHTS, PRETRAIN, SERVER, STATISTICS, WEIGHTS
from vflpriv.methods.fedhssl import FedHSSL
from vflpriv.methods.pretraining import LocalSSL
from vflpriv.methods.towers import PooledEncoder
from vflpriv.models.training import index_batches


def _state(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in module.state_dict().items()}


def _same(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("method", ["fedhssl-simsiam", "fedhssl-moco"])
def test_after_pma_shared_modules_are_identical_and_private_ones_are_not(method: str) -> None:
    plan, fed = build_federation(pretrain_config(method, parties=4))
    encoders = plan.method.pretrain(fed)
    assert all(isinstance(e, PooledEncoder) for e in encoders)
    tops = [e.local.top for e in encoders]
    for other in tops[1:]:
        assert _same(tops[0], other)  # parameters and BN running statistics
    for i in range(len(encoders)):
        for j in range(i + 1, len(encoders)):
            assert not _same(encoders[i].local.bottom, encoders[j].local.bottom)
            assert not _same(encoders[i].cross, encoders[j].cross)


def test_pma_averages_top_projector_and_predictor_with_equal_weights() -> None:
    plan, fed = build_federation(pretrain_config("fedhssl", parties=2))
    method = plan.method
    _, local = method._towers(fed, seed=3)  # different initialisations per party
    states = [
        LocalSSL.create("simsiam", method.options, t, p.x_train[p.local_ids], p.spec, seed=3, stream=f"s{p.index}",
                        device=fed.device)
        for p, t in zip(fed.parties, local)
    ]
    before = [{name: _state(m) for name, m in method._shared(s).items()} for s in states]
    bottoms = [_state(s.tower.encoder.bottom) for s in states]
    assert set(before[0]) == {"top", "projector", "predictor"}
    method._aggregate(fed, states, it=0)
    for name in before[0]:
        for key, v0 in before[0][name].items():
            if not v0.is_floating_point():
                continue
            expected = 0.5 * (v0 + before[1][name][key])
            for s in states:
                assert torch.allclose(method._shared(s)[name].state_dict()[key], expected)
    for s, b in zip(states, bottoms):
        assert all(torch.equal(s.tower.encoder.bottom.state_dict()[k], v) for k, v in b.items())


@pytest.mark.parametrize("parties", [2, 4])
@pytest.mark.parametrize("local_updates", [1, 3])
def test_meter_counts_the_messages_of_one_global_iteration(parties: int, local_updates: int) -> None:
    plan, fed = build_federation(pretrain_config("fedhssl", parties=parties, local_updates=local_updates))
    plan.method.pretrain(fed)
    opts = plan.method.options
    n_batches = len(index_batches(fed.aligned, batch_size=opts.batch_size, generator=None))
    meter = fed.channel.meter
    embeddings = sum(v for (phase, _, kind), v in meter.messages.items() if phase == PRETRAIN and kind == EMBEDDING)
    weights = sum(v for (phase, _, kind), v in meter.messages.items() if phase == PRETRAIN and kind == WEIGHTS)
    statistics = sum(v for (phase, _, kind), v in meter.messages.items() if phase == PRETRAIN and kind == STATISTICS)
    heads = sum(v for (phase, _, kind), v in meter.messages.items() if phase == PRETRAIN and kind == HEAD_WEIGHTS)
    # step 1: per batch, active -> each passive and each passive -> active (e does not add messages)
    assert embeddings == 2 * (parties - 1) * n_batches
    # step 3: each party uploads its top encoder, its heads and BN statistics to the server, which sends
    # each average back
    assert weights == heads == statistics == 2 * parties
    assert meter.total_messages(PRETRAIN) == embeddings + weights + heads + statistics
    # bytes: float32 projector outputs of every aligned sample, 2 (K - 1) times
    emb_bytes = sum(v for (phase, _, kind), v in meter.bytes.items() if phase == PRETRAIN and kind == EMBEDDING)
    assert emb_bytes == 2 * (parties - 1) * fed.aligned.numel() * opts.out_dim("simsiam", plan.config.model.out_dim) * 4


def test_cssl_sends_no_weights_and_local_ssl_sends_nothing() -> None:
    plan, fed = build_federation(pretrain_config("cssl-byol"))
    plan.method.pretrain(fed)
    kinds = {kind for (_, _, kind) in fed.channel.meter.messages}
    assert kinds == {EMBEDDING}
    plan, fed = build_federation(pretrain_config("local-moco"))
    plan.method.pretrain(fed)
    assert fed.channel.meter.total_messages() == 0


def test_pma_messages_go_to_and_come_from_the_server() -> None:
    plan, fed = build_federation(pretrain_config("fedhssl-byol"))
    seen = []
    fed.channel.observers.append(lambda m, _payload: seen.append((m.kind, m.sender, m.receiver)))
    plan.method.pretrain(fed)
    weights = [(s, r) for kind, s, r in seen if kind == WEIGHTS]
    assert weights == [(0, SERVER), (1, SERVER), (SERVER, 0), (SERVER, 1)]


def test_fedhssl_lowers_its_ssl_losses_on_a_tiny_scenario() -> None:
    plan, fed = build_federation(pretrain_config("fedhssl", global_iterations=6, batch_size=128))
    plan.method.pretrain(fed)
    history = plan.method.history
    assert len(history) == 6
    first, last = history[0], history[-1]
    for key in ("cross", "local"):
        assert len(first[key]) == 2
        for k in range(2):
            assert last[key][k] < first[key][k] - 0.05, (key, k, first[key][k], last[key][k])


@pytest.mark.parametrize("method", ["fedhssl", "local-byol", "gssl-moco"])
def test_same_seed_same_weights_other_seed_other_weights(method: str) -> None:
    def weights(seed: int) -> list[dict[str, torch.Tensor]]:
        plan, fed = build_federation(pretrain_config(method, seed=seed))
        return [e.state_dict() for e in plan.method.pretrain(fed)]

    a, b, c = weights(0), weights(0), weights(1)
    for wa, wb in zip(a, b):
        assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert not all(torch.equal(a[0][k], c[0][k]) for k in a[0])


def test_pretraining_does_not_consume_the_finetuning_generator() -> None:
    plan, fed = build_federation(pretrain_config("fedhssl"))
    before = fed.generator.get_state()
    plan.method.pretrain(fed)
    assert torch.equal(fed.generator.get_state(), before)


def test_concat_pooling_doubles_out_dim_and_skeleton_matches() -> None:
    plan, fed = build_federation(pretrain_config("gssl-simsiam", pooling="concat"))
    encoders = plan.method.pretrain(fed)
    assert encoders[0].out_dim == 2 * fed.model.out_dim
    x = fed.parties[0].x_train[:5]
    assert encoders[0].eval()(x).shape == (5, 2 * fed.model.out_dim)
    shells = plan.method.skeleton(fed)
    for shell, enc in zip(shells, encoders):
        shell.load_state_dict(enc.state_dict())  # same architecture: cached weights load into it
        assert shell.out_dim == enc.out_dim


def test_options_are_checked_per_method() -> None:
    with pytest.raises(ConfigError, match="gamma"):
        build_federation(pretrain_config("cssl-simsiam", gamma=0.5))
    with pytest.raises(ConfigError, match="pma_top_blocks"):
        plan, fed = build_federation(pretrain_config("fedhssl", pma_top_blocks=2))
        plan.method.pretrain(fed)
    assert FedHSSL.Options().gamma == 0.5


def test_iso_on_pma_weights_noises_parameters_and_keeps_encoders_finite() -> None:
    """ISO on weights noises the uploaded parameters, not the BN running statistics (a noised running
    variance can turn negative and the encoder NaN, which an attack would read as perfect protection)."""
    iso = {"name": "iso", "phase": "pretrain", "strength": 25.0, "kinds": ["weights"]}
    plan, fed = build_federation(pretrain_config("fedhssl", global_iterations=2, defenses=[iso]))
    sent = {}
    fed.channel.observers.append(lambda m, payload: sent.setdefault((m.kind, m.sender), []).append((m.payload, payload)))
    encoders = plan.method.pretrain(fed)
    before, after = sent[(WEIGHTS, 0)][0]
    assert all(not torch.equal(before[k], after[k]) for k in before)
    before, after = sent[(STATISTICS, 0)][0]
    assert before and all(torch.equal(before[k], after[k]) for k in before)
    for p, encoder in zip(fed.parties, encoders):
        assert torch.isfinite(encoder.eval()(p.x_train[:64])).all()


def test_pretraining_lr_is_rescaled_by_half_over_half_plus_gamma() -> None:
    """The code's pretrain_lr_ratio 0.5 / (local_ratio + gamma), local_ratio 0.5, on every optimiser."""
    from vflpriv.methods.fedhssl import CrossOptions, HybridOptions
    from vflpriv.methods.local_ssl import LocalOptions
    from vflpriv.methods.pretraining import build_tower, make_pretrain_optimizer

    assert HybridOptions(gamma=0.5, batch_size=256).base_lr() == pytest.approx(0.025)
    assert HybridOptions(gamma=1.5, batch_size=512).base_lr() == pytest.approx(0.1 * 0.25)
    assert HybridOptions(gamma=0.5, batch_size=256, lr_rescale=False).base_lr() == pytest.approx(0.05)
    assert LocalOptions(batch_size=256).base_lr() == pytest.approx(0.05)  # no guidance: factor 1
    assert CrossOptions(batch_size=256).base_lr() == pytest.approx(0.05)
    encoder = torch.nn.Linear(4, 8)
    encoder.out_dim = 8
    options = HybridOptions(gamma=1.0, batch_size=128)
    optimizer = make_pretrain_optimizer(build_tower(encoder, "simsiam", options, generator=torch.Generator()), options)
    assert [g["lr"] for g in optimizer.param_groups] == pytest.approx([0.025 * 0.5 / 1.5] * 2)


def test_cross_party_moco_loss_is_the_codes_nt_xent_unless_asked_for_one_way_info_nce() -> None:
    from vflpriv.methods.fedhssl import CrossOptions, cross_loss
    from vflpriv.models.ssl import info_nce, negative_cosine, nt_xent

    g = torch.Generator().manual_seed(0)
    own, received = torch.randn(6, 4, generator=g), torch.randn(6, 4, generator=g)
    code = cross_loss("moco", CrossOptions(temperature=0.3))(own, received)
    assert code == nt_xent(own, received, temperature=0.3)
    one_way = cross_loss("moco", CrossOptions(temperature=0.3, moco_cross_loss="info-nce"))(own, received)
    assert one_way == info_nce(own, received, temperature=0.3) and one_way != code
    assert cross_loss("simsiam", CrossOptions())(own, received) == negative_cosine(own, received)


@pytest.mark.parametrize("kinds", [None, ["embedding", "weights", "head-weights"]])
def test_iso_in_pretraining_noises_the_top_encoder_and_leaves_the_heads_alone_by_default(kinds) -> None:
    """The paper's scope (§VI-B): the active party's local top encoder; the code's wider scope on request."""
    iso = {"name": "iso", "phase": "pretrain", "strength": 1.0, **({"kinds": kinds} if kinds else {})}
    plan, fed = build_federation(pretrain_config("fedhssl", global_iterations=1, defenses=[iso]))
    sent = {}
    fed.channel.observers.append(lambda m, payload: sent.setdefault((m.kind, m.sender), []).append((m.payload, payload)))
    plan.method.pretrain(fed)
    top_before, top_after = sent[(WEIGHTS, 0)][0]
    assert set(top_before) and all(k.startswith("top.") for k in top_before)
    assert all(not torch.equal(top_before[k], top_after[k]) for k in top_before)
    head_before, head_after = sent[(HEAD_WEIGHTS, 0)][0]
    assert {k.split(".")[0] for k in head_before} == {"projector", "predictor"}
    assert all(torch.equal(head_before[k], head_after[k]) for k in head_before) == (kinds is None)
    passive_before, passive_after = sent[(WEIGHTS, 1)][0]  # the protecting party is the active one
    assert all(torch.equal(passive_before[k], passive_after[k]) for k in passive_before)


def test_pma_shares_the_last_stage_of_an_mlp_and_three_of_the_cnns_four_by_default() -> None:
    """Like the code: the top layer on tabular data, ResNet-18's layer2-4 + fc on images (here conv2, conv3, head)."""
    from vflpriv.config.schema import ModelConfig
    from vflpriv.data.base import PartySpec
    from vflpriv.methods.towers import build_local_encoder, encoder_stages
    from vflpriv.models.encoders import build_encoder

    image, table = PartySpec("image", (1, 28, 14)), PartySpec("tabular", (12,))
    for spec, shared in ((image, 3), (table, 1)):
        config = ModelConfig(encoder="cnn" if spec is image else "mlp", hidden=16, out_dim=16)
        local = build_local_encoder(spec, config, generator=torch.Generator().manual_seed(0))
        stages = len(encoder_stages(build_encoder(spec, config, generator=torch.Generator())))
        assert (len(local.top), len(local.bottom)) == (shared, stages - shared)
    cnn = ModelConfig(encoder="cnn", hidden=16, out_dim=16)
    assert len(build_local_encoder(image, cnn, top_blocks=1, generator=torch.Generator()).top) == 1
