"""twinloop's NVML actuator on a real GPU: wait for a sustained dense load, cap the power limit through
`NvmlAdapter` (the adapter `twinloop watch --actuator nvml` uses), hold it, then restore the default limit.

Writes OUT/actuator.json: the adapter's replies, the limits read back, and NVML power/clock at 10 Hz around the
cap (for the power-cap response time). Usage: python3 tools/gpu/cap_check.py OUT [CAP_W] [HOLD_S] [WAIT_S] (alongside tools/gpu/shapes.py)
"""

import json
import sys
import time
from pathlib import Path

import pynvml as N

from twinloop.ops.respond.actions import ActionKind, ActionRequest
from twinloop.ops.respond.adapters.nvml import NvmlAdapter

out = sys.argv[1]
cap_w = float(sys.argv[2]) if len(sys.argv) > 2 else 450.0
hold_s = float(sys.argv[3]) if len(sys.argv) > 3 else 30.0
wait_s = float(sys.argv[4]) if len(sys.argv) > 4 else 330.0
adapter = NvmlAdapter.from_system(dry_run=False)
h = N.nvmlDeviceGetHandleByIndex(0)
target = "local/r0/k0/n0/g0"
REASONS = getattr(N, "nvmlDeviceGetCurrentClocksEventReasons", None) or N.nvmlDeviceGetCurrentClocksThrottleReasons
limits = adapter.limits(ActionKind.POWER_CAP, target)
default_w = N.nvmlDeviceGetPowerManagementDefaultLimit(h) / 1000.0
rec: dict = {"gpu": N.nvmlDeviceGetName(h), "limits_w": limits, "default_limit_w": default_w, "cap_w": cap_w,
             "samples": [], "events": []}


def sample() -> tuple[float, float, int, int]:
    return (round(time.time(), 3), N.nvmlDeviceGetPowerUsage(h) / 1000.0, N.nvmlDeviceGetClockInfo(h, N.NVML_CLOCK_SM),
            REASONS(h))


def event(what: str, **kw: object) -> None:
    rec["events"].append({"t": round(time.time(), 3), "what": what, **kw})


t0, soak = time.time(), Path("/tmp/twinloop_soak")
soak.unlink(missing_ok=True)
while time.time() - t0 < wait_s and not soak.exists():  # shapes.py touches it as its 180 s heat soak begins
    time.sleep(0.5)
time.sleep(20)  # let the soak reach its power-bound steady state
if not (soak.exists() and sample()[1] > 0.85 * default_w):
    event("no heat soak at full power seen; nothing set", last_w=sample()[1])
else:
    try:
        for _ in range(50):
            rec["samples"].append(sample()); time.sleep(0.1)
        reply = adapter.apply(ActionRequest(ActionKind.POWER_CAP, target, cap_w, reason="device check"))
        event("cap", status=reply.status, detail=reply.detail, read_back_w=adapter.current(ActionKind.POWER_CAP, target))
        t1 = time.time()
        while time.time() - t1 < hold_s:
            rec["samples"].append(sample()); time.sleep(0.1)
    finally:
        reply = adapter.apply(ActionRequest(ActionKind.POWER_CAP, target, default_w, reason="device check: restore"))
        event("restore", status=reply.status, detail=reply.detail,
              read_back_w=adapter.current(ActionKind.POWER_CAP, target))
    t2 = time.time()
    while time.time() - t2 < 8:
        rec["samples"].append(sample()); time.sleep(0.1)
json.dump(rec, open(f"{out}/actuator.json", "w"), indent=0)
print("cap_check:", rec["events"])
