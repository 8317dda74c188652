"""ONNX export and the onnxruntime backend (tumorboard.models.onnx).

Oracle: the torch module the graph was exported from (parity <= 1e-4 on tiny configs, at batch
sizes other than the traced one), and the ONNX checker / graph signature for the dynamic axis.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from tumorboard import models  # noqa: E402


def tiny(name, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", models.RandomWeightsWarning)
        m = models.load(name, device="cpu", **kw)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        for pname, p in m.named_parameters():
            if pname.endswith("gamma"):  # LayerScale near 1 so that every block counts
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.add_(0.05 * torch.randn(p.shape, generator=g))
    return m


@pytest.mark.parametrize(
    ("name", "options"),
    [("uni2-tiny", {}), ("conch-tiny", {}), ("uni2-tiny", {"image_size": 112})],
)
def test_onnx_matches_torch(tmp_path, name, options):
    m = tiny(name, **options)
    path = models.export_onnx(m, tmp_path / f"{name}.onnx", batch_size=2)
    graph = onnx.load(str(path))
    onnx.checker.check_model(graph)
    dims = graph.graph.input[0].type.tensor_type.shape.dim
    s = m.image_size
    assert [d.dim_param or d.dim_value for d in dims] == ["batch", 3, s, s]
    enc = models.OnnxEncoder(path, device="cpu")
    assert (enc.name, enc.embed_dim, enc.image_size) == (m.name, m.embed_dim, s)
    assert enc.mean == pytest.approx(m.mean) and enc.std == pytest.approx(m.std)
    assert enc.interpolation == m.interpolation and enc.device == "cpu"
    for batch in (1, 3):
        x = torch.randn(batch, 3, s, s, generator=torch.Generator().manual_seed(batch))
        with torch.no_grad():
            want = m(x)
        got_t = enc(x)
        got_np = enc(x.numpy())
        assert isinstance(got_t, torch.Tensor) and isinstance(got_np, np.ndarray)
        assert got_t.shape == got_np.shape == (batch, m.embed_dim)
        torch.testing.assert_close(got_t, want, atol=1e-4, rtol=0)
        np.testing.assert_allclose(got_np, want.numpy(), atol=1e-4, rtol=0)
        assert float(want.abs().max()) > 1e-2  # a non-trivial output, not a vanishing one


def test_onnx_rejects_wrong_inputs(tmp_path):
    m = tiny("uni2-tiny")
    enc = models.OnnxEncoder(models.export_onnx(m, tmp_path / "u.onnx"), device="cpu")
    with pytest.raises(ValueError, match=r"expected images \[B, 3, 224, 224\]"):
        enc(np.zeros((1, 3, 112, 112), np.float32))
    with pytest.raises(TypeError, match="numpy array or a torch tensor"):
        enc([[0.0]])
    with pytest.raises(ValueError, match="float32 or float16"):
        models.export_onnx(m.to(torch.bfloat16), tmp_path / "bf16.onnx")
    with pytest.raises(TypeError, match="no 'embed_dim'"):
        models.export_onnx(torch.nn.Linear(2, 2), tmp_path / "lin.onnx")
    from onnx import TensorProto, helper

    node = helper.make_node("Identity", ["x"], ["y"])
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2]) for n in ("x", "y")]
    plain = tmp_path / "plain.onnx"
    graph = helper.make_graph([node], "g", io[:1], io[1:])
    opset = [helper.make_opsetid("", 17)]
    onnx.save(helper.make_model(graph, opset_imports=opset, ir_version=8), str(plain))
    with pytest.raises(ValueError, match="no tumorboard metadata"):
        models.OnnxEncoder(plain, device="cpu")


def test_onnx_encoder_and_tokenizer_work_without_torch(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    path = models.export_onnx(tiny("uni2-tiny"), tmp_path / "u.onnx")
    x = np.random.default_rng(0).normal(size=(2, 3, 224, 224)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    want = models.OnnxEncoder(path, device="cpu")(x)
    code = (
        "import sys; sys.modules['torch'] = None\n"  # torch cannot be imported
        "import numpy as np\n"
        "from tumorboard.models import OnnxEncoder, ConchTokenizer\n"
        f"enc = OnnxEncoder({str(path)!r}, device='auto')\n"
        f"np.save({str(tmp_path / 'y.npy')!r}, enc(np.load({str(tmp_path / 'x.npy')!r})))\n"
        "try:\n"
        "    from tumorboard.models import load\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    src = str(Path(models.__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": src}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert res.returncode == 0, res.stderr
    assert "needs torch, which is not installed" in res.stdout and "[embed]'" in res.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), want)
