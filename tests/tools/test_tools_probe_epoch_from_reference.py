"""tools/probe_epoch_from_reference.py: the reference's optimiser groups by name, the state copy, the epoch's lr
(no reference run needed: the committed canary checkpoint's module tree)."""

from __future__ import annotations

import os

import pytest
import torch

from lucid_core.interop.reference import import_checkpoint, read_reference_checkpoint, reference_to_lucid_key
from lucid_core.optim.param_groups import build_param_groups
from lucid_core.optim.schedule import linear_lr_factor
from tool_testing import load_tool

probe = load_tool("probe_epoch_from_reference")
record_reference = load_tool("record_reference")
CANARY = record_reference.CANARY_DIR / "shapes_yolo26n_detect_seed0_last.refpt"


def _our_groups(model: torch.nn.Module) -> list[dict]:
    return build_param_groups(
        model, optimizer="AdamW", lr=0.004, momentum=0.9, weight_decay=5e-4, batch_size=16
    )


def test_reference_groups_name_the_parameters_our_routing_puts_in_each_group() -> None:
    checkpoint = read_reference_checkpoint(CANARY)
    names = probe.reference_group_names(checkpoint["model"])
    model = import_checkpoint(CANARY)[0]
    ours = {g["param_group"]: set(g["param_names"]) for g in _our_groups(model)}
    for kind in ("weight", "bn", "bias"):
        assert {reference_to_lucid_key(n) for n in names[kind]} == ours[kind], kind
        assert len(names[kind]) == len(set(names[kind]))


def _reference_optimizer(names: dict[str, list[str]], model: torch.nn.Module) -> dict:
    params = dict(model.named_parameters())
    state, groups, index = {}, [], 0
    for kind in ("weight", "bn", "bias"):
        indices = []
        for name in names[kind]:
            shape = params[reference_to_lucid_key(name)].shape
            state[index] = {
                "step": torch.tensor(7.0),
                "exp_avg": torch.full(shape, index + 0.5),
                "exp_avg_sq": torch.ones(shape),
            }
            indices.append(index)
            index += 1
        groups.append({"param_group": kind, "params": indices})
    return {"state": state, "param_groups": groups}


def test_the_state_reaches_each_parameter_by_name_and_a_mismatch_is_named() -> None:
    checkpoint = read_reference_checkpoint(CANARY)
    model = import_checkpoint(CANARY)[0]
    names = probe.reference_group_names(checkpoint["model"])
    checkpoint = {"ema": checkpoint["model"], "optimizer": _reference_optimizer(names, model)}
    optimizer = torch.optim.AdamW(_our_groups(model))
    assert probe.load_reference_optimizer(optimizer, checkpoint) == sum(len(v) for v in names.values())
    params = dict(model.named_parameters())
    first_bias = params[reference_to_lucid_key(names["bias"][0])]
    expected = len(names["weight"]) + len(names["bn"]) + 0.5
    assert torch.all(optimizer.state[first_bias]["exp_avg"] == expected)
    wrong = checkpoint["optimizer"]["state"][0]
    wrong["exp_avg"] = torch.zeros(1)
    with pytest.raises(ValueError, match=r"reference moments \(1,\)"):
        probe.load_reference_optimizer(torch.optim.AdamW(_our_groups(model)), checkpoint)


def test_epoch_lr_is_the_linear_schedule() -> None:
    recipe = {"lr0": 0.004, "lrf": 0.01}
    assert probe.epoch_lr(recipe, 7, 10) == pytest.approx(0.001228)
    assert probe.epoch_lr(recipe, 0, 10) == pytest.approx(0.004)


def _recorded_run(root, epochs: int = 3):
    run = root / "ref" / "gate" / "seed4"
    (run / "weights").mkdir(parents=True)
    for epoch in range(epochs):
        (run / "weights" / f"epoch{epoch}.pt").write_bytes(
            CANARY.read_bytes() if epoch == 1 else b"e%d" % epoch
        )
    (run / "args.yaml").write_text("epochs: 3\n")
    (run / "results.csv").write_text("epoch,x\n" + "".join(f"{e + 1},{e}\n" for e in range(epochs)))
    return run


