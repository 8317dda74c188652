"""``make gpu-check`` (benchmarks/gpu_check.py): targets, results files, README sync, the CLI.

The GPU figures themselves need a CUDA machine; here the driver's logic is checked on
hand-made step records, and the script runs in a subprocess the way a user runs it on a
machine without CUDA (it must say the figures are pending and write nothing) and with
``--allow-cpu`` (it must write a results file and its Markdown twin).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "gpu_check.py"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


gc = _load("tb_gpu_check", SCRIPT)


def _steps(**over):
    """Step records shaped like a full GPU run, every target met unless overridden."""
    embed = {
        "loader": {
            "rates": {"1": 400.0, "2": 790.0, "4": 1500.0, "15": 3400.0},
            "gpu_decode": {"patches_per_s": 3600.0, "max_uint8_diff": 3},
        },
        "bare": {"bf16 eager": {"cosine": 1.0}, "fp8 compiled": {"cosine": 0.9985}},
        "end_to_end": {
            "bf16 compiled svs-like": {"patches_per_s": 1400.0, "ratio": 2.8},
            "fp8 compiled svs-like": {"patches_per_s": 1700.0, "ratio": 3.4},
        },
        "idle": {"between_slides_share": 0.01, "idle_share": 0.03, "slides": 20},
    }
    kernels = {
        "results": [
            {"workload": "ABMIL fwd 64 bags", "anchor": "eager padded", "ratio": 2.5},
            {"workload": "ABMIL fwd 64 bags", "anchor": "torch.compile padded", "ratio": 2.1},
        ],
        "meta": {
            "figures": {
                "segment_scale": {"fwd_share_of_peak": 0.86, "fwd_bwd_share_of_peak": 0.88},
                "down_proj": {
                    "ratio_vs_gemm": 0.95,
                    "dispatcher_path": "cublas+scale",
                    "dispatcher_seconds": {"cublas+scale": 1.0, "triton": 1.1},
                },
            }
        },
    }
    for key, value in over.items():
        section, _, field = key.partition("__")
        target = embed if section == "embed" else kernels
        target[field] = value
    return {"embed": {"data": embed}, "kernels": {"data": kernels}}


def _verdicts(steps):
    return {t["workload"]: t["met"] for t in gc.evaluate_targets(steps)}


def test_every_target_is_met_on_figures_that_meet_them():
    v = _verdicts(_steps())
    assert len(v) == 8
    assert all(m is True for m in v.values()), v


def test_targets_missed_and_missing_are_told_apart():
    steps = _steps(
        embed__end_to_end={"bf16 compiled svs-like": {"patches_per_s": 1400.0, "ratio": 2.4}},
        embed__idle={"skipped": "time budget"},
    )
    v = _verdicts(steps)
    assert v["UNI2-h end to end, SVS-like, compiled bf16"] is False  # 2.4x < 2.5x
    assert v["the same, FP8"] is None  # no FP8 end-to-end figure: not measured
    assert v["GPU idle between slides, 20-slide run"] is None


def test_down_proj_counts_as_met_when_the_dispatcher_picks_the_faster_path():
    v = _verdicts(_steps())
    assert v["fused down_proj + scale + residual"] is True  # 0.95x, but the faster path chosen
    steps = _steps()
    figs = steps["kernels"]["data"]["meta"]["figures"]["down_proj"]
    figs["dispatcher_path"] = "triton"  # the slower one
    assert _verdicts(steps)["fused down_proj + scale + residual"] is False


def test_gpu_decode_must_reach_the_cpu_decode_rate_and_stay_within_8_levels():
    steps = _steps()
    steps["embed"]["data"]["loader"]["gpu_decode"] = {"patches_per_s": 3600.0, "max_uint8_diff": 9}
    assert _verdicts(steps)["patch loader, GPU decode"] is False
    steps["embed"]["data"]["loader"]["gpu_decode"] = {"patches_per_s": 3000.0, "max_uint8_diff": 2}
    assert _verdicts(steps)["patch loader, GPU decode"] is False  # slower than 3,400 on CPU


def test_gpu_slug_names_files_by_the_card():
    assert gc.gpu_slug("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"
    assert gc.gpu_slug("NVIDIA H200") == "h200"
    assert gc.gpu_slug(None) == "cpu"


def test_junit_counts_reads_passes_failures_and_skips(tmp_path):
    xml = tmp_path / "j.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="a" name="ok"/>'
        '<testcase classname="a" name="bad"><failure message="x"/></testcase>'
        '<testcase classname="b" name="err"><error message="y"/></testcase>'
        '<testcase classname="b" name="sk"><skipped message="no nvimgcodec"/></testcase>'
        '<testcase classname="c" name="cli"><failure message="AssertionError">'
        "ModuleNotFoundError: No module named 'polars.io'</failure></testcase>"
        "</testsuite></testsuites>"
    )
    c = gc.junit_counts(xml)
    assert (c["passed"], c["failed"], c["errors"], c["skipped"]) == (1, 1, 1, 1)
    assert c["failing"] == ["a::bad", "b::err"]
    assert "no nvimgcodec" in c["skipped_ids"][0]
    assert c["missing_module"] == 1 and c["missing"] == {"polars": ["c::cli"]}
    assert gc.junit_counts(tmp_path / "missing.xml") is None


def test_readme_gpu_section_is_generated_from_the_latest_results_file_of_each_gpu():
    text = (REPO / "docs" / "benchmarks.md").read_text()
    block = text.split(gc.README_BEGIN, 1)[1].split(gc.README_END, 1)[0]
    assert block == "\n" + gc.readme_section(gc.latest_per_gpu()), (
        "docs/benchmarks.md's GPU section is stale: run `make gpu-readme`"
    )
    gpus = {json.loads(p.read_text())["env"]["gpu"] for p in gc.latest_per_gpu()}
    for gpu in gpus:  # every card's newest figures are shown, none merged with another's
        assert f"### GPU results: {gpu}," in block


def _results_file(path: Path, gpu: str, date: str, steps: dict, runs=None) -> Path:
    env = {"gpu": gpu, "date_utc": date, "commit": "c0ffee", "cuda_available": True}
    data = {"schema": 1, "env": env, "command": "make gpu-check", "steps": steps,
            "wall_s": 10.0, **({"runs": runs} if runs else {})}  # fmt: skip
    path.write_text(json.dumps(data))
    return path


def test_latest_per_gpu_keeps_the_newest_file_of_each_card(tmp_path):
    a = _results_file(tmp_path / "h100-a.json", "NVIDIA H100 80GB HBM3", "2026-11-27 04:47", {})
    b = _results_file(tmp_path / "h100-b.json", "NVIDIA H100 80GB HBM3", "2026-11-27 08:00", {})
    c = _results_file(tmp_path / "h200.json", "NVIDIA H200", "2026-11-28 06:08", {})
    assert gc.latest_per_gpu(tmp_path) == [c, b]
    assert gc.latest_results(tmp_path) == c
    section = gc.readme_section([c, b])
    assert section.index("NVIDIA H200,") < section.index("NVIDIA H100 80GB HBM3,")
    assert "h200.json" in section and "h100-b.json" in section and "h100-a" not in section
    assert gc.latest_per_gpu(tmp_path / "none") == []
    assert "No GPU results file yet" in gc.readme_section([])
    assert a.exists()


def test_merge_folds_separate_calls_like_update(tmp_path):
    gpu = "NVIDIA H200"
    tests = {
        "status": "ok",
        "counts": {"passed": 3, "failed": 0, "errors": 0, "skipped": 0, "failing": []},
    }
    e1 = {"status": "ok", "seconds": 100.0, "data": {
        "sections": ["e2e"], "lines": ["run 1 table"], "trident_style": {"svs-like": 250.0},
        "end_to_end": {"bf16 compiled svs-like": {"patches_per_s": 1200.0, "peer": 250.0,
                                                  "ratio": 4.8}}}}  # fmt: skip
    e2 = {"status": "ok", "seconds": 50.0, "data": {
        "sections": ["idle"], "lines": ["### header", "run 2 table"],
        "end_to_end": {"bf16 compiled svs-like": {"skipped": "time budget", "peer": 240.0}},
        "idle": {"between_slides_share": 0.16, "idle_share": 0.18}}}  # fmt: skip
    f1 = _results_file(tmp_path / "1.json", gpu, "2026-11-28 06:08", {"tests": tests, "embed": e1})
    run2 = [{"commit": "beef", "date_utc": "2026-11-28 06:16", "command": "x", "steps": ["embed"]}]
    f2 = _results_file(tmp_path / "2.json", gpu, "2026-11-28 06:16", {"embed": e2}, runs=run2)
    out = gpu_check("merge", str(f1), str(f2), "--results-dir", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    merged = json.loads((tmp_path / "out" / "h200-2026-11-28.json").read_text())
    assert [r["date_utc"] for r in merged["runs"]] == ["2026-11-28 06:08", "2026-11-28 06:16"]
    assert merged["steps"]["tests"] == tests  # not re-run later: kept
    e2e = merged["steps"]["embed"]["data"]["end_to_end"]["bf16 compiled svs-like"]
    assert e2e["patches_per_s"] == 1200.0  # a later skip is no measurement
    assert merged["steps"]["embed"]["data"]["idle"]["between_slides_share"] == 0.16
    assert merged["wall_s"] == 20.0
    idle = next(t for t in merged["targets"] if t["workload"].startswith("GPU idle"))
    assert idle["met"] is False and "16.00%" in idle["measured"]
    md = (tmp_path / "out" / "h200-2026-11-28.md").read_text()
    assert md == gc.render_markdown(merged) and "`merge`" in md


def test_merge_refuses_files_of_different_cards_and_non_results(tmp_path):
    f1 = _results_file(tmp_path / "1.json", "NVIDIA H200", "2026-11-28 06:08", {})
    f2 = _results_file(tmp_path / "2.json", "NVIDIA H100 80GB HBM3", "2026-11-28 06:16", {})
    out = gpu_check("merge", str(f1), str(f2), "--results-dir", str(tmp_path / "o"))
    assert out.returncode != 0 and "different GPUs" in out.stderr
    (tmp_path / "x.json").write_text("{}")
    out = gpu_check("merge", str(f1), str(tmp_path / "x.json"), "--results-dir", str(tmp_path))
    assert out.returncode != 0 and "x.json is not a gpu-check results file" in out.stderr
    out = gpu_check("merge", "--results-dir", str(tmp_path))
    assert out.returncode != 0 and "name the results files" in out.stderr
    out = gpu_check(str(f1))
    assert out.returncode != 0
    assert not (tmp_path / "o").exists()


def test_makefile_passes_shell_variables_in_gpu_check_args_through():
    # `make gpu-check GPU_CHECK_ARGS='--copy-to $OUT'` once copied to a folder named 'UT'
    out = subprocess.run(["make", "-n", "-C", str(REPO), "gpu-check",
                          "GPU_CHECK_ARGS=--copy-to $OUT"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "gpu_check.py --copy-to $OUT" in out.stdout


def test_results_files_in_the_repository_are_complete():
    files = sorted((REPO / "benchmarks" / "results").glob("*.json"))
    for f in files:
        data = json.loads(f.read_text())
        env = data["env"]
        assert env["cuda_available"] and env["gpu"] and env["commit"], f
        assert {t["workload"] for t in data["targets"]} >= {"fused down_proj + scale + residual"}
        md = f.with_suffix(".md")
        assert md.read_text() == gc.render_markdown(data), f"{md} does not match {f.name}"


def gpu_check(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``benchmarks/gpu_check.py ARGS`` as a user runs it (CUDA hidden: a CPU run)."""
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},  # no CUDA, even on a GPU machine
    )


