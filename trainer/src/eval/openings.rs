//! Starting lines for matches: a small built-in book of quiet, balanced
//! openings, or random moves from the start position.

use engine::{Game, Move, MoveError, Position};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use thiserror::Error;

/// Coordinate moves from the start position: two quiet moves a side (pawns
/// two or three squares ahead, knights out), no captures or threats, so that
/// the side to move keeps no more than a small edge. Checked in the tests.
pub const BOOK: [&str; 16] = [
    "e2e4 e9e7 c1d3 c10d8",
    "f2f4 f9f7 h1g3 h10g8",
    "e2e5 f9f7 c1d3 h10g8",
    "d2d4 d9d7 h2h4 h9h7",
    "g2g4 g9g7 b1c3 i10h8",
    "c2c4 h9h7 i1h3 c10b8",
    "e2e4 f9f6 h1g3 b10c8",
    "f2f5 f9f7 c1b3 i10k8",
    "d2d5 e9e7 h1i3 c10d8",
    "g2g5 d9d7 b1c3 h10i8",
    "e2e4 e9e6 f2f4 f9f6",
    "b1c3 h10g8 e2e4 f9f7",
    "h1g3 c10d8 f2f4 e9e7",
    "d2d4 d9d7 e2e4 e9e7",
    "i2i4 b9b7 e2e4 f9f6",
    "c1d3 i10h8 e2e4 g9g6",
];

#[derive(Debug, Error)]
#[error("opening `{line}`, move {index}")]
pub struct OpeningError {
    line: String,
    index: usize,
    source: MoveError,
}

/// The moves of `line` (coordinate moves from the start position), each
/// checked legal under the full rules.
pub fn parse_line(line: &str) -> Result<Vec<Move>, OpeningError> {
    let mut pos = Position::start();
    line.split_whitespace()
        .enumerate()
        .map(|(i, text)| {
            let mv = pos.parse_move(text).map_err(|source| OpeningError {
                line: line.to_string(),
                index: i + 1,
                source,
            })?;
            pos = pos.after(mv);
            Ok(mv)
        })
        .collect()
}

/// Every line of [`BOOK`], parsed.
pub fn book() -> Result<Vec<Vec<Move>>, OpeningError> {
    BOOK.iter().map(|line| parse_line(line)).collect()
}

/// Up to `plies` random moves from the start position, none of which ends
/// the game.
pub fn random_line(plies: usize, seed: u64) -> Vec<Move> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut game = Game::new(Position::start());
    for _ in 0..plies {
        let pos = *game.position();
        let ongoing: Vec<_> = pos
            .legal_moves()
            .iter()
            .copied()
            .filter(|&mv| pos.after(mv).outcome().is_none())
            .collect();
        match ongoing.choose(&mut rng) {
            Some(&mv) => game.play_unchecked(mv),
            None => break,
        }
    }
    game.moves().to_vec()
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use engine::players::AlphaBeta;
    use engine::Color;

    use super::*;

    fn play(line: &[Move]) -> Game {
        let mut game = Game::new(Position::start());
        for &mv in line {
            game.play(mv).unwrap();
        }
        game
    }

    #[test]
    fn book_lines_are_legal_distinct_and_quiet() {
        let book = book().unwrap();
        let mut ends = HashSet::new();
        for (line, text) in book.iter().zip(BOOK) {
            let game = play(line);
            assert!(game.outcome().is_none(), "{text}");
            assert_eq!(game.position().side_to_move(), Color::White, "{text}");
            // No capture.
            assert_eq!(
                game.position().occupied().count(),
                Position::start().occupied().count(),
                "{text}"
            );
            assert!(ends.insert(game.position().key()), "repeated: {text}");
        }
    }

    #[test]
    fn book_lines_are_roughly_balanced() {
        for (line, text) in book().unwrap().iter().zip(BOOK) {
            let score = AlphaBeta::new(3, 0).search(&play(line)).score;
            assert!(score.abs() <= 100, "{text}: {score}");
        }
    }

    #[test]
    fn bad_lines_name_the_move() {
        let err = parse_line("e2e4 e9e7 e4e7").unwrap_err().to_string();
        assert!(err.contains("move 3") && err.contains("e4e7"), "{err}");
        let err = parse_line("e2e4 zz").unwrap_err().to_string();
        assert!(err.contains("move 2"), "{err}");
        // Rule 6: a third pawn move in a row.
        assert!(parse_line("e2e4 e9e7 d2d4 d9d7 c2c4").is_err());
    }

    #[test]
    fn random_lines_are_seeded_and_ongoing() {
        assert_eq!(random_line(4, 9), random_line(4, 9));
        assert_ne!(random_line(4, 9), random_line(4, 10));
        assert!(random_line(0, 9).is_empty());
        let line = random_line(4, 3);
        assert_eq!(line.len(), 4);
        assert!(play(&line).outcome().is_none());
    }
}
