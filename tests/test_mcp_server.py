"""``tumorboard mcp``: the agent tools over the Model Context Protocol, end to end.

The official SDK's client (``mcp.Client``) talks to the server in this process, over stdio (a
``tumorboard mcp`` subprocess) and over streamable HTTP (``tumorboard mcp --http 0`` on
127.0.0.1). Oracles: the tool functions called directly on the same image with models loaded
from the same checkpoint files (those functions are checked against numpy re-implementations
in test_tools_models.py and test_tools_dab.py); the unavailable path lists the reason and
answers every call with a tool error.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("mcp")
anyio = pytest.importorskip("anyio")
from mcp import Client, StdioServerParameters  # noqa: E402
from PIL import Image  # noqa: E402
from tumorboard.integrations.mcp import McpOptions, ToolServer, build_server  # noqa: E402
from tumorboard.tools import TOOL_SCHEMAS, dab_positive_fraction  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 90


@pytest.fixture(scope="module")
def ihc_png(tmp_path_factory):
    skimage_data = pytest.importorskip("skimage.data")
    path = tmp_path_factory.mktemp("img") / "ihc.png"
    Image.fromarray(skimage_data.immunohistochemistry()[:256, :256]).save(path)
    return path


def _run(coro_fn, *args):
    async def bounded():
        with anyio.fail_after(TIMEOUT):
            return await coro_fn(*args)

    return anyio.run(bounded)


async def _session(server, calls):
    """Connect the SDK client, list the tools, make the calls; return (tools, results)."""
    async with Client(server) as client:
        tools = (await client.list_tools()).tools
        results = [await client.call_tool(name, args) for name, args in calls]
    return tools, results


def test_tools_without_weights_are_listed_unavailable_and_dab_answers(ihc_png):
    b64 = base64.b64encode(ihc_png.read_bytes()).decode()
    calls = [
        ("dab_positive_fraction", {"image": str(ihc_png)}),
        ("dab_positive_fraction", {"image_base64": b64, "dab_threshold": 0.3}),
        ("conch_zero_shot", {"image": str(ihc_png), "labels": ["tumour", "stroma"]}),
        ("ihc_positive_percentage", {"image": str(ihc_png)}),
        # bad arguments: each a tool error, and the server keeps answering
        ("dab_positive_fraction", {}),
        ("dab_positive_fraction", {"image": str(ihc_png), "colour": "brown"}),
        ("dab_positive_fraction", {"image": 7}),
        ("dab_positive_fraction", {"image": str(ihc_png), "dab_threshold": -1}),
        ("dab_positive_fraction", {"image": str(ihc_png) + ".missing"}),
        ("dab_positive_fraction", {"image_base64": "%%%not base64"}),
        ("dab_positive_fraction", {"image_base64": base64.b64encode(b"text").decode()}),
        ("dab_positive_fraction", {"image": str(ihc_png), "image_base64": b64}),
        ("no_such_tool", {}),
        ("dab_positive_fraction", {"image": str(ihc_png)}),
    ]
    tools, res = _run(_session, build_server(), calls)
    by_name = {t.name: t for t in tools}
    assert set(by_name) == set(TOOL_SCHEMAS)
    for name, t in by_name.items():
        schema = t.input_schema
        assert schema["properties"]["image"]["type"] == "string"
        assert schema["properties"]["image_base64"]["contentEncoding"] == "base64"
        for prop, spec in TOOL_SCHEMAS[name]["parameters"]["properties"].items():
            if prop != "image":
                assert schema["properties"][prop] == spec
    assert by_name["conch_zero_shot"].input_schema["required"] == ["labels"]
    for name, flag in (("conch_zero_shot", "--conch-weights"), ("ihc_positive_percentage",
                                                                 "--uni2-weights")):  # fmt: skip
        t = by_name[name]
        assert t.meta["tumorboard/available"] is False and flag in t.meta["tumorboard/reason"]
        assert t.description.startswith("UNAVAILABLE: ")
    assert by_name["dab_positive_fraction"].meta["tumorboard/available"] is True

    direct = dab_positive_fraction(np.asarray(Image.open(ihc_png).convert("RGB")), name="ihc.png")
    assert not res[0].is_error
    assert res[0].structured_content["fraction"] == direct.fraction
    assert res[0].content[0].text == direct.reply
    direct_b64 = dab_positive_fraction(np.asarray(Image.open(ihc_png).convert("RGB")),
                                       dab_threshold=0.3)  # fmt: skip
    assert res[1].structured_content["fraction"] == direct_b64.fraction
    assert res[1].structured_content["n_tissue_pixels"] == direct_b64.n_tissue_pixels
    assert res[2].is_error and "conch_zero_shot is unavailable" in res[2].content[0].text
    assert "does not answer from random weights" in res[2].content[0].text
    assert res[3].is_error and "--ihc-weights" in res[3].content[0].text
    expected = [
        "give exactly one of 'image'",
        "unknown argument(s) 'colour'",
        "argument 'image': expected a string, got int",
        "argument 'dab_threshold': expected a number >= 0",
        "no such file",
        "image_base64: not valid base64",
        "image_base64: not a readable image",
        "give exactly one of 'image'",
        "unknown tool 'no_such_tool'",
    ]
    for r, text in zip(res[4:13], expected, strict=True):
        assert r.is_error and text in r.content[0].text, (text, r.content[0].text)
    assert not res[13].is_error and res[13].structured_content["fraction"] == direct.fraction


def test_image_root_confines_paths(ihc_png, tmp_path):
    ts = ToolServer(McpOptions(image_root=tmp_path))
    r = ts.call("dab_positive_fraction", {"image": str(ihc_png)})
    assert r.is_error and "outside the server's image folder" in r.content[0].text
    (tmp_path / "a.png").write_bytes(ihc_png.read_bytes())
    assert not ts.call("dab_positive_fraction", {"image": "a.png"}).is_error


def _png_header_only(width: int, height: int) -> bytes:
    """Return a PNG whose header claims width x height RGB pixels (a few bytes of data)."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr)
            + chunk(b"IDAT", zlib.compress(b"\x00" * 16)) + chunk(b"IEND", b""))  # fmt: skip


