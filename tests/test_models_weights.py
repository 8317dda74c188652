"""Checkpoint reading and strict loading (tumorboard.models.weights).

Oracles: round trips compare tensors and outputs with the module that was saved; the key diff
is checked against the exact text expected for hand-made defects; the unsafe-pickle test uses a
payload whose execution would create a directory, and checks that it never runs.
"""

from __future__ import annotations

import argparse
import os
import warnings

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("safetensors")

from tumorboard import models  # noqa: E402
from tumorboard.models.weights import (  # noqa: E402
    CheckpointKeyError,
    UnsafeCheckpointError,
    WeightsError,
    file_fingerprint,
    read_state_dict,
    save_state_dict,
    state_dict_fingerprint,
)


def random_tiny(seed=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", models.RandomWeightsWarning)
        m = models.load("uni2-tiny", device="cpu", seed=seed)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.01 * torch.randn_like(p))
    return m


def load_strict(path, name="uni2-tiny"):
    with warnings.catch_warnings():
        warnings.simplefilter("error", models.RandomWeightsWarning)  # weights given: no warning
        return models.load(name, weights=path, device="cpu")


@pytest.mark.parametrize("suffix", [".safetensors", ".pt", ".bin", ".pth"])
def test_save_load_round_trip_is_exact(tmp_path, suffix):
    src = random_tiny()
    path = save_state_dict(src, tmp_path / f"w{suffix}")
    dst = load_strict(path)
    a, b = src.state_dict(), dst.state_dict()
    assert list(a) == list(b)
    for k in a:
        assert torch.equal(a[k], b[k]), k
    x = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        assert torch.equal(src(x), dst(x))
    assert not any(t.is_meta for t in dst.state_dict().values())


def test_wrappers_and_prefixes_are_removed(tmp_path):
    src = random_tiny()
    sd = src.state_dict()
    variants = {
        "ddp.pt": {"state_dict": {f"module.{k}": v for k, v in sd.items()}, "epoch": 3},
        "model.pt": {"model": sd, "optimizer": {"lr": 0.1}},
        "compiled.pt": {f"_orig_mod.{k}": v for k, v in sd.items()},
        "both.pt": {"model_state_dict": {f"module._orig_mod.{k}": v for k, v in sd.items()}},
    }
    for name, obj in variants.items():
        torch.save(obj, tmp_path / name)
        got = read_state_dict(tmp_path / name)
        assert list(got) == list(sd), name
        dst = load_strict(tmp_path / name)
        assert torch.equal(dst.pos_embed, src.pos_embed), name


def test_wrong_shape_checkpoint_gives_a_readable_diff(tmp_path):
    sd = random_tiny().state_dict()
    sd["pos_embed"] = torch.zeros(1, 257, 48)  # mis-shaped
    del sd["blocks.1.ls2.gamma"]  # missing
    sd["head.weight"] = torch.zeros(10, 48)  # unexpected
    path = tmp_path / "bad.safetensors"
    save_state_dict(sd, path)
    with pytest.raises(CheckpointKeyError) as info:
        load_strict(path)
    err = info.value
    text = str(err)
    assert text.startswith(f"{path}: checkpoint does not match uni2-tiny (VisionTransformer): ")
    assert "1 missing, 1 unexpected, 1 mis-shaped key(s)" in text
    lines = text.splitlines()
    assert lines[1:] == [
        "  missing from the checkpoint (1):",
        "    blocks.1.ls2.gamma  [48]",
        "  unexpected in the checkpoint (1):",
        "    head.weight  [10, 48]",
        "  mis-shaped (1):",
        "    pos_embed  expected [1, 256, 48], checkpoint has [1, 257, 48]",
    ]
    assert err.path == str(path)
    assert err.missing == {"blocks.1.ls2.gamma": (48,)}
    assert err.unexpected == {"head.weight": (10, 48)}
    assert [(m.key, m.expected, m.found) for m in err.mismatched] == [
        ("pos_embed", (1, 256, 48), (1, 257, 48))
    ]
    assert isinstance(err, WeightsError) and isinstance(err, ValueError)


def test_long_diffs_are_truncated(tmp_path):
    sd = {f"junk.{i}": torch.zeros(1) for i in range(30)}
    sd.update(random_tiny().state_dict())
    path = tmp_path / "junk.pt"
    torch.save(sd, path)
    with pytest.raises(CheckpointKeyError, match=r"unexpected in the checkpoint \(30\)") as info:
        load_strict(path)
    assert "    ... and 5 more" in str(info.value)


