"""GPT decoder over triples-v1 move tokens, in plain torch (after karpathy's nanoGPT); with
`conditioning` over triples-v2 (the same moves after a rating and time-control prefix,
chesscore.tokens), so one model plays like a player of the strength it is told.

Pre-LayerNorm blocks, learned positions, GELU MLP, causal scaled-dot-product attention,
input and output embeddings tied. One config dataclass; named configs in CONFIGS.

With `move_features` the input at every position also gets an embedding of what its token
names on the board (chesscore.features: the moving piece at a source token, the captured piece at
a destination token), replayed from the tokens inside forward, with or without a cache, or ahead
with the batch (row_features: what training does): callers feed tokens as before, and the token
contract stays triples-v1. A small model then knows which piece moves and what it takes
instead of inferring the board from the move history.

With `board_readout` the model also reads the board at its output (chesscore.features.BoardReadout):
each square token's logit gets h . E[square, the piece on it in the position the input sees,
relative to the side to move], from the same replay, so "my piece stands here" scores a source
square without a layer rebuilding the board from the history. `demo-board` is demo-moves with it.
Configs without it save as before. (Adding the position to the *input* instead learnt slower than
demo-moves on the demo data: docs/training.md, "Seeing the board".)

With `skill_inputs` (triples-v2 only) every move position also gets embeddings of the rating
bins of the side to move and of its opponent, read from the row's prefix (Maia-2's skill inputs).

    model = GPT(CONFIGS["demo"])
    logits = model(tokens)                          # (B, T) -> (B, T, 128), training/eval
    logits = model(tokens, features=model.row_features(tokens))  # the same, features made ahead
    cache = model.new_cache(batch_size=64)          # incremental decoding for play
    logits = model(first_tokens, cache=cache)       # prefill (B, T)
    logits = model(next_tokens[:, None], cache=cache)  # one token per game per step

The key/value cache keeps a length per row, so rows may sit at different positions (a batch
of games of different lengths, or evaluation branches that rewind a row).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from chesscore import ranges
from chesscore.failures import Refused
from chesscore.features import BoardReadout, Features, InputFeatures, Track, replayed
from chesscore.tokens import CONDITIONED_VERSION, PREFIX_LENGTH, RATING_LAST, RATING_UNKNOWN, VERSION, VOCAB_SIZE


@dataclass(frozen=True)
class GPTConfig:
    n_layer: int = 12  # transformer blocks
    n_head: int = 12  # attention heads per block; n_embd must divide by it
    n_embd: int = 768  # residual stream width
    block_size: int = 1024  # context in tokens: a game of up to 340 plies fits 2 + 3*340 = 1022
    vocab_size: int = VOCAB_SIZE  # triples-v1: 128 (72..127 reserved, never produced)
    dropout: float = 0.0  # dropout on embeddings, attention output and MLP output
    bias: bool = True  # biases in Linear and LayerNorm layers
    move_features: bool = False  # add the embedding of the moving / captured piece (chesscore.features)
    conditioning: bool = False  # reads triples-v2: BOS, the rating/time-control prefix, then the moves
    # triples-v2 only: also add, at every move position, embeddings of the rating bins of the side
    # to move and of its opponent (Maia-2's skill inputs), so no layer has to find them in the prefix
    skill_inputs: bool = False
    # score each square token also by the piece on it in the position the input sees (BoardReadout)
    board_readout: bool = False

    def __post_init__(self) -> None:
        ranges.check(self, counts=("n_layer", "n_head", "n_embd", "block_size", "vocab_size"), fraction=("dropout",))
        if not isinstance(self.bias, bool):
            raise ranges.InvalidSetting(f"bias must be true or false, got {self.bias!r}")
        if self.n_embd % self.n_head:
            raise ranges.InvalidSetting(f"n_embd {self.n_embd} does not divide into {self.n_head} heads")
        if not isinstance(self.skill_inputs, bool) or (self.skill_inputs and not self.conditioning):
            raise ranges.InvalidSetting("skill_inputs needs conditioning (triples-v2): it reads the rating prefix")
        if not isinstance(self.board_readout, bool):
            raise ranges.InvalidSetting(f"board_readout must be true or false, got {self.board_readout!r}")

    @property
    def replays(self) -> bool:
        """Whether forward reads the replayed position of every token (chesscore.features)."""
        return self.move_features or self.board_readout

    def to_dict(self) -> dict:
        # Written only when set, so every config without it (and its checkpoints' and runs'
        # identities) reads as before; a saved config without the key loads with the default.
        config = asdict(self)
        if not self.board_readout:
            del config["board_readout"]
        return config


def tokens_version(config: GPTConfig) -> str:
    return CONDITIONED_VERSION if config.conditioning else VERSION


CONFIGS: dict[str, GPTConfig] = {
    # 85,940,736 parameters: GPT-2 small with a 128-token vocabulary. For GPUs.
    "baseline": GPTConfig(n_layer=12, n_head=12, n_embd=768),
    # The baseline that sees the board as demo-board does (move features and the readout): 86,599,680.
    "baseline-board": GPTConfig(n_layer=12, n_head=12, n_embd=768, move_features=True, board_readout=True),
    # Trains on the embedded sample on 2 CPU cores in minutes.
    "demo": GPTConfig(n_layer=4, n_head=4, n_embd=128),
    # The demo model with move features (chesscore.features): learns faster at the same size.
    "demo-moves": GPTConfig(n_layer=4, n_head=4, n_embd=128, move_features=True),
    # demo-moves that also reads the board (chesscore.features.BoardReadout) at its output: against
    # demo-moves the readout is the one difference.
    "demo-board": GPTConfig(n_layer=4, n_head=4, n_embd=128, move_features=True, board_readout=True),
    # For tests: seconds on a CPU.
    "tiny": GPTConfig(n_layer=2, n_head=2, n_embd=32),
}


def row_features(config: GPTConfig, idx: torch.Tensor) -> Features | None:
    """The replayed features (chesscore.features) of whole rows idx (B, T) from BOS, on idx's
    device, for a caller that assembles them with its batch on the host and passes them to a
    forward of this config; None for a config without features."""
    return replayed(idx, board=config.board_readout) if config.replays else None


class KVCache:
    """Keys and values of every layer for a batch of rows, with a length per row."""

    def __init__(
        self,
        config: GPTConfig,
        batch_size: int,
        device: torch.device | str = "cpu",
        dtype: torch.dtype = torch.float32,
        max_len: int | None = None,
    ) -> None:
        self.max_len = max_len or config.block_size
        head_dim = config.n_embd // config.n_head
        shape = (config.n_layer, batch_size, config.n_head, self.max_len, head_dim)
        self.keys = torch.zeros(shape, device=device, dtype=dtype)
        self.values = torch.zeros(shape, device=device, dtype=dtype)
        self.lengths = torch.zeros(batch_size, dtype=torch.long, device=device)
        # Move or board features only: each row's tokens and positions, replayed as they are fed (CPU).
        self.track = Track(batch_size, self.max_len) if config.replays else None
        # Skill inputs only: each row's white and black rating tokens, recorded as the prefix is fed.
        self.ratings = torch.full((batch_size, 2), RATING_UNKNOWN, dtype=torch.long, device=device)

    @property
    def batch_size(self) -> int:
        return self.keys.shape[1]

    def select(self, rows: torch.Tensor) -> KVCache:
        """A cache holding only these rows (e.g. the games still running)."""
        other = KVCache.__new__(KVCache)
        other.max_len = self.max_len
        other.keys, other.values = self.keys[:, rows], self.values[:, rows]
        other.lengths = self.lengths[rows].clone()
        other.track = self.track.select(rows.cpu().numpy()) if self.track is not None else None
        other.ratings = self.ratings[rows].clone()
        return other


class SkillInputs(nn.Module):
    """Maia-2's skill embeddings on a triples-v2 row: at every position from the prefix's last
    token on, the rating bins of the side whose move that position predicts and of its opponent.

    The output at position p predicts token p + 1, a token of ply (p - PREFIX_LENGTH) // 3, so
    white moves where that ply is even. Positions before (BOS and the first two prefix tokens)
    get nothing. The prefix stays in the tokens as well, read by attention as before.
    """

    BINS = RATING_LAST - RATING_UNKNOWN + 1  # "unknown" and every bin

    def __init__(self, n_embd: int) -> None:
        super().__init__()
        self.mover = nn.Embedding(self.BINS, n_embd)
        self.opponent = nn.Embedding(self.BINS, n_embd)

    def forward(self, idx: torch.Tensor, cache: KVCache | None, positions: torch.Tensor | None) -> torch.Tensor:
        B, T = idx.shape
        if cache is None:  # whole rows from BOS: the prefix is in idx itself
            positions = torch.arange(T, device=idx.device)[None].expand(B, T)
            unknown = torch.full((B, 1), RATING_UNKNOWN, dtype=idx.dtype, device=idx.device)
            white = idx[:, 1:2] if T > 1 else unknown
            black = idx[:, 2:3] if T > 2 else unknown
        else:  # rows continue from their cached length: record the prefix as it goes by
            for slot in (0, 1):
                rows, columns = (positions == slot + 1).nonzero(as_tuple=True)
                cache.ratings[rows, slot] = idx[rows, columns]
            white, black = cache.ratings[:, 0:1], cache.ratings[:, 1:2]
        bad = (
            (white < RATING_UNKNOWN) | (white > RATING_LAST) | (black < RATING_UNKNOWN) | (black > RATING_LAST)
        ).any()
        message = "skill inputs need a triples-v2 prefix: a rating token (72..100) at positions 1 and 2"
        if idx.device.type == "cpu" and not torch.compiler.is_compiling():
            if bool(bad):
                raise ValueError(message)
        else:  # checked on the device: reading `bad` back would wait for the queue, and break a compiled graph
            torch._assert_async(~bad, message)
        white_moves = (positions - PREFIX_LENGTH).div(3, rounding_mode="floor") % 2 == 0
        mine = torch.where(white_moves, white, black) - RATING_UNKNOWN
        theirs = torch.where(white_moves, black, white) - RATING_UNKNOWN
        present = (positions >= PREFIX_LENGTH)[..., None]
        return (self.mover(mine) + self.opponent(theirs)) * present


class CausalSelfAttention(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.n_head = config.n_head
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(
        self,
        x: torch.Tensor,
        cache: KVCache | None = None,
        layer: int = 0,
        positions: torch.Tensor | None = None,
        visible: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """With a cache: `positions` (B, T) where the new tokens go, `visible` (B, 1, T, span)
        which cached positions each query sees (GPT.forward makes both once for every layer)."""
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        dropout = self.dropout if self.training else 0.0
        if cache is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=dropout)
        else:
            # Write the new keys/values at each row's own positions, then attend over the
            # prefix up to (and including) each query's position.
            rows = torch.arange(B, device=x.device)[:, None]
            cache.keys[layer, rows, :, positions] = k.transpose(1, 2)
            cache.values[layer, rows, :, positions] = v.transpose(1, 2)
            span = visible.shape[-1]
            keys, values = cache.keys[layer, :, :, :span], cache.values[layer, :, :, :span]
            y = F.scaled_dot_product_attention(q, keys, values, attn_mask=visible)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.c_fc = nn.Linear(config.n_embd, 4 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(4 * config.n_embd, config.n_embd, bias=config.bias)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = nn.LayerNorm(config.n_embd, bias=config.bias)
        self.mlp = MLP(config)

    def forward(
        self,
        x: torch.Tensor,
        cache: KVCache | None,
        layer: int,
        positions: torch.Tensor | None,
        visible: torch.Tensor | None,
    ) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x), cache, layer, positions, visible)
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, config: GPTConfig) -> None:
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(
            dict(
                wte=nn.Embedding(config.vocab_size, config.n_embd),
                wpe=nn.Embedding(config.block_size, config.n_embd),
                drop=nn.Dropout(config.dropout),
                h=nn.ModuleList(Block(config) for _ in range(config.n_layer)),
                ln_f=nn.LayerNorm(config.n_embd, bias=config.bias),
            )
        )
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied
        if config.move_features:
            self.features = InputFeatures(config.n_embd)
        if config.skill_inputs:
            self.skills = SkillInputs(config.n_embd)
        if config.board_readout:
            self.board = BoardReadout(config.n_embd, config.vocab_size)
        self.apply(self._init_weights)
        if config.board_readout:
            self.board.reset_parameters()  # zero, after the normal init above
        # GPT-2: scale the residual projections by depth.
        for name, parameter in self.named_parameters():
            if name.endswith("c_proj.weight"):
                torch.nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def flops_per_token(self, seq_len: int | None = None) -> float:
        """Training FLOPs (forward + backward) per token, as in the PaLM appendix."""
        c, t = self.config, seq_len or self.config.block_size
        return 6 * self.num_parameters() + 12 * c.n_layer * c.n_embd * t

    def new_cache(self, batch_size: int, max_len: int | None = None) -> KVCache:
        parameter = self.lm_head.weight
        return KVCache(self.config, batch_size, parameter.device, parameter.dtype, max_len)

    def row_features(self, idx: torch.Tensor) -> Features | None:
        """row_features(self.config, idx)."""
        return row_features(self.config, idx)

    def forward(
        self, idx: torch.Tensor, cache: KVCache | None = None, features: Features | None = None
    ) -> torch.Tensor:
        """Logits (B, T, vocab) for tokens idx (B, T). With a cache, idx continues each row
        from its cached length, and the cache grows by T. `features`: row_features(idx), made
        ahead (whole rows only); without them forward replays the tokens itself."""
        B, T = idx.shape
        if features is not None and cache is not None:
            raise ValueError("features are made for whole rows; with a cache forward replays the tokens itself")
        if cache is None:
            if T > self.config.block_size:
                raise ValueError(f"{T} tokens exceed the context of {self.config.block_size}")
            positions = visible = None
            pos_emb = self.transformer.wpe(torch.arange(T, device=idx.device))[None]
        else:
            positions = cache.lengths[:, None] + torch.arange(T, device=idx.device)[None]
            # The one read of the positions on the host per forward (on a GPU, each such read
            # waits for the queue): the span every layer attends over, and what each query sees.
            span = int(positions.max()) + 1
            if span > cache.max_len:
                raise ValueError(f"cache of {cache.max_len} positions is full")
            visible = (torch.arange(span, device=idx.device)[None, None, :] <= positions[:, :, None])[:, None]
            pos_emb = self.transformer.wpe(positions)
        x = self.transformer.wte(idx) + pos_emb
        square_codes = None
        if self.config.replays:
            if features is None:
                # One replay serves both, called here (not inside a submodule) so torch.compile
                # breaks the graph once, at this torch.compiler.disable'd numpy replay.
                track = cache.track if cache is not None else None
                features = replayed(idx, track, positions, board=self.config.board_readout)
            square_codes = features.squares
            if self.config.move_features:
                x = x + self.features.embed(features.moves)
        if self.config.skill_inputs:
            x = x + self.skills(idx, cache, positions)
        x = self.transformer.drop(x)
        for layer, block in enumerate(self.transformer.h):
            x = block(x, cache, layer, positions, visible)
        if cache is not None:
            cache.lengths += T
        h = self.transformer.ln_f(x)
        logits = self.lm_head(h)
        if square_codes is not None:
            logits = logits + self.board(h, square_codes)
        return logits


def pick_device(choice: str, index: int = 0) -> torch.device:
    """The device a setting names: `auto` (CUDA when torch sees one, else the CPU), `cpu` or
    `cuda` (device `index`, e.g. a rank's local GPU). Asking for CUDA without one is refused."""
    if choice == "auto":
        choice = "cuda" if torch.cuda.is_available() else "cpu"
    if choice == "cuda":
        if not torch.cuda.is_available():
            raise Refused("device cuda was asked for, but torch sees no CUDA device (use auto or cpu)")
        return torch.device("cuda", index)
    if choice != "cpu":
        raise Refused(f"device must be auto, cpu or cuda, not {choice!r}")
    return torch.device("cpu")
