"""One JSON serialiser for stored payloads: ``tumorboard._json.json_text``.

Checked there and in the places that store JSON text (recorder, importers, store manifest and
journal, HDF5 attributes, GeoJSON).

Oracle: the expected text is written out by hand (sorted keys at every depth, ``", "`` and
``": "`` separators, non-ASCII kept, ``str()`` for values JSON has no type for).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
from tumorboard._json import json_text
from tumorboard.traj import Recorder, Store, import_logs
from tumorboard.traj.schema import output_text


def test_json_text_rules():
    assert json_text(None) is None
    assert json_text({"b": 1, "a": {"d": [2, {"z": 0, "y": 1}], "c": "é"}}) == (
        '{"a": {"c": "é", "d": [2, {"y": 1, "z": 0}]}, "b": 1}'
    )
    assert json_text([{"b": 1, "a": 2}]) == '[{"a": 2, "b": 1}]'  # sorted below a list too
    assert json_text("plain") == '"plain"' and json_text(3.5) == "3.5"
    assert json_text({"when": dt.date(2024, 1, 2), "p": Path("a/b")}) == (
        '{"p": "a/b", "when": "2024-01-02"}'
    )
    assert json_text({"x": np.int64(7)}) == '{"x": "7"}'  # str() of a numpy scalar
    assert output_text(None) is None and output_text("as is {") == "as is {"
    assert output_text({"b": 1, "a": 0}) == '{"a": 0, "b": 1}'


def test_recorder_stores_sorted_payloads(tmp_path):
    store = Store(tmp_path / "s", fsync=False)
    with Recorder(store, benchmark="b", model="m", config={"top_p": 1, "temperature": 0}) as rec:
        with rec.item(patient_id="p", item_id="q", question="Q?") as it:
            it.tool_call("t", input=[{"b": 1, "a": 2}], output={"z": "ü", "a": [1]})
            it.message("assistant", '{"kept": "verbatim", "a": 1}')
    ev = store.events().sort("step").collect()
    tool = ev.row(0, named=True)
    assert tool["input"] == '[{"a": 2, "b": 1}]'
    assert tool["output"] == '{"a": [1], "z": "ü"}'
    assert ev.item(1, "output") == '{"kept": "verbatim", "a": 1}'  # text is stored as given
    assert store.runs().collect().item(0, "config") == '{"temperature": 0, "top_p": 1}'


def test_importers_store_the_same_text(tmp_path):
    record = {
        "model": "m1",
        "config": {"top_p": 1, "temperature": 0},
        "question": "Q?\nA) x\nB) y",
        "gold": ["B", "y"],
        "response": "[ANSWER: B]",
        "events": [
            {"kind": "tool_call", "input": {"q": "é", "a": 1}, "output": {"b": 2, "a": 1}},
            {"kind": "action", "input": "look up CD8"},
        ],
    }
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "run.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    import_logs("jsonl", tmp_path / "logs", tmp_path / "s")
    store = Store(tmp_path / "s")
    ev = store.events().sort("step").collect()
    assert ev.item(0, "input") == '{"a": 1, "q": "é"}'
    assert ev.item(0, "output") == '{"a": 1, "b": 2}'
    assert ev.item(1, "input") == '"look up CD8"'  # plain text becomes a JSON string
    runs = store.runs().collect()
    assert runs.item(0, "config") == '{"temperature": 0, "top_p": 1}'
    items = store.items().collect()
    assert items.item(0, "gold") == '["B", "y"]'  # a non-text gold is kept as its JSON text


def test_store_manifest_and_journal_text(tmp_path):
    store = Store(tmp_path / "s", fsync=False)
    text = (tmp_path / "s" / "manifest.json").read_text(encoding="utf-8")
    assert text == json_text(store.manifest) + "\n"
    assert list(json.loads(text)) == sorted(json.loads(text))


def test_h5_dict_attributes_and_geojson_are_sorted(tmp_path):
    from tumorboard import slides
    from tumorboard._hdf5 import attr_to_hdf5

    assert attr_to_hdf5({"b": 1, "a": 2}) == '{"a": 2, "b": 1}'
    img = np.full((32, 32, 3), 255, np.uint8)
    img[8:24, 8:24] = (150, 60, 120)
    tissue = slides.segment_image(img, preset="bwh_biopsy", mpp=10.0)
    path = tissue.write_geojson(tmp_path / "t.geojson")
    text = path.read_text(encoding="utf-8")
    assert text == json_text(json.loads(text)) and text.startswith('{"features": [')
