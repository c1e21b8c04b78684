"""Fine-tune a Hugging Face Transformers model on the tpu device.

    pip install -r requirements-models.txt -c requirements.txt   (or: make models)
    python examples/finetune_hf.py [--device cpu] [--mode fused] [--steps 30]

The model (a small Llama) is built from a config with random weights, so
nothing is downloaded; it is fine-tuned on generated text (addition facts)
and should show its loss falling.
"""
import argparse
import os
import time

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

import torchtpu  # noqa: E402
from torchtpu.perflab.models import CharData, arithmetic_corpus  # noqa: E402


def main():
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError:
        raise SystemExit("this example needs transformers: pip install -r requirements-models.txt "
                         "-c requirements.txt")
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--device", default="tpu", choices=["tpu", "cpu"])
    p.add_argument("--mode", default=None, choices=["debug", "strict", "fused"])
    p.add_argument("--steps", type=int, default=30)
    args = p.parse_args()
    if args.device == "tpu" and args.mode:
        torchtpu.set_mode(args.mode)
    torch.manual_seed(0)
    data = CharData(arithmetic_corpus(), 32)
    config = LlamaConfig(vocab_size=data.vocab, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=64)
    model = LlamaForCausalLM(config).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    print(f"Llama with {sum(p.numel() for p in model.parameters()) / 1e3:.0f}k parameters on {args.device}")
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x, _ = data.batch(16)
        x = x.to(args.device)
        loss = model(input_ids=x, labels=x).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step == 1 or step % 10 == 0:
            print(f"step {step:3d}  loss {loss.item():.4f}  {step * x.numel() / (time.perf_counter() - start):8.0f} tok/s")
    prompt = torch.tensor([[data.stoi[c] for c in "12+30="]], device=args.device)
    out = model.generate(prompt, max_new_tokens=4, do_sample=False)
    print("sample:", data.decode(out[0].tolist()))
    if args.device == "tpu":
        torchtpu.report()


if __name__ == "__main__":
    main()
