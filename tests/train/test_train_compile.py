"""`--model.channels_last` / `--model.compile` (issue 18): the fast training forward gives eager's losses.

Each case builds two modules with the same seed, one contiguous eager and one with the option, and compares the objective
on the same synthetic batch (random images, boxes drawn from the batch generator) within 1e-5 relative, and the
gradients it back-propagates. torch.compile is lazy:
both compile tests are `slow` (importing dynamo alone takes ~20 s here).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from lucid_train.memory_format import resolve_channels_last
from lucid_train.module import YOLOLitModule
from lucid_train.precision import float32_output

FAMILIES = ("yolo26", "yolo11")
REL_TOL = 1e-5


def _batch(batch: int, imgsz: int, boxes_per_image: int = 3) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    n = batch * boxes_per_image
    return {
        "images": (torch.rand(batch, 3, imgsz, imgsz, generator=g) * 255).to(torch.uint8),
        "batch_idx": torch.arange(batch).repeat_interleave(boxes_per_image).float(),
        "cls": torch.randint(0, 3, (n, 1), generator=g).float(),
        "bboxes": torch.cat(
            [torch.rand(n, 2, generator=g) * 0.6 + 0.2, torch.rand(n, 2, generator=g) * 0.3 + 0.1], 1
        ),
    }


def _module(family: str, **options: Any) -> YOLOLitModule:
    """A module after its fit-start layout step; contiguous eager unless ``options`` say otherwise (on the CPU an
    unset ``channels_last`` resolves to channels-last, so the baseline names ``False``)."""
    torch.manual_seed(0)
    options.setdefault("channels_last", False)
    module = YOLOLitModule(family=family, scale="n", num_classes=3, imgsz=64, **options)
    module.fast_paths.prepare(module.model, "cpu")
    return module


def _train_forward(module: YOLOLitModule, images: torch.Tensor) -> Any:
    return module.fast_paths(images, module.model)


def _loss_and_gradient(module: YOLOLitModule, batch: dict[str, torch.Tensor]) -> tuple[float, torch.Tensor]:
    total, _ = module.criterion(float32_output(_train_forward(module, module._images(batch))), batch)
    total.backward()
    grads = [p.grad.flatten() for p in module.model.parameters() if p.grad is not None]
    return float(total.detach()), torch.cat(grads)


def _assert_close(fast: tuple[float, torch.Tensor], eager: tuple[float, torch.Tensor]) -> None:
    """Loss within 1e-5 relative; the gradient (summed in another order by the other kernels) within 1e-3 of its
    norm. Later steps are not compared: the assigner's top-k turns last-bit differences into a different
    assignment once the weights move."""
    assert abs(fast[0] - eager[0]) <= REL_TOL * abs(eager[0]), (fast[0], eager[0])
    assert fast[1].shape == eager[1].shape
    assert float((fast[1] - eager[1]).norm()) <= 1e-3 * float(eager[1].norm())


@pytest.mark.parametrize("family", FAMILIES)
def test_channels_last_losses_equal_eager(family: str) -> None:
    batch = _batch(2, 64)
    eager = _loss_and_gradient(_module(family), batch)
    fast_module = _module(family, channels_last=True)
    weight = next(p for p in fast_module.model.parameters() if p.ndim == 4)
    assert weight.is_contiguous(memory_format=torch.channels_last)
    _assert_close(_loss_and_gradient(fast_module, batch), eager)


@pytest.mark.parametrize(
    ("option", "device_type", "compile", "expected"),
    [
        (None, "cpu", False, True),  # the CPU default: the faster step (docs/benchmarks.md)
        (None, "cpu", True, False),  # compile keeps the layout its figures were measured in
        (None, "cuda", False, False),
        (None, "mps", False, False),
        (False, "cpu", False, False),  # an explicit choice wins everywhere
        (True, "cuda", False, True),
        (True, "cpu", True, True),
    ],
)
def test_channels_last_resolves_per_device(
    option: bool | None, device_type: str, compile: bool, expected: bool
) -> None:
    assert resolve_channels_last(option, device_type, compile=compile) is expected


def test_unset_channels_last_trains_channels_last_on_cpu() -> None:
    """No flag: on the CPU the module's fit-start step puts the trained network in NHWC and the training input
    follows; the EMA copy validation scores stays contiguous (the in-training metric is then the offline one to
    the bit, tests/train/test_train_ddp.py); ``--model.channels_last false`` keeps the network contiguous."""
    torch.manual_seed(0)
    default = YOLOLitModule(family="yolo26", scale="n", num_classes=3, imgsz=64)
    assert default.fast_paths.option is None
    default.fast_paths.prepare(default.model, "cpu")
    assert default.fast_paths.channels_last
    weight = next(p for p in default.model.parameters() if p.ndim == 4)
    assert weight.is_contiguous(memory_format=torch.channels_last) and not weight.is_contiguous()
    assert all(p.is_contiguous() for p in default.ema_model.parameters())
    seen: list[torch.Tensor] = []
    default.model.register_forward_pre_hook(lambda _module, args: seen.append(args[0]))
    images = default._images(_batch(2, 64))
    assert images.is_contiguous()
    _train_forward(default, images)
    assert seen and seen[0].is_contiguous(memory_format=torch.channels_last) and not seen[0].is_contiguous()
    contiguous = _module("yolo26")
    assert not contiguous.fast_paths.channels_last
    assert all(p.is_contiguous() for p in contiguous.model.parameters())


@pytest.mark.slow  # torch.compile's first import (dynamo) alone takes ~20 s on a loaded 2-core machine
def test_compiled_network_stays_out_of_the_checkpoint() -> None:
    plain = _module("yolo26")
    compiled = _module("yolo26", compile=True)
    assert compiled.fast_paths.compiled is not None
    assert set(compiled.state_dict()) == set(plain.state_dict())


@pytest.mark.slow
@pytest.mark.parametrize("family", FAMILIES)
def test_compiled_losses_equal_eager(family: str) -> None:
    batch = _batch(2, 64)
    eager = _loss_and_gradient(_module(family), batch)
    _assert_close(_loss_and_gradient(_module(family, compile=True), batch), eager)


def test_fit_resolves_the_layout_before_the_optimizer_and_keeps_the_ema_contiguous(tmp_path: Path) -> None:
    """A real CPU fit: ``setup("fit")`` puts the network in NHWC before ``configure_optimizers`` (and before a DDP
    wrapper would take the parameters' strides for its gradient buckets), the optimizer holds the model's own
    parameters, the resolved layout is printed/saved with the optimizer, and the EMA copy stays contiguous."""
    from lucid_train_testing import make_shapes, tiny_data, tiny_trainer

    seen: dict[str, bool] = {}

    class Spy(YOLOLitModule):
        def configure_optimizers(self) -> Any:
            weight = next(p for p in self.model.parameters() if p.ndim == 4)
            seen["channels_last_at_configure"] = weight.is_contiguous(memory_format=torch.channels_last)
            return super().configure_optimizers()

    data = tiny_data(make_shapes(tmp_path / "shapes", n_train=4, n_val=2), batch_size=2)
    torch.manual_seed(0)
    module = Spy(family="yolo26", num_classes=data.num_classes, names=data.names, imgsz=data.imgsz)
    tiny_trainer(tmp_path / "run", limit_train_batches=1, limit_val_batches=1).fit(module, datamodule=data)
    assert seen == {"channels_last_at_configure": True}
    assert module.resolved is not None and module.resolved.memory_format == "channels_last"
    assert "memory_format=channels_last" in module.resolved.describe()
    optimizer = module.optimizers().optimizer  # type: ignore[union-attr]
    model_params = {id(p) for p in module.model.parameters()}
    assert {id(p) for group in optimizer.param_groups for p in group["params"]} <= model_params
    assert all(p.is_contiguous() for p in module.ema_model.parameters())


def test_recipe_links_pickle_for_ddp_spawn() -> None:
    """``--trainer.strategy ddp_spawn`` pickles the trainer, whose config callback holds the CLI parser and its
    link functions: they are module-level callables, and a round trip converts as before."""
    import pickle

    from lucid_train.cli import _ToPlain
    from lucid_train.recipe import OptimizerConfig

    link = pickle.loads(pickle.dumps(_ToPlain(OptimizerConfig)))
    assert link(None) is None
    assert link({"name": "SGD", "lr0": 0.02}) == {**vars(OptimizerConfig()), "name": "SGD", "lr0": 0.02}
