"""Measured kernel times of an 8B Llama on the local GPU, beside the step-time model's terms.

    python benchmarks/gpu_kernels.py measure --out FILE   # on a GPU machine: torch only
    python benchmarks/gpu_kernels.py gemms --model 8b|70b-tp2 --dtype bf16|fp8 --out FILE
    python benchmarks/gpu_kernels.py compare FILE [--gpu h200]   # here: model vs measured

``gemms`` times the layer GEMM sweep alone, of Llama-3.1-8B or of Llama-3.3-70B's layer at TP = 2,
in bf16 or fp8 (kept as ``benchmarks/data/h200_gemms_{model}_{dtype}.json``).

``measure`` times, in bf16 with CUDA graphs (so no host launch cost is counted), what one decoder
layer of Llama-3.1-8B runs in vLLM (``vllm/model_executor/models/llama.py``):

- the four weight GEMMs (fused QKV 4096→6144, O 4096→4096, fused gate-up 4096→28672, down
  14336→4096) through ``torch.nn.functional.linear`` (cuBLAS, as vLLM's unquantized linear layers
  call it), at M = 1 … 2048 tokens, over eight layers' copies of the weights so that no layer finds
  its weights in L2 (as in a real forward, where 31 other layers pass in between), per layer;
- the LM head (4096→128256) at M sampled rows;
- attention of B sequences over a context of L tokens with q new tokens each (q = K + 1 in a verify
  pass) through ``scaled_dot_product_attention`` with the four query heads of each KV head packed
  into the query rows (the GQA packing of FlashAttention's decode path), per layer;
- the whole forward: 32 such layers (RMSNorm, QKV, attention over a 1,024-token context, O,
  RMSNorm, gate-up, SiLU-and-mul, down) and the LM head over every new token, for B sequences with
  q = 1 (a decode step) or q = K + 1 (a verify pass) new tokens each: the target's GPU time of a
  step, v(B, K) ÷ v(B, 0) being what speculation adds. (No rotary embedding, KV write or sampler:
  elementwise kernels of a few µs.)

``compare`` prints the measured times beside :mod:`alphagate.sim.cost`'s terms for the same
shapes on the GPU preset (``Gemms.seconds`` and the attention term), and the ratio; the measured
file is kept in ``benchmarks/data/`` with the device, the torch version and the date.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

HIDDEN, INTER, HEADS, KV_HEADS, HEAD_DIM, VOCAB = 4096, 14336, 32, 8, 128, 128256
#: (name, N out, K in) of one Llama-3.1-8B decoder layer's weight GEMMs, TP = 1
LAYER_GEMMS = (
    ("qkv", (HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN),
    ("o", HIDDEN, HEADS * HEAD_DIM),
    ("gate_up", 2 * INTER, HIDDEN),
    ("down", HIDDEN, INTER),
)
GEMM_M = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 160, 192, 256, 320, 384, 512, 768, 1024, 2048)
HEAD_M = (1, 2, 4, 8, 16, 32, 64, 128, 256)
ATTN_B = (1, 4, 16, 64)
ATTN_L = (512, 2048, 8192)
ATTN_Q = (1, 2, 3, 4, 6)
COPIES = 8  # layers' copies of the weights cycled through: 8 × 0.44 GB ≫ the 60 MB L2


def _timer(torch: Any, fn: Any, reps: int) -> float:
    """Seconds per call of ``fn``: CUDA-graph replay of ``reps`` calls, best of 5 replays."""
    if not torch.cuda.is_available():
        fn()
        t0 = time.perf_counter()
        for _ in range(reps):
            fn()
        return (time.perf_counter() - t0) / reps
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(reps):
            fn()
    g.replay()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(5):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        best = min(best, a.elapsed_time(b) / 1e3 / reps)
    del g
    return best


#: Llama-3.3-70B's layer on one GPU of two (TP = 2): QKV and gate-up split by columns, O and
#: down by rows (``vllm/model_executor/layers/linear.py``)
LAYER_GEMMS_70B_TP2 = (
    ("qkv", (64 + 2 * 8) * 128 // 2, 8192),
    ("o", 8192, 64 * 128 // 2),
    ("gate_up", 2 * 28672 // 2, 8192),
    ("down", 8192, 28672 // 2),
)
SHAPES = {"8b": LAYER_GEMMS, "70b-tp2": LAYER_GEMMS_70B_TP2}


def _gemm_sweep(
    torch: Any,
    dev: str,
    shapes: tuple[tuple[str, int, int], ...],
    dtype: str,
    ms: tuple[int, ...],
    scale: int,
    copies: int,
    quick: bool,
) -> dict[str, Any]:
    """Seconds per GEMM and per layer (the four in a row) at each M. bf16 through
    ``torch.nn.functional.linear``; fp8 (e4m3 weights and activations, per-tensor scales, bf16
    out) through ``torch._scaled_mm``, the cuBLASLt FP8 GEMM (vLLM quantizes the activations of
    an FP8 checkpoint on the fly and runs a CUTLASS or cuBLASLt scaled GEMM)."""
    f = torch.nn.functional
    fp8 = dtype == "fp8"
    one_ = torch.ones((), device=dev, dtype=torch.float32)

    def weight(n: int, k: int) -> Any:
        w = torch.randn(n // scale, k // scale, device=dev, dtype=torch.bfloat16) * 0.02
        return w.to(torch.float8_e4m3fn) if fp8 else w

    def gemm(x: Any, w: Any) -> Any:
        if fp8:
            return torch._scaled_mm(x, w.t(), one_, one_, out_dtype=torch.bfloat16)
        return f.linear(x, w)

    layers = [[weight(n, k) for _, n, k in shapes] for _ in range(copies)]
    out: dict[str, list[float]] = {name: [] for name, _, _ in shapes}
    out["layer"] = []
    reps = 4 if quick else 20
    for m in ms:
        xs = {}
        for _, _, k in shapes:
            x = torch.randn(m, k // scale, device=dev, dtype=torch.bfloat16)
            xs[k] = x.to(torch.float8_e4m3fn) if fp8 else x
        for j, (name, _, k) in enumerate(shapes):

            def one(j: int = j, x: Any = xs[k]) -> None:
                for w in layers:
                    gemm(x, w[j])

            out[name].append(_timer(torch, one, reps) / copies)

        def layer(xs: Any = xs) -> None:
            for w in layers:
                for j, (_, _, k) in enumerate(shapes):
                    gemm(xs[k], w[j])

        out["layer"].append(_timer(torch, layer, reps) / copies)
        print(f"{dtype} gemm M={m}: layer {out['layer'][-1] * 1e6:.1f} µs", flush=True)
    layers.clear()  # free the GPU memory for what follows
    return {"m": list(ms), "dtype": dtype, "shapes": [list(x) for x in shapes], "seconds": out}


def gemms(out: Path, model: str, dtype: str, quick: bool) -> None:
    """Only the layer GEMM sweep, for another model's shapes or FP8 weights."""
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    scale = 8 if quick else 1
    ms = GEMM_M[:6] if quick else GEMM_M
    result = {
        "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "shape_divisor": scale,
        "model": model,
        "method": f"{dtype}, CUDA-graph replay of 20 calls (best of 5), weights over 8 copies",
        "gemm": _gemm_sweep(
            torch, dev, SHAPES[model], dtype, ms, scale, 2 if quick else COPIES, quick
        ),
    }
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


