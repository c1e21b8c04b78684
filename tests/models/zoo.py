"""The model zoo: small Hugging Face Transformers models built from configs
in code (random weights, nothing downloaded), each with a batch of inputs and
labels, and the helpers that run one on CPU and on tpu and compare.

Every model is built on CPU from a fixed seed; the tpu copy is a deep copy of
it, so both start from the same weights. Dropout, layer drop, drop path and
SpecAugment masking are switched off in the configs: a training step must be
deterministic to be compared (tpu draws other random numbers than CPU)."""
import copy
import math
import os
import time
from dataclasses import dataclass, field

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

import torchtpu  # noqa: E402

BATCH, SEQ, VOCAB = 2, 8, 96


@dataclass
class Spec:
    name: str       # the architecture, as the table shows it
    kind: str       # encoder, decoder, encoder-decoder, vision, audio
    build: object   # () -> (model, inputs dict); inputs include the labels


ZOO = []


def model(name, kind):
    def register(fn):
        ZOO.append(Spec(name, kind, fn))
        return fn
    return register


def no_dropout(cfg):
    """Zeroes every dropout-like probability of a config (also nested ones)."""
    for key, value in list(vars(cfg).items()):
        low = key.lower()
        if isinstance(value, float) and ("drop" in low or low.startswith("mask_") and low.endswith("_prob")):
            setattr(cfg, key, 0.0)
        elif hasattr(value, "to_dict") and hasattr(value, "model_type"):
            no_dropout(value)
    if hasattr(cfg, "apply_spec_augment"):
        cfg.apply_spec_augment = False
    return cfg


def seeded(cls, cfg):
    torch.manual_seed(0)
    m = cls(no_dropout(cfg))
    m.train()
    return m


def text_batch(vocab=VOCAB, lo=3, pad=0):
    """Token ids with a padded second row (right padding), and its mask."""
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(lo, vocab, (BATCH, SEQ), generator=g)
    mask = torch.ones(BATCH, SEQ, dtype=torch.long)
    mask[1, SEQ - 3:] = 0
    ids[1, SEQ - 3:] = pad
    return ids, mask


def class_labels(n=3):
    return torch.tensor([1, n - 1])


def lm_labels(ids, mask):
    return ids.masked_fill(mask == 0, -100)


def pixels(channels=3, size=32):
    g = torch.Generator().manual_seed(2)
    return torch.randn(BATCH, channels, size, size, generator=g)


def small_text(**kw):
    """The sizes every text model shares: 2 layers, width 32, 4 heads."""
    base = dict(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=64,
                max_position_embeddings=64)
    base.update(kw)
    return base


# ----------------------------------------------------------------- encoders

def encoder_classifier(cls_name, cfg_name, **kw):
    import transformers
    cfg = getattr(transformers, cfg_name)(**small_text(num_labels=3, **kw))
    m = seeded(getattr(transformers, cls_name), cfg)
    ids, mask = text_batch(pad=cfg.pad_token_id or 0)
    return m, dict(input_ids=ids, attention_mask=mask, labels=class_labels())


@model("BERT", "encoder")
def bert():
    return encoder_classifier("BertForSequenceClassification", "BertConfig")


@model("RoBERTa", "encoder")
def roberta():
    return encoder_classifier("RobertaForSequenceClassification", "RobertaConfig", pad_token_id=1)


@model("DistilBERT", "encoder")
def distilbert():
    import transformers
    cfg = transformers.DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=4,
                                        hidden_dim=64, max_position_embeddings=64, num_labels=3)
    m = seeded(transformers.DistilBertForSequenceClassification, cfg)
    ids, mask = text_batch()
    return m, dict(input_ids=ids, attention_mask=mask, labels=class_labels())


@model("ALBERT", "encoder")
def albert():
    return encoder_classifier("AlbertForSequenceClassification", "AlbertConfig", embedding_size=16)


@model("ELECTRA", "encoder")
def electra():
    return encoder_classifier("ElectraForSequenceClassification", "ElectraConfig", embedding_size=16)


@model("DeBERTa-v2", "encoder")
def deberta_v2():
    return encoder_classifier("DebertaV2ForSequenceClassification", "DebertaV2Config",
                              relative_attention=True, position_buckets=16,
                              pos_att_type=["p2c", "c2p"], max_relative_positions=32)


