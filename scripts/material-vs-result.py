#!/usr/bin/env python3
"""How much material decides a run's self-play games, and how much of it a
network's value sees (README, Status).

Replays the last self-play games from the start position in RUN_DIR/pgn
(with `mixchess show --json`, one call per ply) and prints, for the games
that ended by the rules, the mean result for the side to move (wins minus
losses) by phase and by material balance (pawns 1, knights 3, bishops
3.25, rooks 5, queens 9: the engine's scale). With --weights it also takes
White-to-move positions at --ply from those games, as played and with
either queen taken off, and prints each network's mean value there
(`mixzero uci`, capture prior 0): the queen swing is the value without
Black's queen minus the value without White's. With --calibration it
also prints each network's mean value on the decided games' own positions
(every --every plies from ply 20), by material in 3-pawn steps (+-12:
10.5 pawns or more), beside the games' mean result there: whether the
value prices material as the games it learns from do.

    scripts/material-vs-result.py runs/s1
    scripts/material-vs-result.py runs/s1 --weights runs/s1/checkpoints/latest runs/s2/checkpoints/latest
    scripts/material-vs-result.py runs/s1 --games 300 --calibration --weights runs/s1

Needs release builds of mixchess and mixzero (`cargo build --release`).
"""
import argparse
import glob
import json
import math
import os
import re
import subprocess
import sys
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# engine::players::PIECE_VALUES in pawns (mixchess does not print material).
VALUES = {"p": 1.0, "n": 3.0, "b": 3.25, "r": 5.0, "q": 9.0, "k": 0.0}


class Replayer:
    """Coordinate moves and FENs of a SAN game, through `mixchess show`."""

    def __init__(self, mixchess):
        self.mixchess = mixchess
        # The table and the probe read the same games: each is replayed once.
        self.replayed = {}

    def show(self, moves):
        out = subprocess.run([self.mixchess, "show", "--json", "--moves", " ".join(moves)],
                             capture_output=True, text=True)
        if out.returncode != 0:
            sys.exit(f"material-vs-result: mixchess show failed: {out.stderr.strip()}")
        return json.loads(out.stdout)

    def fens(self, sans):
        """FENs of the positions before each move and after the last."""
        return self.replay(sans)[1]

    def replay(self, sans):
        """Coordinate moves, and FENs of the positions before each move and after the last."""
        if tuple(sans) in self.replayed:
            return self.replayed[tuple(sans)]
        moves, fens = [], []
        for san in sans:
            shown = self.show(moves)
            fens.append(shown["fen"])
            plain = [s.rstrip("+#") for s in shown["san"]]
            try:
                moves.append(shown["legal"][plain.index(san.rstrip("+#"))])
            except ValueError:
                sys.exit(f"material-vs-result: {san} is not legal in {shown['fen']}")
        fens.append(self.show(moves)["fen"])
        self.replayed[tuple(sans)] = (moves, fens)
        return moves, fens


RESULTS = ("1-0", "0-1", "1/2-1/2", "*")


# The arena's built-in players and external engines: never the network.
BASELINE = re.compile(r"random|greedy|alphabeta:\d+|uci:.*")


def arena_games(text, player=None):
    """(tags, the network's player name, SAN moves) of each game of an arena
    `--pgn-out` file; the network is `player`, else the one player that is
    neither a built-in baseline nor an external engine (`alphabeta:1` has a
    `:` as a network spec does, so the colon alone cannot tell them)."""
    for game in text.split("[Event")[1:]:
        tags = dict(re.findall(r'\[(\w+) "([^"]*)"\]', game))
        ours = player
        if ours is None:
            networks = {p for p in (tags["White"], tags["Black"]) if not BASELINE.fullmatch(p)}
            if len(networks) != 1:
                sys.exit(f"material-vs-result: cannot tell the network in {tags['White']} "
                         f"against {tags['Black']}: name it with --player")
            ours = networks.pop()
        elif ours not in (tags["White"], tags["Black"]):
            sys.exit(f"material-vs-result: `{ours}` plays neither side of "
                     f"{tags['White']} against {tags['Black']}")
        body = re.sub(r"\{[^}]*\}", " ", game.split("\n\n", 1)[1])
        sans = [re.sub(r"^\d+\.+", "", t) for t in body.split() if t not in RESULTS]
        yield tags, ours, [s for s in sans if s]


