//! Every row of ../shared/perft/*.tsv (independent engines' counts) must match.
//! Rows above `HEAVY_NODES` are `--ignored` (run them with `cargo test --release -- --ignored`).

use std::path::PathBuf;

use engine::{perft, Position, Rules, START_FEN};

const HEAVY_NODES: u64 = 20_000_000;

fn table(name: &str) -> Vec<Vec<String>> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/perft")
        .join(name);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    text.lines()
        .skip(1)
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.split('\t').map(str::to_string).collect())
        .collect()
}

fn start(fen: &str, moves: &str, rules: Rules) -> Position {
    let fen = if fen == "startpos" { START_FEN } else { fen };
    let mut pos = Position::from_fen_with_rules(fen, rules).expect("table FEN parses");
    for text in moves.split_whitespace() {
        let mv = pos.parse_move(text).unwrap_or_else(|e| panic!("{e}"));
        pos = pos.after(mv);
    }
    pos
}

fn check(rows: Vec<(String, Position, u32, u64)>, heavy: bool) {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (name, pos, depth, expected) in rows {
        if (expected > HEAVY_NODES) != heavy {
            continue;
        }
        let got = perft(&pos, depth);
        checked += 1;
        if got != expected {
            failures.push(format!(
                "{name} depth {depth}: expected {expected}, got {got}"
            ));
        }
    }
    assert!(checked > 0, "no rows checked");
    assert!(
        failures.is_empty(),
        "{} rows wrong:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn base_rows() -> Vec<(String, Position, u32, u64)> {
    table("base.tsv")
        .into_iter()
        .map(|r| {
            (
                r[0].clone(),
                start(&r[1], "", Rules::Base),
                r[2].parse().unwrap(),
                r[3].parse().unwrap(),
            )
        })
        .collect()
}

fn full_rows() -> Vec<(String, Position, u32, u64)> {
    table("full.tsv")
        .into_iter()
        .map(|r| {
            (
                r[0].clone(),
                start(&r[1], &r[2], Rules::Full),
                r[3].parse().unwrap(),
                r[4].parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn base_rules_table() {
    check(base_rows(), false);
}

#[test]
fn full_rules_table() {
    check(full_rows(), false);
}

#[test]
#[ignore = "billions of nodes: run with --release -- --ignored"]
fn base_rules_table_heavy() {
    check(base_rows(), true);
}

#[test]
#[ignore = "run with --release -- --ignored"]
fn full_rules_table_heavy() {
    check(full_rows(), true);
}
