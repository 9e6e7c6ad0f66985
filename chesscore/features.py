"""Input features a GPT can add to its token embeddings, derived from the move tokens by replaying
the game (chesscore.boards): the token contract stays triples-v1, callers feed tokens as before.

    features = InputFeatures(n_embd=128)                 # GPTConfig(move_features=True) makes one
    x = token_and_position_embeddings + features(idx)    # whole rows from BOS (training, evaluation)
    x = ... + features(idx, cache.track, positions)      # incremental decoding with the cache

Per position, the id of what the token at it names (MOVE_FEATURES ids, one embedding each):

    source token        the moving piece (White pawn .. Black king: 1..12)
    destination token   the piece it captures, en passant included (14..25), or none (13)
    promotion token, BOS nothing (0)

So the model knows which piece moves and what it takes without inferring the board from the
whole move history: measured on the demo model, the validation NLL after 50 updates is where the
plain model is after 150 (docs/strength-experiment.md).

The board readout (BoardReadout, GPTConfig.board_readout) uses the same replay at the output:
per position, chesscore.boards.position_codes of the position it sees (the i // 3 convention:
source and destination tokens see the board before their move, the promotion token and EOS the
board after it, which is the board the next source is chosen on). `replayed` runs the replay once
for both, outside torch.compile's graph.

Training and evaluation assemble the features with each batch, on the host, before the tokens
go to the device (GPT.row_features, then forward(idx, features=...)): forward then never reads
its tokens back from a GPU, which would wait for all the queued work of the batch before, and a
compiled training forward holds the whole model in one graph. Without them forward replays
itself, as play does with the cache.

A triples-v2 prefix (3 tokens after BOS, chesscore.tokens) needs nothing of its own: the replay reads
it as one more move whose tokens are no squares, which leaves the start board as it is, so every
later position still sees the board of its ply, and the prefix positions name nothing.

With the cache, `Track` keeps each row's tokens by position and its board after every ply: a
row's board after ply k is computed when position 3k is fed, from the board before it and the
move's three tokens, so rows that stand still (their scratch tokens overwritten later), are
rewound (their length set back) or are dropped (`select`) stay right.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from chesscore import boards as replay
from chesscore.tokens import PAD

NOTHING, MOVER, CAPTURED = 0, 1, 13  # feature id offsets: no feature, moving piece, captured piece
MOVE_FEATURES = CAPTURED + replay.CODES  # 26 ids


def move_feature_ids(seen: np.ndarray, tokens: np.ndarray, previous: np.ndarray, places: np.ndarray) -> np.ndarray:
    """Feature ids (B, T) of tokens (B, T) at positions `places`, given the board each position
    sees (B, T, 64) and the token before each (B, T; for the en passant test)."""
    tokens = tokens.astype(np.int64)
    square = np.where(tokens < replay.SQUARES, tokens, 0)
    on_square = np.take_along_axis(seen, square[..., None], axis=-1)[..., 0].astype(np.int64)
    phase = places % 3  # 1: source, 2: destination, 0: promotion or BOS
    ids = np.where((phase == 1) & (tokens < replay.SQUARES) & (on_square > 0), MOVER - 1 + on_square, NOTHING)
    source = np.where(previous < replay.SQUARES, previous, 0).astype(np.int64)
    mover = np.take_along_axis(seen, source[..., None], axis=-1)[..., 0].astype(np.int64)
    pawn = (mover == replay.PAWN) | (mover == replay.PAWN + 6)
    en_passant = pawn & (on_square == 0) & (source % 8 != square % 8)
    captured = np.where(en_passant, np.where(mover == replay.PAWN, replay.PAWN + 6, replay.PAWN), on_square)
    return np.where((phase == 2) & (tokens < replay.SQUARES), CAPTURED + captured, ids)


class Track:
    """Per cache row: the tokens fed, by position, and the position (board and state,
    chesscore.boards.WIDTH columns) after every ply."""

    def __init__(self, rows: int, max_len: int) -> None:
        self.tokens = np.full((rows, max_len), PAD, dtype=np.int64)
        self.boards = np.zeros((rows, max_len // 3 + 1, replay.WIDTH), dtype=np.uint8)

    def select(self, rows: np.ndarray) -> Track:
        other = Track.__new__(Track)
        other.tokens, other.boards = self.tokens[rows], self.boards[rows]
        return other

    def feed(self, tokens: np.ndarray, places: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Record tokens (B, T) at positions (B, T); the positions (boards and state) those
        positions see (B, T, WIDTH) and the token before each (B, T)."""
        rows = np.arange(len(tokens))
        seen = np.empty(places.shape + (replay.WIDTH,), dtype=np.uint8)
        previous = np.empty_like(tokens)
        for t in range(tokens.shape[1]):
            place = places[:, t]
            self.tokens[rows, place] = tokens[:, t]
            previous[:, t] = np.where(place > 0, self.tokens[rows, np.maximum(place - 1, 0)], PAD)
            done = np.flatnonzero(place % 3 == 0)
            first, later = done[place[done] == 0], done[place[done] > 0]
            self.boards[first, 0] = replay.START_POSITION
            if len(later):
                ply, at = place[later] // 3, place[later]
                moves = self.tokens[later, at - 2], self.tokens[later, at - 1], self.tokens[later, at]
                self.boards[later, ply] = replay.apply_moves(self.boards[later, ply - 1], *moves)
            seen[:, t] = self.boards[rows, place // 3]
        return seen, previous


@dataclass(frozen=True)
class Replayed:
    """What the positions of a forward see: `seen[b, which[b, t]]` is the position (board and
    state, WIDTH columns) at row b, position t. Whole rows keep one position per ply (a third of
    the positions) and an index into them."""

    tokens: np.ndarray  # (B, T) int64
    places: np.ndarray  # (B, T): each token's position in its row
    previous: np.ndarray  # (B, T): the token before each (PAD at BOS)
    seen: np.ndarray  # (B, K, WIDTH) uint8
    which: np.ndarray  # (B, T) indices into seen's K axis

    def per_position(self) -> np.ndarray:
        """(B, T, WIDTH): the position each token sees."""
        return np.take_along_axis(self.seen, self.which[..., None], axis=1)


def replay_inputs(idx: torch.Tensor, track: Track | None = None, positions: torch.Tensor | None = None) -> Replayed:
    """Replay tokens idx (B, T): whole rows from BOS without a track, else continuing each
    cache row at `positions` (B, T)."""
    tokens = idx.cpu().numpy().astype(np.int64)
    if track is None:  # whole rows from BOS
        places = np.broadcast_to(np.arange(tokens.shape[1]), tokens.shape)
        previous = np.concatenate([np.full((len(tokens), 1), PAD), tokens[:, :-1]], axis=1)
        return Replayed(tokens, places, previous, replay.game_positions(tokens), places // 3)
    places = positions.cpu().numpy()
    seen, previous = track.feed(tokens, places)
    return Replayed(tokens, places, previous, seen, np.broadcast_to(np.arange(tokens.shape[1]), tokens.shape))


class InputFeatures(nn.Module):
    """The embedding of each position's move feature (MOVE_FEATURES ids)."""

    def __init__(self, n_embd: int) -> None:
        super().__init__()
        self.moves = nn.Embedding(MOVE_FEATURES, n_embd)

    def forward(self, idx: torch.Tensor, track: Track | None = None, positions: torch.Tensor | None = None):
        return self.embed(replayed(idx, track, positions, board=False).moves)

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        """The embedding of feature ids (B, T), as `replayed` gives them."""
        return self.moves(ids)


class BoardReadout(nn.Module):
    """The board readout: to the logit of every square token s it adds h . E[s, what stands on s],
    with h the final hidden state and "what stands on s" relative to the side to move
    (chesscore.boards.position_codes: 13 codes per square, 832 rows of E). So "a piece of mine
    stands here" or "this square is empty" scores a square directly, in every position, without a
    layer having to rebuild the board from the history. E starts at zero: the model starts as the
    plain one and learns how much to trust each (square, piece)."""

    def __init__(self, n_embd: int, vocab_size: int) -> None:
        super().__init__()
        self.codes = nn.Embedding(replay.SQUARES * replay.CODES, n_embd)
        self.vocab_size = vocab_size

    def reset_parameters(self) -> None:
        nn.init.zeros_(self.codes.weight)

    def forward(self, h: torch.Tensor, square_codes: torch.Tensor) -> torch.Tensor:
        """(B, T, vocab) logit terms for hidden states h (B, T, n_embd) and the square codes (B, T,
        64) of the position each input sees; zero past the 64 square tokens."""
        # One (n_embd x 832) product, then a gather: cheaper than gathering 64 rows of E per position.
        scores = torch.gather(h @ self.codes.weight.T, -1, square_codes)
        return F.pad(scores, (0, self.vocab_size - replay.SQUARES))


@dataclass(frozen=True)
class Features:
    """What the replay gives a forward over tokens (B, T): the MOVE_FEATURES id of every position
    and, for the board readout, the square codes of the position each sees (BoardReadout's input)."""

    moves: torch.Tensor  # (B, T) int64
    squares: torch.Tensor | None = None  # (B, T, 64) int64, board readout only

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> Features:
        """The features with fn applied to each tensor (e.g. a move to the device)."""
        return Features(fn(self.moves), None if self.squares is None else fn(self.squares))


# The replay runs in numpy on the CPU, which torch.compile cannot trace: the call is left out of
# the compiled graph on purpose (one graph break per compilation, counted and explained by
# chesscore.train.compiled), and what uses its tensors is compiled again. Training assembles the
# features with its batches instead (GPT.row_features), so its compiled forward has no break.
@torch.compiler.disable
def replayed(
    idx: torch.Tensor, track: Track | None = None, positions: torch.Tensor | None = None, board: bool = True
) -> Features:
    """The Features of tokens idx (B, T), on idx's device: whole rows from BOS without a track,
    else continuing each cache row at `positions`; square codes only with `board`."""
    inputs = replay_inputs(idx, track, positions)
    seen = inputs.per_position()
    ids = torch.from_numpy(move_feature_ids(seen, inputs.tokens, inputs.previous, inputs.places)).to(idx.device)
    if not board:
        return Features(ids)
    squares = replay.position_codes(seen)[..., : replay.SQUARES]
    return Features(ids, torch.from_numpy(np.ascontiguousarray(squares)).to(idx.device))
