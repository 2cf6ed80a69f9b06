"""tools/check_step_parity.py without the reference: its optimiser-state reading, comparison and data subset.

The instrument reads the gradient of the reference's first step out of its checkpoint's optimiser state; these tests
build such a checkpoint from a real torch optimiser over a stand-in module tree, and check that the comparison
passes identical states and fails a perturbed one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from torch import nn

from lucid_core.interop.unpickler import StandInModule, standin_class
from tool_testing import load_tool

step_parity = load_tool("check_step_parity")


def _standin(
    qualified: str, module: nn.Module | None = None, children: dict[str, StandInModule] | None = None
) -> StandInModule:
    node = standin_class(qualified)()
    params = dict(module.named_parameters(recurse=False)) if module is not None else {}
    node.__dict__.update(_parameters=params, _buffers={}, _modules=children or {})
    return node


def _reference_like() -> tuple[nn.Module, StandInModule]:
    """A real module ``model.0`` conv (no bias), ``model.1`` batch norm, ``model.2`` conv with bias, and the
    stand-in tree a pickled checkpoint of it would give."""
    conv, bn, head = nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.Conv2d(4, 2, 1)
    real = nn.Module()
    real.model = nn.Sequential(conv, bn, head)
    seq = _standin(
        "torch.nn.Sequential",
        children={
            "0": _standin("torch.nn.modules.conv.Conv2d", conv),
            "1": _standin("torch.nn.modules.batchnorm.BatchNorm2d", bn),
            "2": _standin("torch.nn.modules.conv.Conv2d", head),
        },
    )
    return real, _standin("ultralytics.nn.tasks.DetectionModel", children={"model": seq})


def test_parameter_order_groups_weights_norms_and_biases() -> None:
    _, root = _reference_like()
    assert step_parity.parameter_order(root) == {
        "weight": ["model.0.weight", "model.2.weight"],
        "bn": ["model.1.weight"],
        "bias": ["model.1.bias", "model.2.bias"],
    }


@pytest.mark.parametrize(("optimizer", "factor"), [("AdamW", 0.1), ("SGD", 1.0)])
def test_first_step_state_is_read_back_by_parameter_name(optimizer: str, factor: float) -> None:
    real, root = _reference_like()
    named = dict(real.named_parameters())
    order = step_parity.parameter_order(root)
    groups = [{"params": [named[n] for n in names], "param_group": g} for g, names in order.items()]
    opt = torch.optim.AdamW(groups, lr=0.01) if optimizer == "AdamW" else torch.optim.SGD(groups, 0.01, 0.9)
    torch.manual_seed(0)
    grads = {n: torch.randn_like(p) for n, p in named.items()}
    grads.pop("model.0.weight")  # a frozen parameter: no gradient, no optimiser state
    for n, p in named.items():
        p.grad = grads[n].clone() if n in grads else None
    opt.step()
    entry, moments = step_parity.reference_first_step({"ema": root, "optimizer": opt.state_dict()})
    assert entry == ("exp_avg" if optimizer == "AdamW" else "momentum_buffer")
    assert set(moments) == {n.replace("model.", "layers.", 1) for n in grads}
    for n, g in grads.items():
        torch.testing.assert_close(moments[n.replace("model.", "layers.", 1)], factor * g)


def test_compare_passes_identical_states_and_fails_a_perturbed_tensor() -> None:
    torch.manual_seed(0)
    reference = {"a": torch.randn(8, 3), "b": torch.randn(5), "zero": torch.zeros(4)}
    same = step_parity.compare({k: v.clone() for k, v in reference.items()}, reference)
    assert step_parity.worst(same, step_parity.GRAD_RTOL)[2] == []
    moved = {k: v.clone() for k, v in reference.items()}
    moved["b"] = moved["b"] * 1.01
    failures = step_parity.worst(step_parity.compare(moved, reference), step_parity.GRAD_RTOL)[2]
    assert [g.name for g in failures] == ["b"]
    noisy = {k: v.clone() for k, v in reference.items()}
    noisy["zero"] = torch.full((4,), 1e-12)  # float noise where the reference is exactly zero
    gaps = step_parity.compare(noisy, reference)
    assert [g.name for g in step_parity.worst(gaps, step_parity.GRAD_RTOL)[2]] == ["zero"]
    assert step_parity.worst(gaps, step_parity.GRAD_RTOL, atol=1e-9)[2] == []
    not_judged = step_parity.compare(noisy, reference, judged={"a", "b"})
    assert step_parity.worst(not_judged, step_parity.GRAD_RTOL)[2] == []


def test_compare_names_a_missing_or_reshaped_tensor() -> None:
    reference = {"a": torch.zeros(2, 2)}
    with pytest.raises(KeyError, match="a"):
        step_parity.compare({}, reference)
    with pytest.raises(ValueError, match=r"a: ours \(4,\)"):
        step_parity.compare({"a": torch.zeros(4)}, reference)


def test_subset_dataset_takes_the_first_images_with_their_labels(tmp_path: Path) -> None:
    source = tmp_path / "source"
    for split in ("train", "val"):
        (source / "images" / split).mkdir(parents=True)
        (source / "labels" / split).mkdir(parents=True)
    for i in range(3):
        (source / "images" / "train" / f"{i}.jpg").write_bytes(b"jpeg")
        (source / "labels" / "train" / f"{i}.txt").write_text(f"0 0.5 0.5 0.{i + 1} 0.2\n")
    data = source / "data.yaml"
    data.write_text(
        yaml.safe_dump({"path": ".", "train": "images/train", "val": "images/val", "names": {0: "a"}})
    )
    out = step_parity.subset_dataset(data, 2, tmp_path / "subset")
    settings = yaml.safe_load(out.read_text())
    assert settings["path"] == str((tmp_path / "subset").resolve()) and settings["names"] == {0: "a"}
    for split in ("train", "val"):
        assert sorted(p.name for p in (tmp_path / "subset" / "images" / split).iterdir()) == [
            "0.jpg",
            "1.jpg",
        ]
        assert (tmp_path / "subset" / "labels" / split / "1.txt").read_text() == "0 0.5 0.5 0.2 0.2\n"
    with pytest.raises(ValueError, match="3 images, --images asks for 5"):
        step_parity.subset_dataset(data, 5, tmp_path / "too-many")


def test_across_border_moves_each_instance_out_by_its_fraction_and_cuts_it_at_the_image() -> None:
    box = "2 0.5 0.5 0.2 0.4"  # x 0.4-0.6, y 0.3-0.7
    for k, fraction in enumerate(step_parity.BORDER_FRACTIONS):
        moved = step_parity.across_border(box, k, "detect")
        assert moved is not None
        cls, cx, cy, w, h = moved.split()
        x1, x2 = float(cx) - float(w) / 2, float(cx) + float(w) / 2
        y1, y2 = float(cy) - float(h) / 2, float(cy) + float(h) / 2
        inside = 1 - fraction
        expected = {
            0: (0.0, 0.2 * inside, 0.3, 0.7),  # left: its right part is left, against x = 0
            1: (1 - 0.2 * inside, 1.0, 0.3, 0.7),
            2: (0.4, 0.6, 0.0, 0.4 * inside),
            3: (0.4, 0.6, 1 - 0.4 * inside, 1.0),
        }[k]
        assert cls == "2"
        np.testing.assert_allclose((x1, x2, y1, y2), expected, atol=2e-6)
    triangle = "1 0.2 0.2 0.4 0.2 0.3 0.5"
    moved = step_parity.across_border(triangle, 0, "segment")
    assert moved is not None
    points = np.array(moved.split()[1:], float).reshape(-1, 2)
    assert points[:, 0].min() == 0.0 and points.min() >= 0.0 and points.max() <= 1.0
    assert points[:, 0].max() == pytest.approx(0.2 * (1 - step_parity.BORDER_FRACTIONS[0]), abs=1e-6)
    with pytest.raises(ValueError, match="not 'pose'"):
        step_parity.across_border(box, 0, "pose")


def test_subset_dataset_with_border_rewrites_both_splits_alike(tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "images" / "train").mkdir(parents=True)
    (source / "labels" / "train").mkdir(parents=True)
    for i in range(2):
        (source / "images" / "train" / f"{i}.jpg").write_bytes(b"jpeg")
        (source / "labels" / "train" / f"{i}.txt").write_text("0 0.5 0.5 0.2 0.2\n0 0.3 0.3 0.1 0.1\n")
    data = source / "data.yaml"
    data.write_text(yaml.safe_dump({"path": ".", "train": "images/train", "val": "images/train"}))
    step_parity.subset_dataset(data, 2, tmp_path / "subset", "detect")
    rows = [
        (tmp_path / "subset" / "labels" / split / f"{i}.txt").read_text().splitlines()
        for split in ("train", "val")
        for i in range(2)
    ]
    assert rows[:2] == rows[2:]  # val is train
    lefts = [float(r.split()[1]) - float(r.split()[3]) / 2 for r in rows[0] + rows[1]]
    assert lefts[0] == pytest.approx(0.0, abs=1e-6)  # the first instance goes to the left border
    assert lefts[1] > 0.5  # the second to the right: the borders are taken in turn over the subset


def test_subset_class_folders_takes_the_classes_in_turn(tmp_path: Path) -> None:
    root = tmp_path / "data"
    for name, count in (("circle", 3), ("square", 1), ("triangle", 2)):
        (root / "train" / name).mkdir(parents=True)
        for k in range(count):
            (root / "train" / name / f"{name}_{k}.png").write_bytes(b"png")
    out = step_parity.subset_class_folders(root, 5, tmp_path / "out")
    for split in ("train", "val"):
        kept = sorted(str(p.relative_to(out / split)) for p in (out / split).rglob("*.png"))
        assert kept == [
            "circle/circle_0.png",
            "circle/circle_1.png",
            "square/square_0.png",
            "triangle/triangle_0.png",
            "triangle/triangle_1.png",
        ]
    with pytest.raises(ValueError, match="6 images, --images asks for 7"):
        step_parity.subset_class_folders(root, 7, tmp_path / "more")
    with pytest.raises(FileNotFoundError, match="no class folders"):
        step_parity.subset_class_folders(tmp_path / "empty", 1, tmp_path / "none")


def test_augmentation_off_turns_classifications_own_policies_off() -> None:
    assert step_parity.AUGMENT_OFF["auto_augment"] is None and step_parity.AUGMENT_OFF["erasing"] == 0.0


def test_command_refuses_border_without_instances_and_weights_for_several_gates(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        step_parity.main(["--task", "classify", "--border"])
    assert "--border: no detect or segment gate" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        step_parity.main(["--task", "all", "--weights", "w.pt"])
    assert "--weights needs one gate" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        step_parity.main(["--task", "shapes_yolo26n_detect", "--weights", "missing.pt"])
    assert "--weights missing.pt: no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        step_parity.main(["--task", "shapes_yolo26n_detect", "--images", "0"])
    assert "--images 0: at least 1" in capsys.readouterr().err
