#!/usr/bin/env python3
"""Writes the hand-made summary.json pairs used by //analyzer/diff:diff_test.

Deterministic (fixed pseudo-random sequence); run from this directory to regenerate:
  diff_base.json         40 steps of ~10 ms (+-2 %), 4 runs
  diff_regression.json   the same steps 15 % slower, plus a kernel 30 % slower -> exit 1
  diff_improvement.json  the same steps 15 % faster -> exit 0
  diff_noisy_base.json / diff_noisy_new.json
                         10 steps each from one wide distribution (6..14 ms); the new mean is
                         8 % higher, which is noise at p < 0.01 -> exit 0
"""
import json
import math


def lcg(seed):
    x = seed
    while True:
        x = (1103515245 * x + 12345) % (2 ** 31)
        yield x / 2 ** 31


def lat(samples):
    s = sorted(samples)
    n = len(s)
    mean = sum(s) / n
    std = math.sqrt(sum((v - mean) ** 2 for v in s) / n)
    pick = lambda p: s[max(0, min(n - 1, math.ceil(p * n / 100) - 1))]
    return {"count": n, "mean": round(mean, 6), "std": round(std, 6), "min": s[0],
            "p50": pick(50), "p90": pick(90), "p99": pick(99), "max": s[-1]}


def summary(samples, kernel_ms, runs_tps, busy_share, peak_bytes):
    tokens = 8 * len(samples)
    total = round(sum(samples), 6)
    return {
        "schema": "profagent.summary/1",
        "meta": {"ranks": [0], "world_size": 1, "hosts": ["node0"], "gpu_timing": "cupti"},
        "stats": {
            "steps": len(samples),
            "tokens": tokens,
            "total_time_ms": total,
            "tokens_per_s": round(tokens / total * 1000, 3),
            "step_latency_ms": lat(samples),
            "step_latency_ms_samples": samples,
            "gpu_busy_ms_per_step": round(0.8 * sum(samples) / len(samples), 4),
        },
        "runs": [],
        "runs_aggregate": {
            "runs": 4,
            "metrics": {"tokens_per_s": {"mean": runs_tps[0], "std": runs_tps[1]}},
        },
        "buckets_model_avg_ms": {
            "attn.compute": {"ms": round(kernel_ms * 0.02, 4), "share": 0.6},
            "mlp.down_proj": {"ms": 2.0, "share": 0.4},
        },
        "kernels": [
            {"name": "attention_decode_kernel", "bucket": "attn.compute", "count": 400,
             "total_ms": kernel_ms, "mean_us": round(kernel_ms / 400 * 1000, 3), "share": 0.6},
            {"name": "gemm_kernel", "bucket": "mlp.down_proj", "count": 400, "total_ms": 80.0,
             "mean_us": 200.0, "share": 0.4},
        ],
        "host": {"gpu_busy_share": busy_share,
                 "launch_to_start_us": {"count": 800, "mean": 12.0, "std": 3.0, "min": 5.0,
                                        "p50": 11.0, "p90": 16.0, "p99": 25.0, "max": 40.0}},
        "memory": {"devices": [{"rank": 0, "device": 0, "allocs": 12, "frees": 12,
                                "alloc_bytes": peak_bytes, "peak_bytes": peak_bytes,
                                "peak_at_ms": 3.5, "final_bytes": 0}]},
    }


def write(name, obj):
    with open(name, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")


r = lcg(42)
base = [round(10.0 * (1 + 0.02 * (2 * next(r) - 1)), 4) for _ in range(40)]
write("diff_base.json", summary(base, 150.0, (800.0, 4.0), 0.8, 1 << 30))
write("diff_regression.json",
      summary([round(v * 1.15, 4) for v in base], 195.0, (696.0, 5.0), 0.8, 1 << 30))
write("diff_improvement.json",
      summary([round(v * 0.85, 4) for v in base], 150.0, (940.0, 4.0), 0.8, 1 << 30))

r = lcg(7)
noisy_base = [round(6 + 8 * next(r), 3) for _ in range(10)]
noisy_new = [round(6 + 8 * next(r), 3) for _ in range(10)]
# Same distribution; shift the new draw so its mean is exactly 8 % above the base mean.
shift = 1.08 * sum(noisy_base) / 10 - sum(noisy_new) / 10
noisy_new = [round(v + shift, 3) for v in noisy_new]
write("diff_noisy_base.json", summary(noisy_base, 150.0, (800.0, 40.0), 0.8, 1 << 30))
# Runs agree within their spread, a bucket moves 6 % with nothing to test it against.
write("diff_noisy_new.json", summary(noisy_new, 159.0, (760.0, 45.0), 0.8, 1 << 30))

with open("diff_malformed.json", "w") as f:
    f.write('{"schema": "profagent.summary/1", "stats": {"steps": 40,, }\n')
