"""Dataset readers: YOLO txt (`yolo`), COCO JSON (`coco`), DOTA labelTxt (`dota`), folder-per-class
classification (`folders`), layout probing (`probe`)."""

from lucid_data.readers.coco import read_coco
from lucid_data.readers.common import LabelError, LabelProblem, corners_to_rbox, rbox_to_corners
from lucid_data.readers.dota import merge_tile_predictions, read_dota, tile_targets, tile_windows
from lucid_data.readers.folders import FolderLayoutError, read_folders
from lucid_data.readers.probe import detect_layout, load_dataset
from lucid_data.readers.yolo import read_yolo

__all__ = [
    "FolderLayoutError",
    "LabelError",
    "LabelProblem",
    "corners_to_rbox",
    "detect_layout",
    "load_dataset",
    "merge_tile_predictions",
    "rbox_to_corners",
    "read_coco",
    "read_dota",
    "read_folders",
    "read_yolo",
    "tile_targets",
    "tile_windows",
]
