"""The power cap a GPU's own thermal path carries (``value_from: thermal_path``).

A GPU whose thermal interface or cold plate fails runs hot at its usual power: its die-to-coolant resistance ``R``
has grown, and the catalog's ``R`` no longer describes it. Its own readings do: at steady state the die sits
``R·P`` above the coolant or inlet air it sees (the relation the detection stage judges thermal-path faults by,
``T − R·P`` against the coolant), so

    R_gpu = (mean T − T_coolant) / mean P        over the GPU's last readings, and
    P_cap = (T_slowdown − margin − T_coolant) / R_gpu

is the highest power limit that holds that die below its slowdown temperature at that coolant, clamped to the
GPU's power-limit range. A power limit bounds the power at every instant, so the die's peak under the cap is at
most ``T_coolant + R·P_cap`` however the job's power swings below it (compute vs communication): no ripple
margin is needed. The margin is :data:`MARGIN_C` (see there). Means over a window rather than one reading: a
training job's power swings every iteration far faster than the die follows, and the time-mean relation holds
for any power trace once the die has settled.

Where the cluster cannot say the coolant temperature or the slowdown threshold (a live adapter with NVML but no
coolant sensor), or the readings make no sense (a die no warmer than its coolant, no power), there is no figure:
the caller falls back to the rule's fixed factor and says so. So does a die not yet settled (:data:`SETTLED_FRACTION`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from twinloop.ops.respond.history import ReadFn, read_back
from twinloop.telemetry.fields import DCGM_FI_DEV_GPU_TEMP, DCGM_FI_DEV_POWER_USAGE

#: Software thermal slowdown starts about 2 °C below the hardware slowdown threshold (an H100's ``nvidia-smi -q``
#: lists "GPU Max Operating Temp" 87 °C below "GPU Slowdown Temp" 89 °C), and the die temperature is read in
#: whole degrees (NVML), so a reading can sit up to 1 °C below the die. The cap keeps the die that far below
#: the slowdown threshold: below the point where the GPU starts pulling its own clock down, as read.
SW_SLOWDOWN_BELOW_C = 2.0
READING_RESOLUTION_C = 1.0
MARGIN_C = SW_SLOWDOWN_BELOW_C + READING_RESOLUTION_C

#: Readings averaged for ``R_gpu``: now and every :data:`~.history.STEP_S` back to ``WINDOW_S`` ago (several
#: iterations of a training job).
WINDOW_S = 30.0

#: The die counts as settled when its readings over the window stay within this fraction of its rise above the
#: coolant. Over a window ``W`` the time-mean relation is off by ``tau·ΔT/W`` (``tau`` the path's time constant,
#: ``ΔT`` the die's move): within 5 %, R is good to about 3 % for a path up to 4x an H100's (tau 18 s). A die still
#: heating after the fault, or cooling after its job left (hot-afternoon: R read 0.20 C/W from an idle GPU cooling
#: off, against ~0.13), is not read: the rule's fallback applies.
SETTLED_FRACTION = 0.05

#: The longer window for a die that bursty work keeps moving (a serving GPU's prefill bursts: on
#: sweeps/new-user/serving-fleet.yaml the faulty H100 swung 140-700 W within seconds and its die 65-84 C between 10 s
#: readings, so no 30 s window was ever within 5 %, and it was never capped). Over it the die counts as settled when
#: the time-means of its two halves differ by at most :data:`SETTLED_FRACTION` of its rise: that is the drift that
#: biases the time-mean relation (by ``tau·ΔT/W``), and the mean of a half averages the bursts out where the range
#: of single readings does not. Four times the short window: halves of 60 s with 6 readings each, their means'
#: scatter ~1/sqrt(6) of a single reading's (an engineering choice, not fitted; the reader keeps 10 min).
BURSTY_WINDOW_S = 120.0

#: How often a cap follows its GPU's coolant (the responder reads the path again). A row's coolant moves over
#: minutes (the CDU's control, facility water, the afternoon), the die settles in seconds.
FOLLOW_EVERY_S = 60.0


class NotSettled(str):
    """Why there is no figure yet: the die is still heating or cooling (read it again later)."""

    __slots__ = ()


@dataclass(frozen=True)
class ThermalPathCap:
    """A cap from a GPU's own thermal path, with its inputs (for the audit trail).

    Attributes:
        cap_w: the power limit, clamped to ``limits_w``, W.
        raw_w: the limit before the clamp, W.
        resistance_c_per_w: the GPU's own die-to-coolant resistance from its readings, °C/W.
        temp_c: its mean die temperature over the window, °C.
        power_w: its mean power over the window, W.
        coolant_c: the coolant or inlet air it sees, °C.
        slowdown_c: its slowdown threshold, °C.
        margin_c: kept below the threshold, °C.
        limits_w: its power-limit range, W.
        r_read_ago_s: how long ago ``R`` was read (0: from the readings of now; more: a die not settled now, its
            last settled ``R`` applied to the coolant of now).
        window_s: the window the means are over (:data:`WINDOW_S`, or :data:`BURSTY_WINDOW_S` for bursty work).
    """

    cap_w: float
    raw_w: float
    resistance_c_per_w: float
    temp_c: float
    power_w: float
    coolant_c: float
    slowdown_c: float
    margin_c: float
    limits_w: tuple[float, float]
    r_read_ago_s: float = 0.0
    window_s: float = WINDOW_S

    def why(self) -> str:
        """The figure and its inputs, in one line."""
        clamp = "" if self.cap_w == self.raw_w else f" (clamped to {self.limits_w[0]:g}-{self.limits_w[1]:g} W)"
        return (
            f"thermal-path cap {self.cap_w:.0f} W{clamp} = ({self.slowdown_c:g} slowdown - {self.margin_c:g} margin"
            f" - {self.coolant_c:.1f} coolant) C / {self.resistance_c_per_w:.4f} C/W, its own R from"
            f" {self.temp_c:.1f} C at {self.power_w:.0f} W over the last {self.window_s:g} s"
            + (f", last read {self.r_read_ago_s:.0f} s ago" if self.r_read_ago_s > 0 else "")
        )

    def at_coolant(self, coolant_c: float, r_read_ago_s: float) -> ThermalPathCap:
        """The same path's cap at another coolant temperature: ``R`` is the path's (its interface and cold plate),
        the coolant is what moves, so a die still heating or cooling needs no new ``R`` to follow its coolant.
        """
        cap, raw = path_cap_w(self.resistance_c_per_w, coolant_c, self.slowdown_c, self.limits_w, self.margin_c)
        return replace(self, cap_w=cap, raw_w=raw, coolant_c=coolant_c, r_read_ago_s=r_read_ago_s)


def own_resistance_c_per_w(temp_c: float, power_w: float, coolant_c: float) -> float | None:
    """A GPU's die-to-coolant resistance from its readings at steady state, °C/W; None when they give none (no
    power, or a die no warmer than its coolant).
    """
    if not (power_w > 0.0 and temp_c > coolant_c):
        return None
    return (temp_c - coolant_c) / power_w


def path_cap_w(
    resistance_c_per_w: float, coolant_c: float, slowdown_c: float, limits_w: tuple[float, float], margin_c: float
) -> tuple[float, float]:
    """(clamped, raw) highest power limit holding the die ``margin_c`` below ``slowdown_c`` at ``coolant_c``, W.

    Non-increasing in the coolant temperature and in the resistance; a coolant at or above the target gives the
    bottom of the range.
    """
    lo, hi = limits_w
    raw = (slowdown_c - margin_c - coolant_c) / resistance_c_per_w
    return min(hi, max(lo, raw)), raw


def _readings(read: ReadFn, gpu: str, window_s: float) -> list[tuple[float, float, float]]:
    """(seconds ago, die temperature °C, power W) of ``gpu`` every :data:`~.history.STEP_S` back to ``window_s`` ago,
    where both were read.
    """
    power_w = dict(read_back(read, DCGM_FI_DEV_POWER_USAGE, gpu, "mean", window_s))
    temps = read_back(read, DCGM_FI_DEV_GPU_TEMP, gpu, "mean", window_s)
    return [(ago, t, power_w[ago]) for ago, t in temps if ago in power_w]


def window_means(read: ReadFn, gpu: str, window_s: float = WINDOW_S) -> tuple[float, float, float] | None:
    """(mean die temperature °C, mean power W, the die temperature's range °C) of ``gpu`` over the last
    ``window_s``; None with no reading.
    """
    got = _readings(read, gpu, window_s)
    if not got:
        return None
    temps = [t for _, t, _ in got]
    return sum(temps) / len(temps), sum(p for _, _, p in got) / len(got), max(temps) - min(temps)


def _halves_drift_c(read: ReadFn, gpu: str, window_s: float) -> tuple[float, float, float] | None:
    """(mean die temperature °C, mean power W, how far the newer half's mean temperature is from the older half's °C)
    over the last ``window_s``; None with fewer than two readings in either half.
    """
    got = _readings(read, gpu, window_s)
    newer = [t for ago, t, _ in got if ago < window_s / 2]
    older = [t for ago, t, _ in got if ago > window_s / 2]
    if len(newer) < 2 or len(older) < 2:
        return None
    temps = [t for _, t, _ in got]
    drift = abs(sum(newer) / len(newer) - sum(older) / len(older))
    return sum(temps) / len(temps), sum(p for _, _, p in got) / len(got), drift


def thermal_path_cap(
    read: ReadFn,
    gpu: str,
    coolant_c: float,
    slowdown_c: float,
    limits_w: tuple[float, float],
    margin_c: float = MARGIN_C,
    bursty: bool = True,
) -> ThermalPathCap | str:
    """The cap ``gpu``'s own thermal path carries, or why there is none (a line for the audit trail). A die that
    moves over :data:`WINDOW_S` is read over :data:`BURSTY_WINDOW_S` if the halves of that window agree (bursty work
    whose mean has settled) and ``bursty`` allows it; a die that is heating or cooling is not read at all.
    """
    means = window_means(read, gpu)
    if means is None:
        return f"no temperature and power readings of {gpu}"
    temp_c, power_w, moved_c = means
    r = own_resistance_c_per_w(temp_c, power_w, coolant_c)
    if r is None:
        return f"no thermal path from {temp_c:.1f} C at {power_w:.0f} W over a {coolant_c:.1f} C coolant"
    window_s = WINDOW_S
    if moved_c > SETTLED_FRACTION * (temp_c - coolant_c):
        rise = temp_c - coolant_c
        why = (
            f"{gpu} not settled: its die moved {moved_c:.1f} C over the last {WINDOW_S:g} s, {rise:.1f} C above coolant"
        )
        halves = _halves_drift_c(read, gpu, BURSTY_WINDOW_S) if bursty else None
        long_r = None if halves is None else own_resistance_c_per_w(halves[0], halves[1], coolant_c)
        if halves is None or long_r is None or halves[2] > SETTLED_FRACTION * (halves[0] - coolant_c):
            return NotSettled(why)
        temp_c, power_w, _ = halves
        r, window_s = long_r, BURSTY_WINDOW_S
    cap, raw = path_cap_w(r, coolant_c, slowdown_c, limits_w, margin_c)
    return ThermalPathCap(cap, raw, r, temp_c, power_w, coolant_c, slowdown_c, margin_c, limits_w, window_s=window_s)


def own_control_holds(read: ReadFn, gpu: str, slowdown_c: float, window_s: float = FOLLOW_EVERY_S) -> str | None:
    """Why ``gpu`` needs no cap: its die stayed under its slowdown threshold over the last ``window_s`` (the follower's
    period, so every moment between two looks), held there by the GPU's own software thermal slowdown, which clocks
    the die down to its target as it heats; None where the die reached the threshold (the GPU's own control did not
    hold it) or no reading says.

    A cap from the path holds the die lower than that control does (the margin, and a power limit bounds the
    job's power peaks where the die's own control lets them through and holds their mean): on mixed_hall the capped
    H100 never passed 86.4 C where its own control let it reach 87 C, and the 192-GPU job it paced ran 1.1 % slower
    (seed 0; goodput -0.2 to -0.8 % over 5 seeds), while that control never let it reach its slowdown.
    """
    temps = read_back(read, DCGM_FI_DEV_GPU_TEMP, gpu, "max", window_s)
    if not temps:
        return None
    hottest = max(t for _, t in temps)
    if hottest >= slowdown_c:
        return None
    return (
        f"no cap: its own thermal control holds the die under its {slowdown_c:g} C slowdown (at most {hottest:.0f} C"
        f" over the last {window_s:g} s); a cap would hold it lower and only slow its job"
    )


def followed_cap_w(found: ThermalPathCap | str, current_w: float, ceiling_w: float) -> float | None:
    """The new limit for a cap that follows its coolant, or None to leave it: no figure now, or a move worth no
    more than :data:`READING_RESOLUTION_C` of die temperature (``|ΔP|·R``). Never above ``ceiling_w`` (the limit
    before the first cap: an operator's lower limit stays).
    """
    if not isinstance(found, ThermalPathCap):
        return None
    value = min(found.cap_w, ceiling_w)
    if abs(value - current_w) * found.resistance_c_per_w <= READING_RESOLUTION_C:
        return None
    return value
