"""The PGN tags of a batch of games as one table, read and queried a column at a time.

    tags = TagTable.build(['[Event "Rated Blitz game"]\\n[Result "1-0"]', {"Result": "0-1"}])
    tags.column("Result")        # pyarrow string array, one value per game (null: no such tag)
    tags.row(1)                  # {"Result": "0-1"}

A game's tags come either as its plain tag paragraph (text lines `[Name "value"]`, read here in
bulk with Arrow string kernels) or as a dict (tags some parser already read). Tag lines are read
as python-chess reads them (chess.pgn.TAG_REGEX: a line that does not match is ignored; a name
given twice keeps its last value); paragraphs with any line outside the simple form take
python-chess's pattern line by line.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# chess.pgn.TAG_REGEX, for one line of a multi-line text.
TAG_LINE = re.compile(r'^\[([A-Za-z0-9][A-Za-z0-9_+#=:-]*)\s+"([^\r\n]*)"\][^\S\n]*$', re.M)


class TagTable:
    """One entry per tag: name, value and the game it belongs to (entries of a game in order)."""

    def __init__(self, names: pa.Array, values: pa.Array, game: np.ndarray, games: int) -> None:
        self.names, self.values, self.game, self.games = names, values, game, games
        self._columns: dict[str, pa.Array] = {}
        self._codes: np.ndarray | None = None  # names as dictionary codes, made on first use
        self._code_of: dict[str, int] = {}

    @classmethod
    def build(cls, heads: list[str | dict[str, str]]) -> TagTable:
        plain = [i for i, head in enumerate(heads) if isinstance(head, str)]
        names, values, game = _read_plain([heads[i] for i in plain], np.array(plain, np.int64))
        other = [
            (name, value, i) for i, head in enumerate(heads) if isinstance(head, dict) for name, value in head.items()
        ]
        if other:
            extra_names, extra_values, extra_game = zip(*other)
            names = pa.concat_arrays([names, pa.array(extra_names, pa.string())])
            values = pa.concat_arrays([values, pa.array(extra_values, pa.string())])
            game = np.concatenate([game, np.array(extra_game, np.int64)])
        if len(game) > 1 and (game[1:] < game[:-1]).any():  # by game, each game's tags in their order
            order = pa.array(np.argsort(game, kind="stable"))
            names, values, game = names.take(order), values.take(order), game[order.to_numpy()]
        return cls(names, values, game, len(heads))

    def column(self, name: str) -> pa.Array:
        """The value of tag `name` for every game (its last occurrence), null where absent."""
        if name not in self._columns:
            if self._codes is None:  # one hash pass over the names; then each column is an int compare
                encoded = pc.dictionary_encode(self.names)
                self._codes = encoded.indices.to_numpy(zero_copy_only=False)
                self._code_of = {value: code for code, value in enumerate(encoded.dictionary.to_pylist())}
            code = self._code_of.get(name, -1)
            at = np.flatnonzero(self._codes == code) if code >= 0 else np.zeros(0, np.int64)
            last = at[np.append(self.game[at][1:] != self.game[at][:-1], True)] if len(at) else at
            take = np.full(self.games, -1, np.int64)
            take[self.game[last]] = last
            self._columns[name] = self.values.take(pa.array(take, mask=take < 0))
        return self._columns[name]

    def counts(self) -> np.ndarray:
        """Tags per game."""
        return np.bincount(self.game, minlength=self.games)

    def row(self, i: int) -> dict[str, str]:
        """The tags of game i as a dict (for messages and per-game checks)."""
        start, stop = np.searchsorted(self.game, [i, i + 1])
        return dict(zip(self.names[start:stop].to_pylist(), self.values[start:stop].to_pylist()))

    def rows(self, games: list[int] | None = None) -> list[dict[str, str]]:
        """The tags of several games (all by default) as dicts. Only their entries are converted
        to Python (for a batch's few rejects, not the thousands of tags of the whole batch)."""
        games = list(range(self.games)) if games is None else games
        bounds = np.searchsorted(self.game, np.array(games, np.int64)[:, None] + [0, 1]).tolist() if games else []
        entries = pa.array([k for start, stop in bounds for k in range(start, stop)], pa.int64())
        names, values = self.names.take(entries).to_pylist(), self.values.take(entries).to_pylist()
        rows, at = [], 0
        for start, stop in bounds:
            rows.append(dict(zip(names[at : at + stop - start], values[at : at + stop - start])))
            at += stop - start
        return rows


def _read_plain(heads: list[str], index: np.ndarray) -> tuple[pa.Array, pa.Array, np.ndarray]:
    """Tag lines of plain paragraphs, split in bulk: `[`, name, ` "`, value, `"]`. Any paragraph
    with a line outside that form is read with TAG_LINE instead (what python-chess does)."""
    if not heads:
        return pa.array([], pa.string()), pa.array([], pa.string()), np.zeros(0, np.int64)
    by_game = pc.split_pattern(pa.array(heads, pa.string()), "\n")  # lines in Arrow, not Python strings
    lines, line_game = pc.list_flatten(by_game), pc.list_parent_indices(by_game).to_numpy()
    parts = pc.split_pattern(pc.utf8_slice_codeunits(lines, 1, -2), ' "', max_splits=1)
    simple = pc.and_(
        pc.equal(pc.list_value_length(parts), 2), pc.and_(pc.starts_with(lines, "["), pc.ends_with(lines, '"]'))
    )
    simple_at = np.flatnonzero(simple.to_numpy(zero_copy_only=False))
    flat = pc.list_flatten(parts.filter(simple))
    names, values = flat.take(pa.array(np.arange(0, len(flat), 2))), flat.take(pa.array(np.arange(1, len(flat), 2)))
    good_name = pc.and_(pc.utf8_is_alnum(names), pc.string_is_ascii(names)).to_numpy(zero_copy_only=False)
    ok = np.zeros(len(line_game), bool)
    ok[simple_at[good_name]] = True
    odd_games = np.unique(line_game[~ok])
    line_game = line_game[simple_at]
    if len(odd_games):  # keep the simple games' lines; read the others with python-chess's pattern
        keep = ~np.isin(line_game, odd_games)
        names, values, line_game = names.filter(pa.array(keep)), values.filter(pa.array(keep)), line_game[keep]
        found = [(name, value, g) for g in odd_games.tolist() for name, value in TAG_LINE.findall(heads[g])]
        if found:
            extra_names, extra_values, extra_game = zip(*found)
            names = pa.concat_arrays([names, pa.array(extra_names, pa.string())])
            values = pa.concat_arrays([values, pa.array(extra_values, pa.string())])
            line_game = np.concatenate([line_game, np.array(extra_game, np.int64)])
    return names, values, index[line_game]
