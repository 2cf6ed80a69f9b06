"""tools/probe_mosaic_partners.py: the marker set, the reference's progress lines, and our side (no reference)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lucid_data import load_dataset
from tool_testing import load_tool

probe = load_tool("probe_mosaic_partners")

#: progress lines as the reference prints them: ``epoch/epochs mem losses... instances size: pct bar k/batches``,
#: separated by carriage-return escapes; the line after the last batch repeats the last batch's count
LOG = "".join(
    f"\r       {epoch}/2         0G      {loss}      4.9      {loss}         {count}         96: "
    f"{pct}% ━━━━──── {k}/3 4.1it/s 1.0s<0.5s\x1b[K"
    for epoch, rows in ((1, [(0, 0), (1, 12), (2, 0), (3, 0)]), (2, [(0, 7), (1, 0), (2, 30), (3, 30)]))
    for (k, count), pct in zip(rows, (0, 33, 66, 100), strict=True)
    for loss in ("0" if count == 0 else "1.234",)
)


def test_the_marker_set_labels_one_training_image(tmp_path: Path) -> None:
    data = probe.write_marker_dataset(tmp_path / "d", images=6, marker=4)
    train = load_dataset(str(data), split="train")
    labelled = [i for i, record in enumerate(train.records) if len(record.targets.labels)]
    assert len(train.records) == 6 and labelled == [4]
    assert len(train.records[4].targets.labels) == 9  # the 3 x 3 grid
    with pytest.raises(ValueError, match="marker 6 is outside 6 images"):
        probe.write_marker_dataset(tmp_path / "e", images=6, marker=6)


def test_progress_lines_give_each_batch_its_instances() -> None:
    counts = probe.batch_instances(LOG)
    assert counts == {(0, 0): 0, (0, 1): 12, (0, 2): 0, (1, 0): 7, (1, 1): 0, (1, 2): 30}
    assert probe.marker_batches(counts) == {0: [1], 1: [0, 2]}
    lines = list(probe.summary("reference", probe.marker_batches(counts), 16))
    assert lines[:2] == ["reference epoch 0: batches [1] span 0", "reference epoch 1: batches [0, 2] span 2"]
    assert (
        lines[-1]
        == "reference: batch 16, 2 epochs with the marker, 1.5 batches per epoch, span median 1.0, spans [0, 2]"
    )


def test_our_side_counts_every_batch_of_every_epoch(tmp_path: Path) -> None:
    data = probe.write_marker_dataset(tmp_path / "d", images=20, marker=10)
    counts = probe.our_instances(data, batch=4, epochs=2, imgsz=48, recent=None)
    assert sorted(counts) == [(e, k) for e in range(2) for k in range(5)]
    hits = probe.marker_batches(counts)
    assert all(hits[e] for e in range(2))  # the marker's own sample shows in its epoch
