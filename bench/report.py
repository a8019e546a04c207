#!/usr/bin/env python3
"""Turns turbo3_bench JSON into a Markdown table (standard library only).

usage: report.py BENCH.json [--names OLD=NEW ...] [--append RESULTS.md --commit SHA --date DATE]
                 [--plot PNG]   (the plot needs matplotlib; without it the option is reported and skipped)

Decode rows: time, effective GB/s of the K/V bytes stored, its share of the copy bandwidth the
binary measured, and turbo3 against f16 of the same kernel, head dim and depth (time ratio).
"""
import argparse
import json
import re
import sys


def parse(path, renames):
    data = json.load(open(path))
    ctx = data.get("context", {})
    rows = []
    for b in data["benchmarks"]:
        if b.get("run_type") == "aggregate" and b.get("aggregate_name") != "median":
            continue
        name = b["run_name"].split("/min_time")[0]
        for old, new in renames:
            name = name.replace(old, new)
        m = re.match(r"decode/([\w-]+)/(\w+)/d(\d+)/depth(\d+)", name)
        if not m:
            continue
        rows.append({
            "kernel": m.group(1), "kv": m.group(2), "d": int(m.group(3)), "depth": int(m.group(4)),
            "us": b["real_time"] if b.get("time_unit") == "us" else b["real_time"] / 1e3,
            "gbps": b.get("kv_GBps", 0.0) / 1e9 if b.get("kv_GBps", 0.0) > 1e6 else b.get("kv_GBps", 0.0),
            "copy": b.get("copy_GBps", float(ctx.get("copy_GBps", 0) or 0)),
        })
    return ctx, rows


def table(rows):
    out = ["| kernel | K/V | D | depth | time (us) | K/V GB/s | % of copy BW | turbo3 vs f16 |",
           "|---|---|--:|--:|--:|--:|--:|--:|"]
    index = {(r["kernel"], r["kv"], r["d"], r["depth"]): r for r in rows}
    for r in sorted(rows, key=lambda r: (r["kernel"], r["d"], r["depth"], r["kv"])):
        ratio = ""
        if r["kv"] == "turbo3":
            f16 = index.get((r["kernel"], "f16", r["d"], r["depth"]))
            if f16:
                ratio = f"{f16['us'] / r['us']:.2f}x faster" if f16["us"] >= r["us"] else f"{r['us'] / f16['us']:.2f}x slower"
        pct = 100.0 * r["gbps"] / r["copy"] if r["copy"] else 0.0
        out.append(f"| {r['kernel']} | {r['kv']} | {r['d']} | {r['depth']} | {r['us']:.1f} | {r['gbps']:.0f} | {pct:.0f}% | {ratio} |")
    return "\n".join(out)


def plot(rows, path, title):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"matplotlib not found: no plot written to {path}", file=sys.stderr)
        return
    dims = sorted({r["d"] for r in rows})
    fig, axes = plt.subplots(1, len(dims), figsize=(5.5 * len(dims), 4.2), squeeze=False)
    for ax, d in zip(axes[0], dims):
        for kernel in sorted({r["kernel"] for r in rows}):
            for kv, style in (("f16", "--"), ("turbo3", "-")):
                pts = sorted((r["depth"], r["us"]) for r in rows if r["d"] == d and r["kernel"] == kernel and r["kv"] == kv)
                if pts:
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], style, marker="o", label=f"{kernel} {kv}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("context depth (tokens)")
        ax.set_ylabel("decode time per call (us)")
        ax.set_title(f"D = {d}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot written to {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--names", nargs="*", default=[], help="OLD=NEW substitutions in benchmark names")
    ap.add_argument("--append")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--date", default="unknown")
    ap.add_argument("--plot", help="write a PNG of decode time by depth (needs matplotlib)")
    args = ap.parse_args()
    renames = [tuple(s.split("=", 1)) for s in args.names]
    ctx, rows = parse(args.json, renames)
    md = table(rows)
    print(md)
    if args.plot:
        plot(rows, args.plot, f"decode, {ctx.get('gpu', 'GPU')}, commit {args.commit}")
    if args.append:
        with open(args.append, "a") as f:
            f.write(f"\n## {args.date}, {ctx.get('gpu', 'GPU?')}, commit {args.commit}\n\n")
            f.write(f"Copy bandwidth measured by the binary: {float(ctx.get('copy_GBps', 0)):.0f} GB/s "
                    f"(read + written). L2: {int(ctx.get('l2_bytes', 0)) // 2**20} MiB.\n\n{md}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
