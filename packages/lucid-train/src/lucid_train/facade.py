"""`YOLO`: the ``model.fit / val / predict / export`` habits people bring from the incumbent, on top of Lightning.

Every method is a thin call into the typed function behind a command, with the same defaults, run directory and
files:

=========================  ===========================================================================
``YOLO(...).fit(...)``     ``lucid-train fit`` (:func:`lucid_train.cli.build_cli`: LightningCLI, our module, data
                           module, callbacks, loggers, run directory rules)
``YOLO(...).val(...)``     ``lucid-eval`` (:func:`lucid_train.eval.evaluate_checkpoint`: input checks, COCO
                           scoring, report)
``YOLO(...).predict(...)`` ``lucid-predict`` (:func:`lucid_core.inference.predict`; with ``output=`` every image
                           and frame predicted once and written by
                           :func:`lucid_core.predict_cli.iter_predictions_to_dir`: lucid-predict's files)
``YOLO(...).track(...)``   ``lucid-predict --track`` (:func:`lucid_core.track.track`: predict with a tracker step
                           per frame; ``persist=True`` keeps the tracker across calls)
``YOLO(...).export(...)``  ``lucid-export`` (:func:`lucid_core.export_cli.export`: the ONNX file + parity check)
=========================  ===========================================================================

``YOLO(source)`` takes a registered model name (``yolo26n``, ``yolo11s-pose``, ``yolov8m-seg``:
:func:`lucid_core.list_models` ``.name``; randomly initialised, trained from scratch by ``fit``), lucid-core
weights (a stem, ``.safetensors`` or ``.json``, e.g. ``runs/train/best``) or a reference ``.pt`` checkpoint
(converted once with :func:`lucid_core.convert_cli.convert`, lucid-convert's function, into
``$LUCID_CACHE_DIR/converted/``; nothing in the pickle runs). After ``fit`` the object holds the run's ``best``
weights, so ``val``/``predict``/``export`` use the trained model.

``fit`` keyword arguments map onto ``lucid-train`` flags: ``data`` → ``--data.root``, ``epochs`` →
``--trainer.max_epochs``, ``imgsz`` → ``--data.imgsz``, ``batch`` → ``--data.batch_size``, ``workers`` →
``--data.workers``, ``device`` → ``--trainer.accelerator``/``--trainer.devices``, ``seed`` →
``--seed_everything`` and ``--data.seed``, ``run_dir`` (or ``project``/``name``) → ``--trainer.default_root_dir``,
``optimizer`` → ``--optimizer.name``; any field of the recipe (``lr0``, ``momentum``, ``warmup_epochs``… →
``--optimizer.*``; ``box``, ``cls``, ``dfl``… → ``--loss.*``) or of the augmentation (``mosaic``, ``fliplr``,
``close_mosaic``… → ``--data.augment.*``) by its name; and any flag by its dotted name
(``**{"trainer.precision": "bf16-mixed"}``). :meth:`YOLO.fit_command` shows the command a call runs.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
import warnings
from collections.abc import Generator, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from lucid_core.checkpoint import checkpoint_paths, file_sha256, load, save_model
from lucid_core.cli_errors import UsageError
from lucid_core.convert_cli import convert
from lucid_core.decode import DEFAULT_IOU, DEFAULT_MAX_DET, PREDICT_CONF
from lucid_core.errors import CheckpointImportError, RefusedGlobalError
from lucid_core.export.loaded import exported_kind
from lucid_core.export_cli import ExportInputError, default_output, export, print_report
from lucid_core.inference import cached_inference_model, predict
from lucid_core.models import build_model, list_models
from lucid_core.predict_cli import PredictionRun, iter_predictions_to_dir
from lucid_core.results import Results
from lucid_core.track import StreamTracker, TrackerSpec
from lucid_core.track import track as track_frames
from lucid_data.augment.pipeline import AugmentConfig
from lucid_train.errors import TrainingSetupError
from lucid_train.eval import EvalInputError, evaluate_checkpoint, evaluate_model
from lucid_train.recipe import LossConfig, OptimizerConfig

#: classes of an untrained model built from a registered name (COCO's 80, named "0".."79").
DEFAULT_NUM_CLASSES = 80
#: ``lucid-train``'s ``--model.task`` default: :meth:`YOLO.fit_command` leaves the flag out for it.
CLI_DEFAULT_TASK = "detect"


def _flag_value(value: Any) -> str:
    """A Python value as a jsonargparse command-line value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, list | tuple | dict):
        return json.dumps(list(value) if isinstance(value, tuple) else value)
    return str(os.fspath(value)) if isinstance(value, os.PathLike) else str(value)


