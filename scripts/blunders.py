#!/usr/bin/env python3
"""Where a network's material goes in an arena match: the policy or the value.

Replays each game of an `mixzero arena --pgn-out` file (with `mixchess
show`, through material-vs-result.py's replayer) and finds the network's
blunders: its moves after which it is `--drop` pawns or more down (pawns
1, knights 3, bishops 3.25, rooks 5, queens 9) once the opponent has
replied, and still after its own next move and the opponent's answer, so
that a trade is not counted. Then asks the network (`mixzero uci
--verbose-move-stats`, a fresh tree each time, the player's search
settings) three things about each:

- before the blunder, a `--nodes` search: the blunder's prior, visits and
  Q, the best move's Q, and whether it still plays the blunder;
- after it (the opponent to move), the raw network: its value for the
  opponent and the rank of the opponent's actual reply in its priors;
- after the reply (the network to move again), the raw network's value.

A value that knows what was lost scores the position after the blunder
well for the opponent and the one after the reply badly for the network;
a policy that sees the punishment ranks the reply high.

    scripts/blunders.py m.pgn --weights runs/s1 --nodes 100

Needs release builds of mixchess and mixzero (`cargo build --release`).
"""
import argparse
import importlib.util
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location(
    "material_vs_result", os.path.join(ROOT, "scripts", "material-vs-result.py"))
mvr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mvr)

# info string e2e5 N: 12 (P: 3.10%) (Q: +0.1234)
STATS = re.compile(r"info string (\S+) N: (\d+) \(P: ([\d.]+)%\) \(Q: (\S+)\)")


class Engine:
    """`mixzero uci` with every root move's statistics after each search."""

    def __init__(self, mixzero, weights, spec):
        args = [mixzero, "uci", "--weights", weights, "--verbose-move-stats", "--threads", "1"]
        for key, value in spec.items():
            args += [f"--{key.replace('_', '-')}", value]
        self.process = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
        self.send("uci")

    def send(self, line):
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def search(self, fen, nodes):
        """(root value for the side to move, {move: (visits, prior, q)}, best move)."""
        self.send("ucinewgame")
        self.send(f"position fen {fen}")
        self.send(f"go nodes {nodes}")
        value, stats = None, {}
        for line in self.process.stdout:
            if line.startswith("info depth") and " wdl " in line:
                w, _, l = line.split(" wdl ")[1].split()[:3]
                value, stats = (int(w) - int(l)) / 1000, {}
            elif found := STATS.match(line):
                mv, n, p, q = found.groups()
                stats[mv] = (int(n), float(p) / 100, None if q == "-" else float(q))
            elif line.startswith("bestmove"):
                return value, stats, line.split()[1]
        sys.exit(f"blunders: mixzero uci stopped: {self.process.stderr.read().strip()}")

    def close(self):
        self.send("quit")
        self.process.stdin.close()
        self.process.wait()


