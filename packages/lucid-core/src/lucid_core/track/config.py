"""Tracker settings: one dataclass per tracker, read from a small YAML (``configs/bytetrack.yaml``, ``botsort.yaml``).

``load_tracker_config("bytetrack" | "botsort" | path.yaml | mapping)`` returns the dataclass; a YAML's
``tracker_type`` picks the tracker and every other key must be a field of its dataclass (an unknown key or a value
of the wrong type is a :class:`TrackerConfigError` naming the file and the key). Defaults are the reference
implementation's documented settings; docs/TRACKING.md lists them.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

__all__ = [
    "CONFIG_DIR",
    "TRACKER_NAMES",
    "TRACKING_EXTRA",
    "BotSortConfig",
    "ByteTrackConfig",
    "MissingExtraError",
    "TrackerConfig",
    "TrackerConfigError",
    "load_tracker_config",
    "read_yaml_mapping",
]

#: folder of the shipped ``<name>.yaml`` files.
CONFIG_DIR = Path(__file__).resolve().parent / "configs"
TRACKER_NAMES = ("bytetrack", "botsort")
#: the install line every "missing optional dependency" message of lucid_core.track names.
TRACKING_EXTRA = 'pip install "lucid-core[tracking]"'


class MissingExtraError(ImportError):
    """An optional dependency of the ``tracking`` extra is not installed; the message names the install line."""


class TrackerConfigError(ValueError):
    """A tracker YAML or mapping cannot be used; the message names the file (or ``<mapping>``) and the key."""


@dataclass(frozen=True)
class ByteTrackConfig:
    """ByteTrack settings (Zhang et al. 2022); thresholds are detection scores or association costs in [0, 1]."""

    tracker_type: Literal["bytetrack", "botsort"] = "bytetrack"
    track_high_thresh: float = 0.25
    track_low_thresh: float = 0.1
    new_track_thresh: float = 0.25
    track_buffer: int = 30
    match_thresh: float = 0.8
    fuse_score: bool = True
    frame_rate: float = 30.0
    #: second association (the tracks left vs low-score detections): largest ``1 - IoU`` matched.
    low_match_thresh: float = 0.5
    #: unconfirmed tracks (seen in one frame) vs the high detections left: largest cost matched.
    unconfirmed_match_thresh: float = 0.7
    #: a tracked and a lost track closer than this ``1 - IoU`` are one object: the younger one is dropped.
    duplicate_thresh: float = 0.15

    @property
    def max_time_lost(self) -> int:
        """Frames a lost track survives: ``track_buffer`` scaled to the frame rate."""
        return int(self.frame_rate / 30.0 * self.track_buffer)

    def __post_init__(self) -> None:
        if not 0.0 <= self.track_low_thresh <= self.track_high_thresh:
            raise TrackerConfigError(
                f"track_low_thresh {self.track_low_thresh} must lie in [0, track_high_thresh "
                f"{self.track_high_thresh}]"
            )
        if self.track_buffer < 0 or self.frame_rate <= 0:
            raise TrackerConfigError(
                f"track_buffer {self.track_buffer} must be >= 0 and frame_rate {self.frame_rate} > 0"
            )


@dataclass(frozen=True)
class BotSortConfig(ByteTrackConfig):
    """BoT-SORT settings (Aharon et al. 2022): ByteTrack's plus camera-motion compensation.

    ``proximity_thresh`` / ``appearance_thresh`` gate appearance costs; they are kept for the YAML's sake, as no
    appearance (ReID) model is built in and ``with_reid: true`` is refused.
    """

    tracker_type: Literal["bytetrack", "botsort"] = "botsort"
    gmc_method: Literal["sparseOptFlow", "none"] = "sparseOptFlow"
    gmc_downscale: int = 2
    proximity_thresh: float = 0.5
    appearance_thresh: float = 0.8
    with_reid: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.with_reid:
            raise TrackerConfigError("with_reid: true is not supported (no appearance model is built in)")
        if self.gmc_method not in ("sparseOptFlow", "none"):
            raise TrackerConfigError(f"gmc_method {self.gmc_method!r}: expected sparseOptFlow or none")
        if self.gmc_downscale < 1:
            raise TrackerConfigError(f"gmc_downscale {self.gmc_downscale} must be >= 1")


TrackerConfig = ByteTrackConfig  # BotSortConfig is a subclass
_CLASSES: dict[str, type[ByteTrackConfig]] = {"bytetrack": ByteTrackConfig, "botsort": BotSortConfig}


def read_yaml_mapping(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The top-level mapping of a YAML file (an empty file is ``{}``); anything else is a TrackerConfigError."""
    try:
        import yaml  # the `tracking` extra of lucid-core
    except ImportError as exc:  # pragma: no cover - pyyaml is installed with the extra
        raise MissingExtraError(f"reading a tracker YAML needs pyyaml: {TRACKING_EXTRA}") from exc
    text = Path(path).read_text(encoding="utf-8")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise TrackerConfigError(f"{path}: not valid YAML ({exc})") from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise TrackerConfigError(f"{path}: expected a mapping of settings, got {type(data).__name__}")
    return {str(k): v for k, v in data.items()}


