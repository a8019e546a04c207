#!/usr/bin/env python3
"""Turns turbo3_bench JSON (and compare_torch.py JSON) into Markdown tables and a PNG plot.

usage: report.py [JSON ...] [--out PREFIX] [--append [RESULTS.md]] [--commit SHA] [--date DATE]
                 [--names OLD=NEW ...] [--no-plot]

JSON: Google Benchmark files from turbo3_bench and/or compare_torch.py (default: the main job's
bench/results/latest.json and latest_torch.json, those that exist). Several files are merged; a
case that appears twice takes its numbers from the later file.
Writes PREFIX.md (the tables) and PREFIX.png (the plot; needs matplotlib, skipped with a note
without it); PREFIX defaults to bench/results/latest. --append inserts the tables, with date, GPU
and commit, at the top of bench/RESULTS.md (newest first) or the file given.
Python standard library only, plus matplotlib when present.

Times are the median per call when the JSON has it (`median_us`), else Google Benchmark's mean.
Prefill: tokens/s = L / time; TFLOP/s = 4 * D * n_head * visible query-key pairs / time (causal:
L(L+1)/2 pairs). Decode: GB/s of the K/V bytes as stored, and its share of the device-to-device copy
bandwidth the same program measured (bytes read + written). Ratios say how much faster or slower a
row is than the f16 row of the same kernel, or than a PyTorch backend on the same shape and GPU.
"""
import argparse
import datetime
import json
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

PREFILL = re.compile(r"^prefill/(?P<kernel>[\w.-]+)/(?P<kv>\w+)(?:/d(?P<d>\d+))?/pp(?P<L>\d+)(?P<mask>/mask)?$")
TORCH_PREFILL = re.compile(r"^torch/(?P<kernel>[\w.-]+)/prefill/(?P<kv>\w+)(?:/d(?P<d>\d+))?/pp(?P<L>\d+)(?P<mask>/mask)?$")
DECODE = re.compile(r"^decode/(?P<kernel>[\w.-]+)/(?P<kv>\w+)/d(?P<d>\d+)/depth(?P<depth>\d+)$")
TORCH_DECODE = re.compile(r"^torch/(?P<kernel>[\w.-]+)/decode/(?P<kv>\w+)/d(?P<d>\d+)/depth(?P<depth>\d+)$")
# Row order of our kernels; others (and PyTorch's) follow.
KERNEL_ORDER = ["vec", "vec-scalar", "vec-mma", "vec-warp", "materialize", "tile", "mma",
                "torch-flash", "torch-cudnn", "torch-efficient"]
TO_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}


def clean_name(name, renames):
    parts = [p for p in name.split("/") if ":" not in p and p not in ("manual_time", "real_time")]
    name = "/".join(parts)
    for old, new in renames:
        name = name.replace(old, new)
    return name


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def load(paths, renames):
    """Returns (contexts, rows by key, skipped {name: message})."""
    contexts, samples, skipped = [], {}, {}
    for path in paths:
        data = json.load(open(path))
        ctx = data.get("context", {})
        ctx["_path"] = path
        contexts.append(ctx)
        for b in data.get("benchmarks", []):
            if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
                continue
            name = clean_name(b.get("run_name") or b["name"], renames)
            if b.get("error_occurred") or b.get("skipped"):
                skipped[name] = b.get("error_message") or b.get("skip_message") or "skipped"
                continue
            row = parse_row(name, b, ctx)
            if row is None:
                continue
            skipped.pop(name, None)
            key = row["key"]
            if key in samples and samples[key][0]["_path"] != path:
                del samples[key]  # a later file replaces an earlier one
            row["_path"] = path
            row["_aggregate"] = b.get("run_type") == "aggregate"
            samples.setdefault(key, []).append(row)
    rows = {}
    for key, rs in samples.items():
        rs = [x for x in rs if x["_aggregate"]] or rs  # Google Benchmark's median of the repetitions, if any
        r = dict(rs[-1])
        if len(rs) > 1:  # repetitions without aggregates: the median of the repetitions
            r["us"] = median([x["us"] for x in rs])
        finish(r)
        rows[key] = r
    return contexts, rows, skipped