def _recipe_flags() -> dict[str, str]:
    """Recipe/augmentation field name → its dotted ``lucid-train`` flag (see the module docstring)."""
    flags: dict[str, str] = {}
    for cls, prefix in (
        (AugmentConfig, "data.augment"),
        (LossConfig, "loss"),
        (OptimizerConfig, "optimizer"),
    ):
        for field in dataclasses.fields(cls):
            flags.setdefault(field.name, f"{prefix}.{field.name}")
    flags["optimizer"] = "optimizer.name"
    return flags


def _device_flags(device: str | int) -> list[str]:
    """``device`` (``cpu``, ``cuda``, ``cuda:N``, ``N``, ``gpu``, ``auto``, ``mps``) → trainer flags."""
    text = str(device).strip().lower()
    if text in ("cpu", "gpu", "auto", "mps", "cuda"):
        return ["--trainer.accelerator", "gpu" if text == "cuda" else text]
    index = text.split(":", 1)[1] if text.startswith("cuda:") else text
    if index.isdigit():
        return ["--trainer.accelerator", "gpu", "--trainer.devices", json.dumps([int(index)])]
    raise TrainingSetupError(f"device: expected cpu, cuda, cuda:N, N, gpu, mps or auto, got {device!r}")


def _model_key(name: str) -> Any:
    """The registered ``ModelKey`` spelled ``name`` (``yolo26n-seg``), or None."""
    return next((key for key in list_models() if key.name == name), None)


