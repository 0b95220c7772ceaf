"""Hugging Face transformers models (tiny configs, random weights, offline; never from_pretrained)
through dynview, against eager and TorchDynamo: for each architecture -- decoder-only, encoder-only,
encoder-decoder, vision and audio -- the outputs equal eager's on two inputs, a repeat call is a cache
hit (no new compile), and the graph and break counts equal torch._dynamo.explain's on the same
inputs (TorchDynamo captures every one as 1 graph with 0 breaks). The last test prints the tally."""
import os
import sys
import warnings

import pytest
import torch

import dynview
from conftest import in_share
from model_outputs import assert_compiles_as_torch_compile, assert_equal_to_eager_on_two_inputs, tensors

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers", reason="make deps installs transformers")
warnings.filterwarnings("ignore")
pytestmark = [pytest.mark.usefixtures("fresh_engine"), pytest.mark.shared_by_versions]  # (conftest.py)

SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=100,
             max_position_embeddings=64)


def _ids(seed, n=8):
    return torch.randint(0, 100, (2, n), generator=torch.Generator().manual_seed(seed))


def _pixels(seed):
    return torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(seed))


def text(seed):
    return dict(input_ids=_ids(seed))


def enc_dec(seed):
    return dict(input_ids=_ids(seed), decoder_input_ids=_ids(seed + 10, 4))


def image(seed):
    return dict(pixel_values=_pixels(seed))


def audio(seed):
    return dict(input_features=torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(seed)))


def wave(seed):
    return dict(input_values=torch.randn(2, 1600, generator=torch.Generator().manual_seed(seed)))


def speech_and_text(seed):
    return dict(audio(seed), decoder_input_ids=_ids(seed + 10, 4))


def wave_and_text(seed):
    return dict(wave(seed), decoder_input_ids=_ids(seed + 10, 4))


def codebooks(seed):  # (musicgen's decoder: a row of ids per codebook, 2 codebooks)
    return dict(input_ids=torch.randint(0, 100, (2 * 2, 8), generator=torch.Generator().manual_seed(seed)))


def text_and_image(seed):
    return dict(text(seed), pixel_values=_pixels(seed))


def series(seed):
    return dict(past_values=torch.randn(2, 32, 2, generator=torch.Generator().manual_seed(seed)))


def s2t(seed):
    return dict(input_features=torch.randn(2, 32, 16, generator=torch.Generator().manual_seed(seed)),
                decoder_input_ids=_ids(seed + 10, 4))


KV = dict(SMALL, num_key_value_heads=2)
T5GEMMA2_TEXT = dict(KV, head_dim=16, layer_types=["sliding_attention", "full_attention"], sliding_window=4,
                     max_position_embeddings=64)
BARTLIKE = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=100, max_position_embeddings=64,
                pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
VITLIKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=32, patch_size=8)


WAV2VEC2 = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16),
                conv_stride=(5, 4), conv_kernel=(10, 4), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, vocab_size=32)
WHISPER = dict(d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
               encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=100, num_mel_bins=16, max_source_positions=16,
               max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)

