"""An operator's power cap on a real GPU running a training-like step, with `twinloop watch nvml` watching.

The loop's power-throttle rule once missed an operator's cap on a training GPU (its activity alternates between
compute at the limit and communication far below it) and then took the lifted cap for a straggler (issue 14).
This check reproduces that situation on real hardware: a step of dense BF16 GEMMs (compute, ~0.55 s) followed by
device-to-device copies (HBM-bound, a stand-in for the communication phase, ~0.2 s), repeated for
``UNCAPPED_S + CAP_S + AFTER_S``; ``UNCAPPED_S`` in, the limit is set to ``CAP_W`` *outside twinloop*
(``nvidia-smi -pl``, as an operator would; NVML's setter if nvidia-smi refuses) and restored to the default
after ``CAP_S``. Run `twinloop watch nvml` beside it (tools/gpu/check_cap.sh).

Writes OUT/operator_cap.json: the events (cap, restore, how each was set), every step's start and duration, and
NVML power/SM clock/reason bits at 10 Hz. Usage: python3 tools/gpu/operator_cap.py OUT [CAP_W] [UNCAPPED_S]
[CAP_S] [AFTER_S]
"""

import json
import subprocess
import sys
import threading
import time

import pynvml as N
import torch

out = sys.argv[1]
cap_w = float(sys.argv[2]) if len(sys.argv) > 2 else 400.0
uncapped_s, cap_s, after_s = (float(a) for a in (sys.argv[3:6] if len(sys.argv) > 5 else (40, 60, 50)))
N.nvmlInit()
h = N.nvmlDeviceGetHandleByIndex(0)
REASONS = getattr(N, "nvmlDeviceGetCurrentClocksEventReasons", None) or N.nvmlDeviceGetCurrentClocksThrottleReasons
default_w = N.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0
rec: dict = {"gpu": N.nvmlDeviceGetName(h), "default_limit_w": default_w, "cap_w": cap_w, "uncapped_s": uncapped_s,
             "cap_s": cap_s, "after_s": after_s, "events": [], "steps": [], "samples": []}
running = [True]


def sampler() -> None:
    while running[0]:
        rec["samples"].append((round(time.time(), 3), N.nvmlDeviceGetPowerUsage(h) / 1000.0,
                               N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM), REASONS(h),
                               N.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0))
        time.sleep(0.1)


def set_limit(watts: float, what: str) -> None:
    """Set the limit as an operator would: nvidia-smi first, NVML's setter if nvidia-smi refuses."""
    r = subprocess.run(["nvidia-smi", "-i", "0", "-pl", f"{watts:.0f}"], capture_output=True, text=True)
    how = "nvidia-smi -pl"
    if r.returncode != 0:
        N.nvmlDeviceSetPowerManagementLimit(h, int(watts * 1000))
        how = f"nvmlDeviceSetPowerManagementLimit (nvidia-smi rc {r.returncode}: {r.stdout.strip()[:120]})"
    rec["events"].append({"t": round(time.time(), 3), "what": what, "set_w": watts, "how": how,
                          "read_back_w": N.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0})


a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
src = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
dst = torch.empty_like(src)
threading.Thread(target=sampler, daemon=True).start()
t0 = time.time()
capped = restored = False
try:
    while (now := time.time()) - t0 < uncapped_s + cap_s + after_s:
        if not capped and now - t0 >= uncapped_s:
            set_limit(cap_w, "cap")
            capped = True
        if capped and not restored and now - t0 >= uncapped_s + cap_s:
            set_limit(default_w, "restore")
            restored = True
        s0 = time.time()
        for _ in range(380):
            a @ b
        torch.cuda.synchronize()
        s1 = time.time()
        for _ in range(280):
            dst.copy_(src)
        torch.cuda.synchronize()
        rec["steps"].append((round(s0, 3), round(s1 - s0, 4), round(time.time() - s1, 4)))
finally:
    if capped and not restored:
        set_limit(default_w, "restore (on error)")
    running[0] = False
    time.sleep(0.2)
    json.dump(rec, open(f"{out}/operator_cap.json", "w"))
print("operator_cap:", rec["events"], len(rec["steps"]), "steps", flush=True)