@model("XLM-RoBERTa (masked LM)", "encoder")
def xlm_roberta():
    import transformers
    cfg = transformers.XLMRobertaConfig(**small_text(pad_token_id=1))
    m = seeded(transformers.XLMRobertaForMaskedLM, cfg)
    ids, mask = text_batch(pad=1)
    return m, dict(input_ids=ids, attention_mask=mask, labels=lm_labels(ids, mask))


# ----------------------------------------------------------------- decoders

def causal_lm(cls_name, cfg_name, **kw):
    import transformers
    cfg = getattr(transformers, cfg_name)(**kw)
    m = seeded(getattr(transformers, cls_name), cfg)
    ids, mask = text_batch(pad=0)
    return m, dict(input_ids=ids, attention_mask=mask, labels=lm_labels(ids, mask))


def llama_like(**kw):
    base = small_text(num_key_value_heads=2)
    base.update(kw)
    return base


@model("GPT-2", "decoder")
def gpt2():
    return causal_lm("GPT2LMHeadModel", "GPT2Config", vocab_size=VOCAB, n_embd=32, n_layer=2,
                     n_head=4, n_positions=64)


@model("GPT-Neo", "decoder")
def gpt_neo():
    return causal_lm("GPTNeoForCausalLM", "GPTNeoConfig", vocab_size=VOCAB, hidden_size=32,
                     num_layers=2, num_heads=4, attention_types=[[["global", "local"], 1]],
                     window_size=4, max_position_embeddings=64, intermediate_size=64)


@model("GPT-J", "decoder")
def gptj():
    return causal_lm("GPTJForCausalLM", "GPTJConfig", vocab_size=VOCAB, n_embd=32, n_layer=2,
                     n_head=4, rotary_dim=4, n_positions=64)


@model("GPT-NeoX", "decoder")
def gpt_neox():
    return causal_lm("GPTNeoXForCausalLM", "GPTNeoXConfig", **small_text(rotary_pct=0.5))


@model("OPT", "decoder")
def opt():
    return causal_lm("OPTForCausalLM", "OPTConfig", vocab_size=VOCAB, hidden_size=32,
                     num_hidden_layers=2, num_attention_heads=4, ffn_dim=64,
                     word_embed_proj_dim=32, max_position_embeddings=64, pad_token_id=0)


@model("Llama", "decoder")
def llama():
    return causal_lm("LlamaForCausalLM", "LlamaConfig", **llama_like())


@model("Mistral", "decoder")
def mistral():
    return causal_lm("MistralForCausalLM", "MistralConfig", **llama_like(sliding_window=4))


@model("Qwen2", "decoder")
def qwen2():
    return causal_lm("Qwen2ForCausalLM", "Qwen2Config", **llama_like())


@model("Qwen3", "decoder")
def qwen3():
    return causal_lm("Qwen3ForCausalLM", "Qwen3Config", **llama_like(head_dim=8))


@model("Gemma", "decoder")
def gemma():
    return causal_lm("GemmaForCausalLM", "GemmaConfig", **llama_like(head_dim=8))


@model("Gemma2", "decoder")
def gemma2():
    return causal_lm("Gemma2ForCausalLM", "Gemma2Config",
                     **llama_like(head_dim=8, sliding_window=4, query_pre_attn_scalar=8))


@model("Phi", "decoder")
def phi():
    return causal_lm("PhiForCausalLM", "PhiConfig", **small_text(partial_rotary_factor=0.5))


@model("Phi-3", "decoder")
def phi3():
    return causal_lm("Phi3ForCausalLM", "Phi3Config", **llama_like(pad_token_id=0))


@model("Falcon", "decoder")
def falcon():
    return causal_lm("FalconForCausalLM", "FalconConfig", vocab_size=VOCAB, hidden_size=32,
                     num_hidden_layers=2, num_attention_heads=4, new_decoder_architecture=True,
                     num_kv_heads=2, max_position_embeddings=64)


@model("Bloom", "decoder")
def bloom():
    return causal_lm("BloomForCausalLM", "BloomConfig", vocab_size=VOCAB, hidden_size=32,
                     n_layer=2, n_head=4)


@model("StableLM", "decoder")
def stablelm():
    return causal_lm("StableLmForCausalLM", "StableLmConfig", **llama_like())


# ---------------------------------------------------------- encoder-decoders

def seq2seq(cls_name, cfg_name, **kw):
    import transformers
    cfg = getattr(transformers, cfg_name)(**kw)
    m = seeded(getattr(transformers, cls_name), cfg)
    ids, mask = text_batch(pad=cfg.pad_token_id or 0)
    g = torch.Generator().manual_seed(3)
    labels = torch.randint(3, VOCAB, (BATCH, 6), generator=g)
    labels[1, 4:] = -100
    return m, dict(input_ids=ids, attention_mask=mask, labels=labels)


