import pytest
import torch

from codeexecutor.modeling.model import CodeExecutorConfig, CodeExecutorModel, prefix_lm_mask


def tiny(vocab=300, **kw):
    torch.manual_seed(0)
    return CodeExecutorModel(
        CodeExecutorConfig.preset("tiny", vocab_size=vocab, structural_token_ids=[5, 6], **kw)
    ).eval()


def test_prefix_lm_mask():
    code_mask = torch.tensor([[1, 1, 0]])
    trace_mask = torch.tensor([[1, 1]])
    m = prefix_lm_mask(code_mask, trace_mask)[0].int().tolist()  # (5, 5)
    assert m == [
        [1, 1, 0, 0, 0],  # code sees real code only
        [1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0],  # a padding query: harmless, never used; sees itself so no row is empty
        [1, 1, 0, 1, 0],  # trace sees code and the trace up to itself
        [1, 1, 0, 1, 1],
    ]


@pytest.mark.parametrize("positions", ["absolute", "rotary"])
def test_cached_decoding_matches_the_training_forward(positions):
    m = tiny(positions=positions)
    B, S, T = 2, 7, 5
    code = torch.randint(3, 300, (B, S))
    code_mask = torch.ones(B, S, dtype=torch.long)
    code_mask[1, 5:] = 0
    trace = torch.randint(3, 300, (B, T))
    trace_mask = torch.ones(B, T, dtype=torch.long)
    with torch.no_grad():
        full = m(code, code_mask, trace, trace_mask).logits.log_softmax(-1)
        cache, code_len = m.encode(code, code_mask)
        keys = code_mask.bool()
        for t in range(T - 1):
            keys = torch.cat([keys, torch.ones(B, 1, dtype=torch.bool)], 1)
            step = m.decode_step(trace[:, t], cache, keys, code_len + t)
            assert torch.allclose(step, full[:, t], atol=1e-4)


@pytest.mark.parametrize("positions", ["absolute", "rotary"])
def test_padding_does_not_change_the_loss(positions):
    m = tiny(positions=positions)
    code = torch.randint(3, 300, (1, 6))
    trace = torch.randint(3, 300, (1, 4))
    one = m(code, torch.ones_like(code), trace, torch.ones_like(trace)).loss
    padded_code = torch.cat([code, torch.ones(1, 3, dtype=torch.long)], 1)
    padded_trace = torch.cat([trace, torch.ones(1, 2, dtype=torch.long)], 1)
    two = m(padded_code, (padded_code != 1).long(), padded_trace, torch.tensor([[1, 1, 1, 1, 0, 0]])).loss
    assert torch.allclose(one, two, atol=1e-5)


def test_structural_tokens_weigh_less():
    m = tiny()
    labels = torch.tensor([[5, 7, 6, 9]])
    assert m.token_weights(labels).tolist() == [[1.0, 10.0, 1.0, 10.0]]


def test_the_exception_token_takes_its_own_weight_when_one_is_set():
    labels = torch.tensor([[5, 7, 9, 9]])
    assert tiny(exception_token_id=9).token_weights(labels).tolist() == [[1.0, 10.0, 10.0, 10.0]]  # unset: as any token
    m = tiny(exception_token_id=9, exception_weight=40.0)
    assert m.token_weights(labels).tolist() == [[1.0, 10.0, 40.0, 40.0]]
    code, trace = torch.randint(10, 300, (1, 6)), torch.tensor([[4, 7, 9, 8]])
    plain = tiny(exception_token_id=9)(code, torch.ones_like(code), trace, torch.ones_like(trace)).logits
    heavy = m(code, torch.ones_like(code), trace, torch.ones_like(trace))
    assert torch.allclose(plain, heavy.logits)  # a weight changes the loss, never the forward pass


@pytest.mark.parametrize("positions", ["absolute", "rotary"])
def test_save_and_load_round_trip(tmp_path, positions):
    m = tiny(positions=positions)
    m.save_pretrained(tmp_path)
    again = CodeExecutorModel.from_pretrained(tmp_path).eval()
    assert again.lm_head.weight.data_ptr() == again.roberta.embeddings.word_embeddings.weight.data_ptr()
    x = torch.randint(3, 300, (1, 5))
    y = torch.randint(3, 300, (1, 4))
    with torch.no_grad():
        a = m(x, torch.ones_like(x), y, torch.ones_like(y)).logits
        b = again(x, torch.ones_like(x), y, torch.ones_like(y)).logits
    assert torch.allclose(a, b)