def test_without_cuda_the_command_says_pending_and_writes_nothing():
    before = sorted((REPO / "benchmarks" / "results").glob("*"))
    out = gpu_check("--budget", "30")
    assert out.returncode == 0, out.stderr
    assert "no CUDA device here" in out.stdout and "pending" in out.stdout
    assert sorted((REPO / "benchmarks" / "results").glob("*")) == before


def test_allow_cpu_writes_a_results_file_and_its_markdown(tmp_path):
    out = gpu_check("--allow-cpu", "--steps", "env,kernels", "--results-dir", str(tmp_path),
                    "--copy-to", str(tmp_path / "copy"), "--budget", "100",
                    timeout=240)  # fmt: skip
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    files = sorted(tmp_path.glob("*.json"))
    assert len(files) == 1, list(tmp_path.iterdir())
    data = json.loads(files[0].read_text())
    assert data["steps"]["kernels"]["status"] == "ok"
    assert "no CUDA" in json.dumps(data["steps"]["kernels"]["data"]["meta"]["skipped"])
    assert all(t["met"] is None for t in data["targets"])  # nothing measured on a CPU
    md = files[0].with_suffix(".md").read_text()
    assert "#### Targets" in md and "not measured" in md
    assert (tmp_path / "copy" / files[0].name).exists()
    assert (tmp_path / "copy" / "gpu-check-logs.tar.gz").exists()


