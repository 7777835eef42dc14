"""Build tiny random Hugging Face checkpoints offline, for real SGLang on CPU in tests.

    python tools/make_tiny_models.py OUT_DIR

writes, with random weights (seed 0) and a tokenizer trained offline (no model hub):

* ``OUT_DIR/tiny-llama-h4``  LlamaForCausalLM, hidden 64, 4 layers, 4 heads / 4 KV heads of 32,
  so TP1, TP2 and TP4 divide the heads and PP2/PP4 get whole layers;
* ``OUT_DIR/tiny-qwen3moe``  Qwen3MoeForCausalLM, hidden 64, 4 layers, 4 heads of 16, 4 experts,
  top-2, so SGLang's MoE code path and ``--ep-size`` are exercised.

Both share one vocabulary of 256 ids (``[workload] vocab_size = 256``): a Metaspace BPE over
printable ASCII, padded with ``<xN>`` tokens, so every id decodes to text. Run it with the
Python of the SGLang venv (``scripts/provision_sglang_cpu.sh`` does), so the checkpoints are
written by the same transformers that SGLang reads them with.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

VOCAB = 256
MODELS = ("tiny-llama-h4", "tiny-qwen3moe")


def build_tokenizer(out: Path) -> dict[str, int]:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    specials = ["<s>", "</s>", "<pad>", "<unk>"]
    alphabet = [chr(c) for c in range(33, 127)] + ["\u2581"]
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB, special_tokens=specials, initial_alphabet=alphabet, show_progress=False
    )
    corpus = [
        "hello world",
        "the quick brown fox jumps over the lazy dog",
        "pipeline parallel tensor parallel expert parallel serving engine",
    ] * 20
    tok.train_from_iterator(corpus, trainer=trainer)
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", tok.token_to_id("<s>"))]
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        model_max_length=4096,
    )
    fast.chat_template = (
        "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
        "{% if add_generation_prompt %}assistant: {% endif %}"
    )
    n = len(fast)
    if n > VOCAB:
        raise SystemExit(f"tokenizer has {n} tokens, more than the vocabulary of {VOCAB}")
    fast.add_tokens([f"<x{i}>" for i in range(VOCAB - n)])
    assert len(fast) == VOCAB, len(fast)
    fast.save_pretrained(out)
    return {
        "bos_token_id": fast.bos_token_id,
        "eos_token_id": fast.eos_token_id,
        "pad_token_id": fast.pad_token_id,
    }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen3MoeConfig, Qwen3MoeForCausalLM

    root = Path(argv[1])
    root.mkdir(parents=True, exist_ok=True)
    common = {
        "vocab_size": VOCAB,
        "hidden_size": 64,
        "num_hidden_layers": 4,
        "max_position_embeddings": 4096,
        "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    }
    builds = {
        "tiny-llama-h4": lambda ids: LlamaForCausalLM(
            LlamaConfig(
                intermediate_size=128,
                num_attention_heads=4,
                num_key_value_heads=4,
                head_dim=32,
                **common,
                **ids,
            )
        ),
        "tiny-qwen3moe": lambda ids: Qwen3MoeForCausalLM(
            Qwen3MoeConfig(
                intermediate_size=128,
                moe_intermediate_size=64,
                num_experts=4,
                num_experts_per_tok=2,
                num_attention_heads=4,
                num_key_value_heads=4,
                head_dim=16,
                decoder_sparse_step=1,
                norm_topk_prob=True,
                mlp_only_layers=[],
                **common,
                **ids,
            )
        ),
    }
    for name in MODELS:
        out = root / name
        out.mkdir(parents=True, exist_ok=True)
        ids = build_tokenizer(out)
        torch.manual_seed(0)
        model = builds[name](ids).to(torch.bfloat16)
        model.save_pretrained(out, safe_serialization=True)
        params = sum(p.numel() for p in model.parameters())
        meta = {"model": name, "vocab_size": VOCAB, "params": params, "random": True}
        (out / "ppsweep_tiny_model.json").write_text(json.dumps(meta) + "\n")
        print(f"saved {out} {type(model).__name__} vocab {VOCAB} params {params}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
