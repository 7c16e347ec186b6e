"""A cache entry's checksum covers its manifest as well as its payload: an entry copied under another key's name with
its recorded name edited to match (or any other manifest field edited) does not check out."""

from __future__ import annotations

import json

import pytest

from vflpriv.common.errors import CacheError
from vflpriv.store import cache


def _edited(path, **changes) -> bytes:
    head, _, payload = path.read_bytes().partition(b"\n")
    return json.dumps({**json.loads(head), **changes}).encode() + b"\n" + payload


def test_an_entry_checks_out_under_its_own_name(tmp_path):
    cache.write_entry(tmp_path / "a.entry", b"payload", traffic_rows=3)
    manifest, payload = cache.read_entry(tmp_path / "a.entry")
    assert payload == b"payload" and manifest["traffic_rows"] == 3 and manifest["entry"] == "a.entry"


@pytest.mark.parametrize("changes", [{"entry": "b.entry"}, {"entry": "b.entry", "traffic_rows": 4}])
def test_an_entry_copied_under_another_name_with_its_manifest_edited_is_refused(tmp_path, changes):
    cache.write_entry(tmp_path / "a.entry", b"payload", traffic_rows=3)
    (tmp_path / "b.entry").write_bytes(_edited(tmp_path / "a.entry", **changes))
    with pytest.raises(CacheError, match="checksum mismatch"):
        cache.read_entry(tmp_path / "b.entry")
