#!/usr/bin/env python3
"""Times PyTorch's scaled_dot_product_attention (f16) on the shapes turbo3_bench runs, so the
report can put the library next to what users run today.

usage: compare_torch.py [--out bench/results/latest_torch.json] [--pp 512,2048,4096]
                        [--prefill-head-dims 256] [--mask] [--head-dims 128,256]
                        [--depths 4096,32768,131072] [--heads 16] [--kv-heads 8]
                        [--filter REGEX] [--min-time 0.1]

Cases (names as turbo3_bench's, prefixed with torch/<backend>/):
  torch/<flash|cudnn>/prefill/f16/pp<L>          causal (is_causal=True), n_q = n_kv = L
  torch/<cudnn|efficient>/prefill/f16/pp<L>/mask  a full additive f16 mask [L, L] with the
                                                  causal pattern (0 / -inf), is_causal=False
                                                  (the FlashAttention backend takes no mask)
  torch/<flash|cudnn>/decode/f16/d<D>/depth<N>    one query row
Each backend is forced with torch.nn.attention.sdpa_kernel. GQA (n_head over n_head_kv heads)
uses enable_gqa=True where the backend accepts it; where it does not, K and V are expanded with
repeat_interleave once, outside the timing (the kernel then reads n_head K/V heads): the JSON
says which in the `gqa` field of every case.

Method, as turbo3_bench's: enough copies of Q, K, V (and mask, and out) are rotated that a timed
working set is at least 4x the L2; the first and last copy's outputs are checked for NaN/Inf;
one CUDA graph holds one call per copy (eager calls where capture fails: the `timing` field says
which); a sample is one replay between two CUDA events divided by the number of calls, queued
behind a short spin kernel so that no launch gap is timed; warm-up first; real_time is the median.

The output is Google Benchmark's JSON shape (context + benchmarks with name, real_time, time_unit
and counters), so bench/report.py merges it with the binary's. Without PyTorch or without a CUDA
device it says so and exits 0.
"""
import argparse
import datetime
import json
import math
import os
import re
import sys
import warnings


