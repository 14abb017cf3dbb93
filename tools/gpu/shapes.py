# Copied (below this header) from shared/data/h100/tools/shapes.py, the project's read-only H100 measurement
# tools, so that it travels to a lent GPU machine; see tools/gpu/README.md. Two changes: the heat soak touches
# /tmp/twinloop_soak as it begins, so that tools/gpu/cap_check.py caps the power inside the soak and not during a
# shape; SOAK_S and COOL_S (environment, default 180 and 120) set the soak and cool-down lengths.
"""GEMM throughput by shape and dtype (BF16, FP8 per-tensor scaled), SDPA attention by sequence length,
then a heat soak (dense GEMMs 180 s) and a cool-down (120 s idle) for thermal constants. NVML sampled at 10 Hz."""
import json, os, sys, threading, time, torch, pynvml as N
import torch.nn.functional as F
OUT = sys.argv[1]; N.nvmlInit(); h = N.nvmlDeviceGetHandleByIndex(0); dev = "cuda"
samples = []; marks = []; stop = False
def sampler():
    while not stop:
        samples.append((round(time.time(), 3), N.nvmlDeviceGetPowerUsage(h), N.nvmlDeviceGetTemperature(h, 0),
                        N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM)))
        time.sleep(0.1)
th = threading.Thread(target=sampler, daemon=True); th.start()
def bench(f, flops, min_s=0.6):
    f(); torch.cuda.synchronize(); k = 0; t0 = time.time()
    while True:
        for _ in range(5): f()
        torch.cuda.synchronize(); k += 5
        if time.time() - t0 >= min_s: break
    dt = time.time() - t0; return flops * k / dt / 1e12, dt / k * 1e3
res = {"gemm": [], "sdpa": []}
shapes = [(m, n, k) for m in (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384) for (n, k) in ((4096, 4096), (8192, 8192), (14336, 4096), (4096, 14336), (2048, 7168), (7168, 2048), (28672, 8192))]
marks.append((time.time(), "gemm_shapes"))
for (m, n, k) in shapes:
    a = torch.randn(m, k, device=dev, dtype=torch.bfloat16); b = torch.randn(k, n, device=dev, dtype=torch.bfloat16)
    tf, ms = bench(lambda: a @ b, 2 * m * n * k); res["gemm"].append({"dtype": "bf16", "m": m, "n": n, "k": k, "tflops": round(tf, 1), "ms": round(ms, 4)})
    if m % 16 == 0:
        a8 = a.to(torch.float8_e4m3fn); b8 = b.t().contiguous().to(torch.float8_e4m3fn).t(); one = torch.ones((), device=dev)
        tf, ms = bench(lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), 2 * m * n * k)
        res["gemm"].append({"dtype": "fp8", "m": m, "n": n, "k": k, "tflops": round(tf, 1), "ms": round(ms, 4)})
    del a, b
marks.append((time.time(), "sdpa"))
for (b_, hq, hkv, d) in ((1, 32, 8, 128), (1, 64, 8, 128)):
    for s in (512, 1024, 2048, 4096, 8192, 16384, 32768):
        bs = max(1, 16384 // s)
        q = torch.randn(bs, hq, s, d, device=dev, dtype=torch.bfloat16); kk = torch.randn(bs, hkv, s, d, device=dev, dtype=torch.bfloat16); v = torch.randn_like(kk)
        flops = 4 * bs * hq * s * s * d / 2  # causal
        try:
            tf, ms = bench(lambda: F.scaled_dot_product_attention(q, kk, v, is_causal=True, enable_gqa=True), flops)
            res["sdpa"].append({"batch": bs, "heads": hq, "kv_heads": hkv, "head_dim": d, "seq": s, "causal": True, "fwd_tflops": round(tf, 1), "ms": round(ms, 4)})
        except Exception as e:
            res["sdpa"].append({"seq": s, "error": str(e)[:200]})
        del q, kk, v
json.dump(res, open(f"{OUT}/shapes.json", "w"), indent=0)
marks.append((time.time(), "heat_soak"))
open("/tmp/twinloop_soak", "w").close()
a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16); b = torch.randn_like(a); t0 = time.time()
while time.time() - t0 < float(os.environ.get("SOAK_S", 180)):
    for _ in range(10): a @ b
    torch.cuda.synchronize()
marks.append((time.time(), "cooldown")); del a, b; torch.cuda.empty_cache(); time.sleep(float(os.environ.get("COOL_S", 120)))
marks.append((time.time(), "end")); stop = True; th.join()
with open(f"{OUT}/soak_10hz.csv", "w") as f:
    f.write("t,power_mw,gpu_temp_c,sm_mhz\n"); [f.write(",".join(map(str, r)) + "\n") for r in samples]
with open(f"{OUT}/soak_phases.csv", "w") as f:
    f.write("t,phase\n"); [f.write(f"{t:.3f},{p}\n") for t, p in marks]
print("done", len(res["gemm"]), len(res["sdpa"]), len(samples))