def test_update_says_when_it_finds_no_earlier_file(tmp_path):
    # a lent machine re-copies the tree for each command: an --update run there starts afresh
    args = ("--allow-cpu", "--update", "--steps", "env", "--results-dir", str(tmp_path))
    first = gpu_check(*args)
    assert first.returncode == 0, first.stderr
    assert "found no results file" in first.stdout and "gpu_check.py merge" in first.stdout
    again = gpu_check(*args)
    assert again.returncode == 0 and "found no results file" not in again.stdout
    (data,) = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert len(data["runs"]) == 2


def test_unknown_step_is_refused_with_the_valid_names():
    out = gpu_check("--steps", "env,kernals")
    assert out.returncode == 2
    assert "kernals" in out.stderr and "kernels" in out.stderr


def test_idle_shares_hand_worked():
    eg = _load("tb_embed_gpu", REPO / "benchmarks" / "_embed_gpu.py")
    # two slides: forwards [0,10], [10,20] | gap 5 | [25,35]; then a 2 ms gap inside slide 2
    spans = [(0.0, 10.0), (10.0, 20.0), (25.0, 35.0), (37.0, 40.0)]
    r = eg.idle_shares(spans, [2, 2])
    assert r["window_s"] == pytest.approx(0.040)
    assert r["idle_share"] == pytest.approx(7 / 40)
    assert r["between_slides_share"] == pytest.approx(5 / 40)


