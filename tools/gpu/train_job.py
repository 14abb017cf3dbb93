"""A real training job on the lent GPU that reports its steps to `twinloop watch` the way a job on a cluster would,
and meets the troubles the loop's job rules are for, at known times.

A decoder-only transformer (PyTorch, BF16 autocast, AdamW) learns a synthetic corpus drawn from a random bigram
table (each token has 8 equally likely successors: the loss falls from ln 32000 = 10.4 towards ln 8 = 2.1 and keeps
a step-to-step noise, as a language model's does; a corpus the model can memorize drives the loss to ~1e-3, where
its noise is no longer a training run's). Rank 0 (the only rank)
records one heartbeat line a step with ``twinloop``'s own writer (``heartbeats.record``: ``step``, ``step_time_s``,
``loss``, ``grad_norm``, ``tokens_per_s``) in ``BEATS/JOB.jsonl``, ``checkpoint_start`` / ``checkpoint_done``
around a real ``torch.save``, and ``finished`` at its end. At the times given (seconds from the first step):

* ``contend``: a second process on the same GPU runs BF16 GEMMs for ``contend_s`` (a co-tenant: the job's steps slow
  while its GPU stays busy at its clocks);
* ``hang``: the trainer stops stepping for ``hang_s`` with its CUDA context and memory held (a host-side deadlock);
* ``save``: a checkpoint of the model and optimizer to local disk (a synchronous save: no step while it writes);
* ``flip``: one bit flipped in one step's FP32 logits (bit 30, the top exponent bit, of the first positive value
  below 1: it becomes ~1e38; the bit-flip model of silent data corruption in an arithmetic unit). The loss of that
  step jumps by orders of magnitude; the gradient passes the flip unchanged (softmax bounds it), so the run goes on:
  a transient corruption, as a faulty unit that errs once leaves it. (A flip in a gradient's top exponent bit
  instead makes the FP32 gradient norm infinite, which a job cannot report as a finite number.)

What happened and when (Unix s) goes to ``OUT/train_job.json``: the truth the watcher's incidents are scored on.
Usage: ``python3 tools/gpu/train_job.py OUT BEATS JOB [--small]`` (``--small``: a CPU-sized model and a 60 s plan
to try the script without a GPU).
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import sys
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional

from twinloop.ops.respond.adapters.heartbeats import record

#: The model and the plan (s from the first step); SMALL tries the script on a CPU.
BIG = {"layers": 8, "d": 2048, "heads": 16, "seq": 1024, "batch": 24, "vocab": 32000,
       "plan": {"contend": 70, "contend_s": 45, "hang": 150, "hang_s": 45, "save": 225, "flip": 265,
                "end": 300}}  # fmt: skip
SMALL = {"layers": 2, "d": 128, "heads": 4, "seq": 64, "batch": 8, "vocab": 512,
         "plan": {"contend": 10, "contend_s": 8, "hang": 25, "hang_s": 8, "save": 40, "flip": 48,
                  "end": 60}}  # fmt: skip


class Block(nn.Module):
    """A pre-norm transformer block: causal self-attention, then a GELU MLP."""

    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
        self.up, self.down = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # noqa: D102
        b, s, d = x.shape
        q, k, v = self.qkv(self.n1(x)).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = functional.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(a)
        return x + self.down(functional.gelu(self.up(self.n2(x))))


class Model(nn.Module):
    """A decoder-only language model: embeddings, blocks, a final norm and an untied head."""

    def __init__(self, cfg: dict) -> None:
        super().__init__()
        self.emb = nn.Embedding(cfg["vocab"], cfg["d"])
        self.blocks = nn.ModuleList(Block(cfg["d"], cfg["heads"]) for _ in range(cfg["layers"]))
        self.norm, self.head = nn.LayerNorm(cfg["d"]), nn.Linear(cfg["d"], cfg["vocab"], bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # noqa: D102
        x = self.emb(tokens)
        for blk in self.blocks:
            x = blk(x)
        return self.head(self.norm(x))


def contend(seconds: float, device: str) -> None:
    """A co-tenant: back-to-back BF16 GEMMs on the same GPU for ``seconds``."""
    n = 8192 if device == "cuda" else 256
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    end = time.time() + seconds
    while time.time() < end:
        for _ in range(20):
            a = (a @ b) * (1.0 / n**0.5)
        if device == "cuda":
            torch.cuda.synchronize()


def bigram_corpus(vocab: int, n: int, length: int, device: str, successors: int = 8) -> torch.Tensor:
    """``n`` sequences of ``length`` tokens from a random bigram table: each token's next is one of its
    ``successors``, equally likely.
    """
    table = torch.randint(0, vocab, (vocab, successors), device=device)
    seqs = torch.empty(n, length, dtype=torch.long, device=device)
    seqs[:, 0] = torch.randint(0, vocab, (n,), device=device)
    for t in range(1, length):
        seqs[:, t] = table[seqs[:, t - 1], torch.randint(0, successors, (n,), device=device)]
    return seqs


def flip_bit30(logits: torch.Tensor) -> tuple[torch.Tensor, float, float]:
    """``logits`` with bit 30 flipped in its first value in (0, 1); that value before and after. The gradient
    passes through as if nothing changed (a fault in the forward arithmetic, not in autograd).
    """
    flat = logits.detach().reshape(-1)
    i = int(((flat > 0) & (flat < 1)).nonzero()[0])
    bad = flat.clone()
    bad[i : i + 1].view(torch.int32).bitwise_xor_(1 << 30)
    return logits + (bad.view_as(logits) - logits).detach(), float(flat[i]), float(bad[i])


def main() -> None:
    """Train until the plan's end, meeting its troubles; write ``OUT/train_job.json``."""
    out, beats, job = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    cfg = SMALL if "--small" in sys.argv else BIG
    plan = cfg["plan"]
    device = "cuda" if torch.cuda.is_available() and "--small" not in sys.argv else "cpu"
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model = Model(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    corpus = bigram_corpus(cfg["vocab"], 8192, cfg["seq"] + 1, device)
    tokens_per_step = cfg["batch"] * cfg["seq"]
    log: dict = {"job": job, "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
                 "params": sum(p.numel() for p in model.parameters()), "tokens_per_step": tokens_per_step,
                 "plan_s": plan, "events": [], "steps": []}  # fmt: skip
    done: set[str] = set()
    rival: mp.Process | None = None
    t0: float | None = None
    step = 0
    while True:
        now = time.time()
        t0 = now if t0 is None else t0
        at = now - t0
        if at >= plan["end"]:
            break
        if at >= plan["contend"] and "contend" not in done:
            done.add("contend")
            rival = mp.get_context("spawn").Process(target=contend, args=(plan["contend_s"], device))
            rival.start()
            log["events"].append({"what": "contend_start", "t": time.time()})
        if rival is not None and not rival.is_alive():
            rival.join()
            log["events"].append({"what": "contend_end", "t": time.time()})
            rival = None
        if at >= plan["hang"] and "hang" not in done:
            done.add("hang")
            log["events"].append({"what": "hang_start", "t": time.time()})
            time.sleep(plan["hang_s"])
            log["events"].append({"what": "hang_end", "t": time.time()})
            continue
        if at >= plan["save"] and "save" not in done:
            done.add("save")
            start = time.time()
            record(beats, job, "checkpoint_start", start)
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, "/tmp/ckpt.pt")
            end = time.time()
            record(beats, job, "checkpoint_done", end)
            log["events"].append({"what": "checkpoint", "t": start, "end": end})
        t_start = time.time()
        idx = torch.randint(0, corpus.shape[0], (cfg["batch"],), device=device)
        batch = corpus[idx]
        with torch.autocast(device_type=device, dtype=torch.bfloat16):
            logits = model(batch[:, :-1]).float()
        if at >= plan["flip"] and "flip" not in done:
            done.add("flip")
            logits, before, after = flip_bit30(logits)
            log["events"].append({"what": "bit_flip", "t": time.time(), "step": step + 1, "before": before,
                                  "after": after})  # fmt: skip
        loss = functional.cross_entropy(logits.reshape(-1, cfg["vocab"]), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0))
        opt.step()
        loss_value = float(loss.detach())  # synchronizes: the step is done
        step += 1
        step_s = time.time() - t_start
        values = {"step": step, "step_time_s": step_s, "loss": loss_value, "tokens_per_s": tokens_per_step / step_s}
        if math.isfinite(grad_norm):
            values["grad_norm"] = grad_norm
        record(beats, job, "step", time.time(), values)
        log["steps"].append([round(time.time(), 3), step, round(step_s, 4), round(loss_value, 4), grad_norm])
    record(beats, job, "finished")
    if rival is not None:
        rival.join()
    (out / "train_job.json").write_text(json.dumps(log))
    print(f"{step} steps; events: {[(e['what'], round(e['t'] - t0, 1)) for e in log['events']]}")


if __name__ == "__main__":
    main()
