"""What the ```python blocks under docs/ expect to find before they run.

A block of a docs page that is preceded by the comment ``<!-- docs-setup: NAME -->`` runs (in
tests/test_docs.py, in a subprocess, in an empty folder) after ``PRELUDES[NAME]()``: the
function writes the files the block reads into the current folder and returns the variables
the block uses without defining them (its reader's own data), which become the block's
globals. The data are synthetic but shaped as a user's would be: answers with patients nested
in tasks, scorer frames with each benchmark's columns, a pyramidal slide in Aperio's layout, a
trajectory store written by the Recorder, checkpoints of the right classes with random weights.

Each prelude imports what it needs when it runs, so collecting the tests imports nothing heavy.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

Prelude = Callable[[], dict[str, Any]]
PRELUDES: dict[str, Prelude] = {}

TOOLS = ["Anatomy Classifier", "Modality Classifier", "Organ Segmentor", "Lesion Segmentor"]
OPTIONS = ["A) adenocarcinoma", "B) squamous cell carcinoma", "C) lymphoma", "D) benign"]


def prelude(fn: Prelude) -> Prelude:
    """Register ``fn`` under its name (``stats`` for ``stats``)."""
    PRELUDES[fn.__name__] = fn
    return fn


def _rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


# ---- stats, text and the scorers: frames and arrays ---------------------------------------------


@prelude
def stats() -> dict[str, Any]:
    import polars as pl
    from tumorboard._demo import generate_answers

    rng = _rng()
    answers = generate_answers(seed=0, n_patients=30, n_questions=4)
    answers.write_parquet("answers.parquet")
    a = answers.filter(pl.col("model") == "gpt-4o").sort("task", "patient_id", "question")
    b = answers.filter(pl.col("model") == "llama-3.3-70b").sort("task", "patient_id", "question")
    n = answers.height
    tp = rng.integers(0, 6, 120)
    truth = rng.integers(0, 5, 80)  # an ordinal 0-4 grade of 80 slides by two pathologists
    rater1 = np.clip(truth + rng.integers(-1, 2, 80), 0, 4)
    rater2 = np.clip(truth + rng.integers(-1, 2, 80), 0, 4)
    three = np.stack([np.clip(truth + rng.integers(-1, 2, 80), 0, 4) for _ in range(3)])
    reliability = three.astype(float)
    reliability[0, :5] = np.nan  # the first rater skipped five slides
    counts = np.stack([np.bincount(three[:, i], minlength=5) for i in range(80)])
    return {
        "scores": rng.beta(5, 2, 150),
        "tp": tp,
        "fp": rng.integers(0, 3, 120),
        "fn": rng.integers(0, 3, 120),
        "hits": tp,
        "totals": tp + rng.integers(0, 4, 120),
        "correct_a": a["correct"].to_numpy(),
        "correct_b": b["correct"].to_numpy(),
        "patient_id": a["patient_id"].to_numpy(),
        "x": answers["correct"].to_numpy().astype(np.float64),
        "model": answers["model"].to_numpy(),
        "item_id": answers.select(pl.concat_str("task", "patient_id", "question", separator="/"))
        .to_series()
        .to_numpy(),
        "shards": np.array_split(rng.permutation(n), 4),
        "rater1": rater1,
        "rater2": rater2,
        "counts_table": counts,
        "reliability_data": reliability,
        "r1": rater1 >= 2,
        "r2": rater2 >= 2,
        "labels": three.T,
    }


@prelude
def text() -> dict[str, Any]:
    refs = [
        "invasive ductal carcinoma of the left breast, grade 2",
        "no evidence of malignancy in the sampled lymph nodes",
        "the tumour is ER positive and HER2 negative",
        "recommend adjuvant endocrine therapy and follow-up imaging",
    ] * 5
    hyps = [
        "invasive ductal carcinoma, left breast, histologic grade 2",
        "lymph nodes negative for malignancy",
        "ER positive, HER2 negative tumour",
        "adjuvant chemotherapy is recommended",
    ] * 5
    refs_zh = ["左乳浸润性导管癌，组织学分级二级", "淋巴结未见转移", "雌激素受体阳性"] * 4
    hyps_zh = ["左乳浸润性导管癌，二级", "淋巴结未见癌转移", "雌激素受体阳性，HER2阴性"] * 4
    return {
        "hyps": hyps,
        "refs": refs,
        "hyps_zh": hyps_zh,
        "refs_zh": refs_zh,
        "model": ["gpt-4o", "llama-3.3-70b"] * 10,
        "generated": ["tumour size correlates with nodal status", "HER2 status predicts response"],
        "ground_truth": [
            "larger tumours have more positive nodes",
            "HER2 positive patients respond to trastuzumab",
            "grade is associated with recurrence",
        ],
        "pred_chains": [TOOLS[:3], TOOLS[1:], [TOOLS[0], TOOLS[2]]],
        "gt_chains": [TOOLS[:3], TOOLS[:3], TOOLS[:3]],
        "box_a": [(10, 10, 60, 50), (0, 0, 20, 20)],
        "box_b": [(15, 12, 65, 48), (30, 30, 40, 40)],
    }


@prelude
def score() -> dict[str, Any]:
    import polars as pl
    from tumorboard._demo import generate_answers

    rng = _rng(1)
    calls = pl.List(pl.Struct({"name": pl.String, "input": pl.String, "success": pl.Boolean}))
    models = ["gpt-4o", "llama-3.3-70b"]
    rada = pl.DataFrame(
        {
            "model": [m for m in models for _ in range(12)],
            "task": ["two-hop", "three-hop"] * 12,
            "gt_tools": [TOOLS[:2], TOOLS[:3]] * 12,
            "called_tools": [list(rng.choice(TOOLS, int(rng.integers(1, 4)))) for _ in range(24)],
            "completed": (rng.random(24) < 0.8).tolist(),
            "response": ["a hypodense lesion in liver segment 4"] * 24,
            "reference_answer": ["hypodense liver lesion, segment 4"] * 24,
        }
    )
    lammi = pl.DataFrame(
        {
            "model": [m for m in models for _ in range(10)],
            "task": ["he_subtyping", "ihc_scoring"] * 10,
            "tool_calls": [
                [{"name": "zoom", "input": f"region {k}", "success": bool(k % 3)}] * (k % 3)
                for k in range(20)
            ],
            "output_valid": (rng.random(20) < 0.85).tolist(),
        },
        schema_overrides={"tool_calls": calls},
    )
    insights = pl.DataFrame(
        {
            "model": [m for m in models for _ in range(4)],
            "case_id": [1, 2, 3, 4] * 2,
            "insights": [["tumour size predicts nodal status", "age is not associated"]] * 8,
            "gt_insights": [["larger tumours have more positive nodes"]] * 8,
        }
    )
    # MedBench v4: a multiple-choice task (accuracy) and a judged generation task per model
    med_rows = []
    for k in range(24):
        judged_task = k % 6 >= 3
        med_rows.append({
            "model": models[k // 12],
            "task": "MedHC" if judged_task else "MedQA",
            "dimension": "generation" if judged_task else "knowledge",
            "metric": "judge" if judged_task else "accuracy",
            "correct": None if judged_task else bool(rng.random() < 0.7),
            "judge_output": f"Covers the key points. <score>{k % 6}</score>" if judged_task
            else None,
        })  # fmt: skip
    med = pl.DataFrame(med_rows)
    human = rng.integers(0, 6, 60)
    judged = pl.DataFrame(
        {"judge_score": np.clip(human + rng.integers(-1, 2, 60), 0, 5), "human_score": human}
    )
    return {
        "df": generate_answers(seed=0, n_patients=30, n_questions=4),
        "rada": rada,
        "lammi": lammi,
        "insights": insights,
        "med": med,
        "judged": judged,
    }


# ---- trajectory stores --------------------------------------------------------------------------


@prelude
def recorder() -> dict[str, Any]:
    return {
        "text": "Patient 104: what is the histological subtype of the primary tumour?",
        "options": OPTIONS,
        "reply": "[REQUEST: PrimaryTumor_HE_104.jpg]",
        "files": ["PrimaryTumor_HE_104.jpg", "PrimaryTumor_IHC_104.jpg", "pathology_104.txt"],
        "response": "The slide shows sheets of atypical lymphocytes. [ANSWER: C]",
    }


@prelude
def store() -> dict[str, Any]:
    from tumorboard.traj import Recorder, Store

    runs = Store("runs")
    rng = _rng(2)
    with Recorder(runs, benchmark="radabench", model="agent", tools=True) as rec:
        for case in range(8):
            gt = TOOLS[:3]
            with rec.item(patient_id=f"case{case}", item_id="chain1", task="three-hop",
                          extra={"gt_tools": gt}) as it:  # fmt: skip
                for tool in gt[: int(rng.integers(1, 4))]:
                    it.tool_call(tool, input={"image": f"ct_{case}.nii"}, output="ok", ok=True)
                it.answer("a hypodense lesion in liver segment 4")
    with Recorder(runs, benchmark="lammi", model="agent", tools=True) as rec:
        for sample in range(8):
            with rec.item(patient_id=f"wsi{sample}", item_id="q1", task="he_subtyping",
                          question="Which subtype?", options=OPTIONS, gold="A") as it:  # fmt: skip
                it.tool_call("zoom", input={"region": sample}, output="tile", ok=sample % 4 != 0)
                it.answer(f"[ANSWER: {'AB'[sample % 2]}]")
    return {}


def _mtbbench_store(path: str) -> None:
    from tumorboard.traj import Recorder, Store

    rng = _rng(3)
    runs = Store(path)
    for model, skill in (("gpt-4o", 0.7), ("llama-3.3-70b", 0.5)):
        with Recorder(runs, benchmark="mtbbench", track="multimodal", model=model) as rec:
            for patient in range(10):
                for q, task in enumerate(("digital_pathology", "outcome_prediction")):
                    with rec.item(patient_id=f"{100 + patient}", item_id=f"q{q}", task=task,
                                  question=f"Question {q} about patient {100 + patient}",
                                  options=OPTIONS, gold="C") as it:  # fmt: skip
                        it.answer(f"[ANSWER: {'C' if rng.random() < skill else 'A'}]")


@prelude
def ray() -> dict[str, Any]:
    import ray

    _mtbbench_store("runs/store")
    # a local one-CPU instance; the block's ray_address="auto" reuses this connection
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,
             configure_logging=False)  # fmt: skip
    return {}


# ---- slides, models, tools ----------------------------------------------------------------------


def _write_svs(path: Path, image: np.ndarray, *, mpp: float = 0.5) -> Path:
    """Write ``image`` as an Aperio SVS: JPEG 256 px tiles, a thumbnail page, 2x levels."""
    import tifffile

    h, w = image.shape[:2]
    head = "Aperio Image Library v12.0.15\r\n"
    desc = f"{head}{w}x{h} [0,0 {w}x{h}] (256x256) JPEG/RGB Q=90|AppMag = 20|MPP = {mpp}"
    kw: dict[str, Any] = {"photometric": "rgb", "metadata": None}
    tiled = {"tile": (256, 256), "compression": "jpeg", "compressionargs": {"level": 90}}
    with tifffile.TiffWriter(path) as tif:
        tif.write(image, description=desc, **tiled, **kw)
        thumb = np.ascontiguousarray(image[::8, ::8])
        tif.write(thumb, description=f"{head}{w}x{h} -> {w // 8}x{h // 8}", **kw)
        for k in (1, 2):
            level = np.ascontiguousarray(image[:: 2**k, :: 2**k])
            tif.write(level, description=f"{head}{w}x{h} -> {w >> k}x{h >> k}", **tiled, **kw)
    return path


@prelude
def slide() -> dict[str, Any]:
    from tumorboard._demo import sample_slide_image

    _write_svs(Path("case.svs"), sample_slide_image(seed=0, width=1024, height=768))
    return {}


def _rois() -> None:
    from PIL import Image
    from tumorboard._demo import sample_slide_image

    image = sample_slide_image(seed=0, width=1024, height=768)
    roi = image[160:672, 50:562]  # 512 x 512 px of the first tissue fragment
    Image.fromarray(roi).save("ihc_roi.png")
    Image.fromarray(roi).save("roi.png")
    Image.fromarray(roi).save("he_roi.jpg", quality=90)


@prelude
def regressor() -> dict[str, Any]:
    import torch
    import tumorboard.models as tm
    from tumorboard.models.abmil import MTBBenchRegressor

    torch.manual_seed(0)
    torch.save(MTBBenchRegressor().state_dict(), "ihc_regressor.pt")  # the released layout
    size = tm.info("uni2-tiny").image_size
    return {
        "features": torch.randn(48, 1536),  # UNI2-h features of a region's 48 patches
        "batch": torch.randn(2, 3, size, size),  # two normalized patches
    }


@prelude
def tools() -> dict[str, Any]:
    import tumorboard.models as tm
    from tumorboard._demo import _demo_tokenizer

    _rois()
    labels = ["tumor", "stroma", "necrosis", "an H&E image of tumor tissue"]
    tokenizer = _demo_tokenizer(Path("conch_tokenizer.json"), labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # random weights stand in for the gated ones
        enc = tm.load("uni2-tiny", device="cpu", dtype="fp32")
        reg = tm.load("mtbbench-regressor", in_dim=enc.embed_dim, hidden=16, device="cpu")
        conch = tm.load_conch("conch-tiny", tokenizer=tokenizer, device="cpu", image_size=224)
    return {"enc": enc, "reg": reg, "conch": conch}


@prelude
def mcp() -> dict[str, Any]:
    _rois()
    return {}


# ---- kernels and the LAMMI adapter --------------------------------------------------------------


@prelude
def kernels() -> dict[str, Any]:
    import tokenizers
    import torch
    import transformers
    from tumorboard.models import ABMIL

    torch.manual_seed(0)
    sizes = [30, 0, 1, 45]  # four bags, one empty and one with a single patch
    offsets = torch.tensor(np.concatenate([[0], np.cumsum(sizes)]), dtype=torch.int64)
    config = transformers.LlamaConfig(
        vocab_size=40, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    words = ["[UNK]", "Thought", ":", "Action", " Input", "Observation", " Thought", " Action"]
    tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = tokenizers.pre_tokenizers.Split(
        tokenizers.Regex(r" ?\w+|[^\w\s]"), behavior="isolated"
    )
    tok.model = tokenizers.models.WordLevel({w: i for i, w in enumerate(words)}, "[UNK]")
    return {
        "abmil_model": ABMIL(64, hidden=32, n_heads=2, gated=True, dropout=0.0).eval(),
        "features": torch.randn(int(offsets[-1]), 64),
        "offsets": offsets,
        "h": torch.randn(40, 32),
        "seg": torch.randint(0, 4, (40,), dtype=torch.int8),
        "gamma": 0.1 * torch.randn(3, 32),
        "llm": transformers.LlamaForCausalLM(config).eval(),
        "tok": transformers.PreTrainedTokenizerFast(tokenizer_object=tok),
    }