def games(run_dir, count):
    """(result, termination, SAN moves) of the last `count` games from the start position."""
    found = []
    for path in reversed(sorted(glob.glob(os.path.join(run_dir, "pgn", "*.pgn")))):
        with open(path) as f:
            text = f.read()
        for game in reversed(text.split("[Event")[1:]):
            if "[FEN " in game:
                continue
            result = re.search(r'\[Result "([^"]*)"\]', game)
            termination = re.search(r'\[Termination "([^"]*)"\]', game)
            if not result or "\n\n" not in game:
                sys.exit(f"material-vs-result: a game in {path} has no Result tag or no moves")
            result = result.group(1)
            body = re.sub(r"\d+\.", "", game.split("\n\n", 1)[1])
            sans = [t for t in body.split() if t not in RESULTS]
            found.append((result, termination.group(1) if termination else "", sans))
            if len(found) == count:
                return found
    return found


def decided(found):
    """The games of `found` that the rules ended (not the length cap)."""
    return [g for g in found if g[1] not in ("adjudication", "")]


def score(result, white):
    """A PGN result for White if `white`, else for Black: 1, 0 or -1."""
    if result == "1/2-1/2":
        return 0
    return 1 if (result == "1-0") == white else -1


def balance(fen):
    """Material for the side to move, in pawns."""
    board, side = fen.split()[:2]
    white = sum(VALUES[c.lower()] for c in board if c.isupper())
    black = sum(VALUES[c] for c in board if c.islower())
    return white - black if side == "w" else black - white


def without(fen, piece):
    """`fen` with the first `piece` (FEN letter) taken off, or None."""
    fields = fen.split(" ")
    rows = []
    removed = False
    for row in fields[0].split("/"):
        squares = []
        for token in re.findall(r"\d+|\D", row):
            squares += ["."] * int(token) if token.isdigit() else [token]
        if not removed and piece in squares:
            squares[squares.index(piece)] = "."
            removed = True
        rows.append(re.sub(r"\.+", lambda m: str(len(m.group(0))), "".join(squares)))
    if not removed:
        return None
    fields[0] = "/".join(rows)
    return " ".join(fields)


def table(replayer, found):
    buckets = defaultdict(lambda: [0, 0, 0])
    ended = decided(found)
    for result, _, sans in ended:
        for ply, fen in enumerate(replayer.fens(sans)[:-1]):
            white = fen.split()[1] == "w"
            outcome = 1 - score(result, white)  # the bucket's win, draw, loss column
            pawns = balance(fen)
            material = "<= -3" if pawns <= -3 else (">= +3" if pawns >= 3 else "within 3")
            phase = "plies 0-39" if ply < 40 else ("plies 40-79" if ply < 80 else "plies 80+")
            buckets[(phase, material)][outcome] += 1
    print(f"{len(ended)} games decided by the rules, of the last {len(found)} from the start")
    print(f"{'phase':12} {'material':9} {'positions':>9} {'W-L':>6} {'draws':>6}")
    for (phase, material), (w, d, l) in sorted(buckets.items()):
        n = w + d + l
        print(f"{phase:12} {material:9} {n:9d} {(w - l) / n:+6.2f} {d / n:6.2f}")


def calibration(replayer, found, weights, mixzero, every):
    """Mean value of each network and mean result (side to move) by material
    on the decided games' positions, every `every` plies from ply 20."""
    rows = []
    for result, _, sans in decided(found):
        for fen in replayer.fens(sans)[20:-1:every]:
            pawns = balance(fen)
            # 3-pawn steps, halves away from zero so that the steps are symmetric
            steps = min(4, math.floor(abs(pawns) / 3 + 0.5))
            rows.append((int(math.copysign(steps * 3, pawns)), score(result, fen.split()[1] == "w"), fen))
    if not rows:
        sys.exit("material-vs-result: no decided game is 21 plies long")
    columns = [values(mixzero, w, [fen for _, _, fen in rows], 1) for w in weights]
    print(f"\nvalue and result (W-L, side to move) on {len(rows)} positions of the decided games")
    print(f"{'material':>8} {'positions':>9} {'result':>7}  " + "  ".join(f"value {i + 1}" for i in range(len(weights))))
    for bucket in sorted({b for b, _, _ in rows}):
        at = [i for i, (b, _, _) in enumerate(rows) if b == bucket]
        result = sum(rows[i][1] for i in at) / len(at)
        means = "  ".join(f"{sum(c[i] for i in at) / len(at):+7.3f}" for c in columns)
        print(f"{bucket:+8d} {len(at):9d} {result:+7.2f}  {means}")
    for i, w in enumerate(weights):
        print(f"value {i + 1}: {w}")


