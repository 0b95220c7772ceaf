"""Survey: 124 Hugging Face transformers builds (109 architectures beside test_hf_models.py's first 35,
and task heads), through dynview against eager and TorchDynamo (tiny configs, random weights, offline; never
from_pretrained).

For each model: outputs of dynview.compile(m, backend="eager") equal eager's on two inputs; the graph
and break counts of dynview.explain against torch._dynamo.explain on the same inputs; a repeat call
with the same inputs is a cache hit (no new compile record). One line per model:

    name  ours=(graphs, breaks)  dynamo=(graphs, breaks)  =|graphs=|MISMATCH  eager-equal  cache-hit  seconds  first break reason

("graphs=": equal graph counts, the break counts differ only because torch._dynamo.explain's graph_break_count
is graph_count - 1; an exception is checked against torch.compile, and counts as a wrong result only where
torch.compile runs the model.)

and a last line: "N/M match TorchDynamo's counts, K wrong results".

Usage: python3 tests/benchmarks/hf_survey.py [NAME ...] [-v]   (-v: every break reason of both engines)
       --eager-only: build and run each model eagerly (checks the configs) and stop.
Run from the repository root with PYTHONPATH=python:tests/python HF_HUB_OFFLINE=1.
"""
import logging
import os
import signal
import sys
import time
import traceback
import warnings

os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore")
logging.disable(logging.WARNING)

import torch  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, os.path.join(HERE, "..", "python"))

import transformers as T  # noqa: E402

from test_hf_models import tensors  # noqa: E402  (every tensor of a model's output, as the tests compare them)

LIMIT_S = int(os.environ.get("DV_SURVEY_LIMIT", "60"))

SMALL = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, vocab_size=100,
             max_position_embeddings=64)
KV = dict(SMALL, num_key_value_heads=2)
BARTLIKE = dict(d_model=64, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                encoder_ffn_dim=128, decoder_ffn_dim=128, vocab_size=100, max_position_embeddings=64,
                pad_token_id=1, bos_token_id=0, eos_token_id=2, decoder_start_token_id=2)
T5LIKE = dict(d_model=64, d_ff=128, num_layers=2, num_heads=4, d_kv=16, vocab_size=100)
VITLIKE = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=32, patch_size=8)
WAV = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16),
           conv_stride=(5, 4), conv_kernel=(10, 4), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2, vocab_size=32)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def _ids(seed, n=8):
    return torch.randint(0, 100, (2, n), generator=_gen(seed))


def text(seed):
    return dict(input_ids=_ids(seed))


def enc_dec(seed):
    return dict(input_ids=_ids(seed), decoder_input_ids=_ids(seed + 10, 4))


def image(seed):
    return dict(pixel_values=torch.randn(2, 3, 32, 32, generator=_gen(seed)))


def wave(seed):
    return dict(input_values=torch.randn(2, 1600, generator=_gen(seed)))


def mae(seed):  # ViTMAE masks at random: the noise is an input, so eager and compiled mask alike
    return dict(image(seed), noise=torch.rand(2, 16, generator=_gen(seed + 20)))


def s2t(seed):
    return dict(input_features=torch.randn(2, 32, 16, generator=_gen(seed)), decoder_input_ids=_ids(seed + 10, 4))


def codec(seed):
    return dict(input_values=torch.randn(2, 1, 1600, generator=_gen(seed)))


def wave_and_text(seed):
    return dict(wave(seed), decoder_input_ids=_ids(seed + 10, 4))


def text_and_image(seed):
    return dict(text(seed), pixel_values=image(seed)["pixel_values"])


def series(seed):
    return dict(past_values=torch.randn(2, 32, 2, generator=_gen(seed)))


def features(seed):
    return dict(input_features=torch.randn(2, 20, 16, generator=_gen(seed)))


def labels2(seed):
    return torch.tensor([seed % 2, 1 - seed % 2])