def bart_like(**kw):
    base = dict(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2,
                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=64,
                decoder_ffn_dim=64, max_position_embeddings=64, pad_token_id=1,
                decoder_start_token_id=2)
    base.update(kw)
    return base


@model("T5", "encoder-decoder")
def t5():
    return seq2seq("T5ForConditionalGeneration", "T5Config", vocab_size=VOCAB, d_model=32,
                   d_kv=8, d_ff=64, num_layers=2, num_heads=4, relative_attention_num_buckets=8,
                   decoder_start_token_id=0)


@model("BART", "encoder-decoder")
def bart():
    return seq2seq("BartForConditionalGeneration", "BartConfig", **bart_like())


@model("Marian", "encoder-decoder")
def marian():
    return seq2seq("MarianMTModel", "MarianConfig", **bart_like(pad_token_id=0, decoder_start_token_id=0))


@model("mBART", "encoder-decoder")
def mbart():
    return seq2seq("MBartForConditionalGeneration", "MBartConfig", **bart_like())


# ------------------------------------------------------------------- vision

def image_classifier(cls_name, cfg_name, **kw):
    import transformers
    cfg = getattr(transformers, cfg_name)(num_labels=3, **kw)
    m = seeded(getattr(transformers, cls_name), cfg)
    return m, dict(pixel_values=pixels(), labels=class_labels())


def vit_like(**kw):
    base = dict(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, intermediate_size=64)
    base.update(kw)
    return base


@model("ViT", "vision")
def vit():
    return image_classifier("ViTForImageClassification", "ViTConfig", **vit_like())


@model("DeiT", "vision")
def deit():
    return image_classifier("DeiTForImageClassification", "DeiTConfig", **vit_like())


@model("ConvNeXt", "vision")
def convnext():
    return image_classifier("ConvNextForImageClassification", "ConvNextConfig",
                            hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, patch_size=4)


@model("ResNet", "vision")
def resnet():
    return image_classifier("ResNetForImageClassification", "ResNetConfig", embedding_size=8,
                            hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic")


@model("Swin", "vision")
def swin():
    return image_classifier("SwinForImageClassification", "SwinConfig", image_size=32,
                            patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 4],
                            window_size=4)


# -------------------------------------------------------------------- audio

def wav2vec2_like(**kw):
    base = dict(vocab_size=16, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                num_conv_pos_embedding_groups=4, num_labels=3)
    base.update(kw)
    return base


def waveform(n=800):
    g = torch.Generator().manual_seed(4)
    return torch.randn(BATCH, n, generator=g)


@model("Wav2Vec2", "audio")
def wav2vec2():
    import transformers
    m = seeded(transformers.Wav2Vec2ForSequenceClassification,
               transformers.Wav2Vec2Config(**wav2vec2_like()))
    return m, dict(input_values=waveform(), labels=class_labels())


@model("HuBERT", "audio")
def hubert():
    import transformers
    m = seeded(transformers.HubertForSequenceClassification,
               transformers.HubertConfig(**wav2vec2_like()))
    return m, dict(input_values=waveform(), labels=class_labels())


@model("Whisper", "audio")
def whisper():
    import transformers
    cfg = transformers.WhisperConfig(vocab_size=VOCAB, num_mel_bins=16, encoder_layers=2,
                                     decoder_layers=2, encoder_attention_heads=4,
                                     decoder_attention_heads=4, encoder_ffn_dim=64,
                                     decoder_ffn_dim=64, d_model=32, max_source_positions=16,
                                     max_target_positions=32, pad_token_id=0, bos_token_id=1,
                                     eos_token_id=2, decoder_start_token_id=1,
                                     begin_suppress_tokens=None, suppress_tokens=None)
    m = seeded(transformers.WhisperForConditionalGeneration, cfg)
    g = torch.Generator().manual_seed(5)
    feats = torch.randn(BATCH, 16, 32, generator=g)
    labels = torch.randint(3, VOCAB, (BATCH, 6), generator=g)
    return m, dict(input_features=feats, labels=labels)


# --------------------------------------------------------------- comparison

def to_device(x, device):
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, dict):
        return {k: to_device(v, device) for k, v in x.items()}
    return x


def logits_of(out):
    for key in ("logits", "last_hidden_state"):
        if getattr(out, key, None) is not None:
            return getattr(out, key)
    return out[0]