class _Payload:
    """Unpickling this runs os.makedirs(target): proof of arbitrary code execution."""

    def __init__(self, target):
        self.target = target

    def __reduce__(self):
        return (os.makedirs, (self.target,))


def test_pickles_needing_arbitrary_objects_are_refused_unexecuted(tmp_path):
    marker = tmp_path / "payload-ran"
    sd = random_tiny().state_dict()
    path = tmp_path / "evil.bin"
    torch.save({"state_dict": sd, "extra": _Payload(str(marker))}, path)
    with pytest.raises(UnsafeCheckpointError) as info:
        models.load("uni2-tiny", weights=path, device="cpu")
    text = str(info.value)
    assert text.startswith(f"{path}: refused")
    assert "posix.makedirs" in text or "os.makedirs" in text  # names what it needed
    assert "weights_only=True" in text and "torch.save(model.state_dict()" in text
    assert not marker.exists()

    ns = tmp_path / "namespace.pt"
    torch.save({"state_dict": sd, "args": argparse.Namespace(lr=0.1)}, ns)
    with pytest.raises(UnsafeCheckpointError, match="argparse.Namespace"):
        read_state_dict(ns)


def test_unreadable_and_empty_checkpoints(tmp_path):
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"this is not a checkpoint at all")
    with pytest.raises(WeightsError, match="not a readable torch checkpoint") as info:
        read_state_dict(junk)
    assert not isinstance(info.value, UnsafeCheckpointError)
    bad_st = tmp_path / "junk.safetensors"
    bad_st.write_bytes(b"\x00" * 16)
    with pytest.raises(WeightsError, match="not a readable safetensors file"):
        read_state_dict(bad_st)
    meta_only = tmp_path / "meta.pt"
    torch.save({"epoch": 3, "config": {"lr": 0.1}}, meta_only)
    with pytest.raises(WeightsError, match="no state dict found.*'epoch', 'config'"):
        read_state_dict(meta_only)
    with pytest.raises(FileNotFoundError, match="checkpoint not found"):
        read_state_dict(tmp_path / "absent.safetensors")


def test_weights_fingerprints(tmp_path):
    import hashlib

    from tumorboard.errors import MissingFileError

    m = random_tiny(seed=3)
    path = save_state_dict(m, tmp_path / "w.safetensors")
    assert file_fingerprint(path) == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(MissingFileError, match="checkpoint not found"):
        file_fingerprint(tmp_path / "none.pt")
    # the state-dict fingerprint follows the values, not the object, the file or the device
    fp = state_dict_fingerprint(m)
    assert fp.startswith("state-sha256:") and len(fp) == len("state-sha256:") + 64
    assert state_dict_fingerprint(read_state_dict(path)) == fp
    other = random_tiny(seed=3)
    with torch.no_grad():
        next(other.parameters()).view(-1)[0] += 1e-3
    assert state_dict_fingerprint(other) != fp
    half = {k: v.to(torch.bfloat16) for k, v in m.state_dict().items()}  # bf16 hashes too
    assert state_dict_fingerprint(half).startswith("state-sha256:")
    assert state_dict_fingerprint(half) != fp


def test_zip_checkpoint_with_a_flipped_tensor_byte_is_refused(tmp_path):
    import struct
    import zipfile

    path = tmp_path / "weights.pt"
    torch.save({"w": torch.arange(64, dtype=torch.float32)}, path)
    with zipfile.ZipFile(path) as zf:
        member = next(i for i in zf.infolist() if i.filename.endswith("/data/0"))
    data = bytearray(path.read_bytes())
    # the local header: 30 bytes, then the name and the extra field, then the stored bytes
    name_len, extra_len = struct.unpack("<HH", data[member.header_offset + 26 :][:4])
    start = member.header_offset + 30 + name_len + extra_len
    data[start + 17] ^= 0x40  # one bit of one float of the stored tensor
    path.write_bytes(bytes(data))
    loaded = torch.load(path, weights_only=True)  # torch alone reads the changed value
    assert not torch.equal(loaded["w"], torch.arange(64, dtype=torch.float32))
    with pytest.raises(WeightsError) as info:
        read_state_dict(path)
    assert str(path) in str(info.value) and member.filename in str(info.value)
    assert "CRC-32" in str(info.value)
