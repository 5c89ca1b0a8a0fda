"""PyTorch reference of the lingen model ("Transformers are RNNs", Katharopoulos et al. 2020).

One module, two ways to run it:
  - forward(tokens):      the parallel form (training, evaluation), all positions at once;
  - step(tokens, t, st):  the step (RNN) form, one position for a batch, with a state.
Both go through the same Layer code; only the attention function differs.

Runs on PyTorch 1.13 (Debian, CPU) and 2.x (GPU). The tensor names of state_dict()
are the model file's names (see docs/model-format.md).
"""
import functools
import math
from dataclasses import dataclass, asdict

import torch
import torch.nn as nn
import torch.nn.functional as F

EPS_LINEAR = 1e-6     # added to the linear-attention normaliser
LN_EPS = 1e-5         # LayerNorm epsilon (PyTorch default)
LOG_SCALE_MIN = -7.0  # DMoL log-scale clamp
BOS = 256             # start token


@dataclass
class Config:
    attention: str = "linear"   # linear | softmax
    n_layers: int = 8
    n_heads: int = 8
    d_head: int = 32
    d_ff: int = 1024
    n_mix: int = 10
    height: int = 28
    width: int = 28
    channels: int = 1
    norm: str = "post"          # post | pre
    activation: str = "relu"    # relu | gelu
    dataset: str = "mnist"      # mnist | cifar10

    @property
    def d(self):
        return self.n_heads * self.d_head

    @property
    def seq_len(self):
        return self.height * self.width * self.channels

    def as_dict(self):
        return asdict(self)


MNIST = Config()
CIFAR10 = Config(n_layers=16, height=32, width=32, channels=3, dataset="cifar10")


def positional_encoding(n, h, device=None, dtype=torch.float32):
    """PE(t, 2i) = sin(t / 10000^(2i/h)), PE(t, 2i+1) = cos(t / 10000^(2i/h)), t = 0..n-1."""
    t = torch.arange(n, dtype=torch.float64, device=device)[:, None]
    i2 = torch.arange(0, h, 2, dtype=torch.float64, device=device)
    ang = t / torch.pow(10000.0, i2 / h)
    pe = torch.zeros(n, h, dtype=torch.float64, device=device)
    pe[:, 0::2] = torch.sin(ang)
    pe[:, 1::2] = torch.cos(ang)
    return pe.to(dtype)


def phi(u):
    """The linear attention's feature map, elu(u) + 1 > 0: u + 1 above 0, exp(u) at or below.

    Not F.elu(u) + 1: that is exp(u) - 1 + 1, which cancels (to 0 in float32 below u = -17,
    in steps of 6e-8 above). Trained models have keys with phi down to 1e-15, and on the first
    50 CIFAR-10 test images the cancelling form moves a linear model's bits/dim by 0.005
    against float64 and the C engine (which takes exp(u)). exp of min(u, 0): no inf, so no NaN
    gradient, above 0.
    """
    return torch.where(u > 0, u + 1.0, torch.exp(u.clamp(max=0.0)))


# ---------------------------------------------------------------- attention functions
# All take q, k, v of shape [B, H, T, D] and return [B, H, T, D].

def causal_linear_attention(q, k, v, chunk=64, mixed=False):
    """Causal linear attention, chunked parallel form.

    Inside a chunk: the masked product (phi(Q) phi(K)^T * tril) V.
    Across chunks: the running state S = sum phi(k) v^T and z = sum phi(k) of earlier chunks.
    Same numbers as the step form out_t = phi(q_t)^T S_t / (phi(q_t)^T z_t + eps).

    Computed in float32 (float64 stays float64), also under bf16 autocast: phi(u) = elu(u) + 1
    in bf16 cancels (at u = -6 it is 0 or 2^-8 instead of 0.0025), which on 20 MNIST test
    images costs a linear model 0.075 bits/dim (0.914 against 0.839); bf16 sums across chunks
    alone cost under 0.001.

    mixed=True (an option for training, under autocast): phi, the sums across chunks (S, z),
    the normaliser and the division in float32, the products in the autocast dtype (tensor
    cores, float32 accumulation inside each product). On those 20 images: 0.8387.
    """
    if mixed:
        return _chunked(q, k, v, chunk)
    dt = torch.promote_types(q.dtype, torch.float32)
    with torch.autocast(device_type=q.device.type, enabled=False):
        return _chunked(*(a.to(dt) for a in (q, k, v)), chunk)


