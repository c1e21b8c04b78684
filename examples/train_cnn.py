"""Train a small CNN (conv, batch norm, pooling) on the tpu device.

    python examples/train_cnn.py [--device cpu] [--mode fused] [--steps 100]

The data is generated: 16x16 images with one bright blob; the label is the
quadrant it is in, which a CNN learns in a few dozen steps.
"""
import argparse
import time

import torch
import torch.nn.functional as F

import torchtpu
from torchtpu.perflab.models import CNN


def blobs(n, gen):
    labels = torch.randint(0, 4, (n,), generator=gen)
    images = torch.randn(n, 3, 16, 16, generator=gen) * 0.3
    for i, q in enumerate(labels.tolist()):
        r, c = (q // 2) * 8 + 2, (q % 2) * 8 + 2
        images[i, :, r:r + 4, c:c + 4] += 2.0
    return images, labels


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", choices=["tpu", "cpu"])
    p.add_argument("--mode", default=None, choices=["debug", "strict", "fused"])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=32)
    args = p.parse_args()
    if args.device == "tpu" and args.mode:
        torchtpu.set_mode(args.mode)
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    model = CNN(3, 4).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = blobs(args.batch, gen)
        loss = F.cross_entropy(model(x.to(args.device)), y.to(args.device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 20 == 0 or step == 1:
            print(f"step {step:4d}  loss {loss.item():.4f}  "
                  f"{step * args.batch / (time.perf_counter() - start):7.0f} images/s")
    model.eval()
    x, y = blobs(256, gen)
    with torch.no_grad():
        acc = (model(x.to(args.device)).argmax(1).cpu() == y).float().mean().item()
    print(f"accuracy on new images: {acc:.1%}")
    if args.device == "tpu":
        torchtpu.report()


if __name__ == "__main__":
    main()
