"""The task seam of the objective: one branch objective per task, combined once for every task.

A *branch objective* (:class:`BranchObjective`) is the loss of one head branch: the detection terms plus the
task's own terms (``lucid_core.loss.terms.*``), gathering per-instance targets through the assignment's
``target_gt_idx``. :class:`OneToManyObjective` trains a classic (YOLOv8 / YOLO11) model with one branch;
:class:`EndToEndObjective` is YOLO26's ``o2m · one2many + o2o · one2one`` with the branch-weight schedule
(``shared/fixtures/README.md``, "YOLO26 end-to-end combination"), written once for any task. The one-to-one
branch objective is called with ``one2one=True`` so that a task whose auxiliary outputs must not receive
one-to-one gradient (segment prototypes, fixture README "segment_loss_*.pt", E2E) detaches them itself.
:func:`lucid_core.tasks.build_objective` builds the right one for a model's task.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, Protocol

from torch import Tensor

from lucid_core.loss.detection import BranchLoss, DetectionLoss
from lucid_core.loss.schedule import BranchWeightSchedule
from lucid_core.outputs import BranchOutput, TrainOutput

__all__ = [
    "BranchObjective",
    "E2EDetectionLoss",
    "E2ELossResult",
    "EndToEndObjective",
    "OneToManyObjective",
]


class BranchObjective(Protocol):
    """The loss of one head branch (detection terms + the task's terms)."""

    loss_names: tuple[str, ...]

    def pack(self, batch: Mapping[str, Any], batch_size: int, imgsz_hw: tuple[int, int]) -> Any:
        """Padded per-image ground truth (boxes and any per-instance task targets) from a collated batch."""
        ...

    def branch_loss(
        self,
        output: TrainOutput,
        branch: BranchOutput,
        targets: Any,
        batch: Mapping[str, Any],
        *,
        one2one: bool = False,
    ) -> BranchLoss:
        """Loss of ``branch`` (one of ``output``'s branches) against packed ``targets``."""
        ...


class OneToManyObjective:
    """Single-branch training objective: ``objective(output, batch) -> (total, loss_items)``.

    ``total`` is the scalar to call ``backward()`` on (the loss vector times the batch size, summed — the
    reference's batch-size convention), ``loss_items`` the detached per-term losses with gains applied.
    """

    def __init__(self, branch: BranchObjective) -> None:
        self.objective = branch
        self.loss_names = tuple(branch.loss_names)

    def result(self, output: TrainOutput, batch: Mapping[str, Any]) -> BranchLoss:
        targets = self.objective.pack(batch, output.one2many.scores.shape[0], output.imgsz_hw)
        return self.objective.branch_loss(output, output.one2many, targets, batch, one2one=False)

    def __call__(self, output: TrainOutput, batch: Mapping[str, Any]) -> tuple[Tensor, Tensor]:
        result = self.result(output, batch)
        return result.total, result.loss_items


class E2ELossResult(NamedTuple):
    """Combined end-to-end loss and its parts."""

    loss_vector_times_bs: Tensor  # (T,) o2m · one2many + o2o · one2one
    loss_items: Tensor  # (T,) the one-to-one branch's items (what the reference reports)
    total: Tensor  # ()
    one2many: BranchLoss
    one2one: BranchLoss


class EndToEndObjective:
    """YOLO26 end-to-end objective for any task: ``o2m · one2many + o2o · one2one``.

    Both branch objectives share the packed targets of the one-to-many one. Reported items are the one-to-one
    items. Call :meth:`step_epoch` once at the end of every epoch; :meth:`state_dict` / :meth:`load_state_dict`
    carry the schedule across a resume.
    """

    def __init__(
        self,
        one2many: BranchObjective,
        one2one: BranchObjective,
        schedule: BranchWeightSchedule,
    ) -> None:
        if tuple(one2many.loss_names) != tuple(one2one.loss_names):
            raise ValueError(
                f"EndToEndObjective: branch loss names differ: {one2many.loss_names} vs {one2one.loss_names}"
            )
        self.one2many = one2many
        self.one2one = one2one
        self.schedule = schedule
        self.loss_names = tuple(one2many.loss_names)

    def step_epoch(self) -> None:
        """Advance the branch-weight schedule (once at the end of every epoch)."""
        self.schedule.step()

    def state_dict(self) -> dict[str, float | int]:
        return self.schedule.state_dict()

    def load_state_dict(self, state: Mapping[str, float | int]) -> None:
        self.schedule.load_state_dict(state)

    def pack(self, batch: Mapping[str, Any], output: TrainOutput) -> Any:
        return self.one2many.pack(batch, output.one2many.scores.shape[0], output.imgsz_hw)

    def combine(
        self, output: TrainOutput, targets: Any, batch: Mapping[str, Any] | None = None
    ) -> E2ELossResult:
        """Both branch losses and their weighted combination against already packed targets."""
        if output.one2one is None:
            raise ValueError(
                "EndToEndObjective: the model output has no one2one branch (is this an end-to-end model?)"
            )
        batch = {} if batch is None else batch
        o2m = self.one2many.branch_loss(output, output.one2many, targets, batch, one2one=False)
        o2o = self.one2one.branch_loss(output, output.one2one, targets, batch, one2one=True)
        vector = self.schedule.o2m * o2m.loss_vector_times_bs + self.schedule.o2o * o2o.loss_vector_times_bs
        return E2ELossResult(vector, o2o.loss_items, vector.sum(), o2m, o2o)

    def result(self, output: TrainOutput, batch: Mapping[str, Any]) -> E2ELossResult:
        return self.combine(output, self.pack(batch, output), batch)

    def __call__(self, output: TrainOutput, batch: Mapping[str, Any]) -> tuple[Tensor, Tensor]:
        result = self.result(output, batch)
        return result.total, result.loss_items


def E2EDetectionLoss(
    num_classes: int,
    reg_max: int = 1,
    strides: Sequence[float] = (8, 16, 32),
    box: float = 7.5,
    cls: float = 0.5,
    dfl: float = 1.5,
    epochs: int = 100,
    topk: int = 10,
    o2o_topk: int = 7,
    o2o_topk2: int = 1,
    alpha: float = 0.5,
    beta: float = 6.0,
    small_target: bool = True,
    o2m_init: float = 0.8,
    o2m_final: float = 0.1,
) -> EndToEndObjective:
    """YOLO26 end-to-end detection objective: ``o2m · one2many + o2o · one2one`` with the branch-weight schedule.

    The detection instance of :class:`lucid_core.loss.objective.EndToEndObjective`: the one-to-many branch uses
    the classic top-10 assignment, the one-to-one branch top-7 then one anchor per ground truth (fixture
    ``assigner_params``). Reported items are the one-to-one items.
    """
    common: dict[str, Any] = dict(
        box=box, cls=cls, dfl=dfl, alpha=alpha, beta=beta, small_target=small_target
    )
    return EndToEndObjective(
        DetectionLoss(num_classes, reg_max, strides, topk=topk, **common),
        DetectionLoss(num_classes, reg_max, strides, topk=o2o_topk, topk2=o2o_topk2, **common),
        BranchWeightSchedule(epochs=epochs, o2m_init=o2m_init, o2m_final=o2m_final),
    )
