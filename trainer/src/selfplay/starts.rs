//! Sparse starts: the start position with pieces taken off at random.
//!
//! Games from the full start position between young networks mostly reach
//! the length cap undecided, so they teach the value nothing and the policy
//! no mates. A share of self-play games (`[selfplay] sparse_start_share`)
//! starts instead from the start position thinned out: each side keeps each
//! of its non-king pieces with a chance of its own, so most of these games
//! are short and unbalanced, and the rules decide them. Their results are
//! true results; no heuristic enters a target. (KataGo likewise starts a
//! share of its games away from the empty board.)

use engine::{Bitboard, Kind, Position};
use rand::Rng;

/// The start position with pieces taken off at random (never the kings).
/// Each side's keep chance is drawn from `[low, high]` (`[selfplay]
/// sparse_keep`), independently, so that one side is usually well ahead and
/// the other has something left to lose. Castling rights go with their
/// rooks; White moves, at move 1.
pub fn sparse_start([low, high]: [f64; 2], rng: &mut impl Rng) -> Position {
    let start = Position::start();
    let mut draw = || rng.random_range(low..=high);
    let keep_chance = [draw(), draw()];
    let taken_off: Bitboard = start
        .occupied()
        .filter(|&sq| {
            let piece = start.piece_at(sq).expect("an occupied square");
            piece.kind != Kind::King && !rng.random_bool(keep_chance[piece.color.index()])
        })
        .collect();
    // Nothing on its start square attacks the enemy king's (f1 or f10), so
    // any subset of the start position is legal.
    start
        .without_pieces(taken_off)
        .expect("the start position thinned out is a legal position")
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::{CastlingSide, Color, Piece, Square};
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    #[test]
    fn the_keep_range_bounds_what_is_left() {
        let mut rng = SmallRng::seed_from_u64(2);
        let bare = sparse_start([0.0, 0.0], &mut rng);
        assert_eq!(bare.occupied().count(), 2, "{}", bare.fen());
        assert_eq!(sparse_start([1.0, 1.0], &mut rng), Position::start());
    }

    #[test]
    fn sparse_starts_keep_the_kings_and_only_start_pieces() {
        let start = Position::start();
        let mut rng = SmallRng::seed_from_u64(1);
        let mut counts = Vec::new();
        for _ in 0..500 {
            let pos = sparse_start([0.1, 0.7], &mut rng);
            for color in Color::ALL {
                assert_eq!(pos.king(color), start.king(color));
            }
            for sq in Square::all() {
                if let Some(piece) = pos.piece_at(sq) {
                    assert_eq!(start.piece_at(sq), Some(piece), "{}", pos.fen());
                }
            }
            // The position is one the rules accept and play on.
            assert!(!pos.in_check());
            assert!(pos.outcome().is_none() || pos.occupied().count() == 2);
            let rights = pos.castling_rights();
            for color in Color::ALL {
                for side in [CastlingSide::Short, CastlingSide::Long] {
                    let rook = match side {
                        CastlingSide::Short => Square::from_coords(9, 0),
                        CastlingSide::Long => Square::from_coords(0, 0),
                    };
                    let rook = if color == Color::White {
                        rook
                    } else {
                        rook.flip_rank()
                    };
                    assert_eq!(
                        rights.has(color, side),
                        pos.piece_at(rook) == Some(Piece::new(color, Kind::Rook))
                    );
                }
            }
            counts.push([
                pos.color(Color::White).count(),
                pos.color(Color::Black).count(),
            ]);
        }
        // Thinned out, and unbalanced more often than not.
        let pieces = |c: usize| counts.iter().map(|n| n[c]).sum::<u32>() as f64 / 500.0;
        assert!(pieces(0) > 4.0 && pieces(0) < 14.0, "{}", pieces(0));
        assert!(pieces(1) > 4.0 && pieces(1) < 14.0, "{}", pieces(1));
        let unbalanced = counts.iter().filter(|n| n[0].abs_diff(n[1]) >= 3).count();
        assert!(unbalanced > 250, "{unbalanced}");
    }
}
