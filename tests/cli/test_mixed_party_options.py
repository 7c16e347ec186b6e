"""An attack option that fits one adversary or victim of a dataset mixing image and tabular parties: the audit sets
the unfit cells aside and says so, and refuses the option (naming the party) only where it fits none of them."""

from __future__ import annotations

import sys

import pytest
from cli_helpers import planned, refused_in_planning

PLUGIN = '''
from vflpriv.data import VerticalDataset
from vflpriv.data.base import PartySpec
from vflpriv.data.embedded import load_digits


def load(*, parties=2, root=None, max_samples=None, seed=0):
    """digits with its last party's quadrant flattened to tabular features."""
    d = load_digits(parties=parties, root=root, max_samples=max_samples, seed=seed)
    train, test = list(d.x_train), list(d.x_test)
    train[-1], test[-1] = train[-1].flatten(1).contiguous(), test[-1].flatten(1).contiguous()
    specs = (*(PartySpec("image", tuple(x.shape[1:])) for x in train[:-1]),
             PartySpec("tabular", tuple(train[-1].shape[1:])))
    return VerticalDataset(name="mixed", x_train=tuple(train), y_train=d.y_train, x_test=tuple(test),
                           y_test=d.y_test, num_classes=10, specs=specs)
'''


@pytest.fixture
def mixed(tmp_path, monkeypatch):
    """A plugin dataset ``mixedparties:load`` on the import path; the folder the CLI runs in."""
    (tmp_path / "plug").mkdir()
    (tmp_path / "plug" / "mixedparties.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path / "plug"))
    yield tmp_path / "run"
    sys.modules.pop("mixedparties", None)


MIXMATCH = ["audit", "--method", "splitnn", "--dataset", "mixedparties:load", "--attacks", "mc-mixmatch,mc",
            "--set", "audit.attack_options.mc-mixmatch.augment_rate=0.3", "--defenses", "none", "--seeds", "0"]
INVERSION = ["audit", "--method", "splitnn", "--dataset", "mixedparties:load", "--attacks", "fi-inversion,mc",
             "--set", "audit.attack_options.fi-inversion.tv=0.1", "--defenses", "none", "--seeds", "0"]


@pytest.mark.parametrize(("args", "unfit", "kept"), [
    ([*MIXMATCH, "--set", "partition.parties=4", "--all-adversaries"],
     "mc-mixmatch x none (finetune): attack 'mc-mixmatch' run by party 1", "run by party 3"),
    ([*INVERSION, "--set", "audit.feature_adversaries=[active,passive]"],
     "fi-inversion by party 0 x none (finetune): attack 'fi-inversion' against party 1",
     "not run: fi-inversion by party 1"),
])
def test_an_option_fitting_another_party_sets_the_unfit_cells_aside(args, unfit, kept, mixed, monkeypatch):
    mixed.mkdir()
    result = planned(args, mixed, monkeypatch)
    assert result.exit_code == 0, result.output
    aside = [line for line in result.output.splitlines() if line.startswith("not run: ")]
    assert any(line.startswith(f"not run: {unfit}") and "set aside" in line for line in aside), result.output
    assert not any(kept in line for line in aside), result.output  # the tabular party's cell runs


@pytest.mark.parametrize(("args", "needle"), [
    ([*MIXMATCH, "--set", "partition.parties=4"],
     "attack 'mc-mixmatch' run by party 1 (the passive party): audit.attack_options.mc-mixmatch.augment_rate=0.3 "
     "resamples tabular features; the adversary's are images"),
    ([*INVERSION, "--set", "audit.feature_adversaries=[active]"],
     "attack 'fi-inversion' against party 1 (the passive party): audit.attack_options.fi-inversion.tv=0.1: tv "
     "weighs the total variation of image reconstructions only, and the victim's features are tabular"),
])
def test_an_option_fitting_no_party_is_refused_naming_it(args, needle, mixed, monkeypatch):
    mixed.mkdir()
    refused_in_planning(args, needle, mixed, monkeypatch)