def test_decompression_bomb_is_a_bad_argument_not_an_internal_error(tmp_path):
    # 900 million pixels claimed by a 70-byte file: Pillow refuses it at open
    # (DecompressionBombError), which the server reported as "internal error"
    png = _png_header_only(30000, 30000)
    ts = ToolServer(McpOptions(image_root=tmp_path))
    (tmp_path / "bomb.png").write_bytes(png)
    for args, where in (({"image_base64": base64.b64encode(png).decode()}, "image_base64"),
                        ({"image": "bomb.png"}, "image ")):  # fmt: skip
        r = ts.call("dab_positive_fraction", args)
        text = r.content[0].text
        assert r.is_error and "image too large to decode" in text, text
        assert where in text and "internal error" not in text
    # under Pillow's bomb limit but over the server's own: refused from the header alone
    png = _png_header_only(9000, 9000)
    (tmp_path / "big.png").write_bytes(png)
    r = ts.call("dab_positive_fraction", {"image": "big.png"})
    text = r.content[0].text
    assert r.is_error and "9000 x 9000 pixels, more than the 67,108,864" in text, text


def test_numbers_beyond_the_float_range_are_bad_arguments(ihc_png):
    # a 401-digit JSON integer reached the tool and failed there as "internal error TypeError"
    ts = ToolServer()
    for v in (10**400, float("nan"), float("inf")):
        r = ts.call("dab_positive_fraction", {"image": str(ihc_png), "dab_threshold": v})
        text = r.content[0].text
        assert r.is_error and "argument 'dab_threshold': expected a finite number" in text, text


@pytest.fixture(scope="module")
def weights(tmp_path_factory):
    torch = pytest.importorskip("torch")
    models = pytest.importorskip("tumorboard.models")
    pytest.importorskip("tokenizers")
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers import models as tmodels

    d = tmp_path_factory.mktemp("weights")
    tok = Tokenizer(tmodels.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    special = ["<pad>", "<start_of_text>", "<end_of_text>"]
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False, special_tokens=special)
    tok.train_from_iterator(["invasive ductal carcinoma", "normal breast tissue"] * 20, trainer)
    tok.save(str(d / "tok.json"))
    with warnings.catch_warnings():  # random weights, written as checkpoints for the test
        warnings.simplefilter("ignore")
        conch = models.load_conch("conch-tiny", device="cpu", seed=3)
        enc = models.load("uni2-tiny", device="cpu", seed=4)
        reg = models.load("mtbbench-regressor", in_dim=enc.embed_dim, hidden=16, device="cpu",
                          seed=5)  # fmt: skip
    torch.save(conch.state_dict(), d / "conch.pt")
    torch.save(enc.state_dict(), d / "uni2.pt")
    torch.save(reg.state_dict(), d / "ihc.pt")
    return d


def _options(w, **kw):
    return McpOptions(conch_model="conch-tiny", conch_weights=w / "conch.pt",
                      conch_tokenizer=w / "tok.json", uni2_model="uni2-tiny",
                      uni2_weights=w / "uni2.pt", ihc_weights=w / "ihc.pt",
                      ihc_options={"hidden": 16}, device="cpu", **kw)  # fmt: skip


