"""Choosing moves with a model: many games at once, one batched forward per token, under the
legal mask, with a key/value cache.

A `ModelPlayer` is one model's view of a batch of games: its cache and the logits of the next
token of every game. `choose_moves` spells one move per live game in three token steps
(source, destination, promotion): each game samples from the logits of the player whose turn
it is, and every player is fed the chosen token, so two different models (or one model
playing itself) stay in step.

    player = ModelPlayer(model, n_games=64)
    states = [State.from_moves([]) for _ in range(64)]
    moves, illegal = choose_moves(states, [player], movers=[0] * 64, sampler=Sampler(1.0, seed=7))

Sampling uses the Gumbel-max trick: the same noise picks the unmasked token and the masked
one, so `illegal` says whether the model's own unmasked choice would have been illegal, and
where it was legal it is exactly the move played. Temperature 0 plays the most likely legal move
(chesscore.play.best); `illegal` is then the unmasked greedy token's, along that move.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import chess
import numpy as np
import torch

from chesscore.model import GPT, GPTConfig
from chesscore.play.best import best_moves
from chesscore.tokens import BOS, EOS, PAD, PREFIX_LENGTH, UNKNOWN_PREFIX, State, encode_move


class ModelPlayer:
    """A model, its key/value cache, and the next-token logits of each of n_games rows."""

    def __init__(
        self,
        model: GPT,
        n_games: int,
        max_len: int | None = None,
        prefixes: Sequence[Sequence[int]] | None = None,
    ) -> None:
        self.model = model
        self.device = model.lm_head.weight.device
        # A triples-v2 model reads each row's conditioning prefix after BOS ("unknown" unless
        # given); `max_len` counts the game's tokens, the prefix comes on top.
        self.offset = PREFIX_LENGTH if model.config.conditioning else 0
        self.prefixes = [list(p) for p in prefixes] if prefixes is not None else [list(UNKNOWN_PREFIX)] * n_games
        if len(self.prefixes) != n_games:
            raise ValueError(f"{len(self.prefixes)} prefixes for {n_games} games")
        self.cache = model.new_cache(n_games, max_len + self.offset if max_len else None)
        self.logits = torch.zeros(n_games, model.config.vocab_size, device=self.device)
        self.prefill([[BOS]] * n_games)

    @property
    def n_games(self) -> int:
        return self.cache.batch_size

    @torch.no_grad()
    def feed(self, tokens: torch.Tensor, active: torch.Tensor | None = None) -> None:
        """Append tokens (n_games, T) to every row; rows where `active` is False keep their
        length and logits (their tokens are scratch, overwritten by the next real ones)."""
        tokens = tokens.to(self.device)
        before = self.cache.lengths.clone()
        logits = self.model(tokens, cache=self.cache)[:, -1].float()
        if active is None:
            self.logits = logits
        else:
            active = active.to(self.device)
            self.cache.lengths = torch.where(active, self.cache.lengths, before)
            self.logits = torch.where(active[:, None], logits, self.logits)

    @torch.no_grad()
    def prefill(self, sequences: Sequence[Sequence[int]]) -> None:
        """Restart every row from its own token sequence (each starting with BOS, triples-v1);
        a conditioned model reads the row's prefix after BOS."""
        if len(sequences) != self.n_games:
            raise ValueError(f"{len(sequences)} sequences for {self.n_games} games")
        if self.offset:
            sequences = [[s[0], *prefix, *s[1:]] for s, prefix in zip(sequences, self.prefixes)]
        longest = max(len(s) for s in sequences)
        batch = torch.full((self.n_games, longest), PAD, dtype=torch.long)
        for row, sequence in enumerate(sequences):
            batch[row, : len(sequence)] = torch.as_tensor(list(sequence), dtype=torch.long)
        self.cache.lengths.zero_()
        logits = self.model(batch.to(self.device), cache=self.cache).float()
        lengths = torch.tensor([len(s) for s in sequences], device=self.device)
        self.cache.lengths = lengths  # right padding is ignored: later tokens overwrite it
        self.logits = logits[torch.arange(self.n_games, device=self.device), lengths - 1]

    def keep(self, rows: Sequence[int]) -> None:
        """Drop every row but these (in this order): finished games stop costing compute."""
        index = torch.as_tensor(list(rows), dtype=torch.long, device=self.device)
        self.prefixes = [self.prefixes[int(row)] for row in rows]
        self.cache = self.cache.select(index)
        self.logits = self.logits[index]

    def feed_move(self, move: chess.Move, row: int) -> None:
        """Feed one game's move (e.g. an engine's) while the other rows stand still."""
        tokens = torch.full((self.n_games, 3), PAD, dtype=torch.long)
        tokens[row] = torch.tensor(encode_move(move))
        active = torch.zeros(self.n_games, dtype=torch.bool)
        active[row] = True
        self.feed(tokens, active)