def _tree(run) -> dict[str, bytes]:
    return {str(p.relative_to(run)): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


def test_prepare_resume_leaves_what_resume_reads_and_restore_puts_the_recorded_run_back(tmp_path) -> None:
    run = _recorded_run(tmp_path)
    before = _tree(run)
    probe.prepare_resume(run, 1)
    assert (run / "weights" / "last.pt").read_bytes() == before["weights/epoch1.pt"]
    assert (run / "results.csv").read_text() == "epoch,x\n1,0\n2,1\n"
    assert sorted(_tree(run)) == ["args.yaml", "results.csv", "weights/last.pt"]
    assert probe.aside_path(run).is_dir() and not probe.aside_path(run).name.startswith("seed")
    (run / "weights" / "epoch2.pt").write_bytes(b"resumed")  # what the resumed reference writes
    probe.restore_run(run)
    assert _tree(run) == before and not probe.aside_path(run).exists()
    probe.restore_run(run)  # nothing set aside: nothing happens
    assert _tree(run) == before


def test_a_missing_checkpoint_is_named_and_leaves_the_run_alone(tmp_path) -> None:
    run = _recorded_run(tmp_path)
    before = _tree(run)
    with pytest.raises(FileNotFoundError, match=r"epoch7\.pt"):
        probe.prepare_resume(run, 7)
    assert _tree(run) == before


def test_resume_reference_copies_the_next_epoch_stops_the_run_and_restores_the_folder(
    tmp_path, monkeypatch
) -> None:
    run = _recorded_run(tmp_path)
    before = _tree(run)
    pid_file = tmp_path / "pid"
    # a stand-in for refbench's train: writes the next epoch's checkpoint beside --model, then runs until stopped
    fake = tmp_path / "run.sh"
    fake.write_text(
        "#!/bin/sh\n"
        f'echo $$ > "{pid_file}"\n'
        'while [ "$1" != "--model" ]; do shift; done\n'
        'cp "$2" "$(dirname "$2")/epoch2.pt"\n'
        "exec tail -f /dev/null\n"
    )
    fake.chmod(0o755)
    monkeypatch.setattr(probe.rr, "REFBENCH", fake)
    out = tmp_path / "resumed"
    path = probe.resume_reference(run, 1, out, poll_s=0.01)
    assert path == out / "epoch2.pt" and path.read_bytes() == before["weights/epoch1.pt"]
    assert _tree(run) == before
    pid = int(pid_file.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_resume_reference_names_the_log_when_the_reference_stops_early(tmp_path, monkeypatch) -> None:
    run = _recorded_run(tmp_path)
    before = _tree(run)
    fake = tmp_path / "run.sh"
    fake.write_text("#!/bin/sh\necho broken\nexit 3\n")
    fake.chmod(0o755)
    monkeypatch.setattr(probe.rr, "REFBENCH", fake)
    with pytest.raises(RuntimeError, match=r"exit 3.*resume\.log"):
        probe.resume_reference(run, 1, tmp_path / "resumed", poll_s=0.01)
    assert _tree(run) == before


@pytest.mark.parametrize(("epoch", "count"), [(1, 1), (1, 6), (4, 3), (8, 2)])
def test_a_shorter_run_continues_the_full_runs_linear_schedule(epoch: int, count: int) -> None:
    recipe = {"lr0": 0.004, "lrf": 0.01}
    short = probe.continued_schedule(recipe, epoch, count, 10)
    for k in range(count):
        lr = short["lr0"] * linear_lr_factor(k, count, short["lrf"])
        assert lr == pytest.approx(probe.epoch_lr(recipe, epoch + k, 10)), k


def test_checkpoint_losses_are_the_last_epochs_training_columns_by_our_names() -> None:
    losses = probe.checkpoint_losses(CANARY)
    results = read_reference_checkpoint(CANARY)["train_results"]
    assert set(losses) == {k.removeprefix("train/") for k in results if k.startswith("train/")}
    assert losses["box_loss"] == pytest.approx(float(results["train/box_loss"][-1]))
    assert losses["box_loss"] != pytest.approx(float(results["train/box_loss"][0]))


def test_recorded_score_reads_the_committed_figure_or_scores_a_seed_recorded_only_here(monkeypatch) -> None:
    gate = probe.ct.select_gates(["shapes_yolo26n_detect"])[0]
    committed = {"3": [{"nms": 0.1}, {"nms": 0.2}]}
    scored: list = []

    def score(path, g, val_source=None):
        scored.append(path)
        return {"nms": 0.7}

    monkeypatch.setattr(probe.rr, "score_canary", score)
    assert probe.recorded_score(gate, committed, 3, 1, "nms") == 0.2
    assert scored == []
    assert probe.recorded_score(gate, committed, 12, 1, "nms") == 0.7
    assert scored == [probe.rr.seed_dir(gate, 12) / "weights" / "epoch1.pt"]
