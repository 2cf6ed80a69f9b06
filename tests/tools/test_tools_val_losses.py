"""tools/compare_val_losses.py: reading the reference's logged validation losses and printing the comparison."""

from __future__ import annotations

from pathlib import Path

import pytest

from tool_testing import load_tool

compare_val_losses = load_tool("compare_val_losses")


def test_reads_the_val_columns_of_an_epoch_row(tmp_path: Path) -> None:
    results = tmp_path / "results.csv"
    results.write_text(
        "epoch, train/box_loss, val/box_loss, val/cls_loss, metrics/mAP50-95(B)\n"
        "1, 3.0, 2.5, 4.0, 0.01\n"
        "2, 2.0, 1.5, 2.0, 0.2\n",
        encoding="utf-8",
    )
    assert compare_val_losses.reference_val_losses(results, 1) == {"box_loss": 1.5, "cls_loss": 2.0}
    with pytest.raises(ValueError, match="no row for epoch 2"):
        compare_val_losses.reference_val_losses(results, 2)


def test_the_comparison_names_every_item_and_flags_unlogged_ones() -> None:
    line = compare_val_losses.format_comparison(
        {"box_loss": 1.0, "sem_loss": 2.0}, {"box_loss": 0.5, "sem_loss": 0.0}
    )
    assert line == "box_loss 1.00000/0.50000 (2.0000), sem_loss 2.00000/0.00000 (ref 0)"