def rel_err(expected, actual):
    """max |actual - expected| / max(max |expected|, 1e-6)."""
    expected = expected.detach().double()
    actual = actual.detach().cpu().double()
    if expected.shape != actual.shape:
        return float("inf")
    if expected.numel() == 0:
        return 0.0
    scale = max(expected.abs().max().item(), 1e-6)
    return (actual - expected).abs().max().item() / scale


@dataclass
class Result:
    name: str
    kind: str
    params: int = 0
    forward_err: float = float("nan")   # logits, relative to max |logit|
    loss_err: float = float("nan")
    grad_err: float = float("nan")      # worst parameter (see grad_errors)
    grad_worst: str = ""
    step_err: float = float("nan")      # the AdamW updates
    generate: str = "-"                 # greedy tokens equal to CPU's: "yes"/"NO"/"-"
    fallbacks: dict = field(default_factory=dict)
    seconds: float = 0.0


# Limits the tests assert (relative errors; see rel_err and run()).
FORWARD_TOL, LOSS_TOL, GRAD_TOL, STEP_TOL = 1e-5, 1e-5, 1e-4, 1e-3


def fallback_counts():
    return dict(torchtpu.metrics()["fallbacks"])


def one_step(model, inputs, device):
    """Forward (logits), loss, gradients, and the parameters after one AdamW
    step, on `device`."""
    model = model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01)
    out = model(**to_device(inputs, device))
    logits = logits_of(out).detach().cpu()
    loss = out.loss
    opt.zero_grad()
    loss.backward()
    grads = {n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()
             if p.grad is not None}
    opt.step()
    params = {n: p.detach().cpu().clone() for n, p in model.named_parameters()}
    return logits, loss.detach().cpu(), grads, params


def greedy(model, inputs, device, new_tokens=4):
    """Greedy generation from a left-padded batch of two prompts (the
    second one shorter), with the KV cache: token ids on the CPU."""
    ids = inputs["input_ids"][:, :5].clone()
    mask = torch.ones_like(ids)
    mask[1, :2] = 0
    ids[1, :2] = 0
    model = model.to(device).eval()
    model.generation_config.pad_token_id = 0
    out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device),
                         max_new_tokens=new_tokens, do_sample=False)
    return out.cpu()


def grad_errors(c_grads, d_grads):
    """Per parameter: max |tpu - cpu| over max |cpu|, with the scale floored
    at 1e-3 of the model's largest gradient: a gradient that is zero in
    exact arithmetic (the key bias of softmax attention) is rounding noise
    on both devices and is held to that floor."""
    gmax = max((g.abs().max().item() for g in c_grads.values() if g.numel()), default=0.0)
    errs = {}
    for n, g in c_grads.items():
        scale = max(g.abs().max().item() if g.numel() else 0.0, 1e-3 * gmax, 1e-12)
        errs[n] = (d_grads[n].double() - g.double()).abs().max().item() / scale if g.numel() else 0.0
    return errs, gmax


def run(spec, device="tpu"):
    """Builds the model, runs one training step on CPU and on `device` (and
    greedy generation for language models), and compares."""
    res = Result(spec.name, spec.kind)
    start = time.perf_counter()
    model, inputs = spec.build()
    res.params = sum(p.numel() for p in model.parameters())
    cpu_model, dev_model = copy.deepcopy(model), copy.deepcopy(model)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    c_logits, c_loss, c_grads, c_params = one_step(cpu_model, inputs, "cpu")
    generates = spec.kind in ("decoder", "encoder-decoder")
    c_tokens = greedy(copy.deepcopy(model), inputs, "cpu") if generates else None
    fb0 = fallback_counts()
    try:
        d_logits, d_loss, d_grads, d_params = one_step(dev_model, inputs, device)
        d_tokens = greedy(copy.deepcopy(model), inputs, device) if generates else None
        torch.tpu.synchronize()
    finally:
        fb1 = fallback_counts()
        res.fallbacks = {k: v - fb0.get(k, 0) for k, v in fb1.items() if v != fb0.get(k, 0)}
    res.forward_err = rel_err(c_logits, d_logits)
    res.loss_err = rel_err(c_loss, d_loss)
    assert set(c_grads) == set(d_grads), \
        f"parameters with gradients differ: {set(c_grads) ^ set(d_grads)}"
    errs, gmax = grad_errors(c_grads, d_grads)
    res.grad_worst, res.grad_err = max(errs.items(), key=lambda kv: kv[1], default=("", 0.0))
    # The step moves each parameter by about lr. Adam divides the gradient by
    # its own magnitude, so where a gradient is rounding noise the update is
    # noise too: the updates are compared where |gradient| > 1e-5 of the
    # largest gradient (and everywhere for parameters without a gradient).
    res.step_err = 0.0
    for n in c_params:
        keep = (c_grads[n].abs() > 1e-5 * gmax) if n in c_grads \
            else torch.ones_like(c_params[n], dtype=torch.bool)
        if keep.any():
            e = rel_err((c_params[n] - before[n])[keep], (d_params[n] - before[n])[keep])
            res.step_err = max(res.step_err, e)
    if generates:
        res.generate = "yes" if torch.equal(c_tokens, d_tokens) else "NO"
    res.seconds = time.perf_counter() - start
    return res


