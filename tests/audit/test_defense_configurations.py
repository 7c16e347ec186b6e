"""Two configurations of one defense (ISO on the gradients and on the embeddings) are two settings, never pooled."""

import json

import yaml
from typer.testing import CliRunner

from vflpriv.cli import app

CONFIG = {"seeds": [0], "model": {"hidden": 32, "out_dim": 16}, "finetune": {"epochs": 2},
          "partition": {"labeled": 200, "aux": 20},
          "audit": {"attacks": ["gc"], "canaries": 20, "tune": False, "prior_epochs": 2,
                    "defenses": [{"name": "iso", "strengths": [1.0]},
                                 {"name": "iso", "kinds": ["embedding"], "strengths": [1.0]}]}}


def test_two_configurations_of_one_defense_at_one_strength_are_two_rows_with_their_own_canaries(tmp_path, monkeypatch):
    monkeypatch.setenv("VFLPRIV_CACHE", str(tmp_path / "cache"))
    (tmp_path / "audit.yaml").write_text(yaml.safe_dump(CONFIG))
    out = tmp_path / "audit"
    result = CliRunner().invoke(app, ["audit", "--method", "splitnn", "--config", str(tmp_path / "audit.yaml"),
                                      "--out", str(out), "--jobs", "1"])
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "audit.json").read_text())
    rows = [r for r in summary["canaries"]["rows"] if r["defense"] == "iso" and r["attack"] == "gc"]
    assert [r["canaries"] for r in rows] == [20, 20] and all(r["canary_guesses"] <= 20 for r in rows)  # not 40
    assert sorted(r["variant"] for r in rows) == ["on embedding", "on gradient"]
    defended = [d for d in summary["defenses"] if d["defense"] == "iso" and d["attack"] == "gc"]
    assert [d["seeds"] for d in defended] == [1, 1] and all(d["cap"] is not None for d in defended)  # a CAP each
    assert sorted(d.get("variant") for d in defended) == ["on embedding", "on gradient"]
    text = (out / "audit.md").read_text()
    assert "iso (on gradient)" in text and "iso (on embedding)" in text
    table = CliRunner().invoke(app, ["table", str(out)])
    assert table.exit_code == 0, table.output
    weakest = table.output.split("the weakest strength")[1].split("###")[0]
    assert weakest.count("| iso |") == 2 and "| on embedding |" in weakest and "| on gradient |" in weakest
