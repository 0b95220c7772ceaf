"""Hugging Face diffusers models (tiny configs, random weights, offline; never from_pretrained)
through dynview, against eager and TorchDynamo: Stable Diffusion's and SDXL's UNets, a VAE, DiT,
Flux, SD3, a video transformer (Wan), a ControlNet, video VAEs that sample their posterior (VidTok)
or build Haar wavelet filters (Cosmos), and an audio VAE under weight_norm (LongCat). Their code is not transformers': attention
processors called through `inspect.signature(processor.__call__)` (a set of its parameters' names),
a ModelMixin whose own `__getattr__` reads `self.__dict__` and falls back to
`super().__getattr__`, `hasattr` probes of every submodule for hooks, `added_cond_kwargs` dicts.
For each: outputs equal eager's on two inputs, a repeat call is a cache hit, and the graph and
break counts equal torch._dynamo.explain's (TorchDynamo captures each as 1 graph, 0 breaks)."""
import os
import warnings

import pytest
import torch

from model_outputs import assert_compiles_as_torch_compile, assert_one_graph_hit_and_counts_as_torch_dynamo

os.environ.setdefault("HF_HUB_OFFLINE", "1")
diffusers = pytest.importorskip("diffusers", reason="make deps installs diffusers")
warnings.filterwarnings("ignore")
pytestmark = [pytest.mark.usefixtures("fresh_engine"), pytest.mark.shared_by_versions]  # (conftest.py)


def _g(seed):
    return torch.Generator().manual_seed(seed)


def _unet_inputs(seed):
    return dict(sample=torch.randn(2, 4, 16, 16, generator=_g(seed)), timestep=torch.tensor(10),
                encoder_hidden_states=torch.randn(2, 6, 32, generator=_g(seed + 1)))


def _sdxl_inputs(seed):
    # SDXL's micro-conditioning: pooled text embeddings and the six size/crop ids, in a dict
    return dict(_unet_inputs(seed), timestep=7,
                added_cond_kwargs=dict(text_embeds=torch.randn(2, 32, generator=_g(seed + 2)),
                                       time_ids=torch.randn(2, 6, generator=_g(seed + 3))))


def _dit_inputs(seed):
    return dict(hidden_states=torch.randn(2, 4, 8, 8, generator=_g(seed)), timestep=torch.tensor([1, 2]),
                class_labels=torch.tensor([0, 3]))


def _flux_inputs(seed):
    return dict(hidden_states=torch.randn(1, 16, 8, generator=_g(seed)), encoder_hidden_states=torch.randn(1, 4, 16, generator=_g(seed + 1)),
                pooled_projections=torch.randn(1, 8, generator=_g(seed + 2)), timestep=torch.tensor([1.0]),
                img_ids=torch.zeros(16, 3), txt_ids=torch.zeros(4, 3))


def _wan_inputs(seed):
    return dict(hidden_states=torch.randn(1, 4, 2, 8, 8, generator=_g(seed)), encoder_hidden_states=torch.randn(1, 6, 16, generator=_g(seed + 1)),
                timestep=torch.tensor([3]))


def _controlnet_inputs(seed):
    return dict(_unet_inputs(seed), controlnet_cond=torch.randn(2, 3, 32, 32, generator=_g(seed + 3)))


def _vidtok_inputs(seed):
    # its forward samples the posterior (randn_tensor, given the latents' layout): the same random
    # numbers for the compiled call and eager's, as the inputs are made just before each call
    torch.manual_seed(100 + seed)
    return dict(sample=torch.randn(2, 3, 2, 16, 16, generator=_g(seed)))


