"""Training time/memory model: published formulas, monotonicity, vectorisation, properties.

Expected values come from the papers (Korthikanti et al. 2022 activation memory,
Narayanan et al. 2021 eq. 3, PaLM appendix B model FLOPs), written here as literal
formulas in the model dimensions, not as calls into the module under test.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from gpufleet.estimate.assumptions import Assumptions
from gpufleet.estimate.training import (
    RECOMPUTE_CODES,
    Evaluation,
    Layouts,
    TrainingCase,
    evaluate,
)
from gpufleet.estimate.training_case import case_for
from gpufleet.specs.load import validate
from gpufleet.specs.training import TrainingSpec

H100 = "h100-sxm5-80gb"


def make_case(
    model: str | dict[str, Any],
    *,
    seq_len: int = 4096,
    global_batch: int = 512,
    framework: str = "megatron",
    dropout: bool = False,
    accelerator: str = H100,
    count: int = 64,
) -> TrainingCase:
    spec = validate(
        TrainingSpec,
        {
            "kind": "training",
            "model": {"preset": model} if isinstance(model, str) else model,
            "training": {
                "seq_len": seq_len,
                "global_batch": global_batch,
                "framework": framework,
                "dropout": dropout,
            },
            "hardware": {"accelerator": accelerator, "count": count},
        },
        "inline",
    )
    return case_for(spec, Assumptions())


def gpt(layers: int, *, hidden: int = 1024, heads: int = 16, vocab: int = 32000) -> dict[str, Any]:
    """A GPT-3-style block: MHA, 4h GELU MLP (the architecture Korthikanti et al. analyse)."""
    return {
        "layers": layers,
        "hidden": hidden,
        "heads": heads,
        "ffn_hidden": 4 * hidden,
        "ffn_type": "gelu",
        "vocab": vocab,
    }


def one(ev: Evaluation, name: str) -> float:
    return float(getattr(ev, name)[0])


# --- Korthikanti et al. 2022 activation memory ---------------------------------------------

S, B, HID, A = 2048, 2, 1024, 16  # sequence, microbatch, hidden, heads


def _no_sp(t: int) -> float:
    return 10 + 24 / t + 5 * A * S / (HID * t)  # eq. 2 (tensor parallel)


def _sp(t: int) -> float:
    return 34 / t + 5 * A * S / (HID * t)  # eq. 4 (tensor + sequence parallel)


KORTHIKANTI = [
    *(pytest.param(t, False, "none", _no_sp(t), id=f"tp{t}-none") for t in (1, 2, 4, 8)),
    *(pytest.param(t, True, "none", _sp(t), id=f"tp{t}-sp-none") for t in (2, 4, 8)),
    # Selective recompute drops the 5as/h attention-score term (§5).
    *(pytest.param(t, False, "selective", 10 + 24 / t, id=f"tp{t}-selective") for t in (1, 8)),
    *(pytest.param(t, True, "selective", 34 / t, id=f"tp{t}-sp-selective") for t in (2, 8)),
    # Full recompute keeps only the layer input: 2sbh, split by t with sequence parallelism.
    *(pytest.param(t, False, "full", 2.0, id=f"tp{t}-full") for t in (1, 4)),
    *(pytest.param(t, True, "full", 2 / t, id=f"tp{t}-sp-full") for t in (2, 4)),
]


@pytest.mark.parametrize(("tp", "sp", "recompute", "coefficient"), KORTHIKANTI)
def test_activation_memory_per_layer_matches_korthikanti(
    tp: int, sp: bool, recompute: str, coefficient: float
) -> None:
    # Differencing a 2-layer and a 1-layer model through the public `evaluate` isolates
    # exactly one layer of one microbatch: with pp = 1 one microbatch is in flight and
    # the logits buffer does not depend on the layer count, so everything else cancels.
    # This also checks the s·b scaling, which the private per-token helper does not.
    def activations(layers: int) -> float:
        case = make_case(
            gpt(layers, hidden=HID, heads=A),
            seq_len=S,
            global_batch=64,
            framework="megatron-2021",  # unfused attention: scores are stored
            dropout=True,
        )
        lay = Layouts.single(tp=tp, mb=B, recompute=recompute, sp=sp)
        return one(evaluate(case, lay), "activations_bytes")

    per_layer = activations(2) - activations(1)

    assert per_layer == pytest.approx(S * B * HID * coefficient, rel=1e-12)


def test_flash_attention_stores_no_attention_scores() -> None:
    # With flash attention the s×s score matrix is never materialised, so recompute none
    # stores what selective recompute stores: 34sbh/t with sequence parallelism.
    case = make_case(gpt(2, hidden=HID, heads=A), seq_len=S, framework="megatron", dropout=True)
    small = make_case(gpt(1, hidden=HID, heads=A), seq_len=S, framework="megatron", dropout=True)
    lay = Layouts.single(tp=4, mb=B, recompute="none")
    per_layer = one(evaluate(case, lay), "activations_bytes") - one(
        evaluate(small, lay), "activations_bytes"
    )
    assert per_layer == pytest.approx(S * B * HID * 34 / 4, rel=1e-12)


@pytest.mark.parametrize(
    ("framework", "mlp_bytes"),
    [
        # Fused SwiGLU (Transformer Engine) keeps fc1's output and the activation: 6f bytes.
        pytest.param("megatron", 6, id="fused-mlp"),
        # Eager PyTorch keeps gate, up, silu(gate) and their product: 8f bytes.
        pytest.param("fsdp", 8, id="eager-mlp"),
    ],
)
def test_gqa_swiglu_activation_memory_per_layer(framework: str, mlp_bytes: int) -> None:
    # Korthikanti's terms generalised: Q and attention output over a·d, K and V over g·d
    # (GQA), and the SwiGLU intermediates over f; no dropout, flash attention, tp 4 + SP.
    h, a, g, d, f, t, s, b = 4096, 32, 8, 128, 14336, 4, 4096, 2

    def activations(layers: int) -> float:
        case = make_case({"preset": "llama-3-8b", "layers": layers}, seq_len=s, framework=framework)
        lay = Layouts.single(tp=t, dp=16, mb=b, recompute="selective", zero=2)
        return one(evaluate(case, lay), "activations_bytes")

    per_token = 8 * h / t + (2 * a * d + 2 * g * d + 2 * g * d + 2 * a * d + mlp_bytes * f) / t
    assert activations(2) - activations(1) == pytest.approx(s * b * per_token, rel=1e-12)


# --- monotonicity ----------------------------------------------------------------------------


@pytest.mark.parametrize("framework", ["megatron", "megatron-2021", "deepspeed"])
def test_full_recompute_trades_time_for_memory(framework: str) -> None:
    case = make_case("llama-2-7b", framework=framework)
    none = evaluate(case, Layouts.single(tp=2, pp=2, dp=16, recompute="none"))
    full = evaluate(case, Layouts.single(tp=2, pp=2, dp=16, recompute="full"))
    assert one(full, "activations_bytes") < one(none, "activations_bytes")
    assert one(full, "step_time_s") > one(none, "step_time_s")
    assert one(full, "tokens_per_s") < one(none, "tokens_per_s")


@pytest.mark.parametrize("dp", [2, 8, 64])
def test_zero_1_divides_optimizer_state_by_dp(dp: int) -> None:
    case = make_case("llama-2-7b", count=dp)
    z0 = evaluate(case, Layouts.single(dp=dp, zero=0))
    z1 = evaluate(case, Layouts.single(dp=dp, zero=1))
    assert one(z0, "optimizer_bytes") / one(z1, "optimizer_bytes") == pytest.approx(dp)
    assert one(z1, "weights_bytes") == one(z0, "weights_bytes")
    assert one(z1, "gradients_bytes") == one(z0, "gradients_bytes")


@pytest.mark.parametrize("dp", [2, 8, 64])
def test_zero_2_also_divides_gradients_and_zero_3_weights_by_dp(dp: int) -> None:
    case = make_case("llama-2-7b", count=dp, framework="deepspeed")
    z1 = evaluate(case, Layouts.single(dp=dp, zero=1))
    z2 = evaluate(case, Layouts.single(dp=dp, zero=2))
    z3 = evaluate(case, Layouts.single(dp=dp, zero=3))
    assert one(z1, "gradients_bytes") / one(z2, "gradients_bytes") == pytest.approx(dp)
    assert one(z2, "weights_bytes") == one(z1, "weights_bytes")
    assert one(z2, "weights_bytes") / one(z3, "weights_bytes") == pytest.approx(dp)
    assert one(z2, "gradients_bytes") == one(z3, "gradients_bytes")
    assert one(z2, "optimizer_bytes") == one(z3, "optimizer_bytes")


def test_more_data_parallel_gpus_raise_throughput_but_lower_it_per_gpu() -> None:
    case = make_case("llama-2-7b", global_batch=512)
    dps = [4, 8, 16, 32, 64]
    ev = [evaluate(case, Layouts.single(tp=1, dp=dp)) for dp in dps]
    total = [one(e, "tokens_per_s") for e in ev]
    per_gpu = [t / dp for t, dp in zip(total, dps, strict=True)]
    assert total == sorted(total)
    assert len(set(total)) == len(total)
    assert per_gpu == sorted(per_gpu, reverse=True)
    assert len(set(per_gpu)) == len(per_gpu)


def test_pipeline_bubble_fraction_falls_with_more_microbatches() -> None:
    fractions = []
    for batch in (32, 64, 128, 256, 512):
        case = make_case("llama-2-7b", global_batch=batch)
        ev = evaluate(case, Layouts.single(tp=2, pp=4, dp=8))
        assert int(ev.microbatches[0]) == batch // 8
        fractions.append(one(ev, "bubble_s") / one(ev, "step_time_s"))
    assert fractions == sorted(fractions, reverse=True)
    assert len(set(fractions)) == len(fractions)
    assert fractions[0] > 0


def test_interleaved_stages_shrink_the_bubble() -> None:
    case = make_case("llama-2-7b", global_batch=64)
    plain = evaluate(case, Layouts.single(tp=2, pp=4, dp=8, vs=1))
    interleaved = evaluate(case, Layouts.single(tp=2, pp=4, dp=8, vs=2))
    assert one(interleaved, "bubble_s") < one(plain, "bubble_s")
    assert one(interleaved, "bubble_s") / one(interleaved, "step_time_s") < one(
        plain, "bubble_s"
    ) / one(plain, "step_time_s")


def test_no_bubble_without_pipeline() -> None:
    case = make_case("llama-2-7b")
    assert one(evaluate(case, Layouts.single(tp=2, dp=32)), "bubble_s") == 0.0


# --- vectorised == scalar ------------------------------------------------------------------

# (tp, pp, dp, cp, ep, mb, vs, zero, recompute, sp)
MIXED_LAYOUTS = [
    (1, 1, 64, 1, 1, 1, 1, 0, "none", False),
    (2, 1, 32, 1, 1, 2, 1, 1, "selective", True),
    (8, 2, 4, 1, 1, 1, 2, 1, "full", True),
    (4, 4, 2, 2, 1, 1, 1, 1, "selective", False),
    (1, 1, 16, 4, 1, 4, 1, 3, "full", False),
    (2, 8, 4, 1, 1, 1, 4, 0, "none", True),
    (8, 1, 8, 1, 8, 1, 1, 2, "selective", True),
]


def _stack(rows: list[tuple[int, int, int, int, int, int, int, int, str, bool]]) -> Layouts:
    cols = list(zip(*rows, strict=True))

    def arr(values: tuple[Any, ...]) -> np.ndarray:
        return np.array(values, dtype=np.int64)

    return Layouts(
        tp=arr(cols[0]),
        pp=arr(cols[1]),
        dp=arr(cols[2]),
        cp=arr(cols[3]),
        ep=arr(cols[4]),
        mb=arr(cols[5]),
        vs=arr(cols[6]),
        zero=arr(cols[7]),
        recompute=arr(tuple(RECOMPUTE_CODES[r] for r in cols[8])),
        sp=arr(tuple(int(s and t > 1) for s, t in zip(cols[9], cols[0], strict=True))),
    )


@pytest.mark.parametrize(
    ("model", "framework"),
    [
        pytest.param("llama-2-7b", "deepspeed", id="dense-deepspeed"),
        pytest.param("mixtral-8x7b", "nemo", id="moe-nemo"),
        pytest.param("llama-3-8b", "megatron-2021", id="gqa-unfused"),
    ],
)
def test_vectorised_evaluation_equals_one_layout_at_a_time(model: str, framework: str) -> None:
    case = make_case(model, framework=framework, global_batch=256)
    rows = MIXED_LAYOUTS if model == "mixtral-8x7b" else [r for r in MIXED_LAYOUTS if r[4] == 1]
    many = evaluate(case, _stack(rows))
    for i, (tp, pp, dp, cp, ep, mb, vs, zero, rc, sp) in enumerate(rows):
        single = evaluate(
            case,
            Layouts.single(
                tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, mb=mb, vs=vs, zero=zero, recompute=rc, sp=sp
            ),
        )
        for f in fields(Evaluation):
            vec, sca = getattr(many, f.name), getattr(single, f.name)
            if isinstance(vec, np.ndarray):
                assert vec.shape == (len(rows),), f.name
                np.testing.assert_allclose(vec[i], sca[0], rtol=1e-12, err_msg=f"{f.name}[{i}]")
            else:
                assert vec == sca, f.name


# --- FLOPs, MFU and HFU ---------------------------------------------------------------------


def test_model_flops_per_token_is_palm_appendix_b() -> None:
    # PaLM appendix B: 6N + 12·L·h·s for the matrix parameters N = 12·L·h² of a GPT block,
    # plus 6·h·V for the output layer (counted with the logits as a matrix product).
    layers, h, s, vocab = 6, 2048, 3000, 50000
    case = make_case(gpt(layers, hidden=h, heads=16, vocab=vocab), seq_len=s, global_batch=8)
    ev = evaluate(case, Layouts.single(dp=8))
    expected = 6 * 12 * layers * h * h + 12 * layers * h * s + 6 * h * vocab
    assert ev.model_flops_per_token == pytest.approx(expected, rel=1e-12)


def test_full_recompute_hardware_flops_match_narayanan_eq3() -> None:
    # Narayanan et al. 2021 eq. 3 counts a GPT block with full recomputation:
    # 96·s·l·h²·(1 + s/(6h) + V/(16·l·h)) per sequence.
    layers, h, s, vocab = 8, 2048, 2048, 51200
    case = make_case(
        gpt(layers, hidden=h, vocab=vocab), seq_len=s, global_batch=64, framework="megatron-2021"
    )
    ev = evaluate(case, Layouts.single(tp=2, dp=4, recompute="full"))
    eq3 = 96 * s * layers * h * h * (1 + s / (6 * h) + vocab / (16 * layers * h))
    assert one(ev, "hardware_flops_per_token") * s == pytest.approx(eq3, rel=1e-12)
    peak = case.hw.peak_flops
    assert one(ev, "megatron2021_tflops_per_gpu") * 1e12 / peak == pytest.approx(
        one(ev, "hfu"), rel=1e-12
    )


@pytest.mark.parametrize("recompute", ["none", "selective", "full"])
@pytest.mark.parametrize("framework", ["megatron", "megatron-2021"])
def test_mfu_is_model_flops_throughput_over_peak(recompute: str, framework: str) -> None:
    case = make_case("llama-3-8b", framework=framework)
    lay = Layouts.single(tp=2, pp=2, dp=16, recompute=recompute)
    ev = evaluate(case, lay)
    gpus = 64
    achieved = ev.model_flops_per_token * one(ev, "tokens_per_s") / gpus
    assert one(ev, "tflops_per_gpu") * 1e12 == pytest.approx(achieved, rel=1e-12)
    assert one(ev, "mfu") == pytest.approx(achieved / case.hw.peak_flops, rel=1e-12)
    assert one(ev, "tflops_per_gpu") * 1e12 / case.hw.peak_flops == pytest.approx(
        one(ev, "mfu"), rel=1e-12
    )
    assert one(ev, "hfu") >= one(ev, "mfu") * (1 - 1e-12)
    if recompute == "none" and framework == "megatron-2021":
        assert one(ev, "hfu") == pytest.approx(one(ev, "mfu"), rel=1e-12)
    else:
        # full recompute repeats a forward; flash attention's backward recomputes the scores
        assert one(ev, "hfu") > one(ev, "mfu")


def test_extra_hardware_flops_cost_time() -> None:
    # Whatever recomputation HFU counts must show up in the step time, and vice versa.
    case = make_case("llama-2-7b", framework="megatron")  # flash attention
    none = evaluate(case, Layouts.single(tp=2, dp=32, recompute="none"))
    selective = evaluate(case, Layouts.single(tp=2, dp=32, recompute="selective"))
    same_time = one(selective, "step_time_s") == one(none, "step_time_s")
    same_flops = one(selective, "hardware_flops_per_token") == one(none, "hardware_flops_per_token")
    assert same_time == same_flops


# --- properties over random valid layouts --------------------------------------------------

TIME_FIELDS = (
    "step_time_s",
    "compute_s",
    "bubble_s",
    "tp_comm_s",
    "pp_comm_s",
    "dp_comm_s",
    "dp_exposed_s",
    "cp_comm_s",
    "ep_comm_s",
    "optimizer_s",
    "exposed_comm_s",
)
FRAMEWORKS = ("megatron", "megatron-2021", "nemo", "deepspeed", "fsdp", "jax")
CASES = {fw: make_case("llama-2-7b", framework=fw, global_batch=512) for fw in FRAMEWORKS}
GPUS = 64


@st.composite
def layouts(draw: st.DrawFn) -> tuple[str, Layouts]:
    framework = draw(st.sampled_from(FRAMEWORKS))
    tp = draw(st.sampled_from([1, 2, 4, 8]))
    pp = draw(st.sampled_from([1, 2, 4, 8, 16]))
    cp = draw(st.sampled_from([1, 2, 4]))
    assume(tp * pp * cp <= GPUS)
    layers = CASES[framework].arch.layers
    vs = draw(st.sampled_from([v for v in (1, 2, 4) if pp * v <= layers])) if pp > 1 else 1
    zeros = CASES[framework].profile.zero_stages
    zero = draw(st.sampled_from([z for z in zeros if not (z == 3 and pp > 1)] or [0]))
    return framework, Layouts.single(
        tp=tp,
        pp=pp,
        dp=GPUS // (tp * pp * cp),
        cp=cp,
        mb=draw(st.sampled_from([1, 2, 4])),
        vs=vs,
        zero=zero,
        recompute=draw(st.sampled_from(["none", "selective", "full"])),
        sp=draw(st.booleans()),
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(layouts())
def test_invariants_hold_for_any_valid_layout(drawn: tuple[str, Layouts]) -> None:
    framework, lay = drawn
    case = CASES[framework]
    ev = evaluate(case, lay)
    for name in TIME_FIELDS:
        value = one(ev, name)
        assert np.isfinite(value), name
        assert value >= 0, name
    assert one(ev, "step_time_s") > 0
    # The step accounts exactly into compute, exposed communication, bubble and optimizer.
    parts = ("compute_s", "exposed_comm_s", "bubble_s", "optimizer_s")
    assert one(ev, "step_time_s") == pytest.approx(sum(one(ev, p) for p in parts), rel=1e-9)
    # Only part of the data-parallel traffic can be exposed.
    assert one(ev, "dp_exposed_s") <= one(ev, "dp_comm_s") * (1 + 1e-12)
    assert one(ev, "dp_exposed_s") <= one(ev, "exposed_comm_s") * (1 + 1e-12)
    # Memory: the total is the sum of its parts, each of them positive.
    memory = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes")
    for name in memory:
        assert one(ev, name) > 0, name
    assert one(ev, "other_bytes") >= 2 * 2**30
    assert one(ev, "total_bytes") == pytest.approx(
        sum(one(ev, n) for n in (*memory, "other_bytes")), rel=1e-12
    )
    # Throughput is the global batch over the step, and the batch is fully used.
    assert int(ev.microbatches[0]) * int(lay.dp[0]) * int(lay.mb[0]) == case.global_batch
    assert one(ev, "tokens_per_s") * one(ev, "step_time_s") == pytest.approx(
        case.global_batch * case.seq_len, rel=1e-12
    )
    assert 0 < one(ev, "mfu") <= one(ev, "hfu") * (1 + 1e-12)  # equal without recompute
    if int(lay.pp[0]) == 1:
        assert one(ev, "bubble_s") == 0.0
        assert one(ev, "pp_comm_s") == 0.0
    if int(lay.tp[0]) == 1:
        assert one(ev, "tp_comm_s") == 0.0
    if int(lay.cp[0]) == 1:
        assert one(ev, "cp_comm_s") == 0.0
    assert one(ev, "ep_comm_s") == 0.0  # a dense model has no expert traffic
