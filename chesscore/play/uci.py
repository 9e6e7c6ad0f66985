"""The model as a UCI chess engine, for any chess GUI (cutechess, Arena, lichess-bot, ...).

    python -m chesscore.play.uci --checkpoint data/train/best.pt [--device cpu] [--temperature 0]

Register that command line as a UCI engine in the GUI. The engine plays the model's own move
(one forward per token, no search) under the legal mask, so it never plays an illegal move.
A position is played through the model by replaying its move list from the start; moves the
GUI adds to the previous position are fed incrementally (the key/value cache is kept).

Options (chesscore/play/uci_options.py): Temperature, Seed, Threads, MultiPV (`go` reports the
N most likely moves as `info multipv` lines; the move played is unchanged), Debug (or `debug
on`: an `info string` whenever the legal mask corrected the model's unmasked choice),
UCI_LimitStrength + UCI_Elo and UCI_Opponent: a triples-v2 model (docs/conditioning.md) is told
UCI_Elo as the rating of the side it plays when UCI_LimitStrength is on, the opponent's rating
from UCI_Opponent, "unknown" for either otherwise, and the time-control class of the clock at
the game's first `go wtime/btime [winc/binc]` (base + 40 x increment, as Lichess classes games;
"unknown" with no clock); Hash,
Move Overhead and Ponder are accepted (lichess-bot's stock config sets them) with no effect.

What the model cannot see is answered with an `info string` and a legal fallback move (a
mate in one, else the most valuable capture, else a seeded random move): a FEN that is not
the start position (the model only knows games from the start), a game longer than the
model's context. A move in `position` that is illegal ends the move list there (as
Stockfish does); a bad FEN leaves no position, and `go` then answers `bestmove 0000`.
Unknown or malformed lines are reported with `info string` and otherwise ignored; input is read
as bytes, so a byte that is not UTF-8 is replaced (U+FFFD), never the end of the engine. A
checkpoint that cannot be used exits 78 with one line saying why.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import TextIO

import chess
import numpy as np
import torch

from chesscore.checkpoint import CheckpointError, load_model
from chesscore.failures import MARKER
from chesscore.model import GPT
from chesscore.pgn.meta import time_control_class_of
from chesscore.play.best import best_moves, ranked_moves
from chesscore.play.fallback import fallback_move, is_start_position
from chesscore.play.moves import ModelPlayer, Sampler, context_plies
from chesscore.play.uci_options import MAX_THREADS, Options
from chesscore.tokens import (
    RATING_UNKNOWN,
    TIME_CONTROL_CLASSES,
    TIME_CONTROL_FIRST,
    TIME_CONTROL_UNKNOWN,
    TOKEN_PROMOTION,
    VOCAB_SIZE,
    encode_game,
    encode_move,
    rating_token,
    time_control_token,
)

GO_INT_ARGS = {"wtime", "btime", "winc", "binc", "movestogo", "depth", "nodes", "mate", "movetime"}


def step_mask(moves: list[chess.Move], prefix: list[int]) -> np.ndarray:
    """Tokens that continue `prefix` (0, 1 or 2 tokens of a move) towards one of `moves`."""
    mask = np.zeros(VOCAB_SIZE, dtype=bool)
    for move in moves:
        triple = encode_move(move)
        if list(triple[: len(prefix)]) == prefix:
            mask[triple[len(prefix)]] = True
    return mask


class UCIEngine:
    """The UCI protocol around a model; `handle(line)` answers one command line."""

    def __init__(
        self, model: GPT, name: str, out: TextIO = sys.stdout, temperature: float = 0.0, seed: int = 0
    ) -> None:
        self.model, self.name, self.out = model, name, out
        self.options = Options(temperature=temperature, seed=seed)
        self.context_plies = context_plies(model.config)  # plies after which one more move fits
        self.player = ModelPlayer(model, 1)
        self.fed: list[chess.Move] = []  # moves the player's cache holds, from the start (after its prefix)
        self.board: chess.Board | None = chess.Board()
        self.reachable = True
        self.pending: str | None = None  # bestmove held back during `go infinite` / `go ponder`
        self.ranked: list[tuple[chess.Move, float]] = []  # the last `go`'s MultiPV moves
        self.new_game()

    def send(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def info(self, text: str) -> None:
        self.send(f"info string {text}")

    def new_game(self) -> None:
        self.sampler = Sampler(self.options.temperature, self.options.seed)
        self.rng = random.Random(self.options.seed)
        self.time_control = TIME_CONTROL_UNKNOWN  # set by the game's first `go` with a clock

    # -- commands ---------------------------------------------------------------------------

    def handle(self, line: str) -> bool:
        """Answer one line; False after `quit`."""
        words = line.split()
        if not words:
            return True
        command, args = words[0], words[1:]
        try:
            if command == "quit":
                return False
            handler = getattr(self, f"cmd_{command}", None)
            if handler is None:
                self.info(f"unknown command: {line.strip()[:200]}")
            else:
                handler(args)
        except Exception as error:  # a GUI must never see the engine die
            self.info(f"error in '{line.strip()[:200]}': {type(error).__name__}: {error}")
        return True

    def cmd_uci(self, args: list[str]) -> None:
        self.send(f"id name {self.name}")
        self.send("id author chesscore")
        for declaration in self.options.declarations():
            self.send(declaration)
        self.send("uciok")

    def cmd_isready(self, args: list[str]) -> None:
        self.send("readyok")

    def cmd_debug(self, args: list[str]) -> None:
        if args[:1] not in (["on"], ["off"]):
            raise ValueError("expected: debug on|off")
        self.options.debug = args[0] == "on"

    def cmd_ucinewgame(self, args: list[str]) -> None:
        self.pending = None
        self.new_game()

    def cmd_setoption(self, args: list[str]) -> None:
        text = " ".join(args)
        if not text.startswith("name ") or " value " not in text:
            raise ValueError("expected: setoption name <name> value <value>")
        name, value = text[len("name ") :].split(" value ", 1)
        if self.options.set(name, value):
            self.new_game()
        if (
            name.strip().lower() in ("uci_limitstrength", "uci_elo", "uci_opponent")
            and not self.model.config.conditioning
        ):
            self.info(f"{name.strip()}: this model reads no ratings (triples-v1), so it plays as before")

    def cmd_position(self, args: list[str]) -> None:
        self.board, self.reachable = None, False
        if args[:1] == ["startpos"]:
            board, rest = chess.Board(), args[1:]
        elif args[:1] == ["fen"]:
            end = args.index("moves") if "moves" in args else len(args)
            fen = " ".join(args[1:end])
            try:
                board = chess.Board(fen)
            except ValueError as error:
                raise ValueError(f"bad FEN {fen!r}: {error}") from None
            if board.status() != chess.STATUS_VALID:
                raise ValueError(f"FEN {fen!r} is not a valid position ({board.status()!r})")
            rest = args[end:]
        else:
            raise ValueError("expected: position startpos|fen <fen> [moves ...]")
        if rest and rest[0] != "moves":
            raise ValueError(f"expected 'moves', got {rest[0]!r}")
        reachable = is_start_position(board)
        board = chess.Board(board.fen()) if reachable else board  # a root of its own
        for uci in rest[1:]:
            try:
                board.push(board.parse_uci(uci))
            except ValueError:
                self.info(f"illegal move {uci} in {board.fen()}: the move list ends before it")
                break
        if not reachable:
            self.info(
                "this FEN is not the start position: the model only knows games from the "
                "start, so its moves here are fallback moves"
            )
        self.board, self.reachable = board, reachable

    def cmd_go(self, args: list[str]) -> None:
        limits, searchmoves, waiting = {}, [], False
        words = iter(args)
        for word in words:
            if word in GO_INT_ARGS:
                value = next(words, "")
                try:
                    limits[word] = int(value)
                except ValueError:
                    self.info(f"go: {word} needs a number, got {value!r}")
            elif word in ("infinite", "ponder"):
                waiting = True
            elif word == "searchmoves":
                searchmoves = list(words)
            else:
                self.info(f"go: ignored {word!r}")
        self._read_clock(limits)
        started = time.perf_counter()
        move = self.choose(searchmoves)
        elapsed_ms = int((time.perf_counter() - started) * 1000)
        bestmove = f"bestmove {move.uci() if move else '0000'}"
        if self.ranked:
            for rank, (ranked, _) in enumerate(self.ranked, 1):
                self.send(f"info depth 1 seldepth 1 multipv {rank} nodes 1 time {elapsed_ms} pv {ranked.uci()}")
        elif move is not None:
            self.send(f"info depth 1 seldepth 1 nodes 1 time {elapsed_ms} pv {move.uci()}")
        if waiting:
            self.pending = bestmove  # UCI: no bestmove before `stop` / `ponderhit`
        else:
            self.send(bestmove)

    def _read_clock(self, limits: dict[str, int]) -> None:
        """The game's time-control class, from the side to move's clock at its first timed `go`
        (what lichess-bot sends: wtime/btime/winc/binc), as Lichess classes a game: base + 40 x
        increment. Set once a game (ucinewgame resets it): the clock only runs down."""
        if self.time_control != TIME_CONTROL_UNKNOWN or self.board is None:
            return
        side = "w" if self.board.turn == chess.WHITE else "b"
        remaining, increment = limits.get(f"{side}time"), limits.get(f"{side}inc", 0)
        if remaining is None or remaining < 0 or increment < 0:
            return
        self.time_control = time_control_token(time_control_class_of(remaining // 1000, increment // 1000))
        if self.model.config.conditioning and self.options.debug:
            self.info(f"time control from the clock: {TIME_CONTROL_CLASSES[self.time_control - TIME_CONTROL_FIRST]}")

    def cmd_stop(self, args: list[str]) -> None:
        if self.pending is not None:
            self.send(self.pending)
            self.pending = None

    cmd_ponderhit = cmd_stop

    def cmd_register(self, args: list[str]) -> None:
        pass

    # -- choosing a move ----------------------------------------------------------------------

    def choose(self, searchmoves: list[str]) -> chess.Move | None:
        board, self.ranked = self.board, []
        if board is None:
            self.info("no valid position: send `position startpos` or a valid FEN first")
            return None
        legal = list(board.legal_moves)
        allowed = [m for m in legal if m.uci() in set(searchmoves)] if searchmoves else legal
        if searchmoves and not allowed:
            self.info("go searchmoves: none of those moves is legal here; searching all moves")
            allowed = legal
        if not allowed:
            return None
        if not self.reachable:
            return self._fallback(board, allowed)
        if len(board.move_stack) > self.context_plies:
            self.info(f"the game is longer than the model's context ({self.context_plies} plies): fallback move")
            return self._fallback(board, allowed)
        self._catch_up(board.move_stack, self.prefix(board.turn))
        if self.options.multipv > 1:
            ranked = ranked_moves([allowed], [self.player], [0], self.options.multipv)[0]
            self.ranked = [(chess.Move(s, d, TOKEN_PROMOTION[p]), lp) for (s, d, p), lp in ranked]
        move, illegal = self._model_move(allowed)
        if illegal and self.options.debug:
            self.info("the model's unmasked choice was illegal; the legal mask corrected it")
        if move not in board.legal_moves:  # cannot happen under the mask; never send one anyway
            self.info(f"model move {move.uci()} is not legal here: fallback move")
            return self._fallback(board, allowed)
        return move

    def _fallback(self, board: chess.Board, allowed: list[chess.Move]) -> chess.Move:
        move = fallback_move(board, self.rng)
        return move if move in allowed else self.rng.choice(allowed)

    def prefix(self, turn: chess.Color) -> list[int]:
        """What a conditioned model is told when it plays `turn`: its own rating (UCI_Elo under
        UCI_LimitStrength), its opponent's (UCI_Opponent), the time control its clock shows."""
        own = rating_token(self.options.elo) if self.options.limit_strength else RATING_UNKNOWN
        other = rating_token(self.options.opponent_elo)
        return [own, other, self.time_control] if turn == chess.WHITE else [other, own, self.time_control]

    def _catch_up(self, moves: list[chess.Move], prefix: list[int]) -> None:
        """Make the player's cache hold exactly `prefix` (read by a conditioned model) and `moves`:
        feed what was added, or restart."""
        told_otherwise = self.model.config.conditioning and self.player.prefixes[0] != prefix
        if told_otherwise:
            self.player.prefixes = [prefix]
        if not told_otherwise and self.fed == moves[: len(self.fed)]:
            for move in moves[len(self.fed) :]:
                self.player.feed_move(move, 0)
        else:
            self.player.prefill([encode_game(moves)[:-1]])
        self.fed = list(moves)

    def _model_move(self, allowed: list[chess.Move]) -> tuple[chess.Move, bool]:
        prefix: list[int] = []
        illegal = False
        # Temperature 0: the most likely allowed move (not the greedy source, then destination).
        best = best_moves([allowed], [self.player], [0])[0] if self.options.temperature == 0 else None
        for step in range(3):  # source, destination, promotion
            mask = torch.from_numpy(step_mask(allowed, prefix))[None]
            chosen, was_illegal = self.sampler.pick(self.player.logits, mask)
            token = int(chosen[0]) if best is None else best[step]
            illegal |= bool(was_illegal[0])
            prefix.append(token)
            self.player.feed(torch.tensor([[token]]))
        source, destination, promotion = prefix
        move = chess.Move(source, destination, TOKEN_PROMOTION[promotion])
        self.fed.append(move)
        return move, illegal


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m chesscore.play.uci",
        description=__doc__.split("\n\n")[0],
        epilog="Register this command line as a UCI engine in a chess GUI.",
    )
    parser.add_argument("--checkpoint", required=True, type=Path, help="a chesscore checkpoint (.pt)")
    parser.add_argument("--device", default="cpu", help="torch device (cpu, cuda, ...); default cpu")
    parser.add_argument("--temperature", type=float, default=0.0, help="0 = most likely move (default)")
    parser.add_argument("--seed", type=int, default=0, help="sampler seed (default 0)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch CPU threads (default 1: a move is a few tiny forwards, and more "
        "threads than free cores slow them down badly)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.threads <= MAX_THREADS:
        parser.error(f"--threads must be within 1..{MAX_THREADS}")
    torch.set_num_threads(args.threads)
    try:
        model, payload = load_model(args.checkpoint, args.device)
    except CheckpointError as error:  # refused, as for the stages: one line, no traceback
        print(f"chesscore.play.uci: {error}", file=sys.stderr)
        print(f"{MARKER} {error.kind}: {error}", file=sys.stderr)
        return error.exit_code
    config = payload["config"]
    name = (
        f"chesscore {args.checkpoint.name} ({config['n_layer']}x{config['n_embd']}, {model.num_parameters():,} params)"
    )
    sys.stdout.reconfigure(errors="backslashreplace")  # echoing such a line back must not fail either
    engine = UCIEngine(model, name, sys.stdout, args.temperature, args.seed)
    for raw in sys.stdin.buffer:  # bytes: an invalid UTF-8 byte from a GUI must not end the engine
        if not engine.handle(raw.decode("utf-8", errors="replace")):
            break
    return 0


if __name__ == "__main__":
    sys.exit(main())