def parse_row(name, b, ctx):
    us = b.get("median_us")
    stat = "median" if us is not None else "mean"
    if us is None:
        us = b.get("real_time", 0.0) * TO_US.get(b.get("time_unit", "ns"), 1e-3)
    if not us or us <= 0:
        return None
    n_head = int(b.get("n_head") or ctx.get("n_head") or 16)
    n_head_kv = int(b.get("n_head_kv") or ctx.get("n_head_kv") or 8)
    for regex, source in ((PREFILL, "ours"), (TORCH_PREFILL, "torch")):
        m = regex.match(name)
        if m:
            d = int(m.group("d") or b.get("head_dim") or 256)
            L = int(m.group("L"))
            kernel = m.group("kernel") if source == "ours" else "torch-" + m.group("kernel")
            flops = b.get("flop_per_call") or 4.0 * d * n_head * L * (L + 1) / 2
            return {"family": "prefill", "source": source, "kernel": kernel, "kv": m.group("kv"), "d": d, "L": L,
                    "mask": bool(m.group("mask")), "us": us, "flops": flops, "name": name, "heads": (n_head, n_head_kv),
                    "gqa": b.get("gqa", ""), "stat": stat, "key": ("prefill", kernel, m.group("kv"), d, L, bool(m.group("mask")))}
    for regex, source in ((DECODE, "ours"), (TORCH_DECODE, "torch")):
        m = regex.match(name)
        if m:
            kernel = m.group("kernel") if source == "ours" else "torch-" + m.group("kernel")
            d, depth = int(m.group("d")), int(m.group("depth"))
            copy = b.get("copy_GBps") or float(ctx.get("copy_GBps", 0) or 0)
            return {"family": "decode", "heads": (n_head, n_head_kv), "source": source, "kernel": kernel, "kv": m.group("kv"), "d": d,
                    "depth": depth, "us": us, "bytes": b.get("kv_MB", 0.0) * 1e6, "copy": copy, "name": name,
                    "gqa": b.get("gqa", ""), "stat": stat, "key": ("decode", kernel, m.group("kv"), d, depth)}
    return None


def finish(r):
    s = r["us"] * 1e-6
    if r["family"] == "prefill":
        r["tokens_per_s"] = r["L"] / s
        r["tflops"] = r["flops"] / s / 1e12
    else:
        r["gbps"] = r["bytes"] / s / 1e9 if r["bytes"] else 0.0
        r["pct"] = 100.0 * r["gbps"] / r["copy"] if r["copy"] else 0.0


def kernel_rank(kernel):
    torch = kernel.startswith("torch-")
    return (torch, KERNEL_ORDER.index(kernel) if kernel in KERNEL_ORDER else len(KERNEL_ORDER), kernel)


def speed(mine, other):
    """How much faster (or slower) `mine` is than `other`, from two times."""
    if not mine or not other:
        return ""
    ratio = max(other / mine, mine / other)
    text = f"{ratio:.2f}x" if ratio < 10 else f"{ratio:.0f}x"
    return text + (" faster" if other >= mine else " slower")


def fmt_rate(x):
    return f"{x / 1e6:.2f} M" if x >= 1e6 else f"{x / 1e3:.1f} k" if x >= 1e3 else f"{x:.0f}"


def fmt_us(x):
    return f"{x:.1f}" if x < 1000 else f"{x:.0f}"