def _chunked(q, k, v, chunk):
    acc = torch.promote_types(q.dtype, torch.float32)   # the sums' dtype
    # phi in float32 also when mixed: it feeds the float32 sums z and the normaliser
    q, k = phi(q.to(acc)), phi(k.to(acc))
    B, H, T, D = q.shape
    pad = (-T) % chunk
    if pad:  # zero keys/values add nothing to the state; padded queries are dropped
        q, k, v = (F.pad(a, (0, 0, 0, pad)) for a in (q, k, v))
    nc = (T + pad) // chunk
    q, k, v = (a.reshape(B, H, nc, chunk, D) for a in (q, k, v))
    kv = k.transpose(-1, -2) @ v                     # [B,H,nc,D,D] per-chunk phi(K)^T V
    ks = k.sum(-2)                                   # [B,H,nc,D]
    # state before each chunk: exclusive prefix sum over chunks
    S = F.pad(kv.to(acc).cumsum(2), (0, 0, 0, 0, 1, 0))[:, :, :nc]
    z = F.pad(ks.cumsum(2), (0, 0, 1, 0))[:, :, :nc]
    mask = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    A = (q @ k.transpose(-1, -2)).masked_fill(~mask, 0.0)
    num = (A @ v).to(acc) + (q @ S).to(acc)
    den = A.to(acc).sum(-1) + (q * z.unsqueeze(-2)).sum(-1)
    out = num / (den.unsqueeze(-1) + EPS_LINEAR)
    return out.reshape(B, H, nc * chunk, D)[:, :, :T]


def causal_softmax_attention(q, k, v, dropout=0.0):
    """dropout: on the attention weights, in training (the paper code's attention_dropout)."""
    if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0 (fused on the GPU)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
    T, D = q.shape[-2], q.shape[-1]
    s = (q @ k.transpose(-1, -2)) / math.sqrt(D)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    s = s.masked_fill(~mask, float("-inf"))
    return F.dropout(torch.softmax(s, dim=-1), dropout) @ v


def linear_attention_step(state, i):
    """Step form for layer i: state['S'][i] [B,H,D,D], state['z'][i] [B,H,D]."""
    def attn(q, k, v):  # [B,H,1,D]
        q, k = phi(q[:, :, 0]), phi(k[:, :, 0])
        S = state["S"][i] + k.unsqueeze(-1) * v[:, :, 0].unsqueeze(-2)   # S_t = S_t-1 + phi(k) v^T
        z = state["z"][i] + k                                             # z_t = z_t-1 + phi(k)
        state["S"][i], state["z"][i] = S, z
        num = (q.unsqueeze(-2) @ S).squeeze(-2)
        den = (q * z).sum(-1, keepdim=True)
        return (num / (den + EPS_LINEAR)).unsqueeze(2)
    return attn


def softmax_attention_step(state, i):
    """Step form with a KV cache: state['k'][i], state['v'][i] are [B,H,t,D]."""
    def attn(q, k, v):
        K = torch.cat([state["k"][i], k], 2)
        V = torch.cat([state["v"][i], v], 2)
        state["k"][i], state["v"][i] = K, V
        s = (q @ K.transpose(-1, -2)) / math.sqrt(q.shape[-1])
        return torch.softmax(s, -1) @ V
    return attn


# ---------------------------------------------------------------- modules