# name -> (build(), inputs(seed))
MODELS = {
    # decoder-only
    "gptj": (lambda: T.GPTJModel(T.GPTJConfig(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, vocab_size=100, n_positions=64)), text),
    "codegen": (lambda: T.CodeGenModel(T.CodeGenConfig(n_embd=64, n_layer=2, n_head=4, rotary_dim=8, vocab_size=100,
                                                      n_positions=64, n_ctx=64)), text),
    "stablelm": (lambda: T.StableLmModel(T.StableLmConfig(**KV)), text),
    "starcoder2": (lambda: T.Starcoder2Model(T.Starcoder2Config(**KV)), text),
    "olmo": (lambda: T.OlmoModel(T.OlmoConfig(**KV)), text),
    "olmo2": (lambda: T.Olmo2Model(T.Olmo2Config(**KV)), text),
    "cohere": (lambda: T.CohereModel(T.CohereConfig(**KV)), text),
    "granite": (lambda: T.GraniteModel(T.GraniteConfig(**KV)), text),
    "persimmon": (lambda: T.PersimmonModel(T.PersimmonConfig(**SMALL)), text),
    "mixtral": (lambda: T.MixtralModel(T.MixtralConfig(**KV, num_local_experts=4, num_experts_per_tok=2)), text),
    "qwen2_moe": (lambda: T.Qwen2MoeModel(T.Qwen2MoeConfig(**KV, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32,
                                                          shared_expert_intermediate_size=64)), text),
    "qwen3_moe": (lambda: T.Qwen3MoeModel(T.Qwen3MoeConfig(**KV, head_dim=16, num_experts=4, num_experts_per_tok=2,
                                                          moe_intermediate_size=32)), text),
    "gemma3_text": (lambda: T.Gemma3TextModel(T.Gemma3TextConfig(**KV, head_dim=16, sliding_window=4)), text),
    "glm": (lambda: T.GlmModel(T.GlmConfig(**KV, head_dim=16, pad_token_id=0)), text),
    "helium": (lambda: T.HeliumModel(T.HeliumConfig(**KV, head_dim=16)), text),
    "smollm3": (lambda: T.SmolLM3Model(T.SmolLM3Config(**KV, pad_token_id=0)), text),
    "olmoe": (lambda: T.OlmoeModel(T.OlmoeConfig(**KV, num_experts=4, num_experts_per_tok=2)), text),
    "nemotron": (lambda: T.NemotronModel(T.NemotronConfig(**KV, head_dim=16)), text),
    "xglm": (lambda: T.XGLMModel(T.XGLMConfig(d_model=64, num_layers=2, attention_heads=4, ffn_dim=128, vocab_size=100,
                                              max_position_embeddings=64)), text),
    "biogpt": (lambda: T.BioGptModel(T.BioGptConfig(**SMALL)), text),
    "ctrl": (lambda: T.CTRLModel(T.CTRLConfig(n_embd=64, n_layer=2, n_head=4, dff=128, vocab_size=100, n_positions=64)), text),
    "xlnet": (lambda: T.XLNetModel(T.XLNetConfig(d_model=64, n_layer=2, n_head=4, d_inner=128, vocab_size=100)), text),
    "exaone4": (lambda: T.Exaone4Model(T.Exaone4Config(**KV, head_dim=16, pad_token_id=0)), text),
    "ernie4_5": (lambda: T.Ernie4_5Model(T.Ernie4_5Config(**KV, head_dim=16, pad_token_id=0)), text),
    "apertus": (lambda: T.ApertusModel(T.ApertusConfig(**KV, pad_token_id=0)), text),
    "phimoe": (lambda: T.PhimoeModel(T.PhimoeConfig(**KV, num_local_experts=4, num_experts_per_tok=2)), text),
    "dbrx": (lambda: T.DbrxModel(T.DbrxConfig(d_model=64, n_heads=4, n_layers=2, max_seq_len=64, vocab_size=100,
                                              attn_config=dict(kv_n_heads=2, rope_theta=10000.0, clip_qkv=8.0),
                                              ffn_config=dict(ffn_hidden_size=64, moe_num_experts=4, moe_top_k=2))), text),
    "lfm2": (lambda: T.Lfm2Model(T.Lfm2Config(**KV, pad_token_id=0, layer_types=["conv", "full_attention"])), text),
    "mamba": (lambda: T.MambaModel(T.MambaConfig(hidden_size=64, num_hidden_layers=2, vocab_size=100, state_size=8)), text),
    "rwkv": (lambda: T.RwkvModel(T.RwkvConfig(hidden_size=64, num_hidden_layers=2, vocab_size=100, context_length=64,
                                              attention_hidden_size=64, intermediate_size=128)), text),
    "jamba": (lambda: T.JambaModel(T.JambaConfig(**KV, num_experts=2, num_experts_per_tok=1, attn_layer_period=2,
                                                 attn_layer_offset=1, expert_layer_period=2, expert_layer_offset=1,
                                                 mamba_d_state=8, mamba_expand=2, pad_token_id=0)), text),
    # encoder-only
    "rembert": (lambda: T.RemBertModel(T.RemBertConfig(**SMALL, input_embedding_size=32, output_embedding_size=32)), text),
    "ibert": (lambda: T.IBertModel(T.IBertConfig(**SMALL)), text),
    "mra": (lambda: T.MraModel(T.MraConfig(**dict(SMALL, max_position_embeddings=600))), text),
    "yoso": (lambda: T.YosoModel(T.YosoConfig(**SMALL)), text),
    "flaubert": (lambda: T.FlaubertModel(T.FlaubertConfig(emb_dim=64, n_layers=2, n_heads=4, vocab_size=100,
                                                          max_position_embeddings=64)), text),
    "xlm": (lambda: T.XLMModel(T.XLMConfig(emb_dim=64, n_layers=2, n_heads=4, vocab_size=100, max_position_embeddings=64)), text),
    "xlm_roberta": (lambda: T.XLMRobertaModel(T.XLMRobertaConfig(**SMALL)), text),
    "camembert": (lambda: T.CamembertModel(T.CamembertConfig(**SMALL)), text),
    "roformer": (lambda: T.RoFormerModel(T.RoFormerConfig(**SMALL, embedding_size=64)), text),
    "convbert": (lambda: T.ConvBertModel(T.ConvBertConfig(**SMALL, embedding_size=64)), text),
    "squeezebert": (lambda: T.SqueezeBertModel(T.SqueezeBertConfig(**SMALL, embedding_size=64)), text),
    "funnel": (lambda: T.FunnelModel(T.FunnelConfig(d_model=64, n_head=4, d_head=16, d_inner=128, block_sizes=[1, 1],
                                                    num_decoder_layers=1, vocab_size=100)), text),
    "canine": (lambda: T.CanineModel(T.CanineConfig(**dict(SMALL, max_position_embeddings=256), num_hash_buckets=64,
                                                    local_transformer_stride=4)), text),
    "layoutlm": (lambda: T.LayoutLMModel(T.LayoutLMConfig(**SMALL)), text),
    "deberta": (lambda: T.DebertaModel(T.DebertaConfig(**SMALL)), text),
    "ernie": (lambda: T.ErnieModel(T.ErnieConfig(**SMALL)), text),
    "megatron_bert": (lambda: T.MegatronBertModel(T.MegatronBertConfig(**SMALL)), text),
    # landmarks (4 < 8 tokens): the mask transformers builds under a compiler (4D) does not broadcast: fails in TorchDynamo too
    "nystromformer": (lambda: T.NystromformerModel(T.NystromformerConfig(**SMALL, num_landmarks=4, segment_means_seq_len=8)), text),
    "nystromformer_full": (lambda: T.NystromformerModel(T.NystromformerConfig(**SMALL, num_landmarks=8, segment_means_seq_len=8)), text),
    "big_bird": (lambda: T.BigBirdModel(T.BigBirdConfig(**SMALL, attention_type="original_full")), text),
    "longformer": (lambda: T.LongformerModel(T.LongformerConfig(**SMALL, attention_window=4)), text),
    # the classification head puts global attention on the first token: the global-attention path
    # (nonzero breaks; a 0-d int tensor from the frame before given to new_zeros and narrow as a size)
    "longformer_cls": (lambda: T.LongformerForSequenceClassification(T.LongformerConfig(**SMALL, attention_window=4)), text),
    "mpnet": (lambda: T.MPNetModel(T.MPNetConfig(**SMALL)), text),
    "esm": (lambda: T.EsmModel(T.EsmConfig(**SMALL, pad_token_id=1, mask_token_id=3)), text),
    "data2vec_text": (lambda: T.Data2VecTextModel(T.Data2VecTextConfig(**SMALL)), text),
    # encoder-decoder
    "marian": (lambda: T.MarianModel(T.MarianConfig(**dict(BARTLIKE, pad_token_id=0, decoder_start_token_id=0))), enc_dec),
    "mbart": (lambda: T.MBartModel(T.MBartConfig(**BARTLIKE)), enc_dec),
    "pegasus": (lambda: T.PegasusModel(T.PegasusConfig(**dict(BARTLIKE, pad_token_id=0, decoder_start_token_id=0))), enc_dec),
    "blenderbot": (lambda: T.BlenderbotModel(T.BlenderbotConfig(**BARTLIKE)), enc_dec),
    "m2m_100": (lambda: T.M2M100Model(T.M2M100Config(**BARTLIKE)), enc_dec),
    "led": (lambda: T.LEDModel(T.LEDConfig(**{k: v for k, v in BARTLIKE.items() if k != "max_position_embeddings"},
                                           max_encoder_position_embeddings=64, max_decoder_position_embeddings=64,
                                           attention_window=4)), enc_dec),
    "prophetnet": (lambda: T.ProphetNetModel(T.ProphetNetConfig(
        hidden_size=64, encoder_ffn_dim=128, decoder_ffn_dim=128, num_encoder_layers=2, num_decoder_layers=2,
        num_encoder_attention_heads=4, num_decoder_attention_heads=4, vocab_size=100, max_position_embeddings=64, ngram=2,
        num_buckets=8, relative_max_distance=16)), enc_dec),
    "bigbird_pegasus": (lambda: T.BigBirdPegasusModel(T.BigBirdPegasusConfig(**BARTLIKE, attention_type="original_full")), enc_dec),
    "plbart": (lambda: T.PLBartModel(T.PLBartConfig(**BARTLIKE)), enc_dec),
    "mvp": (lambda: T.MvpModel(T.MvpConfig(**BARTLIKE)), enc_dec),
    "switch_transformers": (lambda: T.SwitchTransformersModel(T.SwitchTransformersConfig(
        **T5LIKE, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1, num_experts=4, expert_capacity=8)), enc_dec),
    "mt5": (lambda: T.MT5Model(T.MT5Config(**T5LIKE)), enc_dec),
    "umt5": (lambda: T.UMT5Model(T.UMT5Config(**T5LIKE)), enc_dec),
    "longt5": (lambda: T.LongT5Model(T.LongT5Config(**T5LIKE, local_radius=2)), enc_dec),
    # vision
    "beit": (lambda: T.BeitModel(T.BeitConfig(**VITLIKE)), image),
    "dinov2": (lambda: T.Dinov2Model(T.Dinov2Config(**VITLIKE)), image),
    "vit_mae": (lambda: T.ViTMAEModel(T.ViTMAEConfig(**VITLIKE)), mae),
    "swinv2": (lambda: T.Swinv2Model(T.Swinv2Config(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                                                    window_size=4)), image),
    "levit": (lambda: T.LevitModel(T.LevitConfig(image_size=32, hidden_sizes=[32, 48, 64], num_attention_heads=[1, 2, 2],
                                                 depths=[1, 1, 1], key_dim=[8, 8, 8])), image),
    "mobilevit": (lambda: T.MobileViTModel(T.MobileViTConfig(image_size=32, hidden_sizes=[32, 48, 64],
                                                             neck_hidden_sizes=[8, 8, 16, 16, 32, 32, 64])), image),
    "mobilenet_v2": (lambda: T.MobileNetV2Model(T.MobileNetV2Config(image_size=32, depth_multiplier=0.25)), image),
    "efficientnet": (lambda: T.EfficientNetModel(T.EfficientNetConfig(image_size=32, width_coefficient=0.25, depth_coefficient=0.25,
                                                                      hidden_dim=320)), image),
    "regnet": (lambda: T.RegNetModel(T.RegNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], groups_width=8)), image),
    "poolformer": (lambda: T.PoolFormerModel(T.PoolFormerConfig(hidden_sizes=[16, 32, 32, 64], depths=[1, 1, 1, 1])), image),
    "convnextv2": (lambda: T.ConvNextV2Model(T.ConvNextV2Config(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2)), image),
    "dpt": (lambda: T.DPTModel(T.DPTConfig(**VITLIKE, backbone_out_indices=[0, 1])), image),
    "yolos": (lambda: T.YolosModel(T.YolosConfig(**dict(VITLIKE, image_size=[32, 32]), num_detection_tokens=4)), image),
    "bit": (lambda: T.BitModel(T.BitConfig(embedding_size=32, hidden_sizes=[32, 64], depths=[1, 1], num_groups=4)), image),
    # depth[i] > i: modeling_cvt sizes stage i's drop-path linspace by depth[i] and indexes it by i
    "cvt": (lambda: T.CvtModel(T.CvtConfig(embed_dim=[16, 32, 64], num_heads=[1, 2, 4], depth=[1, 2, 3])), image),
    "focalnet": (lambda: T.FocalNetModel(T.FocalNetConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1],
                                                          focal_levels=[2, 2], focal_windows=[3, 3])), image),
    "siglip_vision": (lambda: T.SiglipVisionModel(T.SiglipVisionConfig(**VITLIKE)), image),
    "hiera": (lambda: T.HieraModel(T.HieraConfig(image_size=[32, 32], patch_size=[3, 3], patch_stride=[2, 2], patch_padding=[1, 1],
                                                 embed_dim=16, num_heads=[1, 2], depths=[1, 1], query_stride=[2, 2],
                                                 masked_unit_size=[4, 4], masked_unit_attention=[True, False],
                                                 num_query_pool=1)), image),
    "pvt_v2": (lambda: T.PvtV2Model(T.PvtV2Config(hidden_sizes=[16, 32], depths=[1, 1], num_attention_heads=[1, 2],
                                                  sr_ratios=[2, 1], patch_sizes=[7, 3], strides=[4, 2], mlp_ratios=[2, 2],
                                                  num_encoder_blocks=2)), image),
    # audio
    "sew_d": (lambda: T.SEWDModel(T.SEWDConfig(**WAV)), wave),
    "unispeech_sat": (lambda: T.UniSpeechSatModel(T.UniSpeechSatConfig(**WAV)), wave),
    "wav2vec2_conformer": (lambda: T.Wav2Vec2ConformerModel(T.Wav2Vec2ConformerConfig(**WAV)), wave),
    "dac": (lambda: T.DacModel(T.DacConfig(encoder_hidden_size=8, decoder_hidden_size=32, n_codebooks=2, codebook_size=64,
                                           codebook_dim=4, hidden_size=32)), codec),
    "moonshine": (lambda: T.MoonshineModel(T.MoonshineConfig(hidden_size=64, intermediate_size=128, encoder_num_hidden_layers=1,
                                                             decoder_num_hidden_layers=1, encoder_num_attention_heads=4,
                                                             decoder_num_attention_heads=4, vocab_size=100,
                                                             pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                                             decoder_start_token_id=1)), wave_and_text),
    "hubert": (lambda: T.HubertModel(T.HubertConfig(**WAV)), wave),
    "wavlm": (lambda: T.WavLMModel(T.WavLMConfig(**WAV)), wave),
    "data2vec_audio": (lambda: T.Data2VecAudioModel(T.Data2VecAudioConfig(**WAV)), wave),
    "sew": (lambda: T.SEWModel(T.SEWConfig(**WAV)), wave),
    "unispeech": (lambda: T.UniSpeechModel(T.UniSpeechConfig(**WAV)), wave),
    "speech_to_text": (lambda: T.Speech2TextModel(T.Speech2TextConfig(
        **{k: v for k, v in BARTLIKE.items() if k != "max_position_embeddings"}, max_source_positions=64, max_target_positions=64,
        input_feat_per_channel=16, num_conv_layers=2, conv_channels=32, conv_kernel_sizes=[5, 5])), s2t),
    "encodec": (lambda: T.EncodecModel(T.EncodecConfig(hidden_size=32, num_filters=8, codebook_size=64, num_residual_layers=1,
                                                       num_lstm_layers=1)), codec),
    # task heads on covered bases
    "llama_causal_lm": (lambda: T.LlamaForCausalLM(T.LlamaConfig(**KV)), text),
    "gpt2_lm_head": (lambda: T.GPT2LMHeadModel(T.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=100, n_positions=64)), text),
    "bert_seq_cls": (lambda: T.BertForSequenceClassification(T.BertConfig(**SMALL)), text),
    "bert_masked_lm": (lambda: T.BertForMaskedLM(T.BertConfig(**SMALL)), text),
    "roberta_token_cls": (lambda: T.RobertaForTokenClassification(T.RobertaConfig(**SMALL)), text),
    "vit_img_cls": (lambda: T.ViTForImageClassification(T.ViTConfig(**VITLIKE)), image),
    "t5_cond_gen": (lambda: T.T5ForConditionalGeneration(T.T5Config(**T5LIKE)), enc_dec),
    "bart_cond_gen": (lambda: T.BartForConditionalGeneration(T.BartConfig(**BARTLIKE)), enc_dec),
    "qwen2_seq_cls": (lambda: T.Qwen2ForSequenceClassification(T.Qwen2Config(**KV, pad_token_id=0)), text),
    # more architectures: MoE and latent attention, state spaces, two-tower, vision-and-language,
    # time series, segmentation
    "cohere2": (lambda: T.Cohere2Model(T.Cohere2Config(**KV, head_dim=16)), text),
    "granitemoe": (lambda: T.GraniteMoeModel(T.GraniteMoeConfig(**KV, num_local_experts=4, num_experts_per_tok=2)), text),
    "jetmoe": (lambda: T.JetMoeModel(T.JetMoeConfig(hidden_size=64, num_hidden_layers=2, num_key_value_heads=2, kv_channels=16,
                                                    intermediate_size=128, vocab_size=100, num_local_experts=4,
                                                    num_experts_per_tok=2)), text),
    "deepseek_v3": (lambda: T.DeepseekV3Model(T.DeepseekV3Config(
        **KV, moe_intermediate_size=32, n_routed_experts=4, num_experts_per_tok=2, n_group=1, topk_group=1,
        first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=16)), text),
    "falcon_mamba": (lambda: T.FalconMambaModel(T.FalconMambaConfig(hidden_size=64, num_hidden_layers=2, vocab_size=100,
                                                                    state_size=8)), text),
    "mistral_sliding": (lambda: T.MistralModel(T.MistralConfig(**KV, head_dim=8, sliding_window=4)), text),
    "fnet": (lambda: T.FNetModel(T.FNetConfig(hidden_size=64, num_hidden_layers=2, intermediate_size=128, vocab_size=100,
                                              max_position_embeddings=64)), text),
    "clip": (lambda: T.CLIPModel(T.CLIPConfig(text_config=dict(SMALL), vision_config=dict(VITLIKE), projection_dim=32)),
             text_and_image),
    "siglip": (lambda: T.SiglipModel(T.SiglipConfig(text_config=dict(SMALL), vision_config=dict(VITLIKE))), text_and_image),
    "vilt": (lambda: T.ViltModel(T.ViltConfig(**VITLIKE, vocab_size=100, max_position_embeddings=64)), text_and_image),
    "patchtst": (lambda: T.PatchTSTModel(T.PatchTSTConfig(num_input_channels=2, context_length=32, patch_length=8,
                                                          patch_stride=8, d_model=32, num_attention_heads=4,
                                                          num_hidden_layers=2, ffn_dim=64)), series),
    "wav2vec2_bert": (lambda: T.Wav2Vec2BertModel(T.Wav2Vec2BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                                      intermediate_size=64, feature_projection_input_dim=16,
                                                                      output_hidden_size=32)), features),
    "convnext_img_cls": (lambda: T.ConvNextForImageClassification(T.ConvNextConfig(hidden_sizes=[16, 32], depths=[1, 1], num_stages=2,
                                                                                   num_labels=3)), image),
    "upernet_convnext": (lambda: T.UperNetForSemanticSegmentation(T.UperNetConfig(
        backbone_config=T.ConvNextConfig(hidden_sizes=[16, 32, 48, 64], depths=[1, 1, 1, 1],
                                         out_features=["stage1", "stage2", "stage3", "stage4"]),
        hidden_size=16, auxiliary_in_channels=48, num_labels=3)), image),
}


