"""Models for bench/models.py, built offline from code with random weights (no downloads).

Each ModelSpec names the package it needs, builds the model (full size, or tiny with small=True
for CPU smoke tests), and makes a batch of example inputs. Dropout is switched off everywhere so
that a compiled run can be compared with eager, also in training mode.

Real models: gpt2, bert, llama (transformers), resnet50 (torchvision), vit, mobilenetv3, convnext,
efficientnet (timm).
Built-in models that need only torch and always exist: mlp, transformer_block.

Not here: running, timing or comparing (bench/models.py does that).
"""
import importlib
import importlib.util
from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn


class MissingPackage(Exception):
    def __init__(self, package):
        super().__init__(f"missing package {package}")
        self.package = package


def require(package):
    """Imports `package`, or raises MissingPackage (a row, not a crash, in the suite)."""
    try:
        return importlib.import_module(package)
    except ImportError as exc:
        raise MissingPackage(package) from exc


def package_available(package):
    return package is None or importlib.util.find_spec(package) is not None


def preload(spec):
    """Imports what spec.build imports (its package and `modules`) without building anything:
    for the fork server in bench/models.py, which imports once for all its workers. Raises
    MissingPackage as build would."""
    for name in filter(None, (spec.package,) + spec.modules):
        require(name)


@dataclass
class ModelSpec:
    name: str
    package: str | None  # what must be importable; None for plain torch
    build: Callable  # (small) -> nn.Module, float32, on the current default device
    make_inputs: Callable  # (batch, small, dtype, device) -> tuple of example inputs
    batch: dict  # mode -> batch size at full size
    about: str
    modules: tuple = ()  # what build imports beyond `package` (lazily loaded submodules)


def disable_dropout(model):
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = 0.0
    return model


# ----------------------------------------------------------------------------- inputs


def token_inputs(vocab, seq, small_vocab, small_seq):
    def make(batch, small, dtype, device):
        high, length = (small_vocab, small_seq) if small else (vocab, seq)
        return (torch.randint(0, high, (batch, length), device=device),)
    return make


def image_inputs(batch, small, dtype, device):
    size = 32 if small else 224
    return (torch.randn(batch, 3, size, size, device=device, dtype=dtype),)


def hidden_inputs(seq, dim, small_seq, small_dim):
    def make(batch, small, dtype, device):
        length, width = (small_seq, small_dim) if small else (seq, dim)
        return (torch.randn(batch, length, width, device=device, dtype=dtype),)
    return make


# ----------------------------------------------------------------------------- transformers


def build_gpt2(small):
    transformers = require("transformers")
    sizes = dict(n_layer=2, n_embd=64, n_head=2, vocab_size=256, n_positions=64,
                 bos_token_id=0, eos_token_id=0) if small else {}
    config = transformers.GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0,
                                     use_cache=False, **sizes)
    return transformers.GPT2LMHeadModel(config)


def build_bert(small):
    transformers = require("transformers")
    sizes = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                 intermediate_size=128, vocab_size=256, max_position_embeddings=64) if small else {}
    config = transformers.BertConfig(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                                     **sizes)
    return transformers.BertForMaskedLM(config)


def _llama(sizes: dict, tied: bool):
    transformers = require("transformers")
    config = transformers.LlamaConfig(attention_dropout=0.0, use_cache=False,
                                      tie_word_embeddings=tied, **sizes)
    return transformers.LlamaForCausalLM(config)


def build_llama(small):
    if small:
        return _llama(dict(vocab_size=256, hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64), False)
    return _llama(dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=8,
                       num_attention_heads=16, num_key_value_heads=8, max_position_embeddings=2048), False)


def build_llama_tied(small):
    """A second Llama-family configuration (issue 23's generality check): another width, head
    count, KV-head ratio (3 query heads a KV head) and vocabulary, and the LM head tied to the
    embedding."""
    if small:
        return _llama(dict(vocab_size=320, hidden_size=96, intermediate_size=256, num_hidden_layers=2,
                           num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64), True)
    return _llama(dict(vocab_size=49152, hidden_size=768, intermediate_size=2048, num_hidden_layers=6,
                       num_attention_heads=12, num_key_value_heads=4, max_position_embeddings=2048), True)


# ----------------------------------------------------------------------------- vision


def build_resnet50(small):
    models = require("torchvision").models
    if small:
        return models.resnet18(weights=None, num_classes=10)
    return models.resnet50(weights=None)


def build_vit(small):
    timm = require("timm")
    if small:
        return timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32,
                                 num_classes=10, drop_rate=0.0)
    return timm.create_model("vit_base_patch16_224", pretrained=False, drop_rate=0.0)


def build_mobilenetv3(small):
    timm = require("timm")
    if small:
        return timm.create_model("mobilenetv3_small_050", pretrained=False, num_classes=10,
                                 drop_rate=0.0)
    return timm.create_model("mobilenetv3_large_100", pretrained=False, drop_rate=0.0)


def build_convnext(small):
    """7x7 depthwise convolutions, each followed by a layer norm over channels (timm's LayerNorm2d
    permutes to channels-last, normalizes, and permutes back) and an MLP."""
    timm = require("timm")
    if small:
        return timm.create_model("convnext_atto", pretrained=False, num_classes=10, drop_path_rate=0.0)
    return timm.create_model("convnext_tiny", pretrained=False, drop_path_rate=0.0)


