"""The model zoo (zoo.py) on tpu against CPU: forward, one AdamW training
step (loss, gradients, updates), greedy generation for language models, and
no CPU fallback. Run by `make models` (not by `make test`)."""
import pytest

pytest.importorskip("transformers", reason="the model zoo needs requirements-models.txt "
                    "(`make models` installs it)")

import os  # noqa: E402

import zoo  # noqa: E402


@pytest.fixture(scope="session", autouse=True)
def zoo_table():
    """With TORCHTPU_ZOO_TABLE=path (set by `make models`), writes the
    results of the run (also test_minilm.py's) there as Markdown at the end
    of the session."""
    yield
    path = os.environ.get("TORCHTPU_ZOO_TABLE")
    if path and zoo.RESULTS:
        with open(path, "w") as f:
            f.write(zoo.table(zoo.RESULTS, extra=[""] + zoo.EXTRA if zoo.EXTRA else (),
                              seconds=zoo.elapsed()))


@pytest.mark.parametrize("spec", zoo.ZOO, ids=[s.name for s in zoo.ZOO])
def test_model(spec):
    try:
        res = zoo.run(spec)
    except Exception as e:
        zoo.RESULTS.append((spec.name, spec.kind, f"{type(e).__name__}: {e}"[:200]))
        raise
    zoo.RESULTS.append(res)
    bad = zoo.failures(res)
    assert not bad, f"{spec.name}: " + "; ".join(bad)


def test_zoo_covers_the_families():
    kinds = {}
    for s in zoo.ZOO:
        kinds[s.kind] = kinds.get(s.kind, 0) + 1
    assert len(zoo.ZOO) >= 20 and set(kinds) == {
        "encoder", "decoder", "encoder-decoder", "vision", "audio"}, kinds


@pytest.mark.parametrize("name", ["BERT", "GPT-2"])
def test_training_with_dropout_has_no_fallbacks(name):
    # With the configs' default dropout, attention takes PyTorch's math path
    # (the fused kernel has no dropout) and dropout draws tpu random numbers:
    # values differ from CPU, but nothing may fall back and the loss falls.
    import torch
    import transformers

    torch.manual_seed(0)
    if name == "BERT":
        cfg = transformers.BertConfig(**zoo.small_text(num_labels=3))
        model = transformers.BertForSequenceClassification(cfg)
        ids, mask = zoo.text_batch()
        inputs = dict(input_ids=ids, attention_mask=mask, labels=zoo.class_labels())
    else:
        cfg = transformers.GPT2Config(vocab_size=zoo.VOCAB, n_embd=32, n_layer=2, n_head=4,
                                      n_positions=64)
        model = transformers.GPT2LMHeadModel(cfg)
        ids, mask = zoo.text_batch()
        inputs = dict(input_ids=ids, attention_mask=mask, labels=zoo.lm_labels(ids, mask))
    assert cfg.attention_probs_dropout_prob if name == "BERT" else cfg.attn_pdrop
    model = model.to("tpu").train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    before = zoo.fallback_counts()
    losses = []
    for _ in range(8):
        loss = model(**zoo.to_device(inputs, "tpu")).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert zoo.fallback_counts() == before
    assert losses[-1] < losses[0], losses