# name -> (kind, build(transformers), inputs(seed))
MODELS = {
    # decoder-only
    "gpt2": ("decoder", lambda T: T.GPT2Model(T.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=64)), text),
    "llama": ("decoder", lambda T: T.LlamaModel(T.LlamaConfig(**SMALL, num_key_value_heads=2)), text),
    "mistral": ("decoder", lambda T: T.MistralModel(T.MistralConfig(**SMALL, num_key_value_heads=2)), text),
    "qwen2": ("decoder", lambda T: T.Qwen2Model(T.Qwen2Config(**SMALL, num_key_value_heads=2)), text),
    "qwen3": ("decoder", lambda T: T.Qwen3Model(T.Qwen3Config(**SMALL, num_key_value_heads=2, head_dim=16)), text),
    "gemma": ("decoder", lambda T: T.GemmaModel(T.GemmaConfig(**SMALL, num_key_value_heads=2, head_dim=16)), text),
    "gemma2": ("decoder", lambda T: T.Gemma2Model(T.Gemma2Config(**SMALL, num_key_value_heads=2, head_dim=16)), text),
    "phi": ("decoder", lambda T: T.PhiModel(T.PhiConfig(**SMALL)), text),
    "phi3": ("decoder", lambda T: T.Phi3Model(T.Phi3Config(**SMALL, num_key_value_heads=2, pad_token_id=0)), text),
    "opt": ("decoder", lambda T: T.OPTModel(T.OPTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128,
                                                         vocab_size=100, max_position_embeddings=64, word_embed_proj_dim=64)), text),
    "gpt_neo": ("decoder", lambda T: T.GPTNeoModel(T.GPTNeoConfig(hidden_size=64, num_layers=2, num_heads=4, vocab_size=100,
                                                                   max_position_embeddings=64, window_size=4,
                                                                   attention_types=[[["global", "local"], 1]])), text),
    "gpt_neox": ("decoder", lambda T: T.GPTNeoXModel(T.GPTNeoXConfig(**SMALL)), text),
    "falcon": ("decoder", lambda T: T.FalconModel(T.FalconConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                                  vocab_size=100)), text),
    "bloom": ("decoder", lambda T: T.BloomModel(T.BloomConfig(hidden_size=64, n_layer=2, n_head=4, vocab_size=100)), text),
    # encoder-only
    "bert": ("encoder", lambda T: T.BertModel(T.BertConfig(**SMALL)), text),
    "distilbert": ("encoder", lambda T: T.DistilBertModel(T.DistilBertConfig(dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                                                                              vocab_size=100, max_position_embeddings=64)), text),
    "roberta": ("encoder", lambda T: T.RobertaModel(T.RobertaConfig(**SMALL)), text),
    "albert": ("encoder", lambda T: T.AlbertModel(T.AlbertConfig(**SMALL, embedding_size=32)), text),
    "electra": ("encoder", lambda T: T.ElectraModel(T.ElectraConfig(**SMALL, embedding_size=32)), text),
    "deberta_v2": ("encoder", lambda T: T.DebertaV2Model(T.DebertaV2Config(**SMALL)), text),
    "mobilebert": ("encoder", lambda T: T.MobileBertModel(T.MobileBertConfig(**SMALL, embedding_size=32, intra_bottleneck_size=32,
                                                                              true_hidden_size=32, num_feedforward_networks=1)), text),
    "clip_text": ("encoder", lambda T: T.CLIPTextModel(T.CLIPTextConfig(**SMALL)), text),
    # encoder-decoder
    "t5": ("encoder-decoder", lambda T: T.T5Model(T.T5Config(d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16,
                                                              vocab_size=100)), enc_dec),
    "bart": ("encoder-decoder", lambda T: T.BartModel(T.BartConfig(d_model=64, encoder_layers=2, decoder_layers=2,
                                                                    encoder_attention_heads=4, decoder_attention_heads=4,
                                                                    encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=100,
                                                                    max_position_embeddings=64)), enc_dec),
    # attention that asserts `list(attn_weights.size()) == [bsz * heads, tgt_len, src_len]`
    "fsmt": ("encoder-decoder", lambda T: T.FSMTModel(T.FSMTConfig(langs=["en", "de"], src_vocab_size=100, tgt_vocab_size=100, d_model=64,
                                                                    encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                                                    decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                                                    max_position_embeddings=64)), enc_dec),
    "prophetnet": ("encoder-decoder", lambda T: T.ProphetNetModel(T.ProphetNetConfig(hidden_size=64, encoder_ffn_dim=128, decoder_ffn_dim=128,
                                                                                      num_encoder_layers=2, num_decoder_layers=2,
                                                                                      num_encoder_attention_heads=4,
                                                                                      num_decoder_attention_heads=4, vocab_size=100,
                                                                                      max_position_embeddings=64)), enc_dec),
    # vision
    "vit": ("vision", lambda T: T.ViTModel(T.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                        intermediate_size=128, image_size=32, patch_size=8)), image),
    "resnet": ("vision", lambda T: T.ResNetModel(T.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1])), image),
    "convnext": ("vision", lambda T: T.ConvNextModel(T.ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)), image),
    "swin": ("vision", lambda T: T.SwinModel(T.SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                                                           num_heads=[2, 2], window_size=4)), image),
    # audio
    "whisper_encoder": ("audio", lambda T: T.WhisperModel(T.WhisperConfig(
        d_model=64, encoder_layers=1, decoder_layers=1, encoder_attention_heads=4, decoder_attention_heads=4,
        encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=100, num_mel_bins=16, max_source_positions=16,
        max_target_positions=16, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1)).get_encoder(), audio),
    # more architectures (issue 14): one of each family the list above lacks
    "gpt_bigcode": ("decoder", lambda T: T.GPTBigCodeModel(T.GPTBigCodeConfig(n_embd=64, n_layer=2, n_head=4, vocab_size=100,
                                                                               n_positions=64)), text),
    "mpt": ("decoder", lambda T: T.MptModel(T.MptConfig(d_model=64, n_layers=2, n_heads=4, vocab_size=100, max_seq_len=64)), text),
    "deit": ("vision", lambda T: T.DeiTModel(T.DeiTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                                           intermediate_size=128, image_size=32, patch_size=8)), image),
    "segformer": ("vision", lambda T: T.SegformerModel(T.SegformerConfig(
        num_encoder_blocks=2, depths=[1, 1], sr_ratios=[2, 1], hidden_sizes=[16, 32], num_attention_heads=[1, 2],
        patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2])), image),
    # musicgen's decoder draws its layer drop with random.uniform(0, 1) in every layer, used only in
    # training (the draws are made by the compiled code before its graph: Translator::random_draw)
    "musicgen": ("decoder", lambda T: T.MusicgenForCausalLM(T.MusicgenDecoderConfig(
        vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, ffn_dim=128, max_position_embeddings=64,
        num_codebooks=2)), codebooks),
    # wav2vec2's encoder asks transformers' install probes (assume_constant_result functions)
    "wav2vec2": ("audio", lambda T: T.Wav2Vec2Model(T.Wav2Vec2Config(**WAV2VEC2)), wave),
    "whisper": ("audio", lambda T: T.WhisperModel(T.WhisperConfig(**WHISPER)), speech_and_text),
    # from a survey of 109 more architectures (tests/benchmarks/hf_survey.py): one or two per family,
    # and those it found breaking where TorchDynamo does not (canine: a module built in forward from a
    # tuple; lfm2: dict.fromkeys in its cache layers; wav2vec2_conformer: a buffer reassigned in
    # forward; moonshine: a config holding a set, deep-copied)
    "gptj": ("decoder", lambda T: T.GPTJModel(T.GPTJConfig(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, vocab_size=100,
                                                           n_positions=64)), text),
    "stablelm": ("decoder", lambda T: T.StableLmModel(T.StableLmConfig(**KV)), text),
    "mixtral": ("decoder", lambda T: T.MixtralModel(T.MixtralConfig(**KV, num_local_experts=4, num_experts_per_tok=2)), text),
    "qwen2_moe": ("decoder", lambda T: T.Qwen2MoeModel(T.Qwen2MoeConfig(**KV, num_experts=4, num_experts_per_tok=2,
                                                                         moe_intermediate_size=32, shared_expert_intermediate_size=64)),
                  text),
    "lfm2": ("decoder", lambda T: T.Lfm2Model(T.Lfm2Config(**KV, pad_token_id=0, layer_types=["conv", "full_attention"])), text),
    "rwkv": ("decoder", lambda T: T.RwkvModel(T.RwkvConfig(hidden_size=64, num_hidden_layers=2, vocab_size=100, context_length=64,
                                                           attention_hidden_size=64, intermediate_size=128)), text),
    "xlm_roberta": ("encoder", lambda T: T.XLMRobertaModel(T.XLMRobertaConfig(**SMALL)), text),
    "roformer": ("encoder", lambda T: T.RoFormerModel(T.RoFormerConfig(**SMALL, embedding_size=64)), text),
    "funnel": ("encoder", lambda T: T.FunnelModel(T.FunnelConfig(d_model=64, n_head=4, d_head=16, d_inner=128, block_sizes=[1, 1],
                                                                 num_decoder_layers=1, vocab_size=100)), text),
    "canine": ("encoder", lambda T: T.CanineModel(T.CanineConfig(**dict(SMALL, max_position_embeddings=256), num_hash_buckets=64,
                                                                 local_transformer_stride=4)), text),
    "big_bird": ("encoder", lambda T: T.BigBirdModel(T.BigBirdConfig(**SMALL, attention_type="original_full")), text),
    "marian": ("encoder-decoder", lambda T: T.MarianModel(T.MarianConfig(**dict(BARTLIKE, pad_token_id=0,
                                                                                decoder_start_token_id=0))), enc_dec),
    "mbart": ("encoder-decoder", lambda T: T.MBartModel(T.MBartConfig(**BARTLIKE)), enc_dec),
    "moonshine": ("encoder-decoder", lambda T: T.MoonshineModel(T.MoonshineConfig(
        hidden_size=64, intermediate_size=128, encoder_num_hidden_layers=1, decoder_num_hidden_layers=1,
        encoder_num_attention_heads=4, decoder_num_attention_heads=4, vocab_size=100, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, decoder_start_token_id=1)), wave_and_text),
    "beit": ("vision", lambda T: T.BeitModel(T.BeitConfig(**VITLIKE)), image),
    "dinov2": ("vision", lambda T: T.Dinov2Model(T.Dinov2Config(**VITLIKE)), image),
    "mobilevit": ("vision", lambda T: T.MobileViTModel(T.MobileViTConfig(image_size=32, hidden_sizes=[32, 48, 64],
                                                                         neck_hidden_sizes=[8, 8, 16, 16, 32, 32, 64])), image),
    "hubert": ("audio", lambda T: T.HubertModel(T.HubertConfig(**WAV2VEC2)), wave),
    "wav2vec2_conformer": ("audio", lambda T: T.Wav2Vec2ConformerModel(T.Wav2Vec2ConformerConfig(**WAV2VEC2)), wave),
    "sew_d": ("audio", lambda T: T.SEWDModel(T.SEWDConfig(**WAV2VEC2)), wave),
    # from the survey's later additions: latent attention with MoE, two towers, time series
    "deepseek_v3": ("decoder", lambda T: T.DeepseekV3Model(T.DeepseekV3Config(
        **KV, moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
        first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16)), text),
    # a state-space decoder: its scan is torch's associative_scan over torch.vmap under compile
    "mamba": ("decoder", lambda T: T.MambaModel(T.MambaConfig(hidden_size=64, num_hidden_layers=2, vocab_size=100,
                                                               state_size=8)), text),
    "clip": ("vision", lambda T: T.CLIPModel(T.CLIPConfig(text_config=dict(SMALL), vision_config=dict(VITLIKE), projection_dim=32)),
             text_and_image),
    "patchtst": ("time-series", lambda T: T.PatchTSTModel(T.PatchTSTConfig(
        num_input_channels=2, context_length=32, patch_length=8, patch_stride=8, d_model=32, num_attention_heads=4,
        num_hidden_layers=2, ffn_dim=64)), series),
    "speech_to_text": ("audio", lambda T: T.Speech2TextModel(T.Speech2TextConfig(
        **{k: v for k, v in BARTLIKE.items() if k != "max_position_embeddings"}, max_source_positions=64, max_target_positions=64,
        input_feat_per_channel=16, num_conv_layers=2, conv_channels=32, conv_kernel_sizes=[5, 5])), s2t),
    # its bidirectional encoder mask is made by vmapped mask functions under torch's
    # TransformGetItemToIndex, a torch function mode (transformers' sdpa_mask with use_vmap)
    "t5gemma2": ("encoder-decoder", lambda T: T.T5Gemma2Model(T.T5Gemma2Config(
        encoder=dict(text_config=T5GEMMA2_TEXT, vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                                                   num_attention_heads=2, image_size=32, patch_size=8),
                     mm_tokens_per_image=4),
        decoder=dict(T5GEMMA2_TEXT), image_token_index=99, eoi_token_index=98)), enc_dec),
}