def _coerce(source: str, name: str, kind: Any, value: Any) -> Any:
    """``value`` as the field's type (an int is a valid float; a bool is never a number)."""
    text = str(kind)
    if text == "bool":
        if isinstance(value, bool):
            return value
    elif text == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif text == "float":
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    elif isinstance(value, str):  # a Literal: checked by the dataclass
        return value
    raise TrackerConfigError(f"{source}: {name}: expected {text}, got {value!r}")


def _from_mapping(
    data: Mapping[str, Any], source: str, name: str | None, overrides: Mapping[str, Any]
) -> ByteTrackConfig:
    settings = {**data, **overrides}
    kind = str(settings.pop("tracker_type", name or "bytetrack")).lower()
    if name is not None and kind != name:
        raise TrackerConfigError(
            f"{source}: tracker_type {kind!r} does not match the tracker {name!r} asked for"
        )
    if kind not in _CLASSES:
        raise TrackerConfigError(
            f"{source}: tracker_type {kind!r}: expected one of {', '.join(TRACKER_NAMES)}"
        )
    cls = _CLASSES[kind]
    known = {f.name: f.type for f in fields(cls) if f.name != "tracker_type"}
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise TrackerConfigError(
            f"{source}: unknown setting(s) {', '.join(unknown)} for {kind}; known: {', '.join(sorted(known))}"
        )
    values = {key: _coerce(source, key, known[key], value) for key, value in settings.items()}
    try:
        return cls(tracker_type=kind, **values)  # type: ignore[arg-type]
    except TrackerConfigError as exc:
        raise TrackerConfigError(f"{source}: {exc}") from None


def load_tracker_config(
    tracker: str | os.PathLike[str] | Mapping[str, Any] | ByteTrackConfig = "bytetrack",
    *,
    config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
    **overrides: Any,
) -> ByteTrackConfig:
    """The settings of ``tracker`` (a name, a YAML path, a mapping or a config), then ``config`` and ``overrides``.

    A name starts from the shipped YAML of that tracker; ``config`` (a YAML path or a mapping) replaces some of its
    settings and must not name another ``tracker_type``; ``overrides`` are keyword settings applied last.
    """
    name: str | None
    if isinstance(tracker, ByteTrackConfig):
        base: dict[str, Any] = dataclasses.asdict(tracker)
        source, name = "<config>", tracker.tracker_type
    elif isinstance(tracker, Mapping):
        base, source, name = dict(tracker), "<mapping>", None
    elif str(tracker).lower() in TRACKER_NAMES:
        name = str(tracker).lower()
        path = CONFIG_DIR / f"{name}.yaml"
        base, source = read_yaml_mapping(path), str(path)
    else:
        path = Path(tracker)
        if not path.is_file():
            raise TrackerConfigError(
                f"tracker {str(tracker)!r}: neither {' nor '.join(TRACKER_NAMES)} nor a YAML file"
            )
        base, source, name = read_yaml_mapping(path), str(path), None
    resolved = _from_mapping(base, source, name, {})
    if config is not None:
        extra = dict(config) if isinstance(config, Mapping) else read_yaml_mapping(config)
        source = "<mapping>" if isinstance(config, Mapping) else str(config)
        base = {k: v for k, v in dataclasses.asdict(resolved).items()}
        resolved = _from_mapping(base, source, resolved.tracker_type, extra)
    if overrides:
        base = dataclasses.asdict(resolved)
        resolved = _from_mapping(base, "<keyword>", resolved.tracker_type, overrides)
    return resolved
