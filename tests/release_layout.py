"""A tiny checkpoint in exactly the layout of the released `microsoft/codeexecutor`.

A random RoBERTa saved with `RobertaModel.save_pretrained` (`model_type: roberta`,
unprefixed keys, no `is_decoder`), and the legacy slow-tokenizer files: `vocab.json`,
`merges.txt`, `added_tokens.json` with the 211 added tokens in the release's order
right after the base vocabulary, `special_tokens_map.json`, `tokenizer_config.json`,
and no `tokenizer.json`. `<mask0>` and `<encoder-decoder>` are ordinary entries of the
base vocabulary, as in UniXcoder's.
"""

from __future__ import annotations

import json
import pathlib

RELEASE_ADDED = [
    "<line>",
    "<state>",
    "</state>",
    "<dictsep>",
    "<output>",
    "<function>",
    "<singleline>",
    "<tutorial>",
    "<codenet>",
    "<indent>",
    "<dedent>",
] + [f"<{i}>" for i in range(200)]
BASE_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>", "<mask0>", "<encoder-decoder>"]

CORPUS = [
    "n = int ( input ( ) )",
    "a = [ 1 , 2 , 3 ]",
    "for i in range ( n ) :",
    "print ( i * 2 )",
    "s = 'hello world'",
    "x : 1",
    "y : [ 1 , 2 ]",
    "d = { 'a' : 1 }",
    "if x > 0 and y < 3 :",
    "total += x",
    "while k != 0 : k -= 1",
    "def f ( a , b ) : return a + b",
    "import sys",
    "ans = max ( a ) - min ( a )",
    "print ( sum ( a ) )",
    "s : hello world",
    "i : 0 <dictsep> n : 3",
    "None True False",
    "3.5 -2 100",
]


def write_release_checkpoint(
    path: pathlib.Path,
    seed: int = 0,
    hidden: int = 32,
    layers: int = 2,
    vocab: int = 400,
    std: float = 0.5,
    eos_pull: float = 0.0,
    pad_pull: float = 0.0,
) -> pathlib.Path:
    """Write the tiny released-layout checkpoint into `path`; returns it. `eos_pull` > 0
    makes `</s>` likelier (its embedding row is aligned with a bias of the last layer's
    output), so that generations end at varied lengths instead of all at the cap;
    `pad_pull` > 0 does the same for `<pad>` (masked out as a key by the release, and
    positioned as padding) and, a little less, `<s>` (where the release cuts)."""
    import torch
    from tokenizers import ByteLevelBPETokenizer
    from transformers import RobertaConfig, RobertaModel

    path.mkdir(parents=True, exist_ok=True)
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(CORPUS * 20, vocab_size=vocab, min_frequency=1, special_tokens=BASE_SPECIALS)
    bpe.save_model(str(path))  # vocab.json + merges.txt
    base = len(json.loads((path / "vocab.json").read_text()))
    (path / "added_tokens.json").write_text(json.dumps({t: base + i for i, t in enumerate(RELEASE_ADDED)}))
    mask = {"content": "<mask>", "lstrip": True, "normalized": False, "rstrip": False, "single_word": False}
    (path / "special_tokens_map.json").write_text(
        json.dumps(
            {
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "sep_token": "</s>",
                "pad_token": "<pad>",
                "cls_token": "<s>",
                "mask_token": mask,
                "additional_special_tokens": RELEASE_ADDED,
            }
        )
    )
    (path / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "RobertaTokenizer",
                "errors": "replace",
                "add_prefix_space": False,
                "trim_offsets": True,
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "sep_token": "</s>",
                "pad_token": "<pad>",
                "cls_token": "<s>",
                "mask_token": {"__type": "AddedToken", **mask},
                "model_max_length": 1000000000000000019884624838656,
            }
        )
    )
    torch.manual_seed(seed)
    cfg = RobertaConfig(
        vocab_size=base + len(RELEASE_ADDED),
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        intermediate_size=2 * hidden,
        max_position_embeddings=1026,
        type_vocab_size=10,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
    )
    model = RobertaModel(cfg)
    with torch.no_grad():  # a wider spread than the default init, so greedy choices are far from ties
        for p in model.parameters():
            if p.ndim == 2:
                p.normal_(0.0, std)
        if eos_pull:
            direction = torch.randn(hidden)
            direction /= direction.norm()
            model.encoder.layer[-1].output.LayerNorm.bias.copy_(eos_pull * direction)
            model.embeddings.word_embeddings.weight[2] = eos_pull * direction
        if pad_pull:
            other = torch.randn(hidden)
            other /= other.norm()
            model.encoder.layer[-1].output.LayerNorm.bias.add_(pad_pull * other)
            model.embeddings.word_embeddings.weight[1] = pad_pull * other
            model.embeddings.word_embeddings.weight[0] = 0.8 * pad_pull * other
    model.save_pretrained(path)
    config = json.loads((path / "config.json").read_text())
    config.pop("is_decoder", None)
    config["model_type"] = "roberta"
    (path / "config.json").write_text(json.dumps(config, indent=2))
    return path