# Where dynview does not yet capture what TorchDynamo does (the graph and break counts differ);
# outputs still equal eager. Each is an xfail the day it is fixed turns into a failure (strict).
NOT_YET: dict[str, str] = {}

# ... and where, in addition, a repeat call compiles again.
RECOMPILES = set()

_tally = {}


def build(name):
    torch.manual_seed(0)
    return MODELS[name][1](transformers).eval()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_equals_eager_and_hits_the_cache(name):
    m = build(name)
    inputs = MODELS[name][2]
    cm = dynview.compile(m, backend="eager")
    with torch.no_grad():
        assert_equal_to_eager_on_two_inputs(cm, m, inputs)
        records = dynview._C.take_records()
        assert any(r["graph"] is not None for r in records)
        if name not in NOT_YET:  # every frame captured: none broke, none ran eagerly (explain counts neither)
            assert [(r["qualname"], r["break_message"]) for r in records if r["break_id"]] == []
        got = tensors(cm(**inputs(0)))  # same shapes and objects: no new compile
        for a, b in zip(got, tensors(m(**inputs(0)))):
            torch.testing.assert_close(a, b)
        hit = dynview._C.take_records() == []
        if name in RECOMPILES:
            assert not hit, f"{name}'s repeat call is now a cache hit: take it off RECOMPILES"
            pytest.xfail("a repeat call compiles again (see RECOMPILES)")
        assert hit, "a repeat call is a cache hit"


