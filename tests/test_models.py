"""Training on tpu: the reference models (3-layer MLP, small CNN, 2-layer GPT)
train for 20 AdamW steps with no CPU fallback and the same loss curve as CPU;
in fused mode too, where a steady loop compiles nothing after step 3."""
import os

import pytest
import torch

import torchtpu
from conftest import NoFallback
from torchtpu.perflab.models import CNN, GPT, MLP, CharData, arithmetic_corpus

STEPS = 20


def make(name):
    torch.manual_seed(0)
    if name == "mlp":
        model = MLP(64, 128, 10)
        data = [(torch.randn(32, 64), torch.randint(0, 10, (32,)))] * STEPS
        loss = lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y)
    elif name == "cnn":  # (a fixed batch: the loss must fall)
        model = CNN(3, 10)
        data = [(torch.randn(8, 3, 16, 16), torch.randint(0, 10, (8,)))] * STEPS
        loss = lambda m, x, y: torch.nn.functional.cross_entropy(m(x), y)
    else:
        text = CharData(arithmetic_corpus(500), 16)
        model = GPT(vocab=text.vocab, dim=32, heads=4, layers=2, block=16)
        data = [text.batch(8)] * STEPS
        loss = lambda m, x, y: m(x, y)[1]
    return model, data, loss


def train(name, device, steps=STEPS, on_step=None):
    model, data, loss_fn = make(name)
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    losses = []
    for step, (x, y) in enumerate(data[:steps]):
        if on_step:
            on_step(step)
        loss = loss_fn(model, x.to(device), y.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt"])
def test_training_matches_cpu(name):
    cpu, _ = train(name, "cpu")
    with NoFallback():
        tpu, _ = train(name, "tpu")
    assert tpu[-1] < tpu[0], tpu
    torch.testing.assert_close(torch.tensor(tpu), torch.tensor(cpu), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("name", ["mlp", "cnn", "gpt"])
def test_fused_training_matches_strict_and_stops_compiling(name):
    strict, _ = train(name, "tpu", steps=8)

    def no_compile_after_3(step):
        if step == 4:
            os.environ["TORCHTPU_ASSERT_NO_COMPILE"] = "1"

    try:
        with torchtpu.mode("fused"), NoFallback():
            fused, _ = train(name, "tpu", steps=8, on_step=no_compile_after_3)
    finally:
        os.environ.pop("TORCHTPU_ASSERT_NO_COMPILE", None)
    torch.testing.assert_close(torch.tensor(fused), torch.tensor(strict), rtol=1e-4, atol=1e-4)
