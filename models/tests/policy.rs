use std::collections::HashMap;

use engine::{Color, Kind, Move, Position, Square};
use models::policy::{decode, move_index, MOVE_TYPES, POLICY_SIZE, UNDERPROMOTION_BASE};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

fn sq(name: &str) -> Square {
    name.parse().unwrap()
}

fn mv(text: &str) -> Move {
    engine::parse_coordinate(text).unwrap()
}

/// Positions along seeded random games from the start.
fn random_positions(seed: u64, games: usize, plies: usize) -> Vec<Position> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut out = Vec::new();
    for _ in 0..games {
        let mut pos = Position::start();
        for _ in 0..plies {
            let moves = pos.legal_moves();
            if moves.is_empty() {
                break;
            }
            out.push(pos);
            pos = pos.after(moves[rng.random_range(0..moves.len())]);
        }
    }
    out
}

/// The same move seen from the other side of the board.
fn mirrored(m: Move) -> Move {
    Move {
        from: m.from.flip_rank(),
        to: m.to.flip_rank(),
        promotion: m.promotion,
    }
}

#[test]
fn sizes() {
    assert_eq!(MOVE_TYPES, 89);
    assert_eq!(POLICY_SIZE, 8900);
}

#[test]
fn legal_moves_have_distinct_indices_that_decode() {
    let positions = random_positions(7, 40, 160);
    assert!(positions.len() > 4000, "{}", positions.len());
    let mut promotions = 0;
    for pos in &positions {
        let side = pos.side_to_move();
        let mut seen = HashMap::new();
        for m in pos.legal_moves() {
            let index = move_index(side, m).unwrap_or_else(|| panic!("{m} in {pos:?}"));
            assert!(index < POLICY_SIZE);
            if let Some(other) = seen.insert(index, m) {
                panic!("{m} and {other} share {index} in {pos:?}");
            }
            assert_eq!(decode(pos, index), Some(m), "{m} in {pos:?}");
            promotions += usize::from(m.promotion.is_some());
        }
    }
    assert!(promotions > 0, "random games should reach a promotion");
}

#[test]
fn only_legal_moves_decode() {
    for pos in random_positions(11, 10, 120).iter().step_by(15) {
        let decoded = (0..POLICY_SIZE).filter_map(|i| decode(pos, i)).count();
        assert_eq!(decoded, pos.legal_moves().len(), "{pos:?}");
    }
    assert_eq!(decode(&Position::start(), POLICY_SIZE), None);
}

#[test]
fn black_moves_index_like_mirrored_white_moves() {
    for pos in random_positions(3, 20, 100) {
        for m in pos.legal_moves() {
            let side = pos.side_to_move();
            assert_eq!(move_index(side, m), move_index(!side, mirrored(m)), "{m}");
        }
    }
}

#[test]
fn castling_is_the_kings_three_square_move() {
    let fen = "r4k3r/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/R4K3R w KQkq - 0 1";
    let white = Position::from_fen(fen).unwrap();
    let black = Position::from_fen(&fen.replace(" w ", " b ")).unwrap();
    for (pos, short, long) in [(white, "f1i1", "f1c1"), (black, "f10i10", "f10c10")] {
        let side = pos.side_to_move();
        // East 3 and west 3 from f1 in the frame.
        let f1 = sq("f1").index();
        assert_eq!(move_index(side, mv(short)), Some((2 * 9 + 2) * 100 + f1));
        assert_eq!(move_index(side, mv(long)), Some((6 * 9 + 2) * 100 + f1));
        for m in [short, long] {
            let index = move_index(side, mv(m)).unwrap();
            assert_eq!(decode(&pos, index), Some(mv(m)));
        }
    }
}

#[test]
fn pawn_steps_of_one_two_and_three_squares() {
    let white = Position::start();
    let black = white.after(mv("a2a3"));
    let e2 = sq("e2").index();
    for (pos, steps) in [
        (white, ["e2e3", "e2e4", "e2e5"]),
        (black, ["e9e8", "e9e7", "e9e6"]),
    ] {
        for (distance, m) in steps.into_iter().enumerate() {
            // North, distance 1..=3, from e2 in the frame.
            let index = distance * 100 + e2;
            assert_eq!(move_index(pos.side_to_move(), mv(m)), Some(index));
            assert_eq!(decode(&pos, index), Some(mv(m)));
        }
    }
}

#[test]
fn promotions_and_under_promotions() {
    // Pawns one step from promotion with a capture on either side.
    let white = Position::from_fen("n1n2k4/1P8/10/10/10/10/10/10/1p8/N1N2K4 w - - 0 1").unwrap();
    let black = Position::from_fen("n1n2k4/1P8/10/10/10/10/10/10/1p8/N1N2K4 b - - 0 1").unwrap();
    let b9 = sq("b9").index();
    for (pos, from, targets) in [
        (white, "b9", ["a10", "b10", "c10"]),
        (black, "b2", ["a1", "b1", "c1"]),
    ] {
        let side = pos.side_to_move();
        for (step, to) in targets.into_iter().enumerate() {
            let df = step as i32 - 1;
            // Queen promotion: the plain pawn move (NW, N or NE, distance 1).
            let dir = [7, 0, 1][step];
            let queen = Move {
                from: sq(from),
                to: sq(to),
                promotion: Some(Kind::Queen),
            };
            assert_eq!(move_index(side, queen), Some(dir * 9 * 100 + b9), "{df}");
            assert_eq!(decode(&pos, dir * 9 * 100 + b9), Some(queen));
            for (piece, kind) in [Kind::Knight, Kind::Bishop, Kind::Rook]
                .into_iter()
                .enumerate()
            {
                let under = Move {
                    promotion: Some(kind),
                    ..queen
                };
                let index = (UNDERPROMOTION_BASE + 3 * piece + step) * 100 + b9;
                assert_eq!(move_index(side, under), Some(index));
                assert_eq!(decode(&pos, index), Some(under));
            }
        }
        let legal = pos.legal_moves();
        assert_eq!(legal.iter().filter(|m| m.promotion.is_some()).count(), 12);
    }
}

#[test]
fn geometrically_impossible_moves_have_no_index() {
    let cases = [
        ("a1c2", Color::White, true),
        ("a1d2", Color::White, false),
        ("a1a1", Color::White, false),
        ("a1k10", Color::White, true),
        ("e9e10n", Color::White, true),
        ("e8e10n", Color::White, false),
        ("e9g10n", Color::White, false),
        ("e2e1n", Color::White, false),
        ("e2e1n", Color::Black, true),
        ("e9e10q", Color::White, true),
        ("e8e10q", Color::White, false),
    ];
    for (m, side, possible) in cases {
        assert_eq!(move_index(side, mv(m)).is_some(), possible, "{m}");
    }
}