class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.h, self.dh = cfg.n_heads, cfg.d_head
        self.qkv = nn.Linear(cfg.d, 3 * cfg.d)  # rows: all q, then all k, then all v
        self.out = nn.Linear(cfg.d, cfg.d)

    def forward(self, x, attn_fn):
        B, T, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=-1)
        q, k, v = (a.reshape(B, T, self.h, self.dh).transpose(1, 2) for a in (q, k, v))
        y = attn_fn(q, k, v)
        return self.out(y.transpose(1, 2).reshape(B, T, d))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.pre = cfg.norm == "pre"
        self.act = F.relu if cfg.activation == "relu" else F.gelu
        self.attn = Attention(cfg)
        self.norm1 = nn.LayerNorm(cfg.d, eps=LN_EPS)
        self.norm2 = nn.LayerNorm(cfg.d, eps=LN_EPS)
        self.ff1 = nn.Linear(cfg.d, cfg.d_ff)
        self.ff2 = nn.Linear(cfg.d_ff, cfg.d)
        self.drop = nn.Dropout(0.0)

    def ff(self, x):  # dropout where the paper's code (fast-transformers) has it
        return self.drop(self.ff2(self.drop(self.act(self.ff1(x)))))

    def forward(self, x, attn_fn):
        if self.pre:
            x = x + self.drop(self.attn(self.norm1(x), attn_fn))
            return x + self.ff(self.norm2(x))
        x = self.norm1(x + self.drop(self.attn(x, attn_fn)))
        return self.norm2(x + self.ff(x))


