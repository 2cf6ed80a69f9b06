"""MOTChallenge tracking metrics (HOTA, CLEAR MOT, IDF1): hand-made cases, and agreement with ``trackeval`` to 1e-6
on random sequences and on the shared TUD-Stadtmitte sequence tracked by lucid-track."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lucid_core.track.mot_io import RESULT_COLUMNS, MotFormatError, read_mot_file
from lucid_core.track_cli import track_detection_file
from lucid_train.eval.mot import build_sequence, evaluate_sequences, evaluate_tracking, track_main

HOTA_KEYS = ("HOTA", "DetA", "AssA", "DetRe", "DetPr", "AssRe", "AssPr", "LocA")
CLEAR_KEYS = ("MOTA", "MOTP", "MODA", "CLR_TP", "CLR_FN", "CLR_FP", "IDSW", "MT", "PT", "ML", "Frag")
ID_KEYS = ("IDF1", "IDR", "IDP", "IDTP", "IDFN", "IDFP")


def write(path: Path, rows: list[tuple[float, ...]] | np.ndarray) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(",".join(f"{v:g}" for v in row) + "\n" for row in rows))
    return path


def gt_rows(frames: int = 10) -> list[tuple[float, ...]]:
    return [
        (f, i, 10 + 100 * i + 2 * f, 20, 40, 80, 1, -1, -1, -1) for f in range(1, frames + 1) for i in (1, 2)
    ]


def test_perfect_tracking_scores_one(tmp_path: Path) -> None:
    gt = write(tmp_path / "gt.txt", gt_rows())
    pred = write(tmp_path / "pred.txt", [(r[0], r[1] + 6, *r[2:6], 0.9, -1, -1, -1) for r in gt_rows()])
    m = evaluate_tracking(gt, pred)
    for key in ("HOTA", "DetA", "AssA", "LocA", "MOTA", "MOTP", "IDF1"):
        assert m[key] == pytest.approx(1.0)
    assert (m["IDSW"], m["MT"], m["ML"], m["Frag"], m["GT_IDs"], m["Pred_IDs"]) == (0, 2, 0, 0, 2, 2)


def test_an_id_switch_and_a_miss_by_hand(tmp_path: Path) -> None:
    gt = write(tmp_path / "gt.txt", gt_rows())
    pred = []
    for r in gt_rows():
        frame, obj = int(r[0]), int(r[1])
        if obj == 2 and frame == 3:
            continue  # one miss
        track = 5 if obj == 1 and frame > 6 else obj  # object 1 changes ID after frame 6
        pred.append((frame, track, *r[2:6], 0.9, -1, -1, -1))
    m = evaluate_tracking(gt, write(tmp_path / "pred.txt", pred))
    assert (m["CLR_TP"], m["CLR_FN"], m["CLR_FP"], m["IDSW"]) == (19, 1, 0, 1)
    assert m["MOTA"] == pytest.approx((19 - 0 - 1) / 20)
    assert m["Frag"] == 1  # object 2: tracked, missed, tracked again
    # IDF1: object 1 keeps its 6-frame ID, the 4 frames under ID 5 are IDFN and IDFP; object 2 misses one frame
    assert (m["IDTP"], m["IDFN"], m["IDFP"]) == (15, 5, 4)
    assert m["IDF1"] == pytest.approx(15 / (15 + 0.5 * 4 + 0.5 * 5))


def test_no_predictions(tmp_path: Path) -> None:
    gt = write(tmp_path / "gt.txt", gt_rows())
    pred = tmp_path / "pred.txt"
    pred.write_text("")
    m = evaluate_tracking(gt, pred)
    assert (m["HOTA"], m["MOTA"], m["IDF1"], m["ML"], m["CLR_FN"]) == (0, 0, 0, 2, 20)


def test_zero_marked_ground_truth_and_distractors(tmp_path: Path) -> None:
    rows = [(1, 1, 0, 0, 10, 10, 1, 1, 1), (1, 2, 50, 50, 10, 10, 1, 8, 1), (1, 3, 100, 100, 10, 10, 0, 1, 1)]
    gt = write(tmp_path / "gt.txt", rows)
    pred = write(
        tmp_path / "pred.txt",
        [(1, 1, 0, 0, 10, 10, 1), (1, 2, 50, 50, 10, 10, 1), (1, 3, 100, 100, 10, 10, 1)],
    )
    plain = evaluate_tracking(gt, pred)  # only the conf = 0 row ignored: object 3 still counts as an FP
    assert (plain["GT_Dets"], plain["CLR_TP"], plain["CLR_FP"]) == (2, 2, 1)
    mot17 = evaluate_tracking(gt, pred, distractor_classes=(2, 7, 8, 12))
    assert (mot17["GT_Dets"], mot17["CLR_TP"], mot17["CLR_FP"], mot17["Pred_Dets"]) == (1, 1, 1, 2)


def test_duplicate_ids_in_a_frame_are_refused(tmp_path: Path) -> None:
    gt = write(tmp_path / "gt.txt", gt_rows(2))
    pred = write(tmp_path / "pred.txt", [(1, 4, 0, 0, 5, 5, 1), (1, 4, 9, 9, 5, 5, 1)])
    with pytest.raises(MotFormatError, match=r"pred\.txt: frame 1 has ID 4 more than once"):
        evaluate_tracking(gt, pred)


def random_sequence(rng: np.random.Generator, frames: int, objects: int) -> tuple[np.ndarray, np.ndarray]:
    """Ground truth of crossing boxes and a noisy tracker output: misses, jitter, false positives, ID swaps."""
    gt, pred = [], []
    start = rng.uniform(0, 300, size=(objects, 2))
    velocity = rng.normal(0, 4, size=(objects, 2))
    size = rng.uniform(20, 60, size=(objects, 2))
    alive = [
        (int(a), int(a + rng.integers(frames // 3, frames))) for a in rng.integers(1, frames // 2, objects)
    ]
    next_id = 100
    ids = list(range(1, objects + 1))
    for f in range(1, frames + 1):
        if rng.random() < 0.1:  # two tracks swap identities
            i, j = rng.choice(objects, 2, replace=False)
            ids[i], ids[j] = ids[j], ids[i]
        if rng.random() < 0.05:  # a track gets a fresh ID
            ids[int(rng.integers(objects))] = next_id
            next_id += 1
        for k in range(objects):
            if not alive[k][0] <= f <= alive[k][1]:
                continue
            x, y = start[k] + velocity[k] * f
            gt.append((f, k + 1, x, y, *size[k], 1 if rng.random() > 0.03 else 0, -1, -1, -1))
            if rng.random() < 0.15:
                continue
            jitter = rng.normal(0, 0.15, size=4) * np.r_[size[k], size[k]]
            pred.append((f, ids[k], x + jitter[0], y + jitter[1], *(size[k] + jitter[2:]), 1, -1, -1, -1))
        for _ in range(rng.poisson(0.7)):
            pred.append((f, next_id, *rng.uniform(0, 400, 2), *rng.uniform(20, 60, 2), 1, -1, -1, -1))
            next_id += 1
    return np.array(gt), np.array(pred)


def trackeval_scores(sequences: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """trackeval's own metric classes on our parsed sequences, combined over sequences by trackeval."""
    trackeval = pytest.importorskip("trackeval")
    metrics = [
        trackeval.metrics.HOTA({"PRINT_CONFIG": False}),
        trackeval.metrics.CLEAR({"PRINT_CONFIG": False}),
        trackeval.metrics.Identity({"PRINT_CONFIG": False}),
    ]
    per_seq: list[dict[str, dict[str, object]]] = [{} for _ in metrics]
    for name, (gt, pred) in sequences.items():
        seq = build_sequence(gt, pred)
        data = {
            "num_timesteps": len(seq.gt_ids),
            "num_gt_ids": seq.num_gt_ids,
            "num_tracker_ids": seq.num_pred_ids,
            "num_gt_dets": seq.num_gt_dets,
            "num_tracker_dets": seq.num_pred_dets,
            "gt_ids": seq.gt_ids,
            "tracker_ids": seq.pred_ids,
            "similarity_scores": seq.similarity,
        }
        for store, metric in zip(per_seq, metrics):
            store[name] = metric.eval_sequence(data)
    out: dict[str, float] = {}
    for store, metric in zip(per_seq, metrics):
        combined = metric.combine_sequences(store)
        out.update({k: float(np.mean(v)) for k, v in combined.items()})
    out["CLR_TP"], out["CLR_FN"], out["CLR_FP"] = out.pop("CLR_TP"), out.pop("CLR_FN"), out.pop("CLR_FP")
    return out