def measure(out: Path, quick: bool) -> None:
    import torch

    dev = "cuda" if torch.cuda.is_available() else "cpu"
    dt = torch.bfloat16
    torch.manual_seed(0)
    scale = 8 if quick else 1  # --quick: shapes ÷ 8 (a CPU check of the script itself)
    copies = 2 if quick else COPIES
    ms = GEMM_M[:6] if quick else GEMM_M
    result: dict[str, Any] = {
        "device": torch.cuda.get_device_name() if dev == "cuda" else "cpu",
        "torch": torch.__version__,
        "date": time.strftime("%Y-%m-%d"),
        "shape_divisor": scale,
        "method": "bf16, CUDA-graph replay of 20 calls (best of 5), weights cycled over 8 copies",
    }
    result["gemm"] = _gemm_sweep(torch, dev, LAYER_GEMMS, "bf16", ms, scale, copies, quick)
    head = torch.randn(VOCAB // scale, HIDDEN // scale, device=dev, dtype=dt) * 0.02
    hs = []
    for m in HEAD_M[:3] if quick else HEAD_M:
        x = torch.randn(m, HIDDEN // scale, device=dev, dtype=dt)
        hs.append(
            _timer(torch, lambda x=x, w=head: torch.nn.functional.linear(x, w), 4 if quick else 20)
        )
    result["lm_head"] = {"m": list(HEAD_M[: len(hs)]), "seconds": hs}
    group = HEADS // KV_HEADS
    attn = []
    for b in ATTN_B[:2] if quick else ATTN_B:
        for ctx in ATTN_L[:1] if quick else ATTN_L:
            per_layer = 2 * b * KV_HEADS * ctx * HEAD_DIM * 2  # K and V bytes
            n = 2 if quick else max(1, min(32, -(-(256 << 20) // per_layer)))
            kv = [
                (
                    torch.randn(b, KV_HEADS, ctx // scale, HEAD_DIM, device=dev, dtype=dt),
                    torch.randn(b, KV_HEADS, ctx // scale, HEAD_DIM, device=dev, dtype=dt),
                )
                for _ in range(n)
            ]
            for q in ATTN_Q:
                qt = torch.randn(b, KV_HEADS, group * q, HEAD_DIM, device=dev, dtype=dt)

                def att(qt: Any = qt, kv: Any = kv) -> None:
                    for k_, v_ in kv:
                        torch.nn.functional.scaled_dot_product_attention(qt, k_, v_)

                t = _timer(torch, att, 2 if quick else 10) / n
                attn.append({"b": b, "context": ctx, "q": q, "seconds": t})
                print(f"attention B={b} L={ctx} q={q}: {t * 1e6:.1f} µs", flush=True)
            del kv
    result["attention"] = attn
    result["forward"] = _forward(torch, dev, dt, quick)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {out}")


FWD_B = (1, 2, 4, 8, 16, 32, 48, 64)
FWD_Q = (1, 2, 3, 4)
FWD_CONTEXT = 1024
LAYERS = 32


def _forward(torch: Any, dev: str, dt: Any, quick: bool) -> list[dict[str, float]]:
    """GPU seconds of the whole forward at B sequences × q new tokens (see the module docstring)."""
    f = torch.nn.functional
    div = 8 if quick else 1
    n_layers = 2 if quick else LAYERS
    h, group = HIDDEN // div, HEADS // KV_HEADS
    bmax = FWD_B[:2][-1] if quick else FWD_B[-1]
    ctx = FWD_CONTEXT // div
    ws = [
        [torch.randn(n // div, k // div, device=dev, dtype=dt) * 0.02 for _, n, k in LAYER_GEMMS]
        for _ in range(n_layers)
    ]
    kv = [
        (torch.randn(bmax, KV_HEADS, ctx, HEAD_DIM // div, device=dev, dtype=dt),
         torch.randn(bmax, KV_HEADS, ctx, HEAD_DIM // div, device=dev, dtype=dt))
        for _ in range(n_layers)
    ]  # fmt: skip
    head = torch.randn(VOCAB // div, h, device=dev, dtype=dt) * 0.02
    norm = torch.ones(h, device=dev, dtype=dt)
    q_width = HEADS * HEAD_DIM // div
    out = []
    for b in FWD_B[:2] if quick else FWD_B:
        for q in FWD_Q:
            x0 = torch.randn(b * q, h, device=dev, dtype=dt)

            def fwd(x0: Any = x0, b: int = b, q: int = q) -> None:
                x = x0
                for (wqkv, wo, wgu, wd), (k_, v_) in zip(ws, kv, strict=True):
                    y = f.rms_norm(x, (h,), norm)
                    qkv = f.linear(y, wqkv)
                    qh = qkv[:, :q_width].reshape(b, q, KV_HEADS, group, -1)
                    qh = qh.permute(0, 2, 3, 1, 4).reshape(b, KV_HEADS, group * q, -1)
                    a = f.scaled_dot_product_attention(qh, k_[:b], v_[:b])
                    a = a.reshape(b, KV_HEADS, group, q, -1).permute(0, 3, 1, 2, 4)
                    x = x + f.linear(a.reshape(b * q, q_width), wo)
                    y = f.rms_norm(x, (h,), norm)
                    gu = f.linear(y, wgu)
                    x = x + f.linear(
                        f.silu(gu[:, : gu.shape[1] // 2]) * gu[:, gu.shape[1] // 2 :], wd
                    )
                f.linear(f.rms_norm(x, (h,), norm), head)

            t = _timer(torch, fwd, 1 if quick else 3)
            out.append({"b": b, "q": q, "context": ctx, "seconds": t})
            print(f"forward B={b} q={q}: {t * 1e3:.3f} ms", flush=True)
    return out


def compare(path: Path, gpu_name: str) -> None:
    import numpy as np

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
    from alphagate.sim.cost import Gemms, Hardware
    from alphagate.specs.gpus import resolve_gpu

    data = json.loads(path.read_text())
    if data.get("shape_divisor", 1) != 1:
        sys.exit(
            f"{path}: measured with --quick (shapes ÷ {data['shape_divisor']}): not comparable"
        )
    dtype = data["gemm"].get("dtype", "bf16")
    shapes = data["gemm"].get("shapes", [list(x) for x in LAYER_GEMMS])
    hw = Hardware.of(resolve_gpu(gpu_name), dtype)
    bpw = 1.0 if dtype == "fp8" else 2.0
    print(f"{data['device']} (torch {data['torch']}, {data['date']}) vs the {gpu_name} preset")
    ms = np.asarray(data["gemm"]["m"], dtype=np.float64)
    rows = [(float(n), float(k), 1.0) for _, n, k in shapes]
    model = Gemms.of(rows).seconds(ms, bpw, hw)
    meas = np.asarray(data["gemm"]["seconds"]["layer"])
    floor = Gemms.of(rows).params * bpw / hw.bandwidth
    names = ", ".join(f"{name} {n}×{k}" for name, n, k in shapes)
    print(f"\none layer's weight GEMMs in {dtype} ({names})")
    print(
        f"{'M':>6} {'measured µs':>12} {'model µs':>9} {'model ÷ meas':>13} {'meas ÷ M=1':>11}"
        f" {'model ÷ M=1':>12}"
    )
    for m, a, b in zip(ms, meas, model, strict=True):
        print(
            f"{m:>6.0f} {a * 1e6:>12.1f} {b * 1e6:>9.1f} {b / a:>13.2f} {a / meas[0]:>11.2f}"
            f" {b / model[0]:>12.2f}"
        )
    print(f"weight read at the preset's bandwidth: {floor * 1e6:.1f} µs")
    if "attention" not in data:
        return
    model8b = _model_8b(gpu_name)
    print("\nattention per layer (KV heads 8, group 4 packed, head dim 128)")
    print(f"{'B':>4} {'L':>6} {'q':>3} {'measured µs':>12} {'model µs':>9} {'meas ÷ q=1':>11}")
    base: dict[tuple[int, int], float] = {}
    for r in data["attention"]:
        b, ctx, q, t = r["b"], r["context"], r["q"], r["seconds"]
        # the model's attention term of a step (its own query tile and GQA packing), per layer
        mod = float(model8b.terms(k=q - 1, n_decode=b, ctx_decode=b * ctx).target_attention)
        mod /= LAYERS
        base.setdefault((b, ctx), t)
        print(
            f"{b:>4} {ctx:>6} {q:>3} {t * 1e6:>12.1f} {mod * 1e6:>9.1f} {t / base[(b, ctx)]:>11.2f}"
        )
    if data.get("forward"):
        _compare_forward(data["forward"], model8b)


def _model_8b(gpu_name: str) -> Any:
    """The step-time model of Llama-3.1-8B in BF16 on the GPU preset."""
    from alphagate.sim.cost import build_cost_model
    from alphagate.specs import DeploymentConfig, resolve_deployment

    cfg = DeploymentConfig(model="llama-3.1-8b", gpu=gpu_name, weight_dtype="bf16")
    return build_cost_model(resolve_deployment(cfg))


def _compare_forward(rows: list[dict[str, float]], model: Any) -> None:
    """The whole forward measured beside the model's target GPU terms (GEMMs, attention, kernel
    gaps; no sampler, no host), and v(B, K) = the verify pass ÷ the decode step of each."""

    def gpu(b: int, q: int, ctx: float) -> float:
        t = model.terms(k=q - 1, n_decode=b, ctx_decode=b * ctx)
        return float(t.target_gemm + t.target_attention + t.target_kernels)

    by = {(int(r["b"]), int(r["q"])): (r["seconds"], r["context"]) for r in rows}
    qs = sorted({q for _, q in by})
    print("\nwhole forward (32 layers, LM head over every new token): decode step ms and")
    print("v(B, K) = verify over K+1 tokens ÷ decode, measured | model (GEMMs, attention, gaps)")
    ks = " ".join(f"K={q - 1:<4}" for q in qs[1:])
    print(f"{'B':>4} {'meas ms':>8} {'model ms':>9}   {ks} | {ks}")
    for b in sorted({b for b, _ in by}):
        meas = [by[(b, q)][0] for q in qs]
        mod = [gpu(b, q, by[(b, q)][1]) for q in qs]
        a = " ".join(f"{t / meas[0]:<6.3f}" for t in meas[1:])
        c = " ".join(f"{t / mod[0]:<6.3f}" for t in mod[1:])
        print(f"{b:>4} {meas[0] * 1e3:>8.3f} {mod[0] * 1e3:>9.3f}   {a} | {c}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("measure")
    m.add_argument("--out", type=Path, required=True)
    m.add_argument("--quick", action="store_true", help="shapes ÷ 8, few sizes (a CPU check)")
    g = sub.add_parser("gemms", help="the layer GEMM sweep only (--model 8b|70b-tp2)")
    g.add_argument("--out", type=Path, required=True)
    g.add_argument("--model", choices=sorted(SHAPES), default="8b")
    g.add_argument("--dtype", choices=["bf16", "fp8"], default="bf16")
    g.add_argument("--quick", action="store_true")
    c = sub.add_parser("compare")
    c.add_argument("file", type=Path)
    c.add_argument("--gpu", default="h200")
    a = ap.parse_args()
    if a.cmd in ("measure", "gemms") and not a.quick:
        import torch

        if not torch.cuda.is_available():
            ap.error(
                f"{a.cmd} times GPU kernels and found no CUDA device (--quick checks the "
                "script on a CPU with shapes ÷ 8)"
            )
    if a.cmd == "measure":
        measure(a.out, a.quick)
    elif a.cmd == "gemms":
        gemms(a.out, a.model, a.dtype, a.quick)
    else:
        compare(a.file, a.gpu)


if __name__ == "__main__":
    main()