def parse_list(s):
    return [int(x) for x in s.split(",") if x.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "latest_torch.json"))
    ap.add_argument("--pp", type=parse_list, default=[512, 2048, 4096], help="prefill sizes n_q = n_kv")
    ap.add_argument("--prefill-head-dims", type=parse_list, default=[256])
    ap.add_argument("--mask", action="store_true", help="also time prefill with a full additive mask")
    ap.add_argument("--head-dims", type=parse_list, default=[128, 256], help="decode head dims")
    ap.add_argument("--depths", type=parse_list, default=[4096, 32768, 131072], help="decode depths")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--filter", default="", help="run only the cases whose name matches this regex")
    ap.add_argument("--min-time", type=float, default=0.1, help="seconds of timed calls per case")
    args = ap.parse_args()

    try:
        import torch
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError as e:
        print(f"PyTorch not found ({e}): no PyTorch comparison. Install a CUDA build of torch to get one.")
        return 0
    if not torch.cuda.is_available():
        print(f"PyTorch {torch.__version__} found but no CUDA device is available: no PyTorch comparison.")
        return 0
    if args.heads < 1 or args.kv_heads < 1 or args.heads % args.kv_heads:
        print("--heads must be a positive multiple of --kv-heads", file=sys.stderr)
        return 2

    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    l2_note = ""
    if l2 <= 0:
        l2 = 64 << 20
        l2_note = " (not reported by this torch; 64 MiB assumed)"
    H, HKV = args.heads, args.kv_heads
    pattern = re.compile(args.filter) if args.filter else None
    sleep = getattr(torch.cuda, "_sleep", None)  # a spin kernel; absent in some builds

    def copy_bandwidth():
        n = 1 << 30
        a = torch.empty(n, dtype=torch.uint8, device=dev).fill_(1)
        b = torch.empty_like(a)
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ms = []
        for i in range(12):
            e0.record()
            b.copy_(a)
            e1.record()
            e1.synchronize()
            if i >= 2:
                ms.append(e0.elapsed_time(e1))
        del a, b
        torch.cuda.empty_cache()
        ms.sort()
        return 2.0 * n / (ms[len(ms) // 2] * 1e-3) / 1e9

    copy_gbps = copy_bandwidth()
    print(f"PyTorch {torch.__version__} (CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}) "
          f"on {props.name}: L2 {l2 >> 20} MiB{l2_note}, copy bandwidth {copy_gbps:.0f} GB/s (read + written)")

    results = []

    def time_calls(run, calls):
        """Median per-call time in us of run() (which makes `calls` calls), and the sample count."""
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(3):
            run()
        torch.cuda.synchronize()
        samples, total = [], 0.0
        while (total < args.min_time or len(samples) < 10) and len(samples) < 2000:
            if sleep:
                sleep(50000)
            e0.record()
            run()
            e1.record()
            e1.synchronize()
            us = e0.elapsed_time(e1) * 1e3 / calls
            samples.append(us)
            total += us * 1e-6
        samples.sort()
        return samples[len(samples) // 2], sum(samples) / len(samples), len(samples)

    def run_case(name, backend, make_sets, counters):
        """make_sets(gqa_native) -> list of (q, k, v, mask, is_causal), one per rotated copy;
        counters(median_us, gqa) -> the rate counters of the JSON entry."""
        if pattern and not pattern.search(name):
            return
        entry = {"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                 "repetition_index": 0, "threads": 1}
        sets = None
        caught = []
        try:
            with sdpa_kernel([backend]), warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")  # torch says why a backend refuses a case in warnings
                gqa = "enable_gqa" if H != HKV else "none"
                sets = make_sets(True)
                try:
                    outs = [F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=c, enable_gqa=H != HKV)
                            for q, k, v, m, c in sets]
                except RuntimeError:
                    if H == HKV:
                        raise
                    sets = None
                    torch.cuda.empty_cache()
                    gqa = "repeat_interleave"
                    sets = make_sets(False)
                    outs = [F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=c) for q, k, v, m, c in sets]
                torch.cuda.synchronize()
                for o in (outs[0], outs[-1]):
                    if not bool(torch.isfinite(o).all()):
                        raise RuntimeError("non-finite output")
                del outs
                native = gqa == "enable_gqa"

                def calls():
                    return [F.scaled_dot_product_attention(q, k, v, attn_mask=m, is_causal=c, enable_gqa=native)
                            for q, k, v, m, c in sets]

                timing = "graph"
                try:
                    side = torch.cuda.Stream()
                    side.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(side):
                        calls()
                    torch.cuda.current_stream().wait_stream(side)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        graph_outs = calls()
                    run = graph.replay
                except Exception:  # capture not possible with this backend: eager calls
                    torch.cuda.synchronize()
                    timing, graph, graph_outs = "eager", None, None
                    run = calls
                median, mean, n = time_calls(run, len(sets))
                del graph, graph_outs
        except Exception as e:  # the backend cannot run this case
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            reasons = [str(w.message).strip().splitlines()[0] for w in caught if str(w.message).strip()]
            if reasons:
                msg += " (" + "; ".join(dict.fromkeys(reasons)) + ")"
            entry.update({"error_occurred": True, "error_message": f"{backend.name}: {msg}"})
            results.append(entry)
            print(f"{name}: skipped ({msg})", flush=True)
            return
        finally:
            sets = None
            torch.cuda.empty_cache()
        entry.update({"iterations": n, "real_time": median, "cpu_time": median, "time_unit": "us",
                      "median_us": median, "mean_us": mean, "gqa": gqa, "timing": timing})
        entry.update(counters(median, gqa))
        results.append(entry)
        print(f"{name}: {median:.1f} us ({timing}, GQA: {gqa})", flush=True)

    f16 = torch.float16
    backends_causal = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)]
    backends_mask = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION)]

    def rand(*shape):
        return torch.empty(*shape, dtype=f16, device=dev).uniform_(-2.0, 2.0)

    # ---- prefill ----
    for mask in ([False, True] if args.mask else [False]):
        for d in args.prefill_head_dims:
            for L in args.pp:
                for bname, backend in (backends_mask if mask else backends_causal):
                    name = f"torch/{bname}/prefill/f16" + ("" if d == 256 else f"/d{d}") + f"/pp{L}" + ("/mask" if mask else "")

                    def make_sets(native, d=d, L=L, mask=mask):
                        kv_heads = HKV if native else H
                        set_bytes = 2 * (2 * L * H * d) + 2 * (2 * L * kv_heads * d) + (2 * L * L if mask else 0)
                        copies = max(1, math.ceil(4 * l2 / set_bytes))
                        k0, v0 = rand(1, HKV, L, d), rand(1, HKV, L, d)
                        m0 = None
                        if mask:
                            m0 = torch.full((L, L), float("-inf"), dtype=f16, device=dev).triu_(1).view(1, 1, L, L)
                        if not native:
                            k0, v0 = k0.repeat_interleave(H // HKV, dim=1), v0.repeat_interleave(H // HKV, dim=1)
                        out = []
                        for i in range(copies):
                            k, v = (k0, v0) if i == 0 else (k0.clone(), v0.clone())
                            m = None if m0 is None else (m0 if i == 0 else m0.clone())
                            out.append((rand(1, H, L, d), k, v, m, not mask))
                        return out

                    def counters(us, gqa, d=d, L=L, mask=mask):
                        flops = 4.0 * d * H * L * (L + 1) / 2  # visible query-key pairs (causal pattern)
                        kv_heads = H if gqa == "repeat_interleave" else HKV
                        set_bytes = 2 * (2 * L * H * d) + 2 * (2 * L * kv_heads * d) + (2 * L * L if mask else 0)
                        copies = max(1, math.ceil(4 * l2 / set_bytes))
                        return {"tokens_per_s": L / (us * 1e-6), "TFLOPs": flops / (us * 1e-6) / 1e12,
                                "flop_per_call": flops, "head_dim": d, "n_head": H, "n_head_kv": HKV, "L": L,
                                "copies": copies, "working_set_MB": set_bytes * copies / 1e6}

                    run_case(name, backend, make_sets, counters)

    # ---- decode ----
    for d in args.head_dims:
        for depth in args.depths:
            for bname, backend in backends_causal:
                name = f"torch/{bname}/decode/f16/d{d}/depth{depth}"
                stored = 2 * (2 * depth * HKV * d)  # K + V bytes as stored (n_head_kv heads, f16)

                def make_sets(native, d=d, depth=depth):
                    kv_heads = HKV if native else H
                    set_bytes = 2 * (2 * depth * kv_heads * d)
                    copies = max(1, math.ceil(4 * l2 / set_bytes))
                    k0, v0 = rand(1, HKV, depth, d), rand(1, HKV, depth, d)
                    if not native:
                        k0, v0 = k0.repeat_interleave(H // HKV, dim=1), v0.repeat_interleave(H // HKV, dim=1)
                    out = []
                    for i in range(copies):
                        k, v = (k0, v0) if i == 0 else (k0.clone(), v0.clone())
                        out.append((rand(1, H, 1, d), k, v, None, False))
                    return out

                def counters(us, gqa, d=d, depth=depth, stored=stored):
                    kv_heads = H if gqa == "repeat_interleave" else HKV
                    set_bytes = 2 * (2 * depth * kv_heads * d)
                    copies = max(1, math.ceil(4 * l2 / set_bytes))
                    return {"tokens_per_s": 1.0 / (us * 1e-6), "kv_GBps": stored / (us * 1e-6) / 1e9,
                            "kv_MB": stored / 1e6, "copy_GBps": copy_gbps, "head_dim": d, "n_head": H,
                            "n_head_kv": HKV, "depth": depth, "copies": copies,
                            "working_set_MB": set_bytes * copies / 1e6}

                run_case(name, backend, make_sets, counters)

    context = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "executable": "bench/compare_torch.py",
        "gpu": props.name,
        "l2_bytes": str(l2),
        "copy_GBps": f"{copy_gbps:.6f}",
        "torch": torch.__version__,
        "cuda": str(torch.version.cuda),
        "cudnn": str(torch.backends.cudnn.version()),
        "n_head": str(H),
        "n_head_kv": str(HKV),
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"context": context, "benchmarks": results}, f, indent=2)
    print(f"{len(results)} cases written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