def build_efficientnet(small):
    """Depthwise 3x3 and 5x5 convolutions with batch norm, SiLU and squeeze-and-excitation."""
    timm = require("timm")
    if small:
        return timm.create_model("efficientnet_b0", pretrained=False, num_classes=10, drop_rate=0.0,
                                 drop_path_rate=0.0)
    return timm.create_model("efficientnet_b0", pretrained=False, drop_rate=0.0, drop_path_rate=0.0)


# ----------------------------------------------------------------------------- plain torch


class MLP(nn.Module):
    """Residual pre-LayerNorm MLP blocks: LayerNorm -> Linear -> GELU -> Linear, plus x."""

    def __init__(self, dim, layers):
        super().__init__()
        self.blocks = nn.ModuleList(
            nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, 4 * dim), nn.GELU(),
                          nn.Linear(4 * dim, dim))
            for _ in range(layers))

    def forward(self, x):
        for block in self.blocks:
            x = x + block(x)
        return x


class CausalSelfAttention(nn.Module):
    """Attention written out (no SDPA): scores, causal mask, fp32 softmax, weighted sum."""

    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        batch, seq, dim = x.shape
        qkv = self.qkv(x).view(batch, seq, 3, self.heads, dim // self.heads)
        q, k, v = qkv.permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-2, -1)) * (q.shape[-1] ** -0.5)
        causal = torch.ones(seq, seq, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        weights = torch.softmax(scores.float(), dim=-1).to(v.dtype)
        return self.proj((weights @ v).transpose(1, 2).reshape(batch, seq, dim))


class TransformerBlocks(nn.Module):
    """Pre-LayerNorm decoder blocks: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, dim, heads, layers):
        super().__init__()
        self.layers = nn.ModuleList(
            nn.ModuleDict(dict(
                ln1=nn.LayerNorm(dim), attn=CausalSelfAttention(dim, heads), ln2=nn.LayerNorm(dim),
                mlp=nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(approximate="tanh"),
                                  nn.Linear(4 * dim, dim))))
            for _ in range(layers))
        self.norm = nn.LayerNorm(dim)

    def forward(self, x):
        for layer in self.layers:
            x = x + layer["attn"](layer["ln1"](x))
            x = x + layer["mlp"](layer["ln2"](x))
        return self.norm(x)


def build_mlp(small):
    return MLP(32, 2) if small else MLP(2048, 4)


def build_transformer_block(small):
    return TransformerBlocks(32, 2, 2) if small else TransformerBlocks(1024, 16, 4)


# ----------------------------------------------------------------------------- the table

LM_BATCH = {"inference": 16, "training": 8}
IMAGE_BATCH = {"inference": 64, "training": 32}

SPECS = [
    ModelSpec("gpt2", "transformers", build_gpt2, token_inputs(50257, 512, 256, 32), LM_BATCH,
              "GPT-2 small (12 layers, 768 wide), LM head, seq 512",
              ("transformers.models.gpt2.modeling_gpt2",)),
    ModelSpec("bert", "transformers", build_bert, token_inputs(30522, 512, 256, 32), LM_BATCH,
              "BERT-base masked LM, seq 512", ("transformers.models.bert.modeling_bert",)),
    ModelSpec("llama", "transformers", build_llama, token_inputs(32000, 512, 256, 32),
              {"inference": 8, "training": 4},
              "Llama-style decoder, 8 layers, 1024 wide, GQA 16/8 heads, seq 512",
              ("transformers.models.llama.modeling_llama",)),
    ModelSpec("llama_tied", "transformers", build_llama_tied, token_inputs(49152, 512, 320, 32),
              {"inference": 8, "training": 4},
              "Llama-family decoder, 6 layers, 768 wide, GQA 12/4 heads, tied LM head, vocab 49152, seq 512",
              ("transformers.models.llama.modeling_llama",)),
    ModelSpec("resnet50", "torchvision", build_resnet50, image_inputs, IMAGE_BATCH,
              "torchvision ResNet-50, 224x224 (small: ResNet-18 on 32x32)"),
    ModelSpec("vit", "timm", build_vit, image_inputs, IMAGE_BATCH,
              "timm vit_base_patch16_224 (small: vit_tiny on 32x32)"),
    ModelSpec("mobilenetv3", "timm", build_mobilenetv3, image_inputs,
              {"inference": 128, "training": 64},
              "timm mobilenetv3_large_100 (small: mobilenetv3_small_050 on 32x32)"),
    ModelSpec("convnext", "timm", build_convnext, image_inputs, IMAGE_BATCH,
              "timm convnext_tiny: 7x7 depthwise convolutions, channel layer norms (small: convnext_atto on 32x32)"),
    ModelSpec("efficientnet", "timm", build_efficientnet, image_inputs, IMAGE_BATCH,
              "timm efficientnet_b0: depthwise convolutions, squeeze-and-excitation (small: 32x32, 10 classes)"),
    ModelSpec("mlp", None, build_mlp, hidden_inputs(1024, 2048, 8, 32), {"inference": 8, "training": 8},
              "plain torch: 4 residual LayerNorm-MLP blocks, 2048 wide, 8x1024 tokens"),
    ModelSpec("transformer_block", None, build_transformer_block, hidden_inputs(512, 1024, 8, 32),
              {"inference": 8, "training": 8},
              "plain torch: 4 decoder blocks with hand-written attention, 1024 wide, seq 512"),
]
SPECS_BY_NAME = {spec.name: spec for spec in SPECS}
REAL_MODELS = ["gpt2", "bert", "llama", "resnet50", "vit", "mobilenetv3", "convnext", "efficientnet"]