def test_random_sequences_agree_with_trackeval(tmp_path: Path) -> None:
    rng = np.random.default_rng(7)
    sequences = {f"seq{i}": random_sequence(rng, frames=60, objects=6 + 2 * i) for i in range(3)}
    for name, (gt, pred) in sequences.items():
        write(tmp_path / "gt" / name / "gt" / "gt.txt", gt)
        write(tmp_path / "pred" / f"{name}.txt", pred)
    expected = trackeval_scores(sequences)
    ours = evaluate_sequences(tmp_path / "gt", tmp_path / "pred")
    assert set(ours) == {"seq0", "seq1", "seq2", "COMBINED"}
    for key in HOTA_KEYS + CLEAR_KEYS + ID_KEYS:
        assert ours["COMBINED"][key] == pytest.approx(expected[key], abs=1e-6), key
    assert ours["COMBINED"]["IDSW"] > 0 and ours["COMBINED"]["CLR_FP"] > 0


@pytest.mark.shared
def test_tud_stadtmitte_agrees_with_trackeval_end_to_end(shared_dir: Path, tmp_path: Path) -> None:
    """lucid-track's results on the shared detections, scored by trackeval's MOTChallenge pipeline and by ours."""
    trackeval = pytest.importorskip("trackeval")
    sequence = "TUD-Stadtmitte"
    source = shared_dir / "data" / "mot-tud" / sequence
    gt_dir = tmp_path / "gt" / sequence
    (gt_dir / "gt").mkdir(parents=True)
    gt_file = gt_dir / "gt" / "gt.txt"
    gt_file.write_bytes((source / "gt.txt").read_bytes())
    frames = int(read_mot_file(gt_file)[:, 0].max())
    (gt_dir / "seqinfo.ini").write_text(f"[Sequence]\nname={sequence}\nseqLength={frames}\n")
    (tmp_path / "seqmap.txt").write_text(f"name\n{sequence}\n")
    for tracker in ("bytetrack", "botsort"):
        results = tmp_path / "trackers" / tracker / "data" / f"{sequence}.txt"
        track_detection_file(source / "det_seed0.txt", results, tracker=tracker)
        assert read_mot_file(results, RESULT_COLUMNS).shape[0] > 0
    evaluator = trackeval.Evaluator(
        {
            "USE_PARALLEL": False,
            "PRINT_RESULTS": False,
            "PRINT_CONFIG": False,
            "OUTPUT_SUMMARY": False,
            "OUTPUT_DETAILED": False,
            "PLOT_CURVES": False,
            "TIME_PROGRESS": False,
            "DISPLAY_LESS_PROGRESS": True,
        }
    )
    dataset = trackeval.datasets.MotChallenge2DBox(
        {
            "GT_FOLDER": str(tmp_path / "gt"),
            "TRACKERS_FOLDER": str(tmp_path / "trackers"),
            "BENCHMARK": "MOT15",
            "SKIP_SPLIT_FOL": True,
            "SEQMAP_FILE": str(tmp_path / "seqmap.txt"),
            "TRACKERS_TO_EVAL": ["bytetrack", "botsort"],
            "OUTPUT_FOLDER": str(tmp_path / "out"),
            "PRINT_CONFIG": False,
        }
    )
    metrics = [trackeval.metrics.HOTA(), trackeval.metrics.CLEAR(), trackeval.metrics.Identity()]
    results, _ = evaluator.evaluate([dataset], metrics)
    for tracker in ("bytetrack", "botsort"):
        expected = results["MotChallenge2DBox"][tracker][sequence]["pedestrian"]
        ours = evaluate_tracking(gt_file, tmp_path / "trackers" / tracker / "data" / f"{sequence}.txt")
        for key in HOTA_KEYS:
            assert ours[key] == pytest.approx(float(np.mean(expected["HOTA"][key])), abs=1e-6), key
        for key in CLEAR_KEYS:
            assert ours[key] == pytest.approx(float(expected["CLEAR"][key]), abs=1e-6), key
        for key in ID_KEYS:
            assert ours[key] == pytest.approx(float(expected["Identity"][key]), abs=1e-6), key


def test_track_main_prints_and_writes_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gt = write(tmp_path / "gt.txt", gt_rows())
    pred = write(tmp_path / "pred.txt", [(r[0], r[1], *r[2:6], 0.9) for r in gt_rows()])
    report = tmp_path / "metrics.json"
    assert track_main(["--gt", str(gt), "--pred", str(pred), "--output", str(report)]) == 0
    out = capsys.readouterr().out
    assert "HOTA" in out.splitlines()[0] and out.splitlines()[1].startswith("pred ")
    assert "COMBINED" not in out  # one sequence
    data = json.loads(report.read_text())
    assert data["COMBINED"]["IDF1"] == pytest.approx(1.0)
    assert track_main(["--gt", str(gt), "--pred", str(tmp_path / "nope")]) == 2
    assert "expected two files" in capsys.readouterr().err
