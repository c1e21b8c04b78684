"""Where a training step's time goes, with a synchronize() after each step.

Runs perflab's model in one mode and prints medians over the steps: the
host's time recording (and, in strict mode, launching) the forward, the
backward and the optimizer step, its wait in the closing synchronize(), and
the device times that events give: from the step's start to the end of the
work launched by the end of backward(), and from there to the end of the
optimizer step's work (in fused mode, its two programs). Then the peak
device memory over the timed steps (buffers, and each program's scratch
memory while it runs).

    .venv/bin/python tools/step_split.py [--model GPT] [--mode fused] [--steps 200]
"""
import argparse
import statistics
import time

import torch

import torchtpu
from torchtpu.perflab import suite_models as sm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="GPT", choices=["MLP", "CNN", "GPT"])
    ap.add_argument("--mode", default="fused", choices=["strict", "fused", "debug"])
    ap.add_argument("--steps", type=int, default=200)
    args = ap.parse_args()
    torch.set_num_threads(1)  # as perflab runs PyTorch
    torchtpu.set_mode(args.mode)
    model, _, loss_fn = sm.build(args.model, sm.shapes(False, False)[args.model], "tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    event = lambda: torch.tpu.Event(enable_timing=True)  # noqa: E731
    ms = {k: [] for k in ("forward", "backward", "optimizer", "sync", "device: to backward's end",
                          "device: optimizer after it", "step")}
    for i in range(30 + args.steps):  # the first 30: warmup
        torch.tpu.synchronize()
        start = event()
        start.record()
        t = [time.perf_counter()]
        opt.zero_grad(True)
        loss = loss_fn(model)
        t.append(time.perf_counter())
        loss.backward()
        t.append(time.perf_counter())
        after_backward = event()
        after_backward.record()
        opt.step()
        t.append(time.perf_counter())
        after_step = event()
        after_step.record()
        torch.tpu.synchronize()
        t.append(time.perf_counter())
        if i < 30:
            if i == 29:
                torch.tpu.reset_peak_memory_stats()
            continue
        host = [(b - a) * 1e3 for a, b in zip(t, t[1:])]
        for k, v in zip(("forward", "backward", "optimizer", "sync"), host):
            ms[k].append(v)
        ms["device: to backward's end"].append(start.elapsed_time(after_backward))
        ms["device: optimizer after it"].append(after_backward.elapsed_time(after_step))
        ms["step"].append((t[-1] - t[0]) * 1e3)
    print(f"{args.model} {args.mode}, ms per step (medians of {args.steps}):")
    for k, v in ms.items():
        print(f"  {k:28s} {statistics.median(v):7.2f}")
    print(f"  {'peak memory, MB':28s} {torch.tpu.max_memory_allocated() / 2**20:7.2f}")


if __name__ == "__main__":
    main()
