"""dp-gaussian's accountant, written out at sample rate 1 so that planning does not import opacus: bit for bit what
Opacus' RDP accountant and its noise search give, and opacus left unimported by the audit's planning of it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from opacus.accountants import RDPAccountant
from opacus.accountants.utils import get_noise_multiplier

from vflpriv.defenses.dp_gaussian import _accountant_notes_off, noise_for, rdp_epsilon, spent


@pytest.mark.parametrize("delta", [1e-5, 1e-3])
@pytest.mark.parametrize("steps", [1, 7, 20, 400])
@pytest.mark.parametrize("multiplier", [0.3, 1.0, 2.5, 5.185546875, 18.125, 1e3])
def test_the_epsilon_is_opacus_rdp_accountant_s_bit_for_bit(multiplier, steps, delta):
    accountant = RDPAccountant()
    accountant.history.append((multiplier, 1.0, steps))
    with _accountant_notes_off():
        assert rdp_epsilon(multiplier, steps, delta=delta) == accountant.get_epsilon(delta=delta)
        assert spent(2 * multiplier, delta=delta, uses=steps) == accountant.get_epsilon(delta=delta)


@pytest.mark.parametrize("delta", [1e-5, 1e-3])
@pytest.mark.parametrize("uses", [1, 20, 60])
@pytest.mark.parametrize("target", [0.5, 1.0, 2.0, 4.0, 8.0])
def test_the_noise_solve_is_opacus_get_noise_multiplier_s_bit_for_bit(target, uses, delta):
    with _accountant_notes_off():
        library = get_noise_multiplier(target_epsilon=target, target_delta=delta, sample_rate=1.0, steps=uses,
                                       accountant="rdp")
    assert noise_for(target, delta=delta, uses=uses) == 2.0 * library


def test_a_budget_no_noise_reaches_is_refused_as_opacus_refuses_it():
    with pytest.raises(ValueError, match="too low"):
        noise_for(1e-9, delta=1e-12, uses=1000)


def test_the_audit_s_strengths_and_claims_do_not_import_opacus():
    """The audit's sigmas and the epsilons they claim (a training's epsilon is the same ``spent``) come without
    opacus, 1.3 CPU s per process."""
    code = ("import sys\n"
            "from vflpriv.config.schema import FinetuneConfig\n"
            "from vflpriv.defenses.dp_gaussian import GaussianDP\n"
            "ft = FinetuneConfig()\n"
            "sigmas = GaussianDP.audit_strengths_for('finetune', finetune=ft, options={})\n"
            "claims = [GaussianDP.claimed_epsilon(s, finetune=ft, options={}) for s in sigmas]\n"
            "assert [round(c[0], 1) for c in claims] == [4.0, 2.0, 1.0], claims\n"
            "assert 'opacus' not in sys.modules, 'opacus imported'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