def build(name):
    torch.manual_seed(0)
    return MODELS[name][0]().eval()


def _where(stack):
    """file:line of a user stack's innermost frame, the path from transformers/ or torch/ on."""
    if not stack:
        return "?"
    s = stack[-1]
    if hasattr(s, "filename"):
        f, line = s.filename, s.lineno
    else:
        f, line = str(s).strip().replace("\n", " "), None
    for root in ("transformers/", "torch/"):
        if root in f:
            f = root + f.split(root, 1)[1]
            break
    return f if line is None else f"{f}:{line}"


def _reasons(out):
    return [(str(getattr(b, "break_id", "")), str(b.reason).replace("\n", " ")[:200], _where(b.user_stack))
            for b in out.break_reasons]


class _Timeout(BaseException):  # not an Exception: a step's handler lets it through
    pass


def _alarm(*_):
    raise _Timeout(f"over {LIMIT_S} s")


def _compare(cm, inputs, want):
    bad = []
    for s in (0, 1):
        torch.manual_seed(100 + s)  # as before the eager call: a model that samples (ViLT) samples alike
        got = tensors(cm(**inputs(s)))
        if len(got) != len(want[s]) or not got:
            bad.append(f"seed {s}: {len(got)} tensors vs eager's {len(want[s])}")
            continue
        for i, (a, b) in enumerate(zip(got, want[s])):
            try:
                torch.testing.assert_close(a, b)
            except AssertionError as e:
                bad.append(f"seed {s} tensor {i}: " + str(e).split("\n")[0][:120])
    return bad


