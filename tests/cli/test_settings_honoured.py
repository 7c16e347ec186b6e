"""Settings accepted and then not honoured (issue 50, item 2): each is refused with one ``error:`` line and exit 2
before anything is trained or written, or does what the README says."""

from __future__ import annotations

import pandas as pd
import pytest
import torch
from cli_helpers import one_error_line, wrote_nothing
from typer.testing import CliRunner

from vflpriv.cli import app
from vflpriv.config.registry import DEFENSES

QUICK = ["--set", "finetune.epochs=1", "--set", "model.hidden=16", "--set", "model.out_dim=8"]


def _refused(args: list[str], needle: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    with wrote_nothing(tmp_path):
        result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    one_error_line(result.output, needle)


#: What keeps a run short where a bug lets it train (the test then fails on what it wrote, in seconds).
SHORT = ["--attack", "gc", "--defense", "none", *QUICK]


@pytest.mark.parametrize(("args", "needle"), [
    (["evaluate", "--method", "splitnn", "--method", "local-a", "--seeds", "0", *SHORT], "--method given more than once"),
    (["evaluate", "--seeds", "0", "--seeds", "1", *SHORT], "--seeds given more than once"),
    (["audit", "--method", "splitnn", "--seeds", "0", "--seeds", "1", "--attacks", "gc", "--defenses", "none",
      "--no-tune-attacks", *QUICK], "--seeds given more than once"),
    (["evaluate", "--tune-attacks", "--no-tune-attacks", "--seeds", "0", *SHORT],
     "--tune-attacks/--no-tune-attacks given more than once"),
    (["table", "x", "--attack", "mc", "--attack", "gc"], "--attack given more than once"),
])
def test_an_option_given_twice_is_refused_not_resolved_silently(args, needle, tmp_path, monkeypatch):
    _refused(args, needle, tmp_path, monkeypatch)


def test_a_repeatable_option_may_repeat(tmp_path, monkeypatch):
    _refused(["evaluate", "--set", "finetune.epochs=1", "--set", "stregths=[1]"], "unknown setting stregths",
             tmp_path, monkeypatch)  # both --set reach the parser: the second is the one refused


@pytest.mark.parametrize("command", [["evaluate"], ["audit", "--method", "splitnn"]])
def test_one_limit_for_a_seed_whatever_the_command(command, tmp_path, monkeypatch):
    """2**31 - 1 passes where 2**32 - 1 passed one check and failed the next: the limit of every integer setting."""
    from vflpriv.config.options import MAX_INT
    from vflpriv.config.schema import RunConfig

    assert RunConfig(seed=MAX_INT).seed == MAX_INT
    rest = SHORT if command == ["evaluate"] else ["--attacks", "gc", "--defenses", "none", "--no-tune-attacks", *QUICK]
    _refused([*command, "--seeds", str(MAX_INT + 1), *rest], f"less than or equal to {MAX_INT}", tmp_path, monkeypatch)
    _refused([*command, "--seeds", str(2**32 - 1), *rest], f"less than or equal to {MAX_INT}", tmp_path, monkeypatch)


def test_a_cpu_with_an_index_is_refused_not_recorded_as_cpu(tmp_path, monkeypatch):
    from vflpriv.runner.planning import resolve_device

    assert resolve_device("cpu") == torch.device("cpu") and resolve_device("cpu:0") == torch.device("cpu")
    _refused(["evaluate", "--device", "cpu:1", "--seeds", "0", *SHORT], "device 'cpu:1': the CPU has no index", tmp_path, monkeypatch)


@pytest.mark.parametrize(("sets", "needle"), [
    (["--canaries", "200"], "partition.canaries=200 leaves no labeled training sample to score the attacks on: of "
                            "the 200 labeled samples, 0 are auxiliary, 200 canaries and 0 held out"),
    (["--canaries", "10", "--set", "partition.labeled=20", "--set", "finetune.validation=0.5"],
     "of the 20 labeled samples, 0 are auxiliary, 10 canaries and 10 held out for validation"),
])
def test_canaries_that_leave_no_training_target_to_score_are_refused_before_training(sets, needle, tmp_path,
                                                                                   monkeypatch):
    _refused(["evaluate", "--attack", "gc", "--defense", "none", "--seeds", "0", *sets, *QUICK], needle, tmp_path,
             monkeypatch)


def test_one_scored_target_left_is_enough(tmp_path):
    from vflpriv.config.schema import DatasetConfig, PartitionConfig
    from vflpriv.data.load import load_dataset
    from vflpriv.data.scenario import build_scenario

    digits = load_dataset(DatasetConfig(name="digits"), parties=2)
    scenario = build_scenario(digits, PartitionConfig(labeled=200, canaries=199), seed=0)
    assert scenario.canaries.numel() == 199


def test_audit_canaries_where_no_attacked_phase_reads_labels_are_refused(tmp_path, monkeypatch):
    _refused(["audit", "--method", "fedhssl", "--phases", "pretrain", "--canaries", "5", "--attacks", "mc",
              "--defenses", "none", "--seeds", "0", "--no-tune-attacks", "--set", "method.options.global_iterations=1",
              *QUICK], "audit.canaries=5: the attacked phase(s) pretrain of method 'fedhssl' "
                                             "read no labels", tmp_path, monkeypatch)
    from vflpriv.workflows.audit import AuditConfig, canaries

    auto = AuditConfig.model_validate({"method": {"name": "fedhssl"}, "audit": {"phases": ["pretrain"]}})
    assert canaries(auto) == 0  # and the report's settings say none, as nothing is planted
    both = AuditConfig.model_validate({"method": {"name": "fedhssl"}, "audit": {"canaries": 5}})
    assert canaries(both) == 5


def test_alibi_at_epsilon_zero_releases_nothing_of_the_labels(tmp_path, monkeypatch):
    """Its declared range includes 0 (ZeroDivisionError after training before): the likelihood is flat, so the
    targets are the prior's and the relabelling a uniform draw, whatever the true labels; a training at 0 runs."""
    from vflpriv.config.schema import RunConfig
    from vflpriv.runner.execution import run

    cls = DEFENSES.get("alibi")
    labels = torch.tensor([0, 1, 2, 3] * 500)

    def make(seed: int):
        return cls(strength=0.0, party=0, phase="finetune", kinds=None, options=cls.Options(),
                   generator=torch.Generator().manual_seed(seed), name="alibi")

    relabelled = make(0).relabel(labels, num_classes=4)
    assert torch.equal(relabelled, make(0).relabel(torch.zeros_like(labels), num_classes=4))  # independent of y
    assert abs(float((relabelled == labels).float().mean()) - 0.25) < 0.04  # chance, not the argmax of a tie (0)
    assert make(0).privacy_spent() == 0.0
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path))
    for prior in ("uniform", "model"):
        (record,) = run(RunConfig.model_validate({
            "finetune": {"epochs": 1}, "model": {"hidden": 16, "out_dim": 8},
            "attack": {"name": "gc", "prior": "none"},
            "defenses": [{"name": "alibi", "strength": 0.0, "sweep": True, "options": {"prior": prior}}]}))
        assert record.status == "ok", record.error
        assert record.epsilon == 0.0