def failures(res):
    """What is wrong with a result, in words (empty when it passes)."""
    bad = []
    for what, value, tol in (("forward", res.forward_err, FORWARD_TOL),
                             ("loss", res.loss_err, LOSS_TOL),
                             ("gradient", res.grad_err, GRAD_TOL),
                             ("AdamW update", res.step_err, STEP_TOL)):
        if math.isnan(value) and what != "forward":
            continue  # not measured (the pretrained model runs inference only)
        if not value <= tol:
            bad.append(f"{what} differs from CPU: relative error {value:.2e} > {tol:.0e}"
                       + (f" ({res.grad_worst})" if what == "gradient" else ""))
    if res.generate == "NO":
        bad.append("greedy generation gives other tokens than CPU")
    if res.fallbacks:
        bad.append(f"CPU fallbacks: {res.fallbacks}")
    return bad


#===--- the table (docs/model_zoo.md) ---===#

_START = time.perf_counter()  # (imported when pytest collects the zoo)


def elapsed():
    return time.perf_counter() - _START


RESULTS = []  # Result or (name, kind, error text), in run order
EXTRA = []    # lines added under the table


def table(results, extra=(), seconds=None):
    """The Markdown table of a zoo run."""
    import transformers

    lines = [
        "# Model zoo",
        "",
        "Generated by `make models` (tests/models/): Hugging Face Transformers "
        f"{transformers.__version__} architectures built from small configs with random "
        "weights (nothing downloaded), float32, torch " + torch.__version__.split("+")[0] + ".",
        "For each: the forward pass on tpu against CPU (logits), one training step "
        "(loss.backward() and an AdamW step: loss, every parameter's gradient, the "
        "parameter updates), and for language models greedy generation with the KV cache "
        "from a left-padded batch (tokens must equal CPU's). Errors are relative: "
        "max |tpu - cpu| / max |cpu| (gradients per parameter, the worst shown; see "
        "tests/models/zoo.py). Limits: forward "
        f"{FORWARD_TOL:.0e}, loss {LOSS_TOL:.0e}, gradients {GRAD_TOL:.0e}, updates "
        f"{STEP_TOL:.0e}. CPU fallbacks are counted over the whole tpu run of the model "
        "(torchtpu.metrics()['fallbacks']).",
        "",
        "| model | kind | params | forward | loss | gradients | AdamW step | generate | "
        "CPU fallbacks | result | s |",
        "|---|---|---:|---:|---:|---:|---:|:---:|---|:---:|---:|",
    ]
    order = {s.name: i for i, s in enumerate(ZOO)}
    results = sorted(results, key=lambda r: order.get(r.name if isinstance(r, Result) else r[0],
                                                      len(order)))

    def num(x):
        return "-" if math.isnan(x) else f"{x:.1e}"

    for r in results:
        if not isinstance(r, Result):
            name, kind, err = r
            lines.append(f"| {name} | {kind} | | | | | | | | error: {err} | |")
            continue
        fb = ", ".join(f"{k} x{v}" for k, v in sorted(r.fallbacks.items())) or "none"
        ok = "pass" if not failures(r) else "FAIL"
        lines.append(
            f"| {r.name} | {r.kind} | {r.params:,} | {num(r.forward_err)} | {num(r.loss_err)} | "
            f"{num(r.grad_err)} | {num(r.step_err)} | {r.generate} | {fb} | {ok} | "
            f"{r.seconds:.1f} |")
    lines += list(extra)
    if seconds is not None:
        lines += ["", f"Whole run (`make models`' pytest on this machine, compiles included; "
                  f"columns s: each model's CPU reference and tpu run): {seconds:.0f} s."]
    return "\n".join(lines) + "\n"