@pytest.mark.parametrize("name", sorted(MODELS))
def test_graphs_and_breaks_equal_torch_dynamo(name):
    m = build(name)
    args = MODELS[name][2](0)
    with torch.no_grad():
        ours = dynview.explain(m)(**args)
        torch._dynamo.reset()
        theirs = torch._dynamo.explain(m)(**args)
        torch._dynamo.reset()
    assert all(b.break_id.startswith("DV") and b.reason for b in ours.break_reasons)
    assert (theirs.graph_count, theirs.graph_break_count) == (1, 0)
    counts = (ours.graph_count, ours.graph_break_count)
    _tally[name] = (counts, (theirs.graph_count, theirs.graph_break_count))
    if name in NOT_YET:
        assert counts != (1, 0), f"{name} now captures as TorchDynamo does: take it off NOT_YET"
        pytest.xfail(NOT_YET[name])
    assert counts == (theirs.graph_count, theirs.graph_break_count), [str(b) for b in ours.break_reasons]


# ---- inputs of other sizes: automatic dynamic shapes on real models ----
# Models whose code meets symbolic sizes in ways the small cases did not: bloom's ALiBi bias through
# baddbmm, mamba's associative scan (any() over size comparisons, torch.Size.numel()), mobilebert's
# and rwkv's attention and time mixing; at other image sizes, swin's min(input_resolution),
# mobilevit's math.ceil(size / patch) * patch and interpolation, dinov2's position embeddings
# interpolated; fsmt's and prophetnet's attention, which compares lists of sizes (`list(w.size()) ==
# [bsz * heads, tgt_len, src_len]`); llama, t5 and wav2vec2 as the common decoder, encoder-decoder
# and audio encoder.
OTHER_SIZES = ["bloom", "dinov2", "fsmt", "llama", "mamba", "mobilebert", "mobilevit", "prophetnet", "rwkv", "swin", "t5", "wav2vec2"]


def _at_size(name, seed, k):
    """The model's inputs with their lengths (token ids, decoder ids, waveform) or image size scaled by
    step k of 0, 1, 2."""
    g = torch.Generator().manual_seed(seed + 100)
    out = {}
    for key, t in MODELS[name][2](seed).items():
        if key in ("input_ids", "decoder_input_ids"):
            t = torch.randint(0, 100, (t.shape[0], t.shape[1] + 2 * k + k // 2), generator=g)
        elif key == "pixel_values":
            t = torch.randn(t.shape[0], t.shape[1], 32 + 16 * k, 32 + 16 * k, generator=g)
        elif key == "input_values":
            t = torch.randn(t.shape[0], 1600 + 800 * k, generator=g)
        out[key] = t
    return out


@pytest.mark.parametrize("name", OTHER_SIZES)
def test_other_input_sizes_compile_as_often_as_torch_compile(name):
    # sizes step 0, 1 (a recompile: the size becomes symbolic), 2 and 0 again: as many compiles as
    # torch.compile, outputs equal eager's each time, and no frame breaks
    calls = [(0, 0), (1, 1), (2, 2), (3, 0)]
    assert_compiles_as_torch_compile(build(name), [_at_size(name, seed, k) for seed, k in calls])


# ---- call forms: the ways users call these models, beyond Model(**inputs) ----
def _cfg(name, **kw):
    small = dict(SMALL)
    return {
        "gpt2": lambda: transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=64, **kw),
        "llama": lambda: transformers.LlamaConfig(**small, num_key_value_heads=2, pad_token_id=0, **kw),
        "bert": lambda: transformers.BertConfig(**small, **kw),
        "roberta": lambda: transformers.RobertaConfig(**small, **kw),
        "vit": lambda: transformers.ViTConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                              image_size=32, patch_size=8, **kw),
    }[name]()


