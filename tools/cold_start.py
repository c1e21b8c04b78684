"""Cold start of a fused training loop, with and without the compile thread.

Runs perflab's model for a few steps in fresh processes, each with an empty
disk cache, alternating TORCHTPU_BACKGROUND_COMPILE=1 and 0, and prints the
median seconds from building the model to the last loss read back.

    .venv/bin/python tools/cold_start.py [--model GPT] [--steps 6] [--runs 3] [--sync]

--sync reads the loss back every step (no recording runs ahead of a compile).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = """
import json, os, sys, time, torch, torchtpu
from torchtpu.perflab import suite_models as sm
name, steps, sync = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1"
t0 = time.perf_counter()
model, _, loss_fn = sm.build(name, sm.shapes(False, False)[name], "tpu")
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
losses = []
with torchtpu.mode("fused"):
    for _ in range(steps):
        opt.zero_grad(True)
        loss = loss_fn(model)
        loss.backward()
        opt.step()
        losses.append(loss.item() if sync else loss)
    losses = [float(v) for v in losses]
seconds = time.perf_counter() - t0
m = torchtpu.metrics()
print(json.dumps({"seconds": seconds, "compiles": m["compiles"],
                  "compile_seconds": m["compile_seconds"], "last_loss": losses[-1]}))
"""


def run(model, steps, sync, background):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCHTPU_CACHE_DIR=cache,
                   TORCHTPU_BACKGROUND_COMPILE="1" if background else "0")
        out = subprocess.run([sys.executable, "-c", CHILD, model, str(steps), "1" if sync else "0"],
                             env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="GPT", choices=("MLP", "CNN", "GPT"))
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--sync", action="store_true")
    a = p.parse_args()
    results = {True: [], False: []}
    for _ in range(a.runs):
        for background in (True, False):
            results[background].append(run(a.model, a.steps, a.sync, background))
    for background, rs in results.items():
        seconds = [r["seconds"] for r in rs]
        runs = ", ".join(f"{t:.2f}" for t in seconds)
        print(f"{a.model} {a.steps} steps, compile thread {'on' if background else 'off'}: "
              f"median {statistics.median(seconds):.2f} s (runs {runs}), "
              f"{rs[0]['compiles']} compiles, last loss {rs[0]['last_loss']:.6f}")

if __name__ == "__main__":
    main()