def probe_positions(replayer, found, ply, count):
    positions = []
    for _, _, sans in found:
        if len(sans) < ply + 10:
            continue
        fen = replayer.fens(sans)[ply]
        no_black, no_white = without(fen, "q"), without(fen, "Q")
        if no_black and no_white:
            positions.append((fen, no_black, no_white))
        if len(positions) == count:
            break
    return positions


def values(mixzero, weights, fens, nodes):
    """Root win minus loss (side to move) of each FEN after a `nodes` search."""
    engine = subprocess.Popen([mixzero, "uci", "--weights", weights, "--capture-prior", "0"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    engine.stdin.write("uci\n")
    found = []
    for fen in fens:
        engine.stdin.write(f"position fen {fen}\ngo nodes {nodes}\n")
        engine.stdin.flush()
        wdl = None
        for line in engine.stdout:
            if line.startswith("info") and " wdl " in line:
                w, _, l = line.split(" wdl ")[1].split()[:3]
                wdl = (int(w) - int(l)) / 1000
            elif line.startswith("bestmove"):
                break
        else:
            sys.exit(f"material-vs-result: mixzero uci stopped: {engine.stderr.read().strip()}")
        found.append(wdl)
    engine.stdin.write("quit\n")
    engine.stdin.close()
    engine.wait()
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", help="a run directory (its pgn/ holds the self-play games)")
    parser.add_argument("--games", type=int, default=60, help="last games from the start (60)")
    parser.add_argument("--weights", nargs="*", default=[], help="networks to probe")
    parser.add_argument("--ply", type=int, default=40, help="ply of the probe positions (40; even)")
    parser.add_argument("--positions", type=int, default=30, help="probe positions (30)")
    parser.add_argument("--nodes", type=int, default=1, help="search nodes per probe (1: the net)")
    parser.add_argument("--calibration", action="store_true",
                        help="each network's value by material on the decided games, beside their results")
    parser.add_argument("--every", type=int, default=3,
                        help="--calibration: plies between positions (3: both sides to move)")
    parser.add_argument("--mixchess", default=os.path.join(ROOT, "target/release/mixchess"))
    parser.add_argument("--mixzero", default=os.path.join(ROOT, "target/release/mixzero"))
    args = parser.parse_args()
    if args.ply % 2:
        parser.error("--ply must be even (White to move)")
    if args.every < 1:
        parser.error("--every must be at least 1")
    if args.calibration and not args.weights:
        parser.error("--calibration needs --weights")
    for path in [args.mixchess] + ([args.mixzero] if args.weights else []):
        if not os.access(path, os.X_OK):
            parser.error(f"no binary at {path} (cargo build --release)")
    replayer = Replayer(args.mixchess)
    found = games(args.run_dir, args.games)
    if not found:
        sys.exit(f"material-vs-result: no self-play games from the start in {args.run_dir}/pgn")
    table(replayer, found)
    if not args.weights:
        return
    if args.calibration:
        calibration(replayer, found, args.weights, args.mixzero, args.every)
    positions = probe_positions(replayer, found, args.ply, args.positions)
    if not positions:
        sys.exit(f"material-vs-result: no game reaches ply {args.ply + 10} with both queens")
    print(f"\nvalue (W-L, White to move) at ply {args.ply} of {len(positions)} of these games")
    print(f"{'as played':>9} {'-black Q':>9} {'-white Q':>9} {'swing':>7}  weights")
    for weights in args.weights:
        flat = values(args.mixzero, weights, [f for triple in positions for f in triple], args.nodes)
        mean = [sum(flat[i::3]) / len(positions) for i in range(3)]
        print(f"{mean[0]:+9.3f} {mean[1]:+9.3f} {mean[2]:+9.3f} {mean[1] - mean[2]:+7.3f}  {weights}")


if __name__ == "__main__":
    main()