def prefill_tables(rows):
    out = []
    pre = [r for r in rows.values() if r["family"] == "prefill"]
    for d, mask in sorted({(r["d"], r["mask"]) for r in pre}):
        group = [r for r in pre if r["d"] == d and r["mask"] == mask]
        torch_kernels = sorted({r["kernel"] for r in group if r["source"] == "torch"}, key=kernel_rank)
        h, hkv = group[0]["heads"]
        what = "full additive f16 mask with the causal pattern, causal flag off" if mask else "causal"
        out.append(f"### Prefill, D = {d}, {h} query heads over {hkv} KV heads, {what} (n_q = n_kv = L)\n")
        cols = ["kernel", "K/V", "L", "time (us)", "tokens/s", "TFLOP/s", "turbo3 vs f16"] + \
               [f"vs {k.replace('torch-', 'torch ')}" for k in torch_kernels]
        out.append("| " + " | ".join(cols) + " |")
        out.append("|---|---|--:|--:|--:|--:|--:|" + "--:|" * len(torch_kernels))
        index = {(r["kernel"], r["kv"], r["L"]): r for r in group}
        for r in sorted(group, key=lambda r: (r["L"], kernel_rank(r["kernel"]), r["kv"])):
            vs_f16 = ""
            if r["kv"] != "f16" and (r["kernel"], "f16", r["L"]) in index:
                vs_f16 = speed(r["us"], index[(r["kernel"], "f16", r["L"])]["us"])
            vs_torch = []
            for k in torch_kernels:
                t = index.get((k, "f16", r["L"]))
                vs_torch.append("" if r["source"] == "torch" or not t else speed(r["us"], t["us"]))
            name = r["kernel"].replace("torch-", "torch ")
            cells = [name, r["kv"], str(r["L"]), fmt_us(r["us"]), fmt_rate(r["tokens_per_s"]), f"{r['tflops']:.1f}", vs_f16]
            out.append("| " + " | ".join(cells + vs_torch) + " |")
        # The kernel-against-kernel ratios the prefill issues set targets for (turbo3 K/V).
        pairs = [("tile", "vec"), ("tile", "vec-scalar"), ("tile", "materialize"), ("mma", "vec"), ("mma", "materialize"), ("mma", "tile")]
        lens = sorted({r["L"] for r in group})
        have = [(a, b) for a, b in pairs if any((a, "turbo3", L) in index and (b, "turbo3", L) in index for L in lens)]
        if have:
            out.append("\nturbo3 kernels against each other (time ratio):\n")
            out.append("| L | " + " | ".join(f"{a} vs {b}" for a, b in have) + " |")
            out.append("|--:|" + "--:|" * len(have))
            for L in lens:
                cells = []
                for a, b in have:
                    ra, rb = index.get((a, "turbo3", L)), index.get((b, "turbo3", L))
                    cells.append(speed(ra["us"], rb["us"]) if ra and rb else "")
                out.append(f"| {L} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def decode_table(rows):
    dec = [r for r in rows.values() if r["family"] == "decode"]
    if not dec:
        return ""
    torch_kernels = sorted({r["kernel"] for r in dec if r["source"] == "torch"}, key=kernel_rank)
    h, hkv = dec[0]["heads"]
    out = [f"### Decode, one query row, {h} query heads over {hkv} KV heads\n"]
    cols = ["kernel", "K/V", "D", "depth", "time (us)", "K/V GB/s", "% of copy BW", "turbo3 vs f16"] + \
           [f"vs {k.replace('torch-', 'torch ')}" for k in torch_kernels]
    out.append("| " + " | ".join(cols) + " |")
    out.append("|---|---|--:|--:|--:|--:|--:|--:|" + "--:|" * len(torch_kernels))
    index = {(r["kernel"], r["kv"], r["d"], r["depth"]): r for r in dec}
    for r in sorted(dec, key=lambda r: (kernel_rank(r["kernel"]), r["d"], r["depth"], r["kv"])):
        vs_f16 = ""
        if r["kv"] != "f16" and (r["kernel"], "f16", r["d"], r["depth"]) in index:
            vs_f16 = speed(r["us"], index[(r["kernel"], "f16", r["d"], r["depth"])]["us"])
        vs_torch = []
        for k in torch_kernels:
            t = index.get((k, "f16", r["d"], r["depth"]))
            vs_torch.append("" if r["source"] == "torch" or not t else speed(r["us"], t["us"]))
        name = r["kernel"].replace("torch-", "torch ")
        cells = [name, r["kv"], str(r["d"]), str(r["depth"]), fmt_us(r["us"]), f"{r['gbps']:.0f}", f"{r['pct']:.0f}%", vs_f16]
        out.append("| " + " | ".join(cells + vs_torch) + " |")
    out.append("")
    return "\n".join(out)


def header(contexts, rows, commit, date):
    ours = [c for c in contexts if "turbo3_bench" in str(c.get("executable", "")) or "torch" not in c]
    torch_ctx = [c for c in contexts if "torch" in c]
    gpu = next((c.get("gpu") for c in contexts if c.get("gpu")), "GPU?")
    lines = []
    for c in ours:
        if c.get("copy_GBps"):
            lines.append(f"turbo3_bench: copy bandwidth {float(c['copy_GBps']):.0f} GB/s (read + written), "
                         f"L2 {int(c.get('l2_bytes', 0) or 0) // 2**20} MiB; JSON `{os.path.relpath(c['_path'], REPO)}`.")
    for c in torch_ctx:
        gqa = sorted({r["gqa"] for r in rows.values() if r["source"] == "torch" and r["gqa"]})
        lines.append(f"PyTorch {c['torch']} (CUDA {c.get('cuda')}, cuDNN {c.get('cudnn')}), f16, "
                     f"scaled_dot_product_attention with one backend forced; GQA by {', '.join(gqa) or 'n/a'}; "
                     f"copy bandwidth {float(c.get('copy_GBps', 0) or 0):.0f} GB/s; JSON `{os.path.relpath(c['_path'], REPO)}`.")
    return gpu, lines


def skipped_list(skipped):
    if not skipped:
        return ""
    out = ["Skipped cases:\n"]
    for name in sorted(skipped):
        out.append(f"- `{name}`: {skipped[name]}")
    return "\n".join(out) + "\n"


def plot(rows, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib not found: no plot written to {path}", file=sys.stderr)
        return False
    pre = [r for r in rows.values() if r["family"] == "prefill"]
    dec = [r for r in rows.values() if r["family"] == "decode"]
    # One row of prefill panels (per head dim and mask variant), one row of decode panels (per head dim).
    grid = [r for r in ([("prefill", d, m) for d, m in sorted({(r["d"], r["mask"]) for r in pre})],
                        [("decode", d, None) for d in sorted({r["d"] for r in dec})]) if r]
    if not grid:
        print("no prefill or decode rows: no plot", file=sys.stderr)
        return False
    ncols = max(len(r) for r in grid)
    fig, axes = plt.subplots(len(grid), ncols, figsize=(5.6 * ncols, 4.4 * len(grid)), squeeze=False)
    panels = []
    for i, row in enumerate(grid):
        panels += [(axes[i][j], p) for j, p in enumerate(row)]
        for j in range(len(row), ncols):
            axes[i][j].set_visible(False)
    colors = {}
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    def style(r):
        k = r["kernel"]
        if k not in colors:
            colors[k] = palette[len(colors) % len(palette)]
        ls = ":" if r["source"] == "torch" else "-" if r["kv"] == "turbo3" else "--"
        return dict(color=colors[k], linestyle=ls, marker="o" if r["kv"] == "turbo3" else "s", markersize=4)

    for ax, (family, d, mask) in panels:
        group = [r for r in (pre if family == "prefill" else dec) if r["d"] == d and (family == "decode" or r["mask"] == mask)]
        for kernel, kv in sorted({(r["kernel"], r["kv"]) for r in group}, key=lambda x: (kernel_rank(x[0]), x[1])):
            rs = [r for r in group if r["kernel"] == kernel and r["kv"] == kv]
            label = kernel.replace("torch-", "torch ") + ("" if kernel.startswith("torch-") else f" {kv}")
            if family == "prefill":
                pts = sorted((r["L"], r["tokens_per_s"]) for r in rs)
            else:
                pts = sorted((r["depth"], r["us"]) for r in rs)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], label=label, **style(rs[0]))
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        xs = sorted({r["L"] if family == "prefill" else r["depth"] for r in group})
        ax.set_xticks(xs)
        ax.set_xticklabels([str(x) for x in xs])
        ax.minorticks_off()
        if family == "prefill":
            ax.set_xlabel("prompt length L (n_q = n_kv)")
            ax.set_ylabel("prefill tokens/s (higher is better)")
            ax.set_title(f"prefill, D = {d}, {'full mask' if mask else 'causal'}")
        else:
            ax.set_xlabel("context depth (tokens)")
            ax.set_ylabel("decode time per call, us (lower is better)")
            ax.set_title(f"decode, D = {d}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")
    return True