def test_model_tools_answer_from_the_given_weights(weights, ihc_png):
    from tumorboard import models
    from tumorboard.tools import conch_zero_shot, ihc_positive_percentage

    labels = ["invasive ductal carcinoma", "normal breast tissue"]
    calls = [("conch_zero_shot", {"image": str(ihc_png), "labels": labels}),
             ("ihc_positive_percentage", {"image": str(ihc_png)}),
             ("conch_zero_shot", {"image": str(ihc_png), "labels": []}),
             ("conch_zero_shot", {"image": str(ihc_png), "labels": ["ok", 3]})]  # fmt: skip
    tools, res = _run(_session, build_server(_options(weights)), calls)
    assert all(t.meta["tumorboard/available"] for t in tools)
    rgb = np.asarray(Image.open(ihc_png).convert("RGB"))
    conch = models.load_conch("conch-tiny", weights=weights / "conch.pt",
                              tokenizer=weights / "tok.json", device="cpu")  # fmt: skip
    ref = conch_zero_shot(rgb, labels, model=conch)
    assert not res[0].is_error
    assert res[0].structured_content["label"] == ref.label
    assert res[0].structured_content["probabilities"] == pytest.approx(ref.probabilities)
    assert res[0].content[0].text == ref.reply
    enc = models.load("uni2-tiny", weights=weights / "uni2.pt", device="cpu")
    reg = models.load("mtbbench-regressor", weights=weights / "ihc.pt", in_dim=enc.embed_dim,
                      hidden=16, device="cpu")  # fmt: skip
    ref_ihc = ihc_positive_percentage(rgb, encoder=enc, regressor=reg, name="ihc.png")
    assert not res[1].is_error
    assert res[1].structured_content["percentage"] == pytest.approx(ref_ihc.percentage)
    assert res[1].structured_content["n_patches"] == ref_ihc.n_patches
    assert (
        res[2].is_error and "argument 'labels': expected at least 1 item" in res[2].content[0].text
    )
    assert res[3].is_error and "argument 'labels[1]': expected a string" in res[3].content[0].text


def test_a_checkpoint_that_does_not_fit_fails_at_start(weights):
    from tumorboard.models import WeightsError

    bad = McpOptions(uni2_model="uni2-tiny", uni2_weights=weights / "conch.pt",
                     ihc_weights=weights / "ihc.pt", device="cpu")  # fmt: skip
    with pytest.raises(WeightsError):
        ToolServer(bad)


def _env():
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def test_stdio_transport(ihc_png):
    params = StdioServerParameters(command=sys.executable, args=["-m", "tumorboard.cli", "mcp"],
                                   env=_env())  # fmt: skip
    tools, res = _run(_session, params, [("dab_positive_fraction", {"image": str(ihc_png)})])
    assert {t.name for t in tools} == set(TOOL_SCHEMAS)
    assert not res[0].is_error and 0 < res[0].structured_content["fraction"] < 1


def test_streamable_http_on_loopback(ihc_png):
    proc = subprocess.Popen([sys.executable, "-m", "tumorboard.cli", "mcp", "--http", "0"],
                            env=_env(), stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            text=True)  # fmt: skip
    try:
        url = None
        lines = []
        deadline = time.monotonic() + TIMEOUT
        while url is None and time.monotonic() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            lines.append(line)
            if "serving on " in line:
                url = line.split("serving on ", 1)[1].strip()
        assert url is not None, "".join(lines)
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
        assert any("conch_zero_shot: unavailable" in s for s in lines)
        tools, res = _run(_session, url, [("dab_positive_fraction", {"image": str(ihc_png)}),
                                          ("dab_positive_fraction", {"image": 1})])  # fmt: skip
        assert {t.name for t in tools} == set(TOOL_SCHEMAS)
        assert not res[0].is_error and res[1].is_error
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stderr.close()


def test_cli_refuses_missing_weights_and_bad_port(tmp_path):
    from tumorboard.cli import main

    cmd = [sys.executable, "-m", "tumorboard.cli", "mcp", "--uni2-weights",
           str(tmp_path / "nope.pt"), "--ihc-weights", str(tmp_path / "x")]  # fmt: skip
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)  # fmt: skip
    assert r.returncode == 2 and "nope.pt" in r.stderr and "tumorboard: error:" in r.stderr
    assert main(["mcp", "--http", "70000"]) == 2  # refused by argparse, before any work


@pytest.mark.parametrize("flag", ["--uni2-weights", "--conch-tokenizer"])
def test_a_missing_path_fails_at_start_even_without_its_partner(tmp_path, flag):
    missing = tmp_path / "missing" / "weights.pt"
    cmd = [sys.executable, "-m", "tumorboard.cli", "mcp", flag, str(missing)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=TIMEOUT,
                       stdin=subprocess.DEVNULL)  # fmt: skip
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tumorboard: error: "), r.stderr
    assert flag in lines[0] and str(missing) in lines[0] and "no such file" in lines[0]
    assert "serving" not in r.stderr and r.stdout == ""
    from tumorboard.errors import MissingFileError
    from tumorboard.integrations.mcp import McpOptions, ToolServer

    with pytest.raises(MissingFileError, match="is a folder"):
        ToolServer(McpOptions(ihc_weights=tmp_path))