def _error(e, stage, verbose):
    if verbose:
        traceback.print_exc()
    tb = traceback.extract_tb(e.__traceback__)
    where = _where([f for f in tb if "site-packages" in f.filename] or tb)
    return f"{type(e).__name__} in {stage}: " + str(e).replace("\n", " ")[:160] + " @ " + where


def survey(name, verbose=False, eager_only=False):
    r = dict(name=name, ours=None, theirs=None, equal="?", hit="?", secs=0.0, ours_reasons=[], theirs_reasons=[], error="")
    t0 = time.perf_counter()
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(LIMIT_S)
    errors = []

    def step(stage, fn):  # one step's failure is recorded; the next steps still run
        try:
            fn()
            return True
        except Exception as e:  # noqa: BLE001
            errors.append(_error(e, stage, verbose))
            return False

    try:
        with torch.no_grad():
            box = {}

            def eager():
                box["m"] = build(name)
                box["want"] = [(torch.manual_seed(100 + s), tensors(box["m"](**MODELS[name][1](s))))[1] for s in (0, 1)]
            if not step("eager", eager):
                r["equal"] = "n/a (eager fails)"
                return r
            if eager_only:
                r["equal"] = f"eager ok ({len(box['want'][0])} tensors)"
                return r
            import dynview
            m, inputs, want = box["m"], MODELS[name][1], box["want"]
            dynview.reset()
            dynview._C.take_records()
            torch._dynamo.reset()
            cm = dynview.compile(m, backend="eager")

            def compare():
                bad = _compare(cm, inputs, want)
                r["equal"] = "yes" if not bad else "NO: " + "; ".join(bad[:2])
            if not step("dynview.compile", compare):
                r["equal"] = "EXCEPTION"
                # TorchDynamo's verdict on the same call: a model that fails under any compiler is no dynview bug
                torch._dynamo.reset()
                if step("torch.compile", lambda: _compare(torch.compile(m, backend="eager"), inputs, want)):
                    r["equal"] = "EXCEPTION (torch.compile ok)"
                else:
                    r["equal"] = "EXCEPTION (torch.compile raises too)"
                torch._dynamo.reset()
            else:
                dynview._C.take_records()

                def repeat():
                    cm(**inputs(0))
                    r["hit"] = "yes" if dynview._C.take_records() == [] else "no"
                step("repeat call", repeat)

            def ours():
                out = dynview.explain(m)(**inputs(0))
                r["ours"] = (out.graph_count, out.graph_break_count)
                r["ours_reasons"] = _reasons(out)
            step("dynview.explain", ours)

            def theirs():
                torch._dynamo.reset()
                out = torch._dynamo.explain(m)(**inputs(0))
                r["theirs"] = (out.graph_count, out.graph_break_count)
                r["theirs_reasons"] = _reasons(out)
            step("torch._dynamo.explain", theirs)
    except _Timeout as e:
        errors.append(f"timeout: {e}")
    finally:
        signal.alarm(0)
        r["secs"] = time.perf_counter() - t0
        r["error"] = " | ".join(errors)
        try:
            import dynview as _dv
            _dv.reset()
        except Exception:  # noqa: BLE001
            pass
        torch._dynamo.reset()
    return r


