"""The smallest torchtpu program: a computation on the tpu device."""
import torch
import torchtpu

x = torch.arange(6, dtype=torch.float32).reshape(2, 3).to("tpu")
y = (x * 2 + 1).sum(dim=1)
print("device:", torch.tpu.get_device_name(), "| result:", y.cpu().tolist())
torchtpu.report()
