#!/usr/bin/env python3
"""Who had the material when the games of an arena match ended (README,
Status, "The moves-left utility at play").

Replays each game of an `mixzero arena --pgn-out` file (with `mixchess
show`, through material-vs-result.py's replayer) and prints, for each way
a game ended from the network's side (the player that is not a baseline,
or --player), the games, the mean material balance at the
end for the network (pawns 1, knights 3, bishops 3.25, rooks 5, queens 9)
and how many ended with it 3 pawns or more ahead and behind.

    scripts/end-material.py s1.pgn

Needs a release build of mixchess (`cargo build --release`).
"""
import argparse
import importlib.util
import os
from collections import defaultdict

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
spec = importlib.util.spec_from_file_location(
    "material_vs_result", os.path.join(ROOT, "scripts", "material-vs-result.py"))
mvr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mvr)


def balance(fen, white):
    """Material in pawns for White in `fen` if `white`, else for Black."""
    to_move = mvr.balance(fen)
    return to_move if (fen.split()[1] == "w") == white else -to_move


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pgn", help="an arena's --pgn-out file")
    parser.add_argument("--player", help="the player to count for (default: the network spec)")
    parser.add_argument("--mixchess", default=os.path.join(ROOT, "target", "release", "mixchess"))
    args = parser.parse_args()
    replayer = mvr.Replayer(args.mixchess)
    groups = defaultdict(list)
    with open(args.pgn) as f:
        text = f.read()
    for tags, ours, sans in mvr.arena_games(text, args.player):
        white = tags["White"] == ours
        fen = replayer.fens(sans)[-1]
        result = tags["Result"]
        outcome = {1: "win", 0: "draw", -1: "loss"}[mvr.score(result, white)]
        groups[(outcome, tags["Termination"])].append(balance(fen, white))
    print("outcome  termination      games  mean  ahead>=3  behind>=3")
    for (outcome, termination), values in sorted(groups.items()):
        print(f"{outcome:8} {termination:15} {len(values):6} {sum(values) / len(values):6.1f}"
              f" {sum(v >= 3 for v in values):9} {sum(v <= -3 for v in values):10}")


if __name__ == "__main__":
    main()
