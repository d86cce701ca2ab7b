//! Supervised bootstrap: games from PGN (alpha-beta games from `mixchess
//! play` or `mixzero arena --pgn-out`, a user's own games) as training data
//! beside self-play. Each move played becomes a policy target with all its
//! weight on that move; the game's result is its value target where the
//! position or the record decides it. A move's `[%eval]` (alpha-beta games
//! from `mixzero arena` carry them) stands where self-play keeps its search
//! value, so `value_q_share` blends the teacher's evaluation into the value
//! target; a move without one stands in the result, leaving the target as
//! the result.

use engine::pgn::{read_pgns, PgnGame};
use engine::search::Score;
use engine::{Outcome, Reason};

use crate::selfplay::data::{GameRecord, MoveRecord};

/// The `network` number of imported games: none played them.
pub const IMPORTED: u32 = u32::MAX;

/// What a PGN text gave: the games as records, and a line per game left out.
#[derive(Debug, Default)]
pub struct Imported {
    pub games: Vec<GameRecord>,
    pub skipped: Vec<String>,
}

/// Reads every game of `text` as a training record. A game with no moves or
/// no result is left out with a note; a text that is not PGN is an error.
pub fn games_from_pgn(text: &str) -> Result<Imported, engine::PgnError> {
    let mut imported = Imported::default();
    for (i, pgn) in read_pgns(text)?.into_iter().enumerate() {
        match record(&pgn) {
            Ok(game) => imported.games.push(game),
            Err(why) => imported.skipped.push(format!("game {}: {why}", i + 1)),
        }
    }
    Ok(imported)
}

fn record(pgn: &PgnGame) -> Result<GameRecord, &'static str> {
    let game = &pgn.game;
    if game.moves().is_empty() {
        return Err("no moves");
    }
    let outcome = game.outcome().ok_or("no result (`*`)")?;
    let mut pos = *game.start();
    let moves = game
        .moves()
        .iter()
        .zip(&pgn.evals)
        .map(|(&mv, eval)| {
            let result = match outcome.winner {
                Some(winner) if winner == pos.side_to_move() => 1.0,
                Some(_) => -1.0,
                None => 0.0,
            };
            let visits = pos
                .legal_moves()
                .iter()
                .map(|&m| (m == mv) as u32)
                .collect();
            pos = pos.after(mv);
            MoveRecord {
                mv,
                visits,
                search_value: eval.map_or(result, Score::value),
            }
        })
        .collect();
    Ok(GameRecord {
        start: *game.start(),
        moves,
        outcome: result_reason(pgn, outcome),
        network: IMPORTED,
        baseline: None,
    })
}

/// The PGN reader calls every result the final position does not decide an
/// adjudication. A decisive one whose `Termination` is absent, `normal` or
/// `resignation` is a resignation (a result to learn); a draw by agreement,
/// a time forfeit or a length cap stays an adjudication (none).
fn result_reason(pgn: &PgnGame, outcome: Outcome) -> Outcome {
    if outcome.reason != Reason::Adjudication || outcome.winner.is_none() {
        return outcome;
    }
    let termination = pgn.tag("Termination").map(str::to_ascii_lowercase);
    match termination.as_deref() {
        None | Some("normal") | Some("resignation") => Outcome {
            reason: Reason::Resignation,
            ..outcome
        },
        Some(_) => outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::Color;

    #[test]
    fn games_become_one_hot_policy_targets_with_their_results() {
        let text = r#"[Variant "Chess-mix"]
[Result "0-1"]

1. e5 {[%eval 0.50]} e6 {[%eval #-3]} 2. Nd3 Nd8 0-1

[Variant "Chess-mix"]
[Result "1-0"]
[Termination "time forfeit"]

1. e5 1-0

[Variant "Chess-mix"]
[Result "*"]

1. e5 *

[Variant "Chess-mix"]
[Result "1/2-1/2"]

1/2-1/2
"#;
        let imported = games_from_pgn(text).unwrap();
        assert_eq!(imported.games.len(), 2);
        assert_eq!(imported.skipped.len(), 2, "{:?}", imported.skipped);
        let first = &imported.games[0];
        assert_eq!(first.moves.len(), 4);
        assert_eq!(
            first.outcome,
            Outcome::win(Color::Black, Reason::Resignation)
        );
        let mut pos = first.start;
        for m in &first.moves {
            let legal = pos.legal_moves();
            assert_eq!(m.visits.len(), legal.len());
            assert_eq!(m.visits.iter().sum::<u32>(), 1);
            let played = m.visits.iter().position(|&v| v == 1).unwrap();
            assert_eq!(legal[played], m.mv);
            pos = pos.after(m.mv);
        }
        assert_eq!(first.samples(), 4);
        // Evals for the mover where given (Black's mate is its win), else
        // the result for the mover.
        let values: Vec<f32> = first.moves.iter().map(|m| m.search_value).collect();
        assert_eq!(values, [Score::Centipawns(50).value(), 1.0, -1.0, 1.0]);
        // A time forfeit says nothing about the position: no result to learn.
        assert_eq!(
            imported.games[1].outcome,
            Outcome::win(Color::White, Reason::Adjudication)
        );
        assert!(games_from_pgn("[Variant \"Chess\"]\n\n1. e4 *").is_err());
    }
}
