"""``tumorboard models``: the registry as a user reads it."""

from __future__ import annotations

import json

from test_logs_to_scores import cli
from tumorboard import models


def test_models_lists_every_registry_row():
    out = cli("models")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("| name | TRIDENT | kind | dim | input |")
    blank = lines.index("")  # the slide-encoder table follows the models table
    assert blank == 2 + len(models.available())
    assert lines[blank + 1].startswith("| slide encoder | status | patch encoder |")
    assert len(lines) == blank + 3 + len(models.slide_encoders())
    assert any(line.startswith("| uni2-h | uni_v2 | encoder | 1536 | 224 | 20x / 256 |")
               for line in lines)  # fmt: skip


def test_models_json_and_kind_filter():
    out = cli("models", "--json", "--kind", "encoder")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert rows and all(r["kind"] == "encoder" for r in rows)
    by = {r["name"]: r for r in rows}
    assert by["uni2-h"]["gated"] is True and by["uni2-h"]["gpu_dtype"] == "bfloat16"
    assert "abmil" not in by
    out = cli("models", "--kind", "encoders")
    assert out.returncode == 2 and "invalid choice" in out.stderr