def test_a_sweep_over_the_lr_chooses_it_per_seed_on_the_validation_split(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    grid = tmp_path / "grid.yaml"
    grid.write_text("methods: [splitnn]\nattacks: [gc]\ndefenses: [{name: dp-gaussian, phase: finetune, sweep: true}]\n"
                    "strengths: [1]\nseeds: [0, 1]\naxes: {finetune.lr: [0.0001, 0.01]}\n"
                    "finetune: {epochs: 2, validation: 0.25}\nmodel: {hidden: 16, out_dim: 8}\n"
                    "attack: {prior: aux, prior_epochs: 10}\njobs: 1\n")
    result = CliRunner().invoke(app, ["sweep", str(grid), "--out", str(tmp_path / "out"), "--quiet"])
    assert result.exit_code == 0, result.output
    assert "finetune.lr chosen per seed (and strength) on the validation split" in result.output
    said = " ".join(result.output.split())
    assert "no ε is recorded for the choice: choosing among 2 trainings of the same labels" in said
    runs = pd.read_csv(tmp_path / "out" / "results.csv")
    chosen = pd.read_csv(tmp_path / "out" / "lr_chosen.csv")
    assert sorted(chosen["seed"]) == [0, 1]
    for row in chosen.itertuples():
        mine = runs[runs["seed"] == row.seed]
        best = mine.loc[mine["utility_val"].idxmax()]
        assert row.utility_val == pytest.approx(best["utility_val"]) and row.utility == pytest.approx(best["utility"])
    caps = pd.read_csv(tmp_path / "out" / "cap_lr_chosen.csv")
    assert len(caps[caps["attack"] == "gc"]) == 1 and int(caps.loc[caps["attack"] == "gc", "n_seeds"].iloc[0]) == 2
    # review-hunt3 P8: a choice among the lrs' DP trainings of the same labels, read on validation labels without
    # noise, has no run's epsilon: neither file carries one (each run's own stays in results.csv)
    assert runs["epsilon"].notna().all()
    assert not [c for c in [*chosen.columns, *caps.columns] if "epsilon" in c]
