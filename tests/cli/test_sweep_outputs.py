"""``vflpriv sweep`` writes what evaluate writes: results, CAP and a privacy-utility plot per (attack, defense,
phase), each panel a dataset."""

from __future__ import annotations

from typer.testing import CliRunner

from vflpriv.cli import app


def test_a_sweep_writes_one_plot_per_attack_with_a_panel_per_dataset(tmp_path):
    grid = tmp_path / "grid.yaml"
    grid.write_text("methods: [splitnn]\ndatasets: [digits, breast-cancer]\nattacks: [mc, gc]\nseeds: [0]\n"
                    "strengths: [1, 25]\nfinetune: {epochs: 2}\n")
    result = CliRunner().invoke(app, ["sweep", str(grid), "--out", str(tmp_path / "o"), "--quiet"])
    assert result.exit_code == 0, result.output
    plots = sorted(p.name for p in (tmp_path / "o").glob("*.png"))
    assert plots == ["tradeoff_gc_iso_finetune.png", "tradeoff_mc_iso_finetune.png",
                     "tradeoff_worst-case_iso_finetune.png"]  # and the worst of the two per point
    for name in plots:
        data = (tmp_path / "o" / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n"
        width = int.from_bytes(data[16:20], "big")
        assert width > 2 * 500  # two panels side by side (5.2 in each at 130 dpi)


def test_the_report_marks_settings_nobody_chose_as_defaults(tmp_path):
    import html
    import re

    grid = tmp_path / "grid.yaml"
    grid.write_text("methods: [splitnn]\ndatasets: [digits, breast-cancer]\nattacks: [mc]\nseeds: [0]\n"
                    "strengths: [1]\nfinetune: {epochs: 2, weight_decay: 0.0001}\n")
    assert CliRunner().invoke(app, ["sweep", str(grid), "--out", str(tmp_path / "o"), "--quiet"]).exit_code == 0
    result = CliRunner().invoke(app, ["report", str(tmp_path / "o"), "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r" / "report.html").read_text()
    differ = page[page.index("Settings that differ"):page.index("<h3>Seeds")]
    rows = {tuple(html.unescape(c) for c in re.findall(r"<td>(?:<code>)?(.*?)(?:</code>)?</td>", row))
            for row in re.findall(r"<tr>(.*?)</tr>", differ)}
    assert ("model.hidden", "128 (the default of digits)", "splitnn / digits / mc") in rows
    assert ("model.hidden", "512 (the default)", "splitnn / breast-cancer / mc") in rows
    assert ("partition.labeled", "80 (the default of breast-cancer)", "splitnn / breast-cancer / mc") in rows
    shared = page[page.index("Settings every run shares"):]
    assert "<code>finetune.weight_decay</code></td><td>0.0001</td>" in shared  # chosen, shared: no mark
