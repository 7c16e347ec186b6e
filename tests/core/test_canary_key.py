"""The canaries' labels come from a key the adversary does not hold: replaying the scenario from the public
configuration and seed does not give them, the same key gives the same numbers, and the key is made, kept and checked
like any stored state."""

from __future__ import annotations

import os
import stat

import pytest
import torch

from vflpriv.common.errors import ConfigError
from vflpriv.config.schema import RunConfig
from vflpriv.runner.execution import pretrain_key, run
from vflpriv.runner.planning import plan, plan_training
from vflpriv.store import secrets

KEY_A, KEY_B = "a" * 64, "b" * 64


def _config(**partition) -> RunConfig:
    return RunConfig.model_validate({"partition": {"labeled": 100, "aux": 40, "canaries": 40, **partition},
                                     "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2},
                                     "attack": {"name": "gc", "prior": "none"}})


def test_the_public_seed_alone_does_not_give_the_labels_and_the_same_key_gives_the_same(monkeypatch):
    labels = {}
    for key in (KEY_A, KEY_B, KEY_A):
        monkeypatch.setenv(secrets.ENV_VAR, key)
        s = plan(_config()).scenario
        labels.setdefault(key, []).append((s.canaries.clone(), s.canary_labels.clone(), s.canary_key))
    (ids_a, a, fa), (_, a_again, _) = labels[KEY_A]
    ((ids_b, b, fb),) = labels[KEY_B]
    assert torch.equal(ids_a, ids_b)  # which samples are canaries is public
    assert not torch.equal(a, b) and torch.equal(a, a_again)  # their labels are the key's
    assert fa != fb and KEY_A not in fa and len(fa) == 16
    assert (a == b).float().mean() < 0.3  # two keys agree about as often as chance (0.1)


def test_a_run_records_the_key_s_fingerprint_and_reproduces_under_the_same_key(monkeypatch):
    monkeypatch.setenv(secrets.ENV_VAR, KEY_A)
    first, again = run(_config()), run(_config())
    assert first[0].canary_key == secrets.fingerprint(bytes.fromhex(KEY_A))
    assert first[0].canary_counts == again[0].canary_counts and first[0].epsilon_lower == again[0].epsilon_lower
    assert run(_config(canaries=0))[0].canary_key == ""


def test_without_the_variable_a_key_is_made_once_from_os_entropy_kept_private_and_reused(monkeypatch, tmp_path):
    monkeypatch.delenv(secrets.ENV_VAR)
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path))
    p = plan(_config())
    assert not (tmp_path / secrets.FILE).exists()  # planning draws nothing: a refused command makes no key
    labels = p.scenario.canary_labels
    path = tmp_path / secrets.FILE
    assert path.is_file() and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert torch.equal(plan(_config()).scenario.canary_labels, labels)
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "other"))
    assert not torch.equal(plan(_config()).scenario.canary_labels, labels)  # another machine's key: other labels


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_a_key_file_that_does_not_check_out_is_replaced_with_a_warning(monkeypatch, tmp_path, damage):
    monkeypatch.delenv(secrets.ENV_VAR)
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path))
    good = secrets.canary_key()
    path = tmp_path / secrets.FILE
    text = path.read_text()
    path.write_text({"truncate": text[:40], "flip": text.replace(text[30], "0" if text[30] != "0" else "1", 1),
                     "garbage": "not a key\n"}[damage])
    with pytest.warns(UserWarning, match="does not check out"):
        fresh = secrets.canary_key()
    assert fresh != good and len(fresh) == 32 and secrets.canary_key() == fresh


@pytest.mark.parametrize("value", ["abc", "g" * 64, "a" * 63, ""])
def test_a_malformed_key_variable_is_refused(monkeypatch, value):
    monkeypatch.setenv(secrets.ENV_VAR, value)
    with pytest.raises(ConfigError, match="64 hexadecimal digits"):
        secrets.canary_key()


def test_a_pretraining_that_reads_labels_is_cached_per_key_with_canaries(monkeypatch):
    vflhlp = _config().model_copy(update={"method": RunConfig.model_validate(
        {"method": {"name": "vflhlp"}}).method}).training()
    keys = []
    for key in (KEY_A, KEY_B):
        monkeypatch.setenv(secrets.ENV_VAR, key)
        keys.append((pretrain_key(vflhlp, type(plan_training(vflhlp).method)),
                     pretrain_key(_config().training(), type(plan(_config()).method))))
    assert keys[0][0] != keys[1][0]  # vflhlp's supervised pretraining trains on the canaries' labels
    assert keys[0][1] == keys[1][1]  # splitnn has no pretraining that reads them
