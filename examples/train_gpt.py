"""Train a small GPT on the tpu device.

    python examples/train_gpt.py                   # tpu, default mode
    python examples/train_gpt.py --mode fused      # fused eager mode
    python examples/train_gpt.py --device cpu      # the same on PyTorch CPU

The corpus is generated (addition facts, "17+25=42"), so nothing is
downloaded. At the end the checkpoint is saved from the device, reloaded on
the CPU, and evaluated there: checkpoints are portable.
"""
import argparse
import io
import sys
import time

import torch

import torchtpu
from torchtpu.perflab.models import GPT, CharData, arithmetic_corpus


def progress(step, steps, loss, tokens_per_s, width=30):
    done = int(width * step / steps)
    bar = "#" * done + "." * (width - done)
    sys.stdout.write(f"\r[{bar}] step {step:4d}/{steps}  loss {loss:.4f}  {tokens_per_s:8.0f} tok/s")
    sys.stdout.flush()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", choices=["tpu", "cpu"])
    p.add_argument("--mode", default=None, choices=["debug", "strict", "fused"],
                   help="tpu execution mode (default: TORCHTPU_MODE or strict)")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--block", type=int, default=32)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    if args.device == "tpu" and args.mode:
        torchtpu.set_mode(args.mode)

    torch.manual_seed(args.seed)
    data = CharData(arithmetic_corpus(), args.block, seed=args.seed)
    model = GPT(vocab=data.vocab, dim=64, heads=4, layers=2, block=args.block).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr)
    params = sum(p.numel() for p in model.parameters())
    where = f"{args.device} ({torchtpu.get_mode()} mode)" if args.device == "tpu" else "cpu"
    print(f"GPT with {params / 1e3:.0f}k parameters, vocab {data.vocab}, on {where}")

    first = last = None
    start = time.perf_counter()
    tokens = 0
    for step in range(1, args.steps + 1):
        x, y = data.batch(args.batch)
        x, y = x.to(args.device), y.to(args.device)
        _, loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        tokens += x.numel()
        if step == 1 or step % 10 == 0 or step == args.steps:
            last = loss.item()  # a host sync, only every few steps
            first = first if first is not None else last
            progress(step, args.steps, last, tokens / (time.perf_counter() - start))
    elapsed = time.perf_counter() - start
    print(f"\nloss {first:.3f} -> {last:.3f} in {elapsed:.1f} s ({tokens / elapsed:.0f} tokens/s)")

    # Portability: save from the device, load on the CPU, evaluate there.
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    cpu_model = GPT(vocab=data.vocab, dim=64, heads=4, layers=2, block=args.block)
    cpu_model.load_state_dict(torch.load(buf, map_location="cpu"))
    x, y = data.batch(args.batch)
    with torch.no_grad():
        _, cpu_loss = cpu_model(x, y)
        _, dev_loss = model(x.to(args.device), y.to(args.device))
    print(f"checkpoint reloaded on cpu: eval loss {cpu_loss.item():.4f} (on {args.device}: "
          f"{dev_loss.item():.4f})")
    prompt = torch.tensor([[data.stoi[c] for c in "12+30="]])
    with torch.no_grad():
        for _ in range(4):
            nxt = cpu_model(prompt[:, -args.block:])[:, -1].argmax(-1, keepdim=True)
            prompt = torch.cat([prompt, nxt], dim=1)
    print("sample:", data.decode(prompt[0].tolist()).split("\n")[0])
    if args.device == "tpu":
        torchtpu.report()
    if not last < first * 0.7:
        sys.exit(f"loss did not fall enough: {first:.3f} -> {last:.3f}")


if __name__ == "__main__":
    main()