@dataclass
class Sampler:
    """Temperature sampling (temperature 0: greedy) from a seeded generator."""

    temperature: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.temperature < 0:
            raise ValueError(f"temperature {self.temperature} must be >= 0")
        self.generator = torch.Generator().manual_seed(self.seed)

    def pick(self, logits: torch.Tensor, legal: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(tokens chosen under the mask, whether the unmasked choice was illegal) per row."""
        scores = logits.float().cpu()
        if self.temperature > 0:
            uniform = torch.rand(scores.shape, generator=self.generator).clamp_(1e-20, 1.0)
            scores = scores / self.temperature - torch.log(-torch.log(uniform))
        unmasked = scores.argmax(dim=-1)
        chosen = scores.masked_fill(~legal, float("-inf")).argmax(dim=-1)
        illegal = ~legal.gather(1, unmasked[:, None])[:, 0]
        return chosen, illegal


def context_plies(config: GPTConfig) -> int:
    """The most plies a game may have for the model to play on in it: BOS, a conditioned model's
    prefix, 3 tokens a ply, and 3 positions more. Those 3 hold the next move's tokens (the UCI
    engine spells it) or a scratch feed (a game loop feeds an engine's move to every row at once,
    so a row that stands still, even one that just reached the cap, takes 3 scratch tokens)."""
    prefix = PREFIX_LENGTH if config.conditioning else 0
    return (config.block_size - 4 - prefix) // 3


def fit_plies(max_plies: int, models: Iterable[GPT]) -> int:
    """The ply cap `max_plies`, lowered to what every model's context holds (context_plies)."""
    return min([max_plies, *(context_plies(model.config) for model in models)])


def cache_length(max_plies: int) -> int:
    """Cache positions (a prefix comes on top, ModelPlayer) for games of up to max_plies plies:
    BOS, 3 tokens a ply, 3 scratch positions, as context_plies counts them."""
    return 4 + 3 * max_plies


def play_mask(state: State) -> np.ndarray:
    """The legal mask for play: a game ends by the rules, so EOS is never chosen."""
    mask = state.mask(legal=True)
    if mask[EOS]:
        mask = mask.copy()
        mask[EOS] = False
    return mask


def choose_moves(
    states: Sequence[State | None], players: Sequence[ModelPlayer], movers: Sequence[int], sampler: Sampler
) -> tuple[list[chess.Move | None], list[bool]]:
    """One move for every game whose state is not None (a finished game is None).

    movers[g] is the index in `players` of the player to move in game g. Every state is
    advanced by the move, every player is fed its three tokens. Returns the moves (None for
    finished games) and, per game, whether any of the mover's unmasked sub-token choices
    would have been illegal. At temperature 0 the move is the mover's most likely legal move
    (chesscore.play.best), not the greedy source followed by the greedy destination."""
    n_games = len(states)
    live = torch.tensor([s is not None for s in states])
    rows = [g for g in range(n_games) if states[g] is not None]
    illegal = [False] * n_games
    best = None
    if sampler.temperature == 0:
        best = best_moves([s.legal_moves() if s is not None else None for s in states], players, movers)
    # Each row's mover, as indices on the players' device: one indexing op gathers the logits
    # whatever the number of games (a GPU would otherwise launch a kernel per game and token).
    device = players[0].device
    index = torch.tensor(rows, dtype=torch.long, device=device)
    who = torch.tensor([movers[g] for g in rows], dtype=torch.long, device=device)
    for step in range(3):  # source, destination, promotion
        tokens = torch.full((n_games, 1), PAD, dtype=torch.long)
        legal = torch.from_numpy(np.stack([play_mask(states[g]) for g in rows]))
        chosen, was_illegal = sampler.pick(_mover_logits(players, who, index), legal)
        if best is not None:
            chosen = torch.tensor([best[g][step] for g in rows])
        tokens[rows, 0] = chosen
        for g, token, flag in zip(rows, chosen.tolist(), was_illegal.tolist()):
            states[g].feed(token)
            illegal[g] |= flag
        for player in players:
            player.feed(tokens, live)
    moves = [s.board.peek() if s is not None else None for s in states]
    return moves, illegal


def _mover_logits(players: Sequence[ModelPlayer], who: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """The next-token logits (len(index), vocab) of rows `index`, each from player who[i]."""
    if len(players) == 1:
        return players[0].logits[index]
    return torch.stack([player.logits for player in players])[who, index]