def test_decode_variants_set_and_restore_the_decoder_environment(monkeypatch):
    eg = _load("tb_embed_gpu", REPO / "benchmarks" / "_embed_gpu.py")
    monkeypatch.setenv("TUMORBOARD_NVIMGCODEC_BACKENDS", "gpu_only")
    monkeypatch.delenv("TUMORBOARD_NVIMGCODEC_OPTIONS", raising=False)
    seen = []

    def rate(grid, **kw):
        seen.append((os.environ["TUMORBOARD_NVIMGCODEC_BACKENDS"],
                     os.environ["TUMORBOARD_NVIMGCODEC_OPTIONS"], kw["decode"]))  # fmt: skip
        if "hybrid" in seen[-1][0]:
            raise RuntimeError("no hybrid backend in this build")
        return 1000.0 + len(seen)

    monkeypatch.setattr(eg, "loader_rate", rate)
    out = eg.decode_variants([], threads=2, batch=64, size=224, limit=128, left=lambda: 600.0)
    assert [v[:2] for v in seen] == list(eg.DECODE_VARIANTS.values())
    assert {v[2] for v in seen} == {"gpu"}
    assert out["hw_gpu_only,gpu_only"] == {"patches_per_s": 1001.0}
    assert out["hybrid_cpu_gpu"]["error"].startswith("RuntimeError: no hybrid backend")
    assert os.environ["TUMORBOARD_NVIMGCODEC_BACKENDS"] == "gpu_only"
    assert "TUMORBOARD_NVIMGCODEC_OPTIONS" not in os.environ
    late = eg.decode_variants([], threads=2, batch=64, size=224, limit=128, left=lambda: 10.0)
    assert all(v == {"skipped": "time budget"} for v in late.values())


def test_boundary_report_hand_worked():
    eg = _load("tb_embed_gpu", REPO / "benchmarks" / "_embed_gpu.py")
    # three slides of two forwards; boundary 1: the next first batch submitted 3 ms after the
    # GPU went idle (host late), boundary 2: submitted 50 ms early, the GPU still idle 4 ms
    spans = [(0, 10), (10, 20), (25, 35), (35, 45), (49, 59), (59, 69)]
    host = {
        "submit": [0, 5, 23, 30, -5, 50],
        "launch": [(0, 1), (5, 6), (23, 24), (30, 31), (-5, 47), (50, 51)],
        "finish": [(30, 40), (60, 80)],
    }
    r = eg.boundary_report([tuple(map(float, s)) for s in spans], [2, 2, 2], host)
    assert r["boundaries"] == 2
    assert r["gap_ms"] == pytest.approx((5 + 4) / 2)
    assert r["submit_after_idle_ms"] == pytest.approx((3 + -50) / 2)
    assert r["launch_end_after_idle_ms"] == pytest.approx((4 + 2) / 2)
    assert r["start_after_launch_ms"] == pytest.approx((2 + 54) / 2)
    assert r["host_late_share"] == pytest.approx(0.5)
    assert r["finish_ms"] == pytest.approx(15.0)
    assert eg.boundary_report([(0.0, 1.0)], [1], host) == {"boundaries": 0}


