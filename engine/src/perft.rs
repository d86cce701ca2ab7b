//! Perft: leaf counts of the legal-move tree, bulk-counted at the last ply.

use crate::position::{Move, Position};

/// Leaf nodes at `depth` plies. Perft ignores repetition, the fifty-move rule
/// and dead positions; a position without legal moves counts 0.
pub fn perft(pos: &Position, depth: u32) -> u64 {
    match depth {
        0 => 1,
        1 => pos.count_legal_moves() as u64,
        _ => {
            let mut nodes = 0;
            pos.for_each_legal_move(|mv| {
                nodes += perft(&pos.after(mv), depth - 1);
                false
            });
            nodes
        }
    }
}

/// Leaf counts under each root move.
pub fn divide(pos: &Position, depth: u32) -> Vec<(Move, u64)> {
    pos.legal_moves()
        .into_iter()
        .map(|mv| {
            let nodes = if depth <= 1 {
                1
            } else {
                perft(&pos.after(mv), depth - 1)
            };
            (mv, nodes)
        })
        .collect()
}
