"""Review eps F5: a delta of 1/n or more (n the training rows) is refused in planning, where it would give no
meaningful guarantee; an accountant's negative epsilon (a large delta) never reaches a record."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from vflpriv.common.errors import ConfigError
from vflpriv.config.schema import RunConfig
from vflpriv.defenses.dp_gaussian import GaussianDPOptions, spent
from vflpriv.defenses.embedding_dp import EmbeddingDPOptions
from vflpriv.defenses.embedding_dp_accounting import gaussian_epsilon
from vflpriv.runner.defense_planning import _check_delta
from vflpriv.runner.planning import plan


def _config(defense: dict, **changes) -> RunConfig:
    return RunConfig.model_validate({"partition": {"labeled": 100, "aux": 40}, "model": {"hidden": 32, "out_dim": 16},
                                     "finetune": {"epochs": 1}, "defenses": [defense], **changes})


@pytest.mark.parametrize(("defense", "attack"), [("dp-gaussian", "gc"), ("embedding-dp", "fi-decoder")])
def test_a_delta_of_one_over_the_training_rows_or_more_is_refused_in_planning(defense, attack):
    def planned(delta):
        return plan(_config({"name": defense, "strength": 4.0, "party": 0 if defense == "dp-gaussian" else 1,
                             "options": {"delta": delta}}, attack={"name": attack}))

    with pytest.raises(ConfigError, match=r"options.delta 0.5 is not below 1/1437 \(1437 training rows"):
        planned(0.5)
    with pytest.raises(ConfigError, match="is not below 1/1437"):
        planned(1 / 1437)
    planned(0.99 / 1437)


def test_the_accountants_never_return_a_negative_epsilon():
    assert spent(4.0, delta=0.5, uses=2) == 0.0  # Opacus' conversion: -0.23
    assert gaussian_epsilon(4.0, 2, delta=0.9) == 0.0
    assert spent(4.0, delta=1e-5, uses=2) == pytest.approx(3.188991562633588, rel=1e-12)


@pytest.mark.parametrize("options", [GaussianDPOptions, EmbeddingDPOptions])
def test_at_100000_rows_the_refusal_says_the_default_delta_is_too_large(options):
    """Review eps2 G4: at 1e5 training rows or more the default delta itself is refused; the hint says so instead of
    offering the default as if it were legal, and the option's description names the bound."""
    defense = SimpleNamespace(is_identity=False, options=options(), privacy_delta=lambda: options().delta)
    config = SimpleNamespace(defenses=[SimpleNamespace(name="d")])
    with pytest.raises(ConfigError) as refused:
        _check_delta(config, [defense], rows=161789)
    assert "the default delta 1e-05 is too large for 161789 training rows: give a delta below 6.18e-06" \
        in str(refused.value) and "by default" not in str(refused.value)
    assert "below 1/n" in options.model_fields["delta"].description
