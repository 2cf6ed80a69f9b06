"""Batch inference through ``Trainer.predict``: one JSONL line per image in source order, the same bytes from one
process and from 2 gloo processes (``ddp_spawn`` on CPU), unreadable images reported in place."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from lucid_core.checkpoint import load, save_model
from lucid_core.geometry.letterbox import letterbox, scale_boxes_back
from lucid_core.inference import forward_for_decode, prepare_inference_model
from lucid_core.models import build_model
from lucid_core.postprocess import postprocess
from lucid_core.results import Results
from lucid_train.batch_predict import add_predict_parser, predict_dataset, predict_main

IMGSZ = 64

TWO_PROCESSES = textwrap.dedent(
    """
    import sys
    import torch
    from lucid_train.batch_predict import predict_dataset

    if __name__ == "__main__":
        torch.set_num_threads(1)
        predict_dataset({weights!r}, {source!r}, {output!r}, batch=2, imgsz={imgsz}, accelerator="cpu",
                        devices=2, strategy="ddp_spawn")
    """
)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Weights of a yolo26n detector whose class biases are 0 (a random network then detects) and a folder of 9
    small images with an unreadable file in the middle."""
    root = tmp_path_factory.mktemp("batch")
    torch.manual_seed(0)
    model = build_model("yolo26", "detect", "n", num_classes=3)
    with torch.no_grad():
        for seq in (*model.head.cv3, *model.head.one2one_cv3):
            seq[-1].bias.zero_()
    weights = save_model(model, root / "model", names=["a", "b", "c"], imgsz=IMGSZ)
    images = root / "images"
    images.mkdir()
    rng = np.random.default_rng(0)
    for i in range(9):
        h, w = int(rng.integers(40, 90)), int(rng.integers(40, 90))
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(images / f"img{i}.png")
    (images / "img4b.png").write_bytes(b"not an image")
    return weights, images


def test_one_line_per_image_in_source_order(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    weights, images = dataset
    output, skipped = predict_dataset(
        weights, images, tmp_path / "pred.jsonl", batch=4, imgsz=IMGSZ, accelerator="cpu", devices=1
    )
    assert skipped == []
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    names = sorted(p.name for p in images.iterdir())
    assert [Path(r["path"]).name for r in lines] == names
    bad = lines[names.index("img4b.png")]
    assert "error" in bad and "img4b.png" in bad["error"]
    assert not (tmp_path / ".pred.jsonl.parts").exists()
    # a line is the Results of the image letterboxed to the imgsz square, in original pixels
    record = lines[0]
    result = Results.from_dict(record)
    net, mode = prepare_inference_model(load(weights).model)
    padded, info = letterbox(torch.from_numpy(np.array(Image.open(record["path"]))).permute(2, 0, 1), IMGSZ)
    with torch.inference_mode():
        out = forward_for_decode(
            net, padded[None].float().contiguous(memory_format=torch.channels_last) / 255, mode
        )
    (det,) = postprocess(out, task="detect", nc=3, mode=mode, input_hw=info.input_hw)
    assert len(result) == len(det) > 0
    torch.testing.assert_close(result.boxes.xyxy, scale_boxes_back(det.boxes, info))
    assert result.orig_shape == info.orig_hw and set(result.names.values()) <= {"a", "b", "c"}


@pytest.mark.slow
def test_two_gloo_processes_write_the_same_bytes(dataset: tuple[Path, Path], tmp_path: Path) -> None:
    weights, images = dataset
    single, _ = predict_dataset(
        weights, images, tmp_path / "one.jsonl", batch=2, imgsz=IMGSZ, accelerator="cpu", devices=1
    )
    script = tmp_path / "two.py"
    script.write_text(
        TWO_PROCESSES.format(
            weights=str(weights), source=str(images), output=str(tmp_path / "two.jsonl"), imgsz=IMGSZ
        )
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "distributed_backend=gloo" in done.stderr and "Starting with 2 processes" in done.stderr
    assert (tmp_path / "two.jsonl").read_bytes() == single.read_bytes()
    assert len(single.read_text().splitlines()) == 10


def test_command_line(dataset: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    weights, images = dataset
    video = tmp_path / "clip.mp4"
    video.write_bytes(b"")
    sources = [str(images / "img0.png"), str(video), str(tmp_path / "none.png")]
    flags = f"--imgsz {IMGSZ} --accelerator cpu --devices 1".split()
    out = tmp_path / "cli.jsonl"
    assert predict_main(["--weights", str(weights), "--source", *sources, "--output", str(out), *flags]) == 0
    err = capsys.readouterr().err
    assert "skipped" in err and "clip.mp4" in err and "none.png" in err  # one line each, then the others run
    assert len(out.read_text().splitlines()) == 1
    nothing = ["--weights", str(weights), "--source", sources[2], "--output", str(tmp_path / "x.jsonl")]
    assert predict_main(nothing) == 1 and "names no image" in capsys.readouterr().err
    parser = add_predict_parser(argparse.ArgumentParser())
    assert parser.parse_args(["--weights", "w", "--source", "s", "--output", "o"]).batch == 16