UNET = dict(block_out_channels=(32, 64), layers_per_block=1, in_channels=4, cross_attention_dim=32, norm_num_groups=8)
MODELS = {
    "unet_sd": (lambda D: D.UNet2DConditionModel(**UNET, sample_size=16, out_channels=4, attention_head_dim=8,
                                                 down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D")), _unet_inputs),
    "unet_sdxl": (lambda D: D.UNet2DConditionModel(**UNET, sample_size=16, out_channels=4, attention_head_dim=(2, 4), use_linear_projection=True,
                                                   down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"),
                                                   up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
                                                   addition_embed_type="text_time", addition_time_embed_dim=8,
                                                   transformer_layers_per_block=(1, 2), projection_class_embeddings_input_dim=80),
                  _sdxl_inputs),
    "vae": (lambda D: D.AutoencoderKL(block_out_channels=(16, 32), in_channels=3, out_channels=3, latent_channels=4, norm_num_groups=8,
                                      down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2),
            lambda seed: dict(sample=torch.randn(2, 3, 16, 16, generator=_g(seed)))),
    "dit": (lambda D: D.DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8, num_layers=2,
                                              sample_size=8, patch_size=2, norm_num_groups=8, num_embeds_ada_norm=10), _dit_inputs),
    "flux": (lambda D: D.FluxTransformer2DModel(patch_size=1, in_channels=8, num_layers=1, num_single_layers=1, attention_head_dim=8,
                                                num_attention_heads=2, joint_attention_dim=16, pooled_projection_dim=8,
                                                axes_dims_rope=(2, 2, 4)), _flux_inputs),
    "wan": (lambda D: D.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
                                              out_channels=4, text_dim=16, freq_dim=256, ffn_dim=32, num_layers=1, cross_attn_norm=True,
                                              qk_norm="rms_norm_across_heads", rope_max_seq_len=32), _wan_inputs),
    "controlnet": (lambda D: D.ControlNetModel(**UNET, attention_head_dim=8, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                               conditioning_embedding_out_channels=(16, 32)), _controlnet_inputs),
    # an audio VAE whose convolutions are under torch.nn.utils.weight_norm (a WeightNorm pre-hook each)
    "longcat_audio_vae": (lambda D: D.LongCatAudioDiTVae(channels=8, c_mults=[1, 2], strides=[2, 2], latent_dim=4,
                                                         encoder_latent_dim=8, downsampling_ratio=4),
                          lambda seed: dict(sample=torch.randn(2, 1, 32, generator=_g(seed)))),
    # Haar wavelet filters built with (-1) ** arange: torch.compile 2.13's eager backend gets them wrong
    # (FX writes `-1 ** t`), dynview equals eager
    "cosmos_vae": (lambda D: D.AutoencoderKLCosmos(encoder_block_out_channels=(16, 32, 32, 32), decode_block_out_channels=(32, 32, 32, 32),
                                                   latent_channels=4),
                   lambda seed: dict(sample=torch.randn(1, 3, 2, 16, 16, generator=_g(seed)))),
    "vidtok": (lambda D: D.AutoencoderVidTok(ch=16, ch_mult=[1, 2], num_res_blocks=1), _vidtok_inputs),
    "sd3": (lambda D: D.SD3Transformer2DModel(sample_size=16, num_layers=1, attention_head_dim=16, num_attention_heads=2,
                                              joint_attention_dim=32, caption_projection_dim=32, pooled_projection_dim=32),
            lambda seed: dict(hidden_states=torch.randn(2, 16, 16, 16, generator=_g(seed)), timestep=torch.tensor([10, 20]),
                              encoder_hidden_states=torch.randn(2, 6, 32, generator=_g(seed + 1)),
                              pooled_projections=torch.randn(2, 32, generator=_g(seed + 2)))),
}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_equals_eager_hits_the_cache_and_counts_as_torch_dynamo(name):
    torch.manual_seed(0)
    build, inputs = MODELS[name]
    assert_one_graph_hit_and_counts_as_torch_dynamo(build(diffusers).eval(), inputs)


# ---- other image sizes and prompt lengths: automatic dynamic shapes ----
# DiT unpatchifies with height = width = int(num_patches ** 0.5) (a square root in its shape guards);
# the UNet's up blocks interpolate to the skip connections' sizes; Flux's token count and position
# ids and Wan's video latents grow together.
OTHER_SIZES = ["dit", "flux", "unet_sd", "wan"]
_SCALE = {0: (1, 1), 1: (3, 2), 2: (2, 1)}


def _at_size(name, seed, k):
    """The model's inputs with their spatial sizes, token counts and text lengths scaled by step k."""
    a, b = _SCALE[k]
    g = _g(seed + 50)
    out = {}
    for key, t in MODELS[name][1](seed).items():
        if isinstance(t, torch.Tensor) and t.is_floating_point() and key not in ("img_ids", "txt_ids"):
            shape = list(t.shape)
            if t.dim() >= 4:
                shape[-2:] = [n * a // b for n in shape[-2:]]
            elif key == "encoder_hidden_states" or (name == "flux" and key == "hidden_states"):
                shape[1] = shape[1] * a // b
            t = torch.randn(*shape, generator=g)
        elif key in ("img_ids", "txt_ids"):
            t = torch.zeros(t.shape[0] * a // b, 3)
        out[key] = t
    return out


@pytest.mark.parametrize("name", OTHER_SIZES)
def test_other_sizes_compile_as_often_as_torch_compile(name):
    torch.manual_seed(0)
    m = MODELS[name][0](diffusers).eval()
    calls = [(0, 0), (1, 1), (2, 2), (3, 0)]
    assert_compiles_as_torch_compile(m, [_at_size(name, seed, k) for seed, k in calls], rtol=1e-3, atol=1e-4)