def player_spec(name):
    """The uci flags of an arena player spec's search keys that `mixzero uci` has."""
    known = {"capture_prior", "c_puct", "policy_temperature", "root", "moves_left_effect",
             "draw_score"}
    spec = {}
    for item in name.split(":", 1)[1].split(";") if ":" in name else []:
        key, _, value = item.partition("=")
        if key in known:
            spec[key] = value
    return spec


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pgn", help="an arena's --pgn-out file")
    parser.add_argument("--weights", required=True, help="the network's weights or run directory")
    parser.add_argument("--player", help="the network's player name (default: the one that is not a baseline)")
    parser.add_argument("--nodes", type=int, default=100, help="playouts of the search before")
    parser.add_argument("--drop", type=float, default=2.0, help="pawns lost to count a blunder")
    parser.add_argument("--level", action="store_true",
                        help="only blunders from a level position (within --drop pawns)")
    parser.add_argument("--games", type=int, default=0, help="read at most this many (0: all)")
    parser.add_argument("--list", action="store_true", help="print each blunder as well")
    parser.add_argument("--mixchess", default=os.path.join(ROOT, "target", "release", "mixchess"))
    parser.add_argument("--mixzero", default=os.path.join(ROOT, "target", "release", "mixzero"))
    args = parser.parse_args()
    replayer = mvr.Replayer(args.mixchess)
    with open(args.pgn) as f:
        games = list(mvr.arena_games(f.read(), args.player))
    if args.games:
        games = games[:args.games]
    engine = None
    rows = []
    for tags, ours, sans in games:
        if engine is None:
            engine = Engine(args.mixzero, args.weights, player_spec(ours))
        white = tags["White"] == ours
        moves, fens = replayer.replay(sans)
        for ply in range(0 if white else 1, len(moves) - 1, 2):
            before = mvr.balance(fens[ply])
            later = [mvr.balance(fens[i]) for i in (ply + 2, ply + 4) if i < len(fens)]
            if len(later) < 2 or max(later) > before - args.drop:
                continue
            if args.level and abs(before) >= args.drop:
                continue
            _, stats, best = engine.search(fens[ply], args.nodes)
            if moves[ply] not in stats:
                # Its only legal move (rule 5): the engine answers at once.
                continue
            visits, prior, q = stats[moves[ply]]
            best_q = stats[best][2]
            child_value, child_stats, _ = engine.search(fens[ply + 1], 1)
            ranked = sorted(child_stats, key=lambda m: -child_stats[m][1])
            reply_rank = ranked.index(moves[ply + 1]) + 1
            after_value, _, _ = engine.search(fens[ply + 2], 1)
            if args.list:
                print(f"{fens[ply]}  {moves[ply]} (P {prior:.1%}, Q {q if q is None else round(q, 3)})"
                      f" {moves[ply + 1]} (rank {reply_rank}, P "
                      f"{child_stats[moves[ply + 1]][1]:.1%}) lost {before - later[0]:.1f}:"
                      f" values {child_value:+.2f} {after_value:+.2f}")
            rows.append({
                "lost": before - later[0], "prior": prior, "visits": visits, "q": q,
                "best_q": best_q, "again": best == moves[ply], "child_value": child_value,
                "reply_rank": reply_rank, "reply_prior": child_stats[moves[ply + 1]][1],
                "after_value": after_value,
            })
    if engine:
        engine.close()
    if not rows:
        print(f"no blunders of {args.drop} pawns or more in {len(games)} games")
        return
    median = lambda key: statistics.median(r[key] for r in rows)
    mean = lambda key: statistics.mean(r[key] for r in rows)
    share = lambda test: sum(1 for r in rows if test(r)) / len(rows)
    print(f"{len(rows)} blunders of {args.drop} pawns or more in {len(games)} games "
          f"(mean {mean('lost'):.1f} pawns lost at once)")
    print(f"before, a fresh {args.nodes}-playout search:")
    print(f"  plays the blunder again        {share(lambda r: r['again']):6.1%}")
    print(f"  the blunder's prior (median)   {median('prior'):6.1%}")
    visited = [r for r in rows if r["q"] is not None]
    if visited:
        print(f"  its Q, the best move's (mean)  {statistics.mean(r['q'] for r in visited):+.3f}, "
              f"{statistics.mean(r['best_q'] for r in visited):+.3f} "
              f"(the {len(visited)} it visited)")
    print("after it, the raw network (the opponent to move):")
    print(f"  value for the opponent (mean)  {mean('child_value'):+.3f}")
    print(f"  reply's prior rank (median)    {median('reply_rank'):6.1f}")
    print(f"  reply in the top 3             {share(lambda r: r['reply_rank'] <= 3):6.1%}")
    print(f"  reply's prior (median)         {median('reply_prior'):6.1%}")
    print("after the reply, the raw network (the network to move):")
    print(f"  value for the network (mean)   {mean('after_value'):+.3f}")


if __name__ == "__main__":
    main()
