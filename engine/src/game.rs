//! Game outcomes (RULES.md §7) and a game record with the history that
//! threefold repetition needs.

use std::fmt;

use serde::Serialize;

use crate::error::MoveError;
use crate::position::{Move, Position};
use crate::types::{Color, Kind};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Reason {
    Checkmate,
    /// The side to move had to move its king (rule 5) and could not.
    KingQuota,
    Stalemate,
    Threefold,
    FiftyMove,
    DeadPosition,
    /// Ended by an adjudicator (game-length cap, time, illegal move).
    Adjudication,
    /// A side gave up.
    Resignation,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Checkmate => "checkmate",
            Reason::KingQuota => "king-quota",
            Reason::Stalemate => "stalemate",
            Reason::Threefold => "threefold",
            Reason::FiftyMove => "fifty-move",
            Reason::DeadPosition => "dead-position",
            Reason::Adjudication => "adjudication",
            Reason::Resignation => "resignation",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Outcome {
    /// `None` for a draw.
    pub winner: Option<Color>,
    pub reason: Reason,
}

impl Outcome {
    pub fn win(winner: Color, reason: Reason) -> Outcome {
        Outcome {
            winner: Some(winner),
            reason,
        }
    }

    pub fn draw(reason: Reason) -> Outcome {
        Outcome {
            winner: None,
            reason,
        }
    }

    /// `1-0`, `0-1` or `1/2-1/2`.
    pub fn result(&self) -> &'static str {
        match self.winner {
            Some(Color::White) => "1-0",
            Some(Color::Black) => "0-1",
            None => "1/2-1/2",
        }
    }

    /// Score for `color`: 1, 0.5 or 0.
    pub fn score(&self, color: Color) -> f64 {
        match self.winner {
            Some(w) if w == color => 1.0,
            Some(_) => 0.0,
            None => 0.5,
        }
    }
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Outcome", 2)?;
        st.serialize_field("result", self.result())?;
        st.serialize_field("reason", self.reason.as_str())?;
        st.end()
    }
}

impl Position {
    /// The outcome decided by this position alone: [`Position::outcome_with`]
    /// for a position that did not occur before.
    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome_with(self.has_legal_moves(), 0)
    }

    /// The outcome of this position, which has legal moves or not
    /// (`has_moves`, known to the caller) and occurred `repetitions` times
    /// before: no legal move first (checkmate, `king-quota` loss,
    /// stalemate), then threefold repetition, the fifty-move rule and a dead
    /// position. The one statement of that precedence (RULES.md §7).
    pub fn outcome_with(&self, has_moves: bool, repetitions: usize) -> Option<Outcome> {
        if !has_moves {
            return Some(self.outcome_of_no_move());
        }
        if repetitions >= 2 {
            return Some(Outcome::draw(Reason::Threefold));
        }
        self.draw_by_clock_or_material()
    }

    /// The decision when the side to move has no legal move.
    pub fn outcome_without_moves(&self) -> Option<Outcome> {
        (!self.has_legal_moves()).then(|| self.outcome_of_no_move())
    }

    /// What having no legal move means for the side to move.
    fn outcome_of_no_move(&self) -> Outcome {
        let us = self.side_to_move();
        if self.in_check() {
            Outcome::win(!us, Reason::Checkmate)
        } else if self.must_move_king(us) {
            Outcome::win(!us, Reason::KingQuota)
        } else {
            Outcome::draw(Reason::Stalemate)
        }
    }

    /// Fifty-move rule or bare king against bare king (the only dead position
    /// Chess-mix detects, RULES.md §7). Assumes the side to move has a move.
    pub fn draw_by_clock_or_material(&self) -> Option<Outcome> {
        if self.halfmove_clock() >= 100 {
            Some(Outcome::draw(Reason::FiftyMove))
        } else if self.occupied() == self.kind(Kind::King) {
            Some(Outcome::draw(Reason::DeadPosition))
        } else {
            None
        }
    }
}

/// A game: its start, the moves played and the key of every position since
/// the last capture or pawn move (earlier ones can never recur).
#[derive(Clone, Debug)]
pub struct Game {
    start: Position,
    position: Position,
    moves: Vec<Move>,
    keys: Vec<u64>,
    adjudicated: Option<Outcome>,
}

/// A game from a FEN that a test knows to be valid.
#[cfg(test)]
pub(crate) fn test_game(fen: &str) -> Game {
    Game::new(Position::from_fen(fen).unwrap())
}

impl Game {
    pub fn new(start: Position) -> Game {
        Game {
            start,
            position: start,
            moves: Vec::new(),
            keys: vec![start.key()],
            adjudicated: None,
        }
    }

    pub fn start(&self) -> &Position {
        &self.start
    }

    pub fn position(&self) -> &Position {
        &self.position
    }

    pub fn moves(&self) -> &[Move] {
        &self.moves
    }

    /// Plays a move after checking that it is legal.
    pub fn play(&mut self, mv: Move) -> Result<(), MoveError> {
        let next = self.position.play(mv)?;
        self.push(mv, next);
        Ok(())
    }

    /// Plays a move known to be legal.
    pub fn play_unchecked(&mut self, mv: Move) {
        let next = self.position.after(mv);
        self.push(mv, next);
    }

    fn push(&mut self, mv: Move, next: Position) {
        if next.halfmove_clock() == 0 {
            self.keys.clear();
        }
        self.keys.push(next.key());
        self.moves.push(mv);
        self.position = next;
    }

    /// How many times the current position occurred before (0, 1, 2...).
    pub fn repetitions(&self) -> usize {
        let current = *self.keys.last().expect("keys hold the current position");
        self.keys[..self.keys.len() - 1]
            .iter()
            .rev()
            .skip(1)
            .step_by(2)
            .filter(|&&k| k == current)
            .count()
    }

    /// Ends the game by adjudication (resignation, length cap, time).
    pub fn adjudicate(&mut self, outcome: Outcome) {
        self.adjudicated = Some(outcome);
    }

    /// The outcome by the rules ([`Position::outcome_with`]), or an
    /// adjudication.
    pub fn outcome(&self) -> Option<Outcome> {
        self.position
            .outcome_with(self.position.has_legal_moves(), self.repetitions())
            .or(self.adjudicated)
    }
}