def git_commit():
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                             check=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO,
                               capture_output=True, text=True).stdout.strip()
        return sha + ("-dirty" if dirty else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def append_results(path, section):
    text = open(path).read() if os.path.exists(path) else "# Measured results\n"
    at = text.find("\n## ")
    text = text.rstrip("\n") + "\n\n" + section if at < 0 else text[:at + 1] + section + "\n" + text[at + 1:]
    with open(path, "w") as f:
        f.write(text)
    print(f"tables added to {path}")


def main():
    ap = argparse.ArgumentParser(description="Markdown tables and a plot from turbo3_bench / compare_torch.py JSON")
    ap.add_argument("json", nargs="*")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "latest"), help="output prefix (.md, .png)")
    ap.add_argument("--append", nargs="?", const=os.path.join(HERE, "RESULTS.md"), help="add the tables to RESULTS.md")
    ap.add_argument("--commit", help="commit the binaries were built from (default: this checkout's)")
    ap.add_argument("--date", help="date of the measurement (default: from the JSON)")
    ap.add_argument("--names", nargs="*", default=[], help="OLD=NEW substitutions in benchmark names")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args()
    paths = args.json or [p for p in (os.path.join(HERE, "results", f) for f in ("latest.json", "latest_torch.json"))
                          if os.path.exists(p)]
    if not paths:
        print("no benchmark JSON given and none at bench/results/latest*.json", file=sys.stderr)
        return 1
    renames = [tuple(s.split("=", 1)) for s in args.names]
    contexts, rows, skipped = load(paths, renames)
    if not rows and not skipped:
        print("no prefill or decode cases in " + ", ".join(paths), file=sys.stderr)
        return 1
    commit = args.commit or git_commit()
    date = args.date or next((str(c["date"])[:10] for c in contexts if c.get("date")),
                             datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"))
    gpu, lines = header(contexts, rows, commit, date)
    stats = {r["stat"] for r in rows.values()}
    timing = "medians per call" if stats == {"median"} else \
             "means per call (Google Benchmark's)" if stats == {"mean"} else \
             "medians per call where the JSON has them (`median_us`), Google Benchmark's means otherwise"
    lines.append(f"Times are {timing}. \"x faster\" / \"x slower\": the row against the f16 row of the same "
                 "kernel, or against a PyTorch backend on the same shape.")
    body = "\n".join(t for t in (prefill_tables(rows), decode_table(rows), skipped_list(skipped)) if t)
    md = "\n".join(lines) + "\n\n" + body
    print(f"## {date}, {gpu}, commit {commit}\n\n{md}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)) or ".", exist_ok=True)
    with open(args.out + ".md", "w") as f:
        f.write(f"## {date}, {gpu}, commit {commit}\n\n{md}")
    print(f"tables written to {args.out}.md")
    if not args.no_plot:
        plot(rows, args.out + ".png", f"{gpu}, {date}, commit {commit}")
    if args.append:
        append_results(args.append, f"## {date}, {gpu}, commit {commit}\n\n{md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
