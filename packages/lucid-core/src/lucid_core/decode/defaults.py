"""The reference's documented decode defaults: validation conf 0.001 / iou 0.7, prediction conf 0.25 / iou 0.7,
max_det 300."""

VAL_CONF = 0.001
PREDICT_CONF = 0.25
DEFAULT_IOU = 0.7
DEFAULT_MAX_DET = 300
