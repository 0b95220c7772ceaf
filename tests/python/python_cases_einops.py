"""Plain-Python cases for test_python_cases.py on einops, the way model code written with it reads
(vision transformers' patch embedding, attention that splits heads with rearrange, rotary embeddings,
pooling by Reduce, pack/unpack of tokens, EinMix). einops is Python over the tensor's shape: it
parses the pattern (cached by functools.lru_cache), picks its backend from the tensor's type, builds
a recipe of AnonymousAxis and axis-name objects and applies it with reshape/permute/expand, all of
which a faithful engine follows into one graph (on torch >= 2.8 einops registers nothing with
TorchDynamo: it is traced as any other library). Appended to python_cases.CASES like
python_cases_more's."""
import torch
import torch.nn as nn
from einops import einsum, pack, parse_shape, rearrange, reduce, repeat, unpack
from einops.layers.torch import EinMix, Rearrange, Reduce

from python_cases import case, module_case

# einops remembers the backend of each tensor type on its first use (a dict of its module, written:
# the compiled code replays that write, and the next call, finding the type there, compiles again, as
# under torch.compile). A program has used einops before it compiles; so have these cases.
for _t in (torch.zeros(1, 1, 2), nn.Parameter(torch.zeros(1, 1, 2))):
    repeat(_t, "1 1 d -> b 1 d", b=1)


# ---- the functions, on their own ----
@case((2, 8, 3))
def rearrange_splits_heads(x):
    return rearrange(x, "b (h d) n -> b h n d", h=2)


@case((2, 3, 4, 6))
def reduce_max_pools_anonymous_axes(x):
    # (h 2) (w 2): anonymous axes, matched by identity in the recipe (list.index over them)
    return reduce(x, "b c (h 2) (w 2) -> b c h w", "max")


@case((2, 3, 4, 6))
def reduce_mean_with_named_pool_sizes(x):
    return reduce(x, "b c (h h2) (w w2) -> b h w c", "mean", h2=2, w2=3)


@case((2, 4))
def repeat_adds_an_axis(x):
    return repeat(x, "b n -> b k n", k=3) + 1


@case((2, 3, 4), (2, 5, 4))
def einops_einsum_of_named_axes(x, y):
    return einsum(x, y, "b i d, b j d -> b i j").softmax(-1)


@case((2, 3, 4), (2, 4))
def pack_then_unpack_tokens(x, cls):
    packed, ps = pack([cls, x], "b * d")
    packed = packed * 2
    cls_out, x_out = unpack(packed, ps, "b * d")
    return cls_out, x_out, len(ps)


@case((2, 6, 8))
def rearrange_of_a_list_of_tensors(x):
    parts = list(x.unbind(1))
    return rearrange(parts, "n b d -> b d n")


@case((2, 3, 8))
def rotate_half_for_rotary_embeddings(x):
    x = rearrange(x, "... (d r) -> ... d r", r=2)
    x1, x2 = x.unbind(dim=-1)
    x = torch.stack((-x2, x1), dim=-1)
    return rearrange(x, "... d r -> ... (d r)")


@case((2, 5, 8))
def parse_shape_names_the_sizes(x):
    dims = parse_shape(x, "b n _")
    return x.new_zeros(dims["b"], dims["n"]) + x.sum(-1), sorted(dims.items())


# ---- einops in modules, as model code writes them ----
class _Attention(nn.Module):
    def __init__(self, dim=16, heads=2, dim_head=8):
        super().__init__()
        inner = heads * dim_head
        self.heads = heads
        self.scale = dim_head ** -0.5
        self.norm = nn.LayerNorm(dim)
        self.to_qkv = nn.Linear(dim, inner * 3, bias=False)
        self.to_out = nn.Linear(inner, dim)

    def forward(self, x):
        x = self.norm(x)
        qkv = self.to_qkv(x).chunk(3, dim=-1)
        q, k, v = map(lambda t: rearrange(t, "b n (h d) -> b h n d", h=self.heads), qkv)
        attn = (torch.matmul(q, k.transpose(-1, -2)) * self.scale).softmax(dim=-1)
        out = rearrange(torch.matmul(attn, v), "b h n d -> b n (h d)")
        return self.to_out(out)


class EinopsViT(nn.Module):
    """A small vision transformer in einops' idiom: patches by a Rearrange layer, a class token
    repeated over the batch, attention heads split and merged by rearrange, mean pooling by Reduce."""

    def __init__(self, image=8, patch=4, channels=3, dim=16, depth=2, classes=5):
        super().__init__()
        n = (image // patch) ** 2
        self.to_patches = nn.Sequential(
            Rearrange("b c (h p1) (w p2) -> b (h w) (p1 p2 c)", p1=patch, p2=patch),
            nn.Linear(patch * patch * channels, dim),
        )
        self.cls_token = nn.Parameter(torch.randn(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim))
        self.layers = nn.ModuleList([_Attention(dim) for _ in range(depth)])
        self.pool = Reduce("b n d -> b d", "mean")
        self.head = nn.Linear(dim, classes)

    def forward(self, img):
        x = self.to_patches(img)
        b, n, _ = x.shape
        cls = repeat(self.cls_token, "1 1 d -> b 1 d", b=b)
        x = torch.cat((cls, x), dim=1)
        x = x + self.pos[:, : n + 1]
        for attn in self.layers:
            x = attn(x) + x
        return self.head(self.pool(x))


module_case(EinopsViT, (2, 3, 8, 8))


class TokenMixer(nn.Module):
    """MLP-Mixer's token mixing in einops: EinMix over the token axis, then a channel MLP."""

    def __init__(self, tokens=4, dim=6):
        super().__init__()
        self.mix = EinMix("b t c -> b t2 c", weight_shape="t t2", bias_shape="t2", t=tokens, t2=tokens)
        self.channel = nn.Sequential(Rearrange("b t c -> (b t) c"), nn.Linear(dim, dim), nn.GELU())

    def forward(self, x):
        b = x.shape[0]
        y = self.mix(x) + x
        return rearrange(self.channel(y), "(b t) c -> b t c", b=b) + y


module_case(TokenMixer, (2, 4, 6))
