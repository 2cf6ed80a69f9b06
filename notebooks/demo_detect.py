# ---
# jupyter:
#   jupytext:
#     formats: py:percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Detection: data → fit → evaluate → predict → pictures
#
# Every cell is a call on the library; the console command that does the same is quoted above it.
# `LUCID_NOTEBOOK_FAST=1` (what `make gate` runs) shrinks the run to a probe: a tiny synthetic shapes set,
# one epoch of a few batches. Without it the notebook trains on COCO
# (`lucid-data download coco`, then `--data.root datasets/coco/data.yaml`); see the measured outcome in
# `docs/tasks/detect.md`.

# %%
import os
from pathlib import Path

import lightning.pytorch as pl
import yaml
from IPython.display import Image, display

import lucid_core
import lucid_data
import lucid_train
import lucid_viz.grid
from lucid_core.inference import load_image_rgb
from lucid_train.callbacks import default_callbacks
from lucid_viz.figures import save_figure

FAST = os.environ.get("LUCID_NOTEBOOK_FAST") == "1"
OUT = Path(os.environ.get("LUCID_NOTEBOOK_OUT", "runs/notebooks")) / "demo_detect"
OUT.mkdir(parents=True, exist_ok=True)
TASK = "detect"

# %% [markdown]
# ## Data
# Console: `lucid-data synth --task detect --output runs/notebooks/demo_detect/data --n-train 16 --n-val 4
# --imgsz 64` (fast probe) or `lucid-data download coco` (full run).

# %%
if FAST:
    data_yaml = lucid_data.synthesize(TASK, OUT / "data", n_train=16, n_val=4, imgsz=64, seed=0)
    imgsz, epochs, limit = 64, 1, 2
else:
    data_yaml = lucid_data.download_dataset("coco", Path("datasets")) / "data.yaml"
    imgsz, epochs, limit = 640, 300, None
print(data_yaml)

# %% [markdown]
# ## Fit
# The recipe values are the packaged embedded default's (`lucid_train/configs/shapes_default.yaml`) — the same
# YAML `lucid-train fit` reads. Console:
# `lucid-train fit --model.task detect --data.root DATA --data.imgsz 64 --trainer.max_epochs 1`.

# %%
recipe = yaml.safe_load(
    (Path(lucid_train.__file__).parent / "configs" / "shapes_default.yaml").read_text()
)
data = lucid_train.YOLODataModule(
    root=str(data_yaml), imgsz=imgsz, batch_size=4 if FAST else 16, workers=0, task=TASK
)
model = lucid_train.YOLOLitModule(
    family="yolo26",
    task=TASK,
    scale="n",
    num_classes=data.num_classes,
    names=data.names,
    imgsz=data.imgsz,
    task_options=data.task_options,
    optimizer=recipe["optimizer"],
)
trainer = pl.Trainer(
    max_epochs=epochs,
    accelerator="cpu" if FAST else "auto",
    logger=False,
    enable_checkpointing=False,
    enable_progress_bar=False,
    num_sanity_val_steps=0,
    limit_train_batches=limit,
    default_root_dir=str(OUT / "run"),
    callbacks=default_callbacks(),
)
trainer.fit(model, datamodule=data)
print(model.val_metrics)

# %% [markdown]
# ## Evaluate the exported best weights
# Console: `lucid-eval --weights runs/notebooks/demo_detect/run/best --data DATA`.

# %%
best = lucid_core.load_model(OUT / "run" / "best")
result = lucid_train.evaluate(best, str(data_yaml), imgsz=imgsz, batch_size=4)
print(result.summary() if hasattr(result, "summary") else result)

# %% [markdown]
# ## Predict and draw predictions beside the labels
# Console: `lucid-predict --weights runs/notebooks/demo_detect/run/best --source DATA/images/val`.

# %%
source = lucid_data.load_dataset(data_yaml, split="val")
paths = [record.path for record in source.records[:4]]
detections = [result.detections for result in lucid_core.predict(best, paths, imgsz=imgsz, conf=0.05)]
images = [load_image_rgb(p).permute(1, 2, 0).numpy() for p in paths]
targets = [record.targets for record in source.records[:4]]
figure = lucid_viz.grid.draw_grid(images, detections, TASK, targets=targets)
predictions_png = save_figure(figure, OUT / "predictions.png")
display(Image(filename=str(predictions_png)))

# %% [markdown]
# ## Training curves (written by `fit` itself: `curves.png`, `val_predictions.png`)

# %%
for name in ("curves.png", "val_predictions.png"):
    path = OUT / "run" / name
    if path.is_file():
        display(Image(filename=str(path)))