class Model(nn.Module):
    """The network of a Config. The options change how it trains, not its weights or its file:
    dropout (residual branches and feed-forward), attn_dropout (softmax attention's weights),
    and the linear attention's chunk length and mixed precision (causal_linear_attention's
    chunk, mixed). New weights: init "normal" draws the Linear weights from N(0, 0.02) with
    zero biases; "pytorch" keeps nn.Linear's own, U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for both,
    as the paper's code does. Embeddings: N(0, 1)."""

    def __init__(self, cfg, dropout=0.0, chunk=64, mixed_attention=False, init="normal", attn_dropout=0.0):
        super().__init__()
        self.cfg = cfg
        self.emb = nn.Embedding(257, cfg.d // 2)
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg.n_layers))
        self.norm = nn.LayerNorm(cfg.d, eps=LN_EPS)
        self.head = nn.Linear(cfg.d, 3 * cfg.n_mix)
        self.register_buffer("pe", positional_encoding(cfg.seq_len, cfg.d // 2), persistent=False)
        for layer in self.layers:
            layer.drop.p = dropout
        self.attn_dropout = attn_dropout
        self.chunk = chunk
        self.mixed_attention = mixed_attention
        if init == "normal":
            self.apply(self._init)
        elif init != "pytorch":
            raise ValueError(f"init must be 'normal' or 'pytorch', not {init!r}")

    @staticmethod
    def _init(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=0.02)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, std=1.0)

    def _parallel_attn(self):
        if self.cfg.attention == "softmax":
            p = self.attn_dropout if self.training else 0.0
            return functools.partial(causal_softmax_attention, dropout=p)
        return functools.partial(causal_linear_attention, chunk=self.chunk, mixed=self.mixed_attention)

    def embed(self, tokens, t0=0):
        T = tokens.shape[1]
        pe = self.pe[t0:t0 + T].to(self.emb.weight.dtype)
        return torch.cat([self.emb(tokens), pe.expand(tokens.shape[0], T, -1)], -1)

    def head_out(self, x):
        """Final LayerNorm and head: [.., 3M] = mixture logits, means, log-scales (clamped).
        Always in float32, also under bf16 autocast: a bf16 mean near +-1 moves in steps of
        2^-8, a whole bin (half-width 1/255), and MNIST's sharp pixels need it inside the bin."""
        with torch.autocast(device_type=x.device.type, enabled=False):
            o = self.head(self.norm(x.to(self.head.weight.dtype)))
        M = self.cfg.n_mix
        return torch.cat([o[..., :2 * M], o[..., 2 * M:].clamp(min=LOG_SCALE_MIN)], -1)

    def forward(self, tokens):
        """tokens [B, T] (BOS first) -> head outputs [B, T, 3M], every position in parallel."""
        x = self.embed(tokens)
        fn = self._parallel_attn()
        for layer in self.layers:
            x = layer(x, fn)
        return self.head_out(x)

    # ---- step (RNN) form
    def init_state(self, B, dtype=torch.float32, device=None):
        c = self.cfg
        if c.attention == "linear":
            return {"S": [torch.zeros(B, c.n_heads, c.d_head, c.d_head, dtype=dtype, device=device)
                          for _ in range(c.n_layers)],
                    "z": [torch.zeros(B, c.n_heads, c.d_head, dtype=dtype, device=device)
                          for _ in range(c.n_layers)]}
        return {"k": [torch.zeros(B, c.n_heads, 0, c.d_head, dtype=dtype, device=device)
                      for _ in range(c.n_layers)],
                "v": [torch.zeros(B, c.n_heads, 0, c.d_head, dtype=dtype, device=device)
                      for _ in range(c.n_layers)]}

    def step(self, tokens, t, state):
        """tokens [B] at input position t -> head outputs [B, 3M]; updates state in place."""
        x = self.embed(tokens[:, None], t0=t)
        mk = linear_attention_step if self.cfg.attention == "linear" else softmax_attention_step
        for i, layer in enumerate(self.layers):
            x = layer(x, mk(state, i))
        return self.head_out(x)[:, 0]


# ---------------------------------------------------------------- data <-> tokens

def inputs_targets(images):
    """images [B, N] uint8 (flattened, channels interleaved) -> (inputs [B, N] = BOS, x1..x_N-1; targets [B, N])."""
    x = images.long()
    bos = torch.full_like(x[:, :1], BOS)
    return torch.cat([bos, x[:, :-1]], 1), x


# ---------------------------------------------------------------- discretized mixture of logistics

def dmol_log_prob(out, x):
    """log p(x) (natural log) under the discretized logistic mixture.

    out [..., 3M] head outputs, x [...] integer values 0..255. Bins: c = x/127.5 - 1,
    half-width 1/255; the bins of 0 and 255 open to -inf / +inf. Exact and stable:
    log(sig(a) - sig(b)) = a + log(-expm1(b - a)) - softplus(a) - softplus(b).
    """
    M = out.shape[-1] // 3
    logits, mu, log_s = out[..., :M], out[..., M:2 * M], out[..., 2 * M:].clamp(min=LOG_SCALE_MIN)
    xi = x.unsqueeze(-1)
    c = xi.to(out.dtype) / 127.5 - 1.0
    inv_s = torch.exp(-log_s)
    a = inv_s * (c - mu + 1.0 / 255)   # upper edge
    b = inv_s * (c - mu - 1.0 / 255)   # lower edge
    mid = a + torch.log(-torch.expm1(b - a)) - F.softplus(a) - F.softplus(b)
    lo = -F.softplus(-a)               # x = 0:   log sig(a)
    hi = -F.softplus(b)                # x = 255: log(1 - sig(b))
    lp = torch.where(xi == 0, lo, torch.where(xi == 255, hi, mid))
    return torch.logsumexp(lp + F.log_softmax(logits, -1), -1)


def dmol_pmf(out):
    """The full 256-bin PMF for head outputs out [3M] (float64), for tests."""
    x = torch.arange(256)
    return dmol_log_prob(out.double().expand(256, -1), x).exp()


def training_loss(model, inp, tgt, amp):
    """Mean negative log-likelihood in bits per dim, the model run under bf16 autocast if amp."""
    with torch.autocast(device_type=inp.device.type, dtype=torch.bfloat16, enabled=amp):
        out = model(inp)
    return -dmol_log_prob(out.float(), tgt).mean() / math.log(2)


def bits_per_dim(model, images, batch=100):
    """Mean bits/dim over images [B, N] (uint8) and the per-image values."""
    per = []
    with torch.no_grad():
        for i in range(0, images.shape[0], batch):
            inp, tgt = inputs_targets(images[i:i + batch])
            out = model(inp).float()
            per.append(-dmol_log_prob(out, tgt).sum(1) / (tgt.shape[1] * math.log(2)))
    per = torch.cat(per)
    return per.mean().item(), per
