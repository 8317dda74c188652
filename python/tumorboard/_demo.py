"""``tumorboard demo``: the main jobs end to end on generated data, with no downloads.

1. Scoring: per-(model, task) accuracy with patient-clustered 95% CIs for a generated sample of
   MTBBench-style agent answers, and a paired comparison of the two best models.
2. Slides (needs the ``slides`` and ``embed`` extras: tifffile, a slide reader, h5py, torch):
   generates a small pyramidal sample slide, tiles it, embeds it with a tiny random-weight
   UNI2-h-style encoder, and runs the agent tools on a region of it.
3. Logs: records a small sample trajectory log (with the tool calls of step 2 when it ran) in a
   Parquet store and scores it with the MTBBench scorer.

Outputs go to ``out`` (default: a fresh temporary folder); an existing non-empty folder gets a
fresh sub-folder, so user files are never overwritten. Parts whose dependencies are missing are
skipped with the reason printed.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from .errors import InvalidArgumentError
from .stats import BootstrapOptions, bootstrap, paired_bootstrap

MODELS = ("gpt-4o", "llama-3.3-70b", "qwen2.5-72b")
TASKS = ("digital_pathology", "hematology", "outcome_prediction", "recurrence")


def generate_answers(*, seed: int = 0, n_patients: int = 40, n_questions: int = 5) -> pl.DataFrame:
    """Generate a reproducible sample of MTBBench-style agent answers.

    Each patient answers ``n_questions`` per task for every model in ``MODELS`` and task in
    ``TASKS``; correctness depends on the model, the task and a per-patient difficulty (so
    questions are nested in patients).

    Parameters
    ----------
    seed : int, default 0
        Seed of the random generator.
    n_patients : int, default 40
        Patients per (model, task).
    n_questions : int, default 5
        Questions per patient and task.

    Returns
    -------
    polars.DataFrame
        One row per answer: ``model``, ``task``, ``patient_id``, ``question``, ``correct``.
    """
    rng = np.random.default_rng(seed)
    skill = {"gpt-4o": 0.8, "llama-3.3-70b": 0.45, "qwen2.5-72b": 0.3}
    task_shift = dict(zip(TASKS, (0.2, 0.0, -0.4, -0.2), strict=True))
    difficulty = rng.normal(0.0, 0.8, size=n_patients)
    noise = rng.random((len(MODELS), len(TASKS), n_patients, n_questions))
    rows = []
    for mi, model in enumerate(MODELS):
        for ti, task in enumerate(TASKS):
            logit = skill[model] + task_shift[task] - difficulty[:, None]
            p = 1.0 / (1.0 + np.exp(-logit))
            correct = noise[mi, ti] < p
            patients = np.repeat(np.arange(n_patients), n_questions)
            rows.append(
                pl.DataFrame(
                    {
                        "model": model,
                        "task": task,
                        "patient_id": [f"P{p:03d}" for p in patients],
                        "question": np.tile(np.arange(n_questions), n_patients),
                        "correct": correct.ravel(),
                    }
                )
            )
    return pl.concat(rows)


def _score_generated(*, seed: int, n_resamples: int) -> None:
    """Score the generated answers and print the CI table and a paired comparison."""
    df = generate_answers(seed=seed)
    print(f"tumorboard demo: {df.height} generated answers "
          f"({len(MODELS)} models x {len(TASKS)} tasks x 40 patients x 5 questions)\n")  # fmt: skip
    res = bootstrap(
        df["correct"].to_numpy(),
        groups=df.select("model", "task"),
        clusters=df["patient_id"],
        options=BootstrapOptions(n_resamples=n_resamples, seed=seed),
    )
    table = (
        res.to_polars()
        .select("model", "task", "n", "estimate", "ci_low", "ci_high", "se")
        .rename({"estimate": "accuracy"})
    )
    with pl.Config(tbl_rows=50, tbl_cols=10, float_precision=3, tbl_hide_dataframe_shape=True):
        print("Accuracy per (model, task), 95% percentile CI, patients resampled as clusters:")
        print(table)
    a = df.filter(pl.col("model") == MODELS[0]).sort("task", "patient_id", "question")
    b = df.filter(pl.col("model") == MODELS[1]).sort("task", "patient_id", "question")
    paired = paired_bootstrap(
        a["correct"].to_numpy(),
        b["correct"].to_numpy(),
        clusters=a["patient_id"],
        options=BootstrapOptions(n_resamples=n_resamples, seed=seed),
    )
    print(
        f"\nPaired bootstrap {MODELS[0]} - {MODELS[1]} (all tasks): "
        f"difference {paired.difference:+.3f}, "
        f"95% CI [{paired.ci_low:+.3f}, {paired.ci_high:+.3f}], "
        f"p = {paired.p_value:.4f}"
    )


# ---- output folder ---------------------------------------------------------------------------


def _fresh_out(out: str | os.PathLike[str] | None) -> Path:
    """Return a folder the demo owns.

    That is ``out`` when it is missing or empty, else a new sub-folder of it; a new temporary
    folder without ``out``.
    """
    if out is None:
        return Path(tempfile.mkdtemp(prefix="tumorboard-demo-"))
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise InvalidArgumentError(f"out: {p} exists and is not a folder")
    if p.is_dir() and any(p.iterdir()):
        return Path(tempfile.mkdtemp(prefix="tumorboard-demo-", dir=p))
    p.mkdir(parents=True, exist_ok=True)
    return p


def _missing(*modules: str) -> list[str]:
    """Return the modules that cannot be imported."""
    return [m for m in modules if importlib.util.find_spec(m) is None]


# ---- the sample slide ------------------------------------------------------------------------

SLIDE_MPP = 0.5  # 20x
SLIDE_SIZE = (2048, 1536)  # level-0 (width, height)


def sample_slide_image(*, seed: int = 0, width: int = SLIDE_SIZE[0],
                       height: int = SLIDE_SIZE[1]) -> np.ndarray:  # fmt: skip
    """Draw a synthetic IHC-like slide image.

    Two tissue fragments (pale eosin-pink stroma) with haematoxylin-blue nuclei, about a third
    of them DAB-brown, on white glass.

    Parameters
    ----------
    seed : int, default 0
        Seed of the random generator.
    width, height : int, default ``SLIDE_SIZE``
        Level-0 size in pixels (2048 x 1536).

    Returns
    -------
    numpy.ndarray
        ``[height, width, 3]`` uint8 RGB image.
    """
    rng = np.random.default_rng(seed)
    img = np.full((height, width, 3), 244, np.float32)
    yy, xx = np.mgrid[0:height, 0:width]
    fragments = ((0.3, 0.45, 0.22, 0.3), (0.72, 0.55, 0.18, 0.28))
    tissue = np.zeros((height, width), bool)
    for cx, cy, rx, ry in fragments:
        e = ((xx - cx * width) / (rx * width)) ** 2 + ((yy - cy * height) / (ry * height)) ** 2
        tissue |= e <= 1.0
    stroma = np.array([232, 178, 205], np.float32)
    img[tissue] = stroma + rng.normal(0, 6, (int(tissue.sum()), 3))
    ys, xs = np.nonzero(tissue[::8, ::8])
    pick = rng.choice(len(ys), size=min(len(ys), 900), replace=False)
    for k in pick:
        cy, cx = int(ys[k]) * 8 + 4, int(xs[k]) * 8 + 4
        r = int(rng.integers(5, 9))
        brown = rng.random() < 0.35
        color = np.array([150, 95, 45] if brown else [95, 70, 150], np.float32)
        y0, y1, x0, x1 = (
            max(cy - r, 0),
            min(cy + r + 1, height),
            max(cx - r, 0),
            min(cx + r + 1, width),
        )
        disk = (yy[y0:y1, x0:x1] - cy) ** 2 + (xx[y0:y1, x0:x1] - cx) ** 2 <= r * r
        img[y0:y1, x0:x1][disk] = color + rng.normal(0, 8, (int(disk.sum()), 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def write_sample_slide(path: Path, image: np.ndarray, *, mpp: float = SLIDE_MPP,
                       levels: int = 3) -> Path:  # fmt: skip
    """Write ``image`` as a pyramidal tiled TIFF, laid out as scanners' generic TIFFs are.

    JPEG 256 px tiles, one IFD per 2x level, resolution tags in pixels per centimetre.

    Parameters
    ----------
    path : pathlib.Path
        The TIFF file to write.
    image : numpy.ndarray
        ``[H, W, 3]`` uint8 level-0 image.
    mpp : float, default ``SLIDE_MPP``
        Level-0 microns per pixel (0.5, i.e. 20x).
    levels : int, default 3
        Pyramid levels, each half the size of the previous one.

    Returns
    -------
    pathlib.Path
        ``path``.
    """
    import tifffile

    with tifffile.TiffWriter(path) as tif:
        for i in range(levels):
            lv = np.ascontiguousarray(image[:: 2**i, :: 2**i])
            res = 1e4 / (mpp * 2**i)
            tif.write(lv, tile=(256, 256), compression="jpeg", compressionargs={"level": 90},
                      photometric="rgb", subfiletype=1 if i else 0, resolution=(res, res),
                      resolutionunit="CENTIMETER")  # fmt: skip
    return path


def _demo_tokenizer(path: Path, words: list[str]) -> Path:
    """Train and save a throwaway byte-level BPE tokenizer JSON with CONCH's special tokens.

    The real CONCH tokenizer file comes with the gated weights.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<pad>", "<start_of_text>", "<end_of_text>"],
        show_progress=False,
    )
    tok.train_from_iterator(words * 10, trainer)
    tok.save(str(path))
    return path