def line(r):
    first = r["ours_reasons"][0] if r["ours_reasons"] else None
    reason = f"{first[0]} {first[1][:110]} @ {first[2]}" if first else ""
    if not first and r["theirs_reasons"]:
        reason = "dynamo: {1:.110} @ {2}".format(*r["theirs_reasons"][0])
    if r["error"]:
        reason = (reason + " | " if reason else "") + r["error"]
    match = "" if r["ours"] is None or r["theirs"] is None else (
        "=" if r["ours"] == r["theirs"] else "graphs=" if r["ours"][0] == r["theirs"][0] else "MISMATCH")
    return (f"{r['name']:20s} ours={r['ours']} dynamo={r['theirs']} {match:8s} equal={r['equal']} hit={r['hit']} "
            f"{r['secs']:.1f}s {reason}")


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    verbose = "-v" in sys.argv
    eager_only = "--eager-only" in sys.argv
    names = args or list(MODELS)
    torch.set_num_threads(1)
    results = []
    for name in names:
        r = survey(name, verbose, eager_only)
        results.append(r)
        print(line(r), flush=True)
        if verbose:
            for who in ("ours", "theirs"):
                for b in r[f"{who}_reasons"]:
                    print(f"    {who}: {b[0]} {b[1]} @ {b[2]}")
    if eager_only:
        return
    compared = [r for r in results if r["ours"] is not None and r["theirs"] is not None]
    same = sum(r["ours"] == r["theirs"] for r in compared)
    wrong = sum(r["equal"].startswith("NO") or r["equal"] == "EXCEPTION (torch.compile ok)" for r in results)
    graphs = sum(r["ours"][0] == r["theirs"][0] for r in compared)
    # torch._dynamo.explain's graph_break_count is graph_count - 1 (eval_frame.py); dynview's counts the breaks
    # with a graph: with equal graph counts the break counts may differ only by that definition ("graphs=")
    print(f"{same}/{len(results)} match TorchDynamo's counts, {wrong} wrong results "
          f"({graphs}/{len(results)} match TorchDynamo's graph count)")


if __name__ == "__main__":
    main()