class YOLO:
    """A model plus the incumbent's ``fit``/``val``/``predict``/``export`` verbs (module docstring).

    Args:
        model: a registered model name (``yolo26n``; :func:`lucid_core.list_models`), lucid-core weights (stem,
            ``.safetensors`` or ``.json``) or a reference ``.pt`` checkpoint.

    Attributes:
        weights: the lucid-core weights this object uses (``None`` for an untrained model name until ``fit``).
        run_dir: the last ``fit`` run directory (``None`` before).
    """

    def __init__(self, model: str | os.PathLike[str] = "yolo26n") -> None:
        text = os.fspath(model)
        self.source = text
        self.key = _model_key(text)
        self.reference: Path | None = None
        self.weights: Path | None = None
        self.run_dir: Path | None = None
        self.data: str | None = None
        self.trainer: Any = None
        self._model: Any = None
        self._imgsz = 640  # the loaded weights' training imgsz (`model`); an untrained model name: 640
        # the loaded weights' class names (`model`); an untrained model name: "0".."79"
        self._names = [str(i) for i in range(DEFAULT_NUM_CLASSES)]
        self._scratch: Path | None = None
        self._tracker: StreamTracker | None = None  # the tracker `track(persist=True)` continues
        if self.key is not None:
            return
        path = Path(text)
        if exported_kind(path) is not None:  # an exported model: predict and val run it in its runtime
            if not path.exists():
                raise FileNotFoundError(f"YOLO({text!r}): no such exported model")
            self.weights = path
            return
        if path.suffix == ".pt":
            if not path.is_file():
                raise FileNotFoundError(f"YOLO({text!r}): no such reference checkpoint")
            self.reference = path
            return
        if path.suffix == ".ckpt":
            raise FileNotFoundError(
                f"YOLO({text!r}): a lucid-train .ckpt is a Lightning training state, not model weights; resume it "
                f"with `lucid-train fit --ckpt_path {text}`, or use the run's exported weights "
                f"({path.with_name('best')} = best.safetensors + best.json)"
            )
        weights, config = checkpoint_paths(path)
        if not weights.is_file() or not config.is_file():
            raise FileNotFoundError(
                f"YOLO({text!r}): expected a registered model name (e.g. yolo26n, yolo11s-pose; see "
                f"lucid_core.list_models()), lucid-core weights ({weights.name} + {config.name}) or a reference "
                ".pt checkpoint"
            )
        self.weights = weights.with_suffix("")

    # ------------------------------------------------------------------ the model behind this object
    def weights_path(self) -> Path:
        """lucid-core weights on disk (converting a reference ``.pt``, or saving an untrained model, once)."""
        if self.weights is not None:
            return self.weights
        if self.reference is not None:
            self.weights = self._converted(self.reference)
            return self.weights
        if self._scratch is None:  # an untrained model name: its random weights, saved once
            folder = Path(tempfile.mkdtemp(prefix="lucid-yolo-"))
            self._scratch = folder / self.key.name
            save_model(self.model, self._scratch, names=self._names, imgsz=640)
        return self._scratch

    @staticmethod
    def _converted(reference: Path) -> Path:
        """``lucid-convert REFERENCE $LUCID_CACHE_DIR/converted/<stem>-<sha8>`` (once per file content)."""
        from lucid_train.datamodule import cache_root  # deferred: the data module imports Lightning

        target = cache_root() / "converted" / f"{reference.stem}-{file_sha256(reference)[:8]}"
        if not checkpoint_paths(target)[0].is_file():
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                print(convert(reference, target).summary())
            except (CheckpointImportError, RefusedGlobalError, UsageError) as exc:
                raise TrainingSetupError(
                    f"YOLO({str(reference)!r}): lucid-convert refused the file: {exc}"
                ) from exc
        return target

    @property
    def model(self) -> Any:
        """The ``lucid_core`` YOLOModel (loaded on first use; a fresh one for a model name)."""
        if self._model is None:
            if self.weights is None and self.reference is None:
                self._model = build_model(
                    self.key.family, self.key.task, self.key.scale, num_classes=DEFAULT_NUM_CLASSES
                )
            else:
                checkpoint = load(self.weights_path())
                self._model, self._imgsz = checkpoint.model, int(checkpoint.imgsz)
                self._names = list(checkpoint.names)
        return self._model

    def _model_flags(self) -> list[str]:
        if self.weights is None and self.reference is None:
            family, scale, task = self.key.family, self.key.scale, self.key.task
            weights: list[str] = []
        else:
            path = self.weights_path()
            config = self.model.config
            family, scale, task = config.family, config.scale, config.task
            weights = ["--model.weights", str(path)]
        flags = ["--model.family", family, "--model.scale", scale, *weights]
        return flags + (["--model.task", task] if task != CLI_DEFAULT_TASK else [])

    # ------------------------------------------------------------------ fit
    def fit_command(
        self,
        data: str | os.PathLike[str] | None = None,
        epochs: int | None = None,
        **recipe: Any,
    ) -> list[str]:
        """The ``lucid-train`` command line (without the program name) that :meth:`fit` runs."""
        args = ["fit", *self._model_flags()]
        if data is not None:
            args += ["--data.root", os.fspath(data)]
        if epochs is not None:
            args += ["--trainer.max_epochs", str(int(epochs))]
        simple = {"imgsz": "data.imgsz", "batch": "data.batch_size", "workers": "data.workers"}
        flags = _recipe_flags()
        run_dir = recipe.pop("run_dir", None)
        project, name = recipe.pop("project", None), recipe.pop("name", None)
        if run_dir is None and (project is not None or name is not None):
            run_dir = Path(project or "runs") / (name or "train")
        if run_dir is not None:
            args += ["--trainer.default_root_dir", os.fspath(run_dir)]
        if "device" in recipe:
            args += _device_flags(recipe.pop("device"))
        if "seed" in recipe:
            seed = str(int(recipe.pop("seed")))
            args += ["--seed_everything", seed, "--data.seed", seed]
        for key, value in recipe.items():
            flag = simple.get(key) or flags.get(key) or (key if "." in key else None)
            if flag is None:
                known = sorted({*simple, *flags, "device", "seed", "run_dir", "project", "name"})
                raise TypeError(
                    f"YOLO.fit: unknown setting {key!r}; expected one of {known} or a dotted lucid-train flag "
                    "such as 'trainer.precision'"
                )
            args += [f"--{flag}", _flag_value(value)]
        return args

    def fit(
        self, data: str | os.PathLike[str] | None = None, epochs: int | None = None, **recipe: Any
    ) -> Path:
        """Train; returns the run directory. The same run as ``lucid-train`` with :meth:`fit_command`'s flags.

        Example (equivalent CLI command)::

            YOLO("yolo26n").fit(data="data.yaml", epochs=10, imgsz=96, lr0=0.004)
            # lucid-train fit --model.family yolo26 --model.scale n --data.root data.yaml \\
            #     --trainer.max_epochs 10 --data.imgsz 96 --optimizer.lr0 0.004

        With ``data=None`` the embedded default (the synthetic shapes run) is trained, as ``lucid-train fit``.
        Setup errors raise :class:`~lucid_train.errors.TrainingSetupError` (the CLI prints the same paragraph).
        """
        from lucid_train.cli import (  # deferred: Lightning, for fit only
            _check_config_files,
            build_cli,
            with_embedded_default,
        )

        args = with_embedded_default(self.fit_command(data, epochs, **recipe))
        _check_config_files(args)
        with warnings.catch_warnings():  # the CLI's own notice filters (lucid_train.cli.main)
            warnings.filterwarnings("ignore", message=r".*isinstance\(treespec, LeafSpec\).*")
            cli = build_cli(args)
        self.trainer = cli.trainer
        self.run_dir = Path(cli.trainer.default_root_dir)
        self.data = None if data is None else os.fspath(data)
        if self.data is None:
            self.data = str(cli.datamodule.root)
        best = self.run_dir / "best"
        if (self.run_dir / "best.safetensors").is_file():
            self.weights, self.reference, self._model = best, None, None
        return self.run_dir

    # ------------------------------------------------------------------ val
    def val(self, data: str | os.PathLike[str] | None = None, **options: Any) -> dict[str, Any]:
        """COCO-protocol scores on ``data`` (default: the data of the last ``fit``): the ``lucid-eval`` report.

        Example (equivalent CLI command)::

            YOLO("runs/train/best").val(data="data.yaml", output="runs/train/eval.json")
            # lucid-eval --weights runs/train/best --data data.yaml --output runs/train/eval.json

        ``options`` are :func:`lucid_train.eval.evaluate_checkpoint`'s: ``split``, ``imgsz``, ``batch``,
        ``square``, ``conf``, ``iou``, ``max_det``, ``decode``, ``backend``, ``device``, ``workers``, ``output``
        (default: ``eval.json`` beside the weights). Returns the report dict
        (``report["iou_types"]["bbox"]["mAP50-95"]`` …), also written to ``output``.
        """
        source = os.fspath(data) if data is not None else self.data
        if source is None:
            raise TrainingSetupError("YOLO.val: no data given and no fit ran; pass data=<dataset>")
        weights = self.weights_path()
        output = options.pop("output", None) or weights.parent / "eval.json"
        try:
            return evaluate_checkpoint(weights, source, output=output, **options)
        except (EvalInputError, UsageError) as exc:
            raise TrainingSetupError(str(exc)) from exc

    # ------------------------------------------------------------------ predict
    def predict(
        self,
        source: Any,
        *,
        output: str | os.PathLike[str] | None = None,
        imgsz: int | None = None,
        conf: float | None = None,
        iou: float | None = None,
        max_det: int | None = None,
        device: str = "cpu",
        decode: Literal["nms", "topk"] | None = None,
        classes: Sequence[int] | None = None,
        agnostic_nms: bool = False,
        stream: bool = False,
        batch: int = 1,
        vid_stride: int = 1,
        save: bool = False,
        save_txt: bool = False,
        save_crop: bool = False,
        save_json: bool = False,
        slice: int | None = None,
        overlap: float = 0.2,
    ) -> list[Results] | Iterator[Results]:
        """One :class:`lucid_core.Results` (original-image pixels) per image or frame of ``source``.

        ``source``: anything ``lucid_core.predict`` reads (images, folders, globs, ``.txt`` lists, videos, stream
        URLs, cameras, BGR arrays, tensors, PIL images). ``imgsz`` defaults to the weights'. ``classes`` /
        ``agnostic_nms``: keep only those class ids / class-agnostic NMS; ``stream=True`` returns a generator
        (memory stays flat over any video); ``batch``: frames per forward pass; ``vid_stride``: every n-th frame.
        With ``output``, each image or frame is predicted once and written as lucid-predict writes it
        (:func:`lucid_core.predict_cli.iter_predictions_to_dir`: one JSON per image by default; ``save``,
        ``save_txt``, ``save_crop``, ``save_json`` as its flags). ``slice``/``overlap``: sliced inference on
        ``slice``-pixel tiles (:func:`lucid_core.predict`'s). Example::

            YOLO("runs/train/best").predict("images/", output="runs/predict")
            # lucid-predict --weights runs/train/best --source images/ --output runs/predict
        """
        return self._infer(
            source,
            tracker=None,
            conf=float(PREDICT_CONF if conf is None else conf),
            output=output,
            imgsz=imgsz,
            iou=iou,
            max_det=max_det,
            device=device,
            decode=decode,
            classes=classes,
            agnostic_nms=agnostic_nms,
            stream=stream,
            batch=batch,
            vid_stride=vid_stride,
            save=save,
            save_txt=save_txt,
            save_crop=save_crop,
            save_json=save_json,
            slice=slice,
            overlap=overlap,
        )

    def _infer(
        self,
        source: Any,
        *,
        tracker: StreamTracker | None,
        conf: float,
        output: str | os.PathLike[str] | None,
        imgsz: int | None,
        iou: float | None,
        max_det: int | None,
        device: str,
        decode: Literal["nms", "topk"] | None,
        classes: Sequence[int] | None,
        agnostic_nms: bool,
        stream: bool,
        batch: int,
        vid_stride: int,
        save: bool,
        save_txt: bool,
        save_crop: bool,
        save_json: bool,
        slice: int | None = None,
        overlap: float = 0.2,
    ) -> list[Results] | Iterator[Results]:
        """:meth:`predict` (``tracker`` None) or :meth:`track`: in memory, or written as lucid-predict writes."""
        model = self.model  # loaded once: repeated calls reuse it and its prepared (fused) copy
        options: dict[str, Any] = {
            "imgsz": int(imgsz or self._imgsz),
            "conf": conf,
            "iou": float(DEFAULT_IOU if iou is None else iou),
            "max_det": int(DEFAULT_MAX_DET if max_det is None else max_det),
            "device": device,
            "classes": classes,
            "agnostic_nms": agnostic_nms,
            "batch": batch,
            "vid_stride": vid_stride,
        }
        if output is None:
            results = (
                predict(model, source, decode=decode, stream=True, names=self._names, slice=slice,
                        overlap=overlap, **options)
                if tracker is None
                else track_frames(model, source, tracker=tracker, decode=decode, stream=True, names=self._names,
                                  **options)
            )  # fmt: skip
            return results if stream else list(results)
        net, mode = cached_inference_model(model, decode=decode, device=device)
        written = iter_predictions_to_dir(
            net,
            source,
            output,
            mode=mode,
            names=self._names,
            save=save,
            save_txt=save_txt,
            save_crop=save_crop,
            save_json=save_json,
            weights=self.weights,
            tracker=tracker,
            slice=slice,
            overlap=overlap,
            **options,
        )
        found = self._found(written, source)
        return found if stream else list(found)

    # ------------------------------------------------------------------ track
    def _stream_tracker(self, tracker: TrackerSpec, persist: bool) -> StreamTracker:
        """The tracker a ``track`` call uses: the kept one when ``persist`` and its settings are the same as
        ``tracker``'s, else a fresh one (kept for the next ``persist=True`` call)."""
        fresh = StreamTracker(tracker)
        kept = self._tracker
        if persist and kept is not None and kept.config == fresh.config:
            return kept
        self._tracker = fresh
        return fresh

    def track(
        self,
        source: Any,
        *,
        tracker: TrackerSpec = "bytetrack",
        persist: bool = False,
        output: str | os.PathLike[str] | None = None,
        imgsz: int | None = None,
        conf: float | None = None,
        iou: float | None = None,
        max_det: int | None = None,
        device: str = "cpu",
        decode: Literal["nms", "topk"] | None = None,
        classes: Sequence[int] | None = None,
        agnostic_nms: bool = False,
        stream: bool = False,
        batch: int = 1,
        vid_stride: int = 1,
        save: bool = False,
        save_txt: bool = False,
        save_crop: bool = False,
        save_json: bool = False,
    ) -> list[Results] | Iterator[Results]:
        """:meth:`predict` with the objects followed across frames: each ``Results`` holds the tracked detections
        and their IDs in ``boxes.id`` (:func:`lucid_core.track.track`; docs/TRACKING.md).

        ``tracker``: ``"bytetrack"``, ``"botsort"``, a tracker YAML, a mapping or a config. ``persist=True``
        continues the tracks and IDs of this object's previous ``persist`` call (e.g. one frame per call); a new
        video still restarts them, and without ``persist`` every call starts afresh. ``conf`` defaults to the
        tracker's ``track_low_thresh``; the other options are :meth:`predict`'s. With ``output`` the files of
        ``lucid-predict --track`` are written (IDs in every record, a MOTChallenge ``<stem>.txt`` per video).
        Example::

            for result in YOLO("runs/train/best").track("clip.mp4", stream=True):
                print(result.boxes.id)
            # lucid-predict --weights runs/train/best --source clip.mp4 --output runs/track --track
        """
        session = self._stream_tracker(tracker, persist)
        return self._infer(
            source,
            tracker=session,
            conf=float(session.default_conf if conf is None else conf),
            output=output,
            imgsz=imgsz,
            iou=iou,
            max_det=max_det,
            device=device,
            decode=decode,
            classes=classes,
            agnostic_nms=agnostic_nms,
            stream=stream,
            batch=batch,
            vid_stride=vid_stride,
            save=save,
            save_txt=save_txt,
            save_crop=save_crop,
            save_json=save_json,
        )

    @staticmethod
    def _found(
        written: Generator[Results, None, PredictionRun], source: Any
    ) -> Generator[Results, None, None]:
        """The results of ``written``; a source that named no image or video raises ``TrainingSetupError``."""
        run = yield from written
        if not run.images and not run.processed and not run.skipped:
            raise TrainingSetupError(f"YOLO.predict: no image or video files in {source}")

    # ------------------------------------------------------------------ export
    def export(
        self,
        format: str = "onnx",
        *,
        imgsz: int | None = None,
        dynamic_batch: bool = False,
        half: bool = False,
        output: str | os.PathLike[str] | None = None,
        check: bool = True,
        batch: int = 1,
        int8: bool = False,
        data: str | os.PathLike[str] | None = None,
        fraction: float = 1.0,
        nms: bool = False,
    ) -> Path:
        """Export the weights (``lucid-export``: torchscript, onnx, openvino, engine, coreml) and print its parity
        check; returns the written file (an OpenVINO IR: its folder).

        Example (equivalent CLI command)::

            YOLO("runs/train/best").export("openvino", int8=True, data="data.yaml")
            # lucid-export runs/train/best --format openvino --int8 --data data.yaml

        The file goes beside the weights unless ``output`` is given (an untrained model name: named after it in
        the working directory). A failed parity check raises ``RuntimeError``.
        """
        weights = self.weights_path()
        if output is None and self.weights is None and self.reference is None:
            output = default_output(Path.cwd() / self.key.name, format, int8=int8)
        try:
            result = export(
                weights,
                format=format,
                imgsz=imgsz,
                dynamic_batch=dynamic_batch,
                half=half,
                output=output,
                check=check,
                batch=batch,
                int8=int8,
                data=data,
                fraction=fraction,
                nms=nms,
            )
        except ExportInputError as exc:
            raise TrainingSetupError(str(exc)) from exc
        if not print_report(result):
            raise RuntimeError(
                f"lucid-export: {result.path}: the runtime's outputs differ from PyTorch (see above)"
            )
        return result.path

    def __repr__(self) -> str:
        return f"YOLO({self.source!r}, weights={None if self.weights is None else str(self.weights)!r})"


def evaluate(model: Any, data: str | os.PathLike[str] | Any, **options: Any) -> Any:
    """COCO-protocol scores (``lucid_train.EvalResult``) of ``model`` on the ``val`` split of ``data``.

    ``model``: a ``lucid_core`` YOLOModel, lucid-core weights or a reference ``.pt`` (a path; ``imgsz`` then defaults
    to the weights').
    ``data``: a dataset path (YOLO data YAML, COCO JSON/folder, DOTA folder), a ``DatasetSource`` or a
    ``DetectionDataset``. ``options`` go to :func:`lucid_train.eval.evaluate_model` (``imgsz``, ``batch_size``,
    ``conf``, ``iou``, ``max_det``, ``decode``, ``device``, ``backend``…), whose pipeline ``lucid-eval`` runs too.
    """
    if isinstance(model, str | os.PathLike):
        checkpoint = load(model)
        options.setdefault("imgsz", checkpoint.imgsz)
        model = checkpoint.model
    source = os.fspath(data) if isinstance(data, os.PathLike) else data
    return evaluate_model(model, source, **options)
