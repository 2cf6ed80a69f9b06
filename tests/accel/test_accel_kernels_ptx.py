"""The fused assignment kernels compile for a GPU without one present, with exact arithmetic in the PTX.

``triton.compile`` for an sm_90 target needs no device. The checks: every kernel compiles (for each exponent
mode of the metric), no flush-to-zero instruction anywhere, and no contracted ``fma`` in the candidate and conflict
kernels (whose eager expressions round every operation); the metric kernel's only ``fma`` are libdevice's
``powf``/``sqrt`` internals (see ``lucid_accel.kernels.assign._launch_options``).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

pytest.importorskip("triton")

FP32 = "*fp32"


def _compile(fn: Any, signature: dict[str, str], constexprs: dict[str, Any], options: dict[str, Any]) -> str:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    compiled = triton.compile(
        ASTSource(fn=fn, signature=signature, constexprs=constexprs),
        target=GPUTarget("cuda", 90, 32),
        options=options,
    )
    ptx: str = compiled.asm["ptx"]
    return ptx


pytestmark = pytest.mark.slow  # ~15 s of Triton compilation


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    import importlib
    import os

    os.environ.setdefault("TRITON_CACHE_DIR", str(tmp_path_factory.mktemp("triton_cache")))
    from lucid_accel.kernels import _triton_assign as k
    from lucid_accel.kernels import assign

    with pytest.MonkeyPatch.context() as env:
        env.setenv("TRITON_INTERPRET", "0")
        if k.INTERPRETED:  # decorated for the interpreter by an earlier test: decorate for compilation
            k = importlib.reload(k)
        exact, metric = assign._launch_options(), assign._launch_options(fp_fusion=True)
    out = {
        "candidates": _compile(
            k.candidates_kernel,
            {
                **dict.fromkeys(("anchors_ptr", "boxes_ptr", "real_ptr"), FP32),
                "labels_ptr": "*i64",
                **dict.fromkeys(("scores_ptr", "candidate_ptr", "class_scores_ptr"), FP32),
                **dict.fromkeys(("num_rows", "num_anchors", "num_classes"), "i32"),
                "small_stride": "fp32",
                **dict.fromkeys(("WIDEN", "EPS", "BLOCK"), "constexpr"),
            },
            {"WIDEN": True, "EPS": assign.CANDIDATE_EPS, "BLOCK": assign.BLOCK_ANCHORS},
            exact,
        ),
        "conflicts": _compile(
            k.conflicts_kernel,
            {
                **dict.fromkeys(("in_topk_ptr", "candidate_ptr", "overlaps_ptr", "out_ptr"), FP32),
                **dict.fromkeys(("num_rows", "num_anchors"), "i32"),
                "BLOCK": "constexpr",
            },
            {"BLOCK": assign.BLOCK_ANCHORS},
            exact,
        ),
    }
    for mode in sorted(set(assign.POW_MODES.values()) | {assign.POW_GENERAL}):
        out[f"metric_{mode}"] = _compile(
            k.metric_kernel,
            {
                **dict.fromkeys(("scores_ptr", "overlaps_ptr", "out_ptr"), FP32),
                "numel": "i32",
                **dict.fromkeys(("ALPHA", "ALPHA_MODE", "BETA", "BETA_MODE", "BLOCK"), "constexpr"),
            },
            {"ALPHA": 0.5, "ALPHA_MODE": 2, "BETA": 6.0, "BETA_MODE": mode, "BLOCK": 1024},
            metric,
        )
    return out


def test_no_flush_to_zero_anywhere(compiled: dict[str, str]) -> None:
    for name, ptx in compiled.items():
        # libdevice's powf reciprocal is inline assembly `rcp.approx.ftz.f32` in every build (nvcc's too)
        arithmetic = ptx.replace("rcp.approx.ftz.f32", "") if name == "metric_5" else ptx
        assert ".ftz" not in arithmetic, name


def test_no_contracted_multiply_add_in_the_exact_kernels(compiled: dict[str, str]) -> None:
    for name in ("candidates", "conflicts"):
        ops = set(re.findall(r"\b(fma|mad)\.[\w.]*f32", compiled[name]))
        assert not ops, (name, ops)
        assert not re.search(r"\bdiv\.(approx|full)\.f32", compiled[name]), name


def test_metric_without_powf_has_no_fma(compiled: dict[str, str]) -> None:
    for name, ptx in compiled.items():
        if name.startswith("metric_") and name != "metric_5":  # mode 5 = libdevice powf
            assert not re.search(r"\bfma\.[\w.]*f32", ptx.replace("sqrt", "")), name
