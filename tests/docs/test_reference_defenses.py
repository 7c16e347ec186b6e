"""The reference's table of defenses (docs/reference/attacks-and-defenses.md) lists every built-in defense with the strengths a sweep takes by default."""

import re
from pathlib import Path

from vflpriv.config.registry import DEFENSES

TABLE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "attacks-and-defenses.md"


def test_every_defense_s_row_gives_its_default_strengths():
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([a-z-]+)` \|.* \| ([^|]+) \|$", TABLE.read_text(),
                                                          re.MULTILINE) if m.group(1) in DEFENSES.names()}
    built_in = {n for n in DEFENSES.names() if DEFENSES.get(n).__module__.startswith("vflpriv.")}
    assert set(rows) == built_in
    for name, shown in rows.items():
        assert shown.strip() == ", ".join(f"{v:g}" for v in DEFENSES.get(name).default_strengths("finetune")), name