def _padded(n=8, left=True):  # the second row padded by 3 tokens on the left (decoders) or right (encoders)
    m = torch.ones(2, n, dtype=torch.long)
    if left:
        m[1, :3] = 0
    else:
        m[1, -3:] = 0
    return m


def _decode_step(seed, m):
    # a second decode step: the DynamicCache an eager prefill made, passed in (a new one each call)
    with torch.no_grad():
        past = m(input_ids=_ids(seed), use_cache=True).past_key_values
    return dict(input_ids=_ids(seed + 5, 1), past_key_values=past, use_cache=True)


def _two(seed):
    return torch.tensor([seed % 2, 1 - seed % 2])


# name -> (build(transformers), inputs(seed, model), train). Each: graphs and breaks as
# torch._dynamo.explain's, outputs (and in training the gradients) equal eager's on two inputs, a
# repeat call a cache hit. train: model.train() with dropout 0, loss.backward() after the call.
CALL_FORMS = {
    # labels=: the loss in the graph (CrossEntropyLoss built in forward; config.problem_type set)
    "llama_causal_lm_labels": (lambda T: T.LlamaForCausalLM(_cfg("llama")), lambda s, m: dict(input_ids=_ids(s), labels=_ids(s)), False),
    # GPT-2's loss_function calls logger.warning_once (an lru_cache'd method): a break in both
    "gpt2_lm_head_labels": (lambda T: T.GPT2LMHeadModel(_cfg("gpt2")), lambda s, m: dict(input_ids=_ids(s), labels=_ids(s)), False),
    "bert_sequence_classification_labels": (lambda T: T.BertForSequenceClassification(_cfg("bert")),
                                            lambda s, m: dict(input_ids=_ids(s), labels=_two(s)), False),
    # DeBERTa-v2's ContextPooler builds its activation in forward (ACT2FN[...]: GELUActivation())
    "deberta_v2_sequence_classification_regression": (
        lambda T: T.DebertaV2ForSequenceClassification(T.DebertaV2Config(**SMALL, num_labels=1)),
        lambda s, m: dict(input_ids=_ids(s), labels=torch.tensor([0.5, -1.0]) * (s + 1)), False),
    "roberta_masked_lm_labels": (lambda T: T.RobertaForMaskedLM(_cfg("roberta")),
                                 lambda s, m: dict(input_ids=_ids(s), attention_mask=_padded(left=False), labels=_ids(s)), False),
    "vit_image_classification_labels": (lambda T: T.ViTForImageClassification(_cfg("vit")),
                                        lambda s, m: dict(pixel_values=_pixels(s), labels=_two(s)), False),
    # options
    "llama_left_padding_mask": (lambda T: T.LlamaModel(_cfg("llama")), lambda s, m: dict(input_ids=_ids(s), attention_mask=_padded()), False),
    "bert_attentions_hidden_states_tuple": (lambda T: T.BertModel(_cfg("bert", attn_implementation="eager")),
                                            lambda s, m: dict(input_ids=_ids(s), output_attentions=True, output_hidden_states=True,
                                                              return_dict=False), False),
    # decoding: a DynamicCache built in the trace and returned; one passed in
    "gpt2_use_cache_prefill": (lambda T: T.GPT2LMHeadModel(_cfg("gpt2")), lambda s, m: dict(input_ids=_ids(s), use_cache=True), False),
    "llama_decode_step_past_key_values": (lambda T: T.LlamaForCausalLM(_cfg("llama")), _decode_step, False),
    # a training step
    "llama_train_step": (lambda T: T.LlamaForCausalLM(_cfg("llama")), lambda s, m: dict(input_ids=_ids(s), labels=_ids(s)), True),
    "bert_train_step": (lambda T: T.BertForSequenceClassification(_cfg("bert", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
                        lambda s, m: dict(input_ids=_ids(s), labels=_two(s)), True),
    # training mode: scores and biases that require grad, changed in place (masked_fill_, +=)
    "t5_train_step": (lambda T: T.T5ForConditionalGeneration(T.T5Config(d_model=64, d_ff=128, d_kv=16, num_layers=2, num_heads=4,
                                                                        vocab_size=100, dropout_rate=0.0, decoder_start_token_id=0,
                                                                        pad_token_id=0)),
                      lambda s, m: dict(input_ids=_ids(s), labels=_ids(s + 1)), True),
    "vit_train_step": (lambda T: T.ViTForImageClassification(_cfg("vit", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
                       lambda s, m: dict(pixel_values=_pixels(s), labels=_two(s)), True),
    # transformers' gradient checkpointing: each layer's forward through torch.utils.checkpoint
    # (one tag_activation_checkpoint subgraph per layer, as TorchDynamo's graph has them)
    "llama_gradient_checkpointing_train_step": (lambda T: _checkpointed(T.LlamaForCausalLM(_cfg("llama")), use_reentrant=False),
                                                lambda s, m: dict(input_ids=_ids(s), labels=_ids(s)), True),
    "bert_reentrant_gradient_checkpointing_train_step": (
        lambda T: _checkpointed(T.BertForSequenceClassification(_cfg("bert", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)),
                                use_reentrant=True),
        lambda s, m: dict(input_ids=_ids(s), labels=_two(s)), True),
}


def _checkpointed(model, **kwargs):
    import warnings
    with warnings.catch_warnings():  # gradient_checkpointing_enable's deprecation (activation_checkpointing_enable)
        warnings.simplefilter("ignore")
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kwargs)
    return model


NOT_YET_FORMS: dict[str, str] = {}


def _run_form(fn, m, kwargs, train):
    if not train:
        with torch.no_grad():
            return tensors(fn(**kwargs))
    m.zero_grad(set_to_none=True)
    out = fn(**kwargs)
    out.loss.backward()
    return tensors(out) + [p.grad for p in m.parameters() if p.grad is not None]


@pytest.mark.parametrize("name", sorted(CALL_FORMS))
def test_call_form_equals_eager_and_torch_dynamo(name):
    build_fn, inputs, train = CALL_FORMS[name]
    torch.manual_seed(0)
    m = build_fn(transformers)
    m = m.train() if train else m.eval()
    with torch.set_grad_enabled(train):
        ours = dynview.explain(m)(**inputs(0, m))
        torch._dynamo.reset()
        theirs = torch._dynamo.explain(m)(**inputs(0, m))
        torch._dynamo.reset()
    assert all(b.break_id.startswith("DV") and b.reason for b in ours.break_reasons)
    # (torch._dynamo.explain's graph_break_count is graph_count - 1, whatever broke; the breaks it
    # reports with a reason are its break_reasons, as the case corpus compares them)
    counts, want = (ours.graph_count, len(ours.break_reasons)), (theirs.graph_count, len(theirs.break_reasons))
    if name in NOT_YET_FORMS:
        assert counts != want, f"{name} now captures as TorchDynamo does: take it off NOT_YET_FORMS"
        pytest.xfail(NOT_YET_FORMS[name])
    assert counts == want, ([str(b) for b in ours.break_reasons], [str(b.reason)[:200] for b in theirs.break_reasons])
    dynview.reset()
    dynview._C.take_records()
    cm = dynview.compile(m, backend="eager")
    for seed in (0, 1):
        got, want_t = _run_form(cm, m, inputs(seed, m), train), _run_form(m, m, inputs(seed, m), train)
        assert len(got) == len(want_t) > 0
        for a, b in zip(got, want_t):
            torch.testing.assert_close(a, b)
    records = dynview._C.take_records()
    if theirs.graph_break_count == 0:
        assert [(r["qualname"], r["break_message"]) for r in records if r["break_id"]] == []
    _run_form(cm, m, inputs(0, m), train)
    assert [(r["qualname"], r["recompile_reason"] if "recompile_reason" in r else r.get("reason"))
            for r in dynview._C.take_records()] == [], "a repeat call is a cache hit"


@pytest.mark.every_version  # (conftest.py)
def test_tally(report, request):
    # (under `make test` on several versions, each version's run compares its share of the models,
    # conftest.py: its tally is over those, and the three tallies cover every model once)
    families = {k for k, _, _ in MODELS.values()}  # the five, and time series
    assert len(MODELS) >= 20 and families == {"decoder", "encoder", "encoder-decoder", "vision", "audio", "time-series"}
    where = request.node.nodeid.rsplit("::", 1)[0]
    mine = [n for n in MODELS if in_share(f"{where}::test_graphs_and_breaks_equal_torch_dynamo[{n}]")]
    if len(_tally) < len(mine):
        pytest.skip("the per-model comparisons did not all run (a -k selection)")
    same = sorted(n for n, (ours, theirs) in _tally.items() if ours == theirs)
    rows = [f"{n} {o[0]}/{o[1]}" for n, (o, t) in sorted(_tally.items()) if o != t]
    share = os.environ.get("DV_SHARE")
    report(f"hf models: {len(same)}/{len(mine)} same graphs and breaks as TorchDynamo (1/0 each)"
           + (f" (this version's share {share} of the {len(MODELS)} models)" if share else "")
           + (f"; differ: {', '.join(rows)}" if rows else ""))
    assert len(same) == len(mine) - len(set(NOT_YET) & set(mine))


# ---- a model's output object handled by compiled code (generation loops, heads, metrics) ----
def _postprocess(outputs, temperature):
    outputs.logits = outputs.logits[:, -1, :] / temperature
    outputs["probs"] = outputs.logits.softmax(-1)
    if outputs.loss is None:
        outputs.loss = -outputs.probs.max(-1).values.log().mean()
    return outputs.probs.argmax(-1), outputs.to_tuple()[0], list(outputs.keys())


def test_a_model_output_from_eager_is_changed_by_compiled_code_as_torch_dynamo_does():
    # transformers' ModelOutput: a dataclass over an OrderedDict subclass whose __setattr__ and
    # __setitem__ mirror fields into items (super().__setitem__): made by eager code, read, changed and
    # given new keys in the compiled function; the changes are written back after the graph.
    torch.manual_seed(0)
    m = transformers.GPT2LMHeadModel(_cfg("gpt2")).eval()
    with torch.no_grad():
        make = lambda seed: m(input_ids=_ids(seed))  # noqa: E731
        torch._dynamo.reset()
        theirs = torch._dynamo.explain(_postprocess)(make(0), 0.7)
        torch._dynamo.reset()
        ours = dynview.explain(_postprocess)(make(0), 0.7)
        assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count) == (1, 0), \
            [str(b) for b in ours.break_reasons]
        dynview.reset()
        cf = dynview.compile(_postprocess, backend="eager")
        for seed in (0, 1, 0):
            got_out, want_out = make(seed), make(seed)
            got, want = cf(got_out, 0.7), _postprocess(want_out, 0.7)
            torch.testing.assert_close(got[:2], want[:2])
            assert got[2] == want[2] == list(want_out.keys()) == list(got_out.keys())
            for k in want_out.keys():  # items and attributes, as eager left them (the cache: its type)
                if isinstance(want_out[k], torch.Tensor):
                    torch.testing.assert_close(got_out[k], want_out[k])
                    torch.testing.assert_close(getattr(got_out, k), getattr(want_out, k))
                else:
                    assert type(got_out[k]) is type(want_out[k]) and getattr(got_out, k) is got_out[k]
        assert [e["hits"] for e in dynview._C.cache_entries(_postprocess.__code__)] == [2], "one compile, then hits"


# ---- a whole training step compiled: forward, backward, optimizer step, zero_grad ----
def _train_step(model, optimizer, batch):
    out = model(**batch)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return out.loss.detach()


def test_a_training_step_with_its_optimizer_equals_eager_step_after_step():
    # the loop people write around torch.compile: after each step the parameters, the optimizer's
    # state and the cleared gradients equal eager's, cache hits included (zero_grad is marked
    # torch._disable_dynamo: it used to run once while tracing, and later steps kept their
    # gradients). The counts are TorchDynamo's: the forward, clip_grad_norm_ after the backward
    # break, and AdamW's own step (torch.optim's frames, _init_group run eagerly) each a graph.
    import copy
    torch.manual_seed(0)
    base = transformers.BertForSequenceClassification(_cfg("bert", hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    batches = [dict(input_ids=_ids(s), labels=_two(s)) for s in range(4)]

    def make():
        m = copy.deepcopy(base).train()
        return m, torch.optim.AdamW(m.parameters(), lr=1e-3)

    (m1, o1), (m2, o2) = make(), make()
    step = dynview.compile(_train_step, backend="eager")
    for b in batches:
        want = _train_step(m1, o1, b)  # eager first, as a warm-up step would be
        torch.testing.assert_close(step(m2, o2, b), want)
        assert all(p.grad is None for p in m2.parameters())
        for p, q in zip(m1.parameters(), m2.parameters()):
            torch.testing.assert_close(q, p)
            torch.testing.assert_close(o2.state[q]["exp_avg"], o1.state[p]["exp_avg"])
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(_train_step)(*make(), batches[0])
    torch._dynamo.reset()
    dynview.reset()
    ours = dynview.explain(_train_step)(*make(), batches[0])
    assert (ours.graph_count, len(ours.break_reasons)) == (theirs.graph_count, len(theirs.break_reasons)), \
        [str(b) for b in ours.break_reasons]


# ---- a cache built inside forward (mamba, jamba, lfm2): its layers' dict.fromkeys(range(n), False) ----
def _forward_with_a_new_cache(x, config):
    y = x * 2
    cache = transformers.DynamicCache(config=config)
    layer = cache.layers[0]
    return y + len(cache.layers), dict(layer.is_conv_states_initialized), layer.conv_states


def test_a_cache_of_linear_attention_layers_built_in_forward_equals_eager_and_torch_dynamo():
    config = transformers.MambaConfig(hidden_size=16, num_hidden_layers=2, vocab_size=10, state_size=4)
    x = torch.randn(2, 4)
    got = dynview.compile(_forward_with_a_new_cache, backend="eager")(x, config)
    want = _forward_with_a_new_cache(x, config)
    torch.testing.assert_close(got[0], want[0])
    assert got[1:] == want[1:]
    ours = dynview.explain(_forward_with_a_new_cache)(x, config)
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(_forward_with_a_new_cache)(x, config)
    torch._dynamo.reset()
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count) == (1, 0), \
        [str(b) for b in ours.break_reasons]


# ---- generation: model.forward compiled, model.generate(...) calling it once per token ----
GENERATE = {
    "llama": lambda T: T.LlamaForCausalLM(T.LlamaConfig(**KV)),
    # a sliding-window cache: its layers' cumulative_length, an int attribute, grows per step
    "mistral": lambda T: T.MistralForCausalLM(T.MistralConfig(**KV)),
    "gpt2": lambda T: T.GPT2LMHeadModel(T.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=64)),
    # encoder-decoder: an EncoderDecoderCache (self-attention and cross-attention caches)
    "t5": lambda T: T.T5ForConditionalGeneration(T.T5Config(d_model=64, d_ff=128, d_kv=16, num_layers=2, num_heads=4,
                                                            vocab_size=100, decoder_start_token_id=0, pad_token_id=0)),
}


def _generate(m, compile_fn, ids):
    n = [0]

    def backend(gm, example_inputs):
        n[0] += 1
        return gm.forward
    forward = m.forward
    if compile_fn:
        m.forward = compile_fn(forward, backend=backend)
    try:
        out = m.generate(ids, max_new_tokens=10, do_sample=False, pad_token_id=0)
    finally:
        m.forward = forward
    return out, n[0]


@pytest.mark.parametrize("name", sorted(GENERATE))
def test_generate_with_a_compiled_forward_compiles_as_often_as_torch_compile(name):
    # Each decoding step calls forward with a cache one token longer. The cache's tensors and its
    # running length are attributes of an object argument: both engines make them symbolic after
    # they first change (prefill, first step, then one symbolic entry for every later step); the
    # tokens equal eager's.
    torch.manual_seed(0)
    m = GENERATE[name](transformers).eval()
    ids = torch.randint(3, 100, (2, 6))
    want, _ = _generate(m, None, ids)
    torch._dynamo.reset()
    theirs, n_td = _generate(m, torch.compile, ids)
    torch._dynamo.reset()
    ours, n_dv = _generate(m, dynview.compile, ids)
    assert torch.equal(ours, want) and torch.equal(theirs, want)
    assert n_dv == n_td == 3


# ---- generation's logits processors and stopping criteria (list subclasses with a Python __call__) ----
def _processor_lists(T):
    lp, sc = T.generation.logits_process, T.generation.stopping_criteria
    return {
        "sampling_warpers": lp.LogitsProcessorList([lp.RepetitionPenaltyLogitsProcessor(1.2), lp.TemperatureLogitsWarper(0.7),
                                                    lp.TopKLogitsWarper(5), lp.TopPLogitsWarper(0.9)]),
        "length_and_ngram_rules": lp.LogitsProcessorList([lp.MinLengthLogitsProcessor(10, eos_token_id=3),
                                                          lp.NoRepeatNGramLogitsProcessor(2),
                                                          lp.ForcedEOSTokenLogitsProcessor(20, eos_token_id=3),
                                                          lp.EpsilonLogitsWarper(0.01), lp.TypicalLogitsWarper(0.9)]),
        "stopping_criteria": sc.StoppingCriteriaList([sc.MaxLengthCriteria(max_length=8)]),
    }


def _tokens_and_scores(seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 50, (2, 6), generator=g), torch.randn(2, 50, generator=g)


def _greedy_step(processors, input_ids, scores):
    scores = processors(input_ids, scores)
    next_tokens = torch.argmax(torch.softmax(scores, dim=-1), dim=-1)
    return torch.cat([input_ids, next_tokens[:, None]], dim=-1), scores


def _stop_step(criteria, input_ids, scores):
    done = criteria(input_ids, scores)
    return input_ids.masked_fill(done[:, None], 0), done


@pytest.mark.parametrize("name", ["sampling_warpers", "length_and_ngram_rules", "stopping_criteria"])
def test_generation_processor_lists_equal_eager_and_torch_dynamo(name):
    # LogitsProcessorList / StoppingCriteriaList: list subclasses called through their Python
    # __call__, which iterates over the list (before: the frame ran eagerly and each processor's
    # __call__ was compiled alone, 4 graphs where TorchDynamo has 1)
    procs = _processor_lists(transformers)[name]
    fn = _stop_step if name == "stopping_criteria" else _greedy_step
    step = dynview.compile(fn, backend="eager")
    for seed in (0, 1, 0):
        got, want = step(procs, *_tokens_and_scores(seed)), fn(procs, *_tokens_and_scores(seed))
        torch.testing.assert_close(got, want)
    entries = dynview._C.cache_entries(fn.__code__)
    assert len(entries) == 1 and entries[0]["hits"] == 2, "the same processors: one compile, then cache hits"
    procs.append(procs[-1])  # one more processor: a recompile (the list's length is guarded), eager's result
    torch.testing.assert_close(step(procs, *_tokens_and_scores(2)), fn(procs, *_tokens_and_scores(2)))
    assert len(dynview._C.cache_entries(fn.__code__)) == 2
    procs.pop()
    torch._dynamo.reset()
    theirs = torch._dynamo.explain(fn)(procs, *_tokens_and_scores(0))
    torch._dynamo.reset()
    ours = dynview.explain(fn)(procs, *_tokens_and_scores(0))
    assert (ours.graph_count, ours.graph_break_count) == (theirs.graph_count, theirs.graph_break_count) == (1, 0), \
        [str(b) for b in ours.break_reasons]
