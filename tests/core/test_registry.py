import pytest

from vflpriv.common.errors import UnknownNameError
from vflpriv.config.registry import ATTACKS, DATASETS, DEFENSES, METHODS, Registry


def test_builtins_come_from_entry_points():
    assert "splitnn" in METHODS.names()
    assert "mc" in ATTACKS.names()
    assert "iso" in DEFENSES.names()
    assert {"digits", "breast-cancer"} <= set(DATASETS.names())


def test_unknown_name_lists_valid_names():
    with pytest.raises(UnknownNameError) as info:
        METHODS.get("no-such-method")
    message = str(info.value)
    assert "unknown method 'no-such-method'" in message
    assert "splitnn" in message


def test_module_path_resolves_unregistered_objects():
    from vflpriv.defenses.iso import IsotropicNoise

    assert DEFENSES.get("vflpriv.defenses.iso:IsotropicNoise") is IsotropicNoise


def test_bad_module_path_is_a_clear_error():
    with pytest.raises(UnknownNameError, match="cannot import defense"):
        DEFENSES.get("vflpriv.defenses.iso:Missing")


def test_runtime_registration():
    reg: Registry[int] = Registry("widget", "vflpriv.no-such-group")
    reg.register("one", 1)
    assert reg.get("one") == 1 and reg.names() == ["one"]


def test_installed_entry_points_are_read_once(monkeypatch):
    """Every name lookup scanned every installed distribution's metadata (6 ms): the tables did it per configuration."""
    import vflpriv.config.registry as registry

    reads = []
    real = registry.entry_points
    monkeypatch.setattr(registry, "entry_points", lambda **kw: reads.append(kw) or real(**kw))
    reg: Registry[object] = Registry("defense", "vflpriv.defenses")
    for _ in range(3):
        assert "iso" in reg.names()
    assert reg.get("iso") is DEFENSES.get("iso") and len(reads) == 1