def test_update_merges_a_partial_rerun_record_by_record():
    old = {
        "status": "ok",
        "seconds": 100.0,
        "data": {
            "end_to_end": {
                "bf16 compiled svs-like": {"patches_per_s": 1000.0, "peer": 350.0},
                "bf16 --decode gpu svs-like": {"failed": "a batch on cuda:0", "peer": 350.0},
            },
            "loader": {"rates": {"15": 2800.0}, "gpu_decode": {"patches_per_s": 900.0}},
            "idle": {"error": "FileNotFoundError"},
            "trident_style": {"svs-like": 350.0},
            "lines": ["run 1 table"],
        },
    }
    new = {
        "status": "ok",
        "seconds": 50.0,
        "data": {
            "sections": ["decode", "idle"],
            "end_to_end": {
                "bf16 --decode gpu svs-like": {"patches_per_s": 370.0, "peer": 110.0},
                "bf16 compiled svs-like": {"skipped": "time budget", "peer": 110.0},
            },
            "loader": {"gpu_decode": {"patches_per_s": 550.0}},
            "idle": {"skipped": "time budget"},
            "trident_style": {"svs-like": 110.0},
            "lines": ["### header", "run 2 table"],
        },
    }
    m = gc.merge_step("embed", old, new, {"commit": "abc123", "date_utc": "2026-11-27 05:01"})
    e2e = m["data"]["end_to_end"]
    assert e2e["bf16 --decode gpu svs-like"] == {"patches_per_s": 370.0, "peer": 110.0}
    assert e2e["bf16 compiled svs-like"]["patches_per_s"] == 1000.0  # a skip is no measurement
    assert m["data"]["loader"] == {"rates": {"15": 2800.0}, "gpu_decode": {"patches_per_s": 550.0}}
    assert m["data"]["idle"] == {"error": "FileNotFoundError"}
    assert m["data"]["trident_style"] == {"svs-like": 350.0}  # the re-run's own goes to reruns
    assert m["data"]["reruns"][0]["trident_style"] == {"svs-like": 110.0}
    assert m["data"]["lines"][0] == "run 1 table" and m["data"]["lines"][-1] == "run 2 table"
    assert any("abc123" in ln for ln in m["data"]["lines"])
    assert m["seconds"] == 150.0


def test_update_replaces_kernel_rows_by_workload_and_anchor():
    row = {"workload": "fused down_proj T=16 [path: fused]", "anchor": "plain GEMM", "ratio": 0.9}
    keep = {"workload": "ABMIL fwd 64 bags [path: persistent TMA]", "anchor": "eager padded"}
    old = {"data": {"results": [keep, row], "meta": {"figures": {"down_proj": {"a": 1}, "s": 2}}}}
    new_row = {**row, "workload": "fused down_proj T=16 [path: cublas]", "ratio": 0.95}
    new = {"status": "ok", "data": {"results": [new_row], "meta": {"figures": {"down_proj": {}}}}}
    m = gc.merge_step("kernels", old, new, {"commit": "c"})
    assert m["data"]["results"] == [keep, new_row]
    assert m["data"]["meta"]["figures"] == {"down_proj": {}, "s": 2}
    failed = gc.merge_step("kernels", old, {"status": "timeout", "data": None}, {"commit": "c"})
    assert failed["data"] == old["data"] and failed["rerun"]["status"] == "timeout"


def test_library_down_proj_scale_pass_restores_its_output_between_autotuning_trials():
    # run 1 on an H100: the in-place pass without restore_value returned inf on the first call
    pytest.importorskip("triton")
    from tumorboard.kernels import segment_scale

    assert "y_ptr" in (segment_scale._fwd_kernel.restore_value or [])


def test_backend_accepts_batches_on_the_indexed_form_of_its_device():
    torch = pytest.importorskip("torch")
    from tumorboard.embed._backends import _same_device

    assert _same_device(torch.device("cpu"), torch.device("cpu"))
    assert not _same_device(torch.device("cpu"), torch.device("cuda", 0))
    assert _same_device(torch.device("cuda", 1), torch.device("cuda", 1))
    assert not _same_device(torch.device("cuda", 0), torch.device("cuda", 1))
