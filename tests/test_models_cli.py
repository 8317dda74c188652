"""``tumorboard models``: the registry as a user reads it."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_logs_to_scores import cli
from tumorboard import models
from tumorboard.models._encoder_table import UNBUILT, encoder_rows, encoder_table_markdown

#: TRIDENT's patch encoders that issue 28 names (every one is listed, built or not).
ISSUE_ENCODERS = (
    "uni_v1", "uni_v2", "conch_v15", "virchow", "virchow2", "hoptimus0", "hoptimus1", "h0-mini",
    "gigapath", "kaiko-vits8", "kaiko-vits16", "kaiko-vitb8", "kaiko-vitb16", "kaiko-vitl14",
    "lunit-vits8", "gpfm", "openmidnight", "phikon", "phikon_v2", "hibou_l", "midnight12k",
    "ctranspath", "resnet50", "conch_v1", "keep", "musk",
)  # fmt: skip


def test_models_lists_every_registry_row():
    out = cli("models")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("| name | TRIDENT | kind | dim | input |")
    blank = lines.index("")  # the slide-encoder table follows the models table
    assert blank == 2 + len(models.available()) + len(UNBUILT)
    assert lines[blank + 1].startswith("| slide encoder | status | patch encoder |")
    assert len(lines) == blank + 3 + len(models.slide_encoders())
    assert any(line.startswith("| uni2-h | uni_v2 | encoder | 1536 | 224 | 20x / 256 |")
               and line.endswith("| built |") for line in lines)  # fmt: skip
    (musk,) = [line for line in lines if line.startswith("| musk | musk | encoder | 1024 |")]
    assert "| not built: a BEiT-3 multiway transformer" in musk


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


def test_models_json_lists_the_encoders_not_built_with_the_reason():
    rows = json.loads(cli("models", "--json", "--kind", "encoder").stdout)
    by = {r["name"]: r for r in rows}
    assert by["musk"]["status"] == "not built" and "BEiT-3" in by["musk"]["reason"]
    assert by["uni2-h"]["status"] == "built" and by["uni2-h"]["reason"] is None


def test_every_encoder_of_the_issue_is_listed_with_its_status():
    rows = {r["name"]: r for r in encoder_rows()}
    assert set(ISSUE_ENCODERS) <= set(rows)
    assert [n for n in ISSUE_ENCODERS if rows[n]["status"] != "built"] == ["musk"]
    assert "uni2-tiny" not in rows and "conch-tiny" not in rows  # random-weight test models
    for name in ISSUE_ENCODERS:
        if rows[name]["status"] == "built":
            assert models.info(rows[name]["tumorboard_name"]).embed_dim == rows[name]["embed_dim"]


def test_readme_encoder_table_is_the_registrys():
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- encoder-table:begin -->\n(.*?)\n<!-- encoder-table:end -->", readme,
                      re.S)  # fmt: skip
    assert found, "README.md has no encoder table between its markers"
    assert found.group(1) == encoder_table_markdown(), (
        "README.md's encoder table differs from the registry: paste "
        "tumorboard.models._encoder_table.encoder_table_markdown() between the markers"
    )
