"""A bulk export's folder destination (engine/exports/destinations.py)."""

from __future__ import annotations

from engine.exports import destinations


def test_a_folder_removes_what_an_export_killed_mid_write_left_and_keeps_the_rest(tmp_path):
    (tmp_path / ".partial-abc123").write_bytes(b'{"run": ')
    (tmp_path / "_export.json").write_text("{}")
    (tmp_path / "run-1.json").write_text("{}")
    folder = destinations.open_destination(str(tmp_path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_export.json", "run-1.json"]
    folder.write("run-2.json", b"{}")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_export.json", "run-1.json", "run-2.json"]
