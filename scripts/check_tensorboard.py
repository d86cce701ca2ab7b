#!/usr/bin/env python3
"""Reads a TensorBoard event directory with TensorBoard's own reader and
lists its scalars: tag, point count, last step and last value.

Exits 1 if the directory has no readable scalars or an --expect tag is
missing; 2 if the directory does not exist or this Python lacks the
`tensorboard` package (pip install tensorboard).

    scripts/check_tensorboard.py runs/main --expect loss/policy
    scripts/check_tensorboard.py runs/main --json   # every point, as JSON
"""
import argparse
import json
import os
import sys


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir", help="directory holding events.out.tfevents.* files")
    parser.add_argument("--expect", action="append", default=[], metavar="TAG",
                        help="fail unless this scalar tag is present (repeatable)")
    parser.add_argument("--json", action="store_true",
                        help='print {tag: [[step, value, wall_time], ...]} instead of a table')
    args = parser.parse_args()
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        print(f"check_tensorboard: {sys.executable} lacks tensorboard; pip install tensorboard",
              file=sys.stderr)
        return 2

    if not os.path.isdir(args.dir):
        print(f"check_tensorboard: {args.dir}: no such directory", file=sys.stderr)
        return 2
    # size_guidance 0 keeps every point; the default samples 10,000 per tag.
    acc = event_accumulator.EventAccumulator(
        args.dir, size_guidance={event_accumulator.SCALARS: 0})
    acc.Reload()
    scalars = {tag: acc.Scalars(tag) for tag in sorted(acc.Tags()["scalars"])}

    if args.json:
        print(json.dumps({tag: [[e.step, e.value, e.wall_time] for e in events]
                          for tag, events in scalars.items()}))
    else:
        for tag, events in scalars.items():
            last = events[-1]
            print(f"{tag}\tpoints {len(events)}\tlast step {last.step}\tlast value {last.value:.6g}")

    if not scalars:
        print(f"check_tensorboard: {args.dir}: no readable scalars", file=sys.stderr)
        return 1
    missing = [tag for tag in args.expect if tag not in scalars]
    if missing:
        print(f"check_tensorboard: {args.dir}: missing tags: {', '.join(missing)}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