def test_initialise_from_a_local_unixcoder_format_checkpoint(tmp_path):
    from tokenizers import ByteLevelBPETokenizer
    from transformers import PreTrainedTokenizerFast, RobertaConfig, RobertaModel

    from codeexecutor.modeling.loading import folder_profile, load_model, read_config
    from codeexecutor.modeling.tokenizer import ROBERTA_SPECIALS, load_tokenizer

    torch.manual_seed(1)
    src = RobertaModel(
        RobertaConfig(
            vocab_size=250,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            max_position_embeddings=1026,
            type_vocab_size=10,
        ),
        add_pooling_layer=False,
    )
    src.save_pretrained(tmp_path / "unixcoder")
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["x = 1", "print(x)"] * 50, vocab_size=250, special_tokens=ROBERTA_SPECIALS)
    PreTrainedTokenizerFast(
        tokenizer_object=bpe._tokenizer,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
        mask_token="<mask>",
    ).save_pretrained(tmp_path / "unixcoder")
    path = str(tmp_path / "unixcoder")
    assert folder_profile(path, read_config(path)) is None  # a bare encoder: the curriculum picks the profile
    tok = load_tokenizer(path)  # as --init does: its tokenizer + our special tokens
    assert tok.convert_tokens_to_ids("<exception>") > tok.convert_tokens_to_ids("<line>") >= len(bpe.get_vocab())
    m = load_model(path, vocab_size=len(tok), overrides={"format_profile": "exact", "max_trace_length": 512})
    assert m.config.hidden_size == 64 and m.config.vocab_size == len(tok) and m.config.max_trace_length == 512
    assert torch.equal(m.roberta.embeddings.word_embeddings.weight[:250], src.embeddings.word_embeddings.weight)
    assert torch.equal(
        m.roberta.encoder.layer[1].attention.self.query.weight, src.encoder.layer[1].attention.self.query.weight
    )
    assert m.lm_head.weight.data_ptr() == m.roberta.embeddings.word_embeddings.weight.data_ptr()
    assert not hasattr(m, "dense")  # the head is the tied projection alone


def test_rotary_scores_depend_on_distances_only():
    """Rotary: shifting every position by the same amount changes nothing, and there is no
    position table; the release's absolute positions do change."""
    from codeexecutor.modeling.model import additive

    ids = torch.randint(3, 300, (1, 7))
    mask = additive(prefix_lm_mask(torch.ones(1, 6), torch.ones(1, 1)), torch.float32)  # 6 code tokens, 1 trace token
    for positions, invariant in (("rotary", True), ("absolute", False)):
        m = tiny(positions=positions)
        with torch.no_grad():
            at = [
                m.roberta(
                    input_ids=ids, attention_mask=mask, position_ids=torch.arange(7)[None] + shift, use_cache=False
                ).last_hidden_state
                for shift in (2, 40)
            ]
        assert torch.allclose(at[0], at[1], atol=1e-4) == invariant, positions
        assert any("position_embeddings" in name for name in m.state_dict()) != invariant, positions


def test_head_is_the_tied_projection_of_the_last_hidden_state():
    m = tiny()
    h = torch.randn(2, 3, m.config.hidden_size)
    expected = h @ m.roberta.embeddings.word_embeddings.weight.T  # lm_head(h), no bias
    assert torch.allclose(m.logits(h), expected, atol=1e-6)
    assert m.lm_head.bias is None


def test_presets_grow_in_size_and_build():
    from codeexecutor.modeling.model import PRESETS

    sizes = {}
    for name, dims in PRESETS.items():
        assert dims["hidden_size"] % dims["num_attention_heads"] == 0, name
        cfg = CodeExecutorConfig.preset(name, vocab_size=100)
        sizes[name] = cfg.num_hidden_layers * (4 * cfg.hidden_size**2 + 2 * cfg.hidden_size * cfg.intermediate_size)
    assert sorted(sizes, key=sizes.get) == ["tiny", "mini", "mini-wide", "small", "base"]
    width = sum(
        p.numel() for p in CodeExecutorModel(CodeExecutorConfig.preset("mini-wide", vocab_size=100)).parameters()
    )
    assert 6e6 < width < 9e6  # 4 layers of 384, positions, a 100-token vocabulary (10.6 M at 8 k)
