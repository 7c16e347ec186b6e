"""``vflpriv table``'s caches (the empirical epsilon's bisections, the frames computed once per write) never serve one
store's numbers to another read in the same process: every file is the same as in a process that read only it."""

from __future__ import annotations

import json

import pandas as pd

from vflpriv.common.empirical_epsilon import epsilon_lower
from vflpriv.reports.results import write_tables
from vflpriv.store.records import RunRecord
from vflpriv.tradeoff.variants import with_variants


def _records(read: int) -> pd.DataFrame:
    """gc and mc on two seeds at two label-DP strengths, 30 canaries each: gc reads ``read`` of its 30 guesses (and
    as many of 30 targets), mc reads 3; the two frames differ only there."""
    rows = []
    for seed in (0, 1):
        for eps in (1.0, 4.0):
            for attack, right in (("gc", read), ("mc", 3)):
                hits, prior = "1" * right + "0" * (30 - right), "1" * 3 + "0" * 27
                config = {"seed": seed, "attack": {"name": attack},
                          "defenses": [{"name": "label-dp", "strength": eps, "sweep": True}]}
                rows.append(RunRecord(
                    key=f"{attack}{seed}{eps}", training_key=f"t{seed}{eps}", method="splitnn", dataset="digits",
                    attack=attack, defense="label-dp", phase="finetune", strength=eps, seed=seed, utility=0.9,
                    utility_metric="accuracy", num_classes=10, attack_accuracy=right / 30, prior_accuracy=0.1,
                    attack_hits=hits, prior_hits=prior, canaries=30, canary_counts=json.dumps([[30, right]]),
                    epsilon=eps, strength_axis="epsilon", strength_stronger="lower",
                    config=json.dumps(config)).to_dict())
    return with_variants(pd.DataFrame(rows, columns=RunRecord.columns()))


def _files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_two_stores_read_in_one_process_each_get_their_own_tables(tmp_path):
    read, chance = _records(30), _records(3)
    epsilon_lower.cache_clear()
    write_tables(read, tmp_path / "read")  # fills the caches with the first store's counts
    write_tables(chance, tmp_path / "chance")
    epsilon_lower.cache_clear()
    write_tables(chance, tmp_path / "chance-alone")  # as a process that read only this store
    epsilon_lower.cache_clear()
    write_tables(read, tmp_path / "read-alone")
    assert _files(tmp_path / "chance") == _files(tmp_path / "chance-alone")
    assert _files(tmp_path / "read") == _files(tmp_path / "read-alone")
    first, second = (pd.read_csv(tmp_path / d / "epsilon_table.csv") for d in ("read", "chance"))
    worst = (first["attack"] == "worst-case") & (first["strength"] == 1.0)
    assert first.loc[worst, "epsilon_lower"].item() > 1 and second.loc[worst, "epsilon_lower"].item() == 0
    for folder, leaked in (("read", 0.9), ("chance", 0.0)):  # gc's own leakage, 27 or 0 of 30 targets beyond the prior
        rows = pd.read_csv(tmp_path / folder / "leakage.csv")
        assert rows.loc[rows["attack"] == "gc", "leakage"].tolist() == [leaked] * 2


def test_the_report_s_labels_section_is_made_of_the_label_records_alone(tmp_path):
    """Where the records hold a feature attack too, the records' computed tables are not the labels section's: it is
    the same as the label records' own report gives."""
    from vflpriv.reports.results import Computed, _labels

    labels = _records(30)
    errors = json.dumps([0.05] * 30)
    features = labels[labels["attack"] == "gc"].assign(
        attack="fi-decoder", secret="features", adversary="active", victim=1, key=lambda f: "f" + f["key"],
        attack_accuracy=float("nan"), prior_accuracy=float("nan"), attack_hits="", prior_hits="", canaries=0,
        canary_counts="", feature_mse=0.05, prior_mse=0.1, attack_errors=errors, prior_errors=json.dumps([0.1] * 30),
        n_targets=30)
    both = with_variants(pd.concat([labels, features], ignore_index=True).drop(columns=["variant"]))
    mixed = _labels(both, tmp_path, ("png",), Computed.of(both))
    alone = _labels(labels, tmp_path, ("png",), Computed.of(labels))
    assert mixed.html() == alone.html() and "fi-decoder" not in mixed.html()