def _slide_part(out: Path, seed: int, lines: list[tuple[str, str]]) -> dict[str, Any] | None:
    """Generate, tile and embed the sample slide, and run the tools on it.

    Returns the tool outputs, or None (with the reason printed) when dependencies are missing.
    """
    need = _missing("tifffile", "h5py", "torch", "PIL", "imagecodecs")
    if _missing("openslide") and _missing("tiffslide"):
        need.append("openslide-python or tiffslide")
    if need:
        print(f"\n[slides] skipped: missing {', '.join(need)} "
              "(pip install 'tumorboard[slides,embed]')")  # fmt: skip
        return None
    from . import models, slides, tools
    from .embed import EmbedOptions, embed_slides, read_features

    t0 = time.perf_counter()
    slide_dir = out / "slides"
    slide_dir.mkdir(parents=True, exist_ok=True)
    image = sample_slide_image(seed=seed)
    path = write_sample_slide(slide_dir / "sample_case.tif", image)
    lines.append((str(path), "the generated pyramidal sample slide (3 levels, 20x, JPEG tiles)"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # random weights are the point here
        report = embed_slides([path], model="uni2-tiny", out=out / "embed",
                              options=EmbedOptions(batch_size=32), progress=False)  # fmt: skip
    res = report.results[0]
    if res.status != "done":
        print(f"\n[slides] embedding failed: {res.error}")
        return None
    feats, coords, _ = read_features(res.features_path)
    print(f"\n[slides] sample slide {path.name}: {image.shape[1]}x{image.shape[0]} px at "
          f"{SLIDE_MPP} um/px; {len(coords)} tissue patches of 256 px at 20x embedded with "
          f"uni2-tiny (random weights) -> features {feats.shape}, "
          f"{report.patches_per_second:.0f} patches/s")  # fmt: skip
    cpath = slides.coords_path(out / "embed", res.name, magnification=20, patch_size=256)
    lines += [
        (str(cpath), "patch coordinates, TRIDENT coords .h5 layout"),
        (str(res.features_path), "patch embeddings [N, D] + coords, TRIDENT features .h5"),
        (str(res.parquet_path), "the same embeddings as Parquet (slide, x, y, embedding)"),
    ]
    # a 512x512 region of interest in the first tissue fragment
    with slides.open(path) as s:
        roi = s.read_region((int(0.3 * 2048) - 256, int(0.45 * 1536) - 256), 0, (512, 512))
    roi = np.asarray(roi)[..., :3]
    from PIL import Image

    roi_path = slide_dir / "sample_case_roi.png"
    Image.fromarray(roi).save(roi_path)
    lines.append((str(roi_path), "a 512x512 region of interest read from the slide (tool input)"))
    dab = tools.dab_positive_fraction(roi_path)
    print(f"[tools] dab_positive_fraction: {dab.percentage:.1f}% of the tissue area is "
          f"DAB-positive (no weights needed)")  # fmt: skip
    outputs: dict[str, Any] = {"dab_positive_fraction": dab.to_dict()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        enc = models.load("uni2-tiny", device="cpu", dtype="fp32")
        reg = models.load("mtbbench-regressor", in_dim=enc.embed_dim, hidden=16, device="cpu")
        ihc = tools.ihc_positive_percentage(roi_path, encoder=enc, regressor=reg)
    print(f"[tools] ihc_positive_percentage: {ihc.percentage:.1f}% over {ihc.n_patches} tiles "
          "(random weights: the number is meaningless, the pipeline is real)")  # fmt: skip
    outputs["ihc_positive_percentage"] = ihc.to_dict()
    if _missing("tokenizers"):
        print("[tools] conch_zero_shot skipped: missing tokenizers (pip install tumorboard[embed])")
    else:
        labels = ["invasive carcinoma", "benign stroma", "necrosis"]
        tok = _demo_tokenizer(slide_dir / "demo_tokenizer.json", labels)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            conch = models.load_conch("conch-tiny", tokenizer=tok, device="cpu", image_size=224)
        cz = tools.conch_zero_shot(roi_path, labels, model=conch)
        print(f"[tools] conch_zero_shot: {cz.reply} (random weights, throwaway tokenizer)")
        outputs["conch_zero_shot"] = {k: v for k, v in cz.to_dict().items()}
    print(f"[slides] done in {time.perf_counter() - t0:.1f} s")
    return outputs


# ---- the sample log --------------------------------------------------------------------------


def _log_part(out: Path, seed: int, n_resamples: int, tool_outputs: dict[str, Any] | None,
              lines: list[tuple[str, str]]) -> None:  # fmt: skip
    """Record a small MTBBench-style log with the Recorder and score it."""
    from .score import mtbbench
    from .traj import Recorder, Store

    rng = np.random.default_rng(seed + 1)
    store = Store(out / "trajectories")
    options = ["A) adenocarcinoma", "B) squamous cell carcinoma", "C) lymphoma", "D) benign"]
    files = ["sample_case_roi.png", "pathology_report.txt"]
    skill = {"agent-with-tools": 0.75, "agent-without-tools": 0.5}
    for model, p_right in skill.items():
        with_tools = model == "agent-with-tools"
        with Recorder(store, benchmark="mtbbench", track="multimodal", model=model,
                      tools=with_tools) as rec:  # fmt: skip
            for patient in range(12):
                for q, task in enumerate(("digital_pathology", "outcome_prediction")):
                    gold = "ABCD"[(patient + q) % 4]
                    with rec.item(patient_id=f"P{patient:02d}", item_id=f"q{q}", task=task,
                                  question=f"Sample question {q} for patient {patient}",
                                  options=options, gold=gold) as it:  # fmt: skip
                        it.request_files(["sample_case_roi.png"], available=files)
                        if with_tools and tool_outputs:
                            for tool, output in tool_outputs.items():
                                it.tool_call(tool, input={"image": "sample_case_roi.png"},
                                             output=output)  # fmt: skip
                        right = rng.random() < p_right
                        letter = gold if right else "ABCD"[("ABCD".index(gold) + 1) % 4]
                        it.answer(f"[ANSWER: {letter}]")
    items = store.items(with_runs=True).collect()
    options = BootstrapOptions(n_resamples=n_resamples, seed=seed)
    report = mtbbench.score(items, options=options, cluster="patient_id")
    md = out / "report.md"
    report.to_markdown(md)
    acc = report.table.filter((pl.col("metric") == "accuracy") & (pl.col("task") == "overall"))
    print(f"\n[logs] recorded {items.height} answers of 2 agents in a Parquet trajectory store "
          "and scored them with the MTBBench scorer (patient-clustered 95% CIs):")  # fmt: skip
    for row in acc.select("model", "estimate", "ci_low", "ci_high").iter_rows(named=True):
        print(f"  {row['model']:<20} overall accuracy {row['estimate']:.3f} "
              f"[{row['ci_low']:.3f}, {row['ci_high']:.3f}]")  # fmt: skip
    lines += [
        (str(store.path), "trajectory store (runs/items/events Parquet parts + manifest)"),
        (str(md), "the MTBBench score report (Markdown table)"),
    ]


def run_demo(
    *, seed: int = 0, n_resamples: int = 1000, out: str | os.PathLike[str] | None = None
) -> Path:
    """Run the demo (see the module docstring) and return the output folder.

    Parameters
    ----------
    seed : int, default 0
        Seed of the generated data and of the bootstrap.
    n_resamples : int, default 1000
        Bootstrap resamples of the confidence intervals.
    out : str or os.PathLike, optional
        Output folder: used when missing or empty, else a fresh sub-folder of it is; a fresh
        temporary folder when None.

    Returns
    -------
    pathlib.Path
        The folder the outputs were written to.
    """
    _score_generated(seed=seed, n_resamples=n_resamples)
    folder = _fresh_out(out)
    lines: list[tuple[str, str]] = []
    tool_outputs = None
    try:
        tool_outputs = _slide_part(folder, seed, lines)
    except ImportError as exc:
        print(f"\n[slides] skipped: {exc}")
    _log_part(folder, seed, n_resamples, tool_outputs, lines)
    print(f"\nOutputs (under {folder}):")
    for path, meaning in lines:
        print(f"  {os.path.relpath(path, folder)}\n      {meaning}")
    return folder
