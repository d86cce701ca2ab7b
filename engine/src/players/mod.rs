//! Baseline players: uniform random, one-ply greedy and a fixed-depth
//! alpha-beta searcher, plus a spec parser and a game loop to pit them.

mod alphabeta;
pub mod mcts;

use std::ops::ControlFlow;

use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use thiserror::Error;

use crate::error::MoveError;
use crate::game::{Game, Outcome, Reason};
use crate::position::{Move, Position};
use crate::search::Score;
use crate::types::{Color, Kind};

pub use alphabeta::{AlphaBeta, SearchResult, MATE_SCORE, MAX_DEPTH};

/// Something that picks moves.
pub trait Player {
    /// A short name for game records, such as the spec it was made from.
    fn name(&self) -> String;
    /// A legal move in the current position of `game`, which is not over.
    fn choose(&mut self, game: &Game) -> Move;
    /// What the last [`Player::choose`] found the position worth, from the
    /// mover's point of view; `None` for a player that does not evaluate
    /// (or did not search that move).
    fn score(&self) -> Option<Score> {
        None
    }
}

/// Material values in centipawns, indexed by [`Kind::index`]; the king has none.
pub const PIECE_VALUES: [i32; 6] = [100, 300, 325, 500, 900, 0];

/// Material of `color` minus that of its opponent.
pub fn material_balance(pos: &Position, color: Color) -> i32 {
    Kind::ALL
        .iter()
        .map(|&kind| {
            let diff =
                pos.pieces(color, kind).count() as i32 - pos.pieces(!color, kind).count() as i32;
            PIECE_VALUES[kind.index()] * diff
        })
        .sum()
}

/// Plays uniformly at random among the legal moves.
pub struct RandomPlayer {
    rng: SmallRng,
}

impl RandomPlayer {
    pub fn new(seed: u64) -> RandomPlayer {
        RandomPlayer {
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// One of `moves`, uniformly at random.
    fn pick(&mut self, moves: &[Move]) -> Move {
        *moves
            .choose(&mut self.rng)
            .expect("choose is only called while the game is not over")
    }
}

impl Player for RandomPlayer {
    fn name(&self) -> String {
        "random".to_string()
    }

    fn choose(&mut self, game: &Game) -> Move {
        self.pick(&game.position().legal_moves())
    }
}

/// Plays a move that wins at once if there is one, else a move leaving the
/// best material balance, without looking at the replies; ties at random.
pub struct GreedyPlayer {
    ties: RandomPlayer,
}

impl GreedyPlayer {
    pub fn new(seed: u64) -> GreedyPlayer {
        GreedyPlayer {
            ties: RandomPlayer::new(seed),
        }
    }
}

impl Player for GreedyPlayer {
    fn name(&self) -> String {
        "greedy".to_string()
    }

    fn choose(&mut self, game: &Game) -> Move {
        let pos = game.position();
        let us = pos.side_to_move();
        let mut best = Vec::new();
        let mut best_score = i32::MIN;
        for mv in pos.legal_moves() {
            let next = pos.after(mv);
            let score = match next.outcome_without_moves() {
                Some(Outcome {
                    winner: Some(winner),
                    ..
                }) if winner == us => i32::MAX,
                _ => material_balance(&next, us),
            };
            if score > best_score {
                best_score = score;
                best.clear();
            }
            if score == best_score {
                best.push(mv);
            }
        }
        self.ties.pick(&best)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PlayerSpecError {
    #[error("unknown player `{0}` (expected random, greedy or alphabeta:DEPTH)")]
    Unknown(String),
    #[error("alpha-beta depth `{0}` is not a number from 1 to {max}", max = MAX_DEPTH)]
    Depth(String),
}

/// Builds a player from `random`, `greedy` or `alphabeta:D`.
pub fn player_from_spec(spec: &str, seed: u64) -> Result<Box<dyn Player + Send>, PlayerSpecError> {
    match spec.split_once(':') {
        None if spec == "random" => Ok(Box::new(RandomPlayer::new(seed))),
        None if spec == "greedy" => Ok(Box::new(GreedyPlayer::new(seed))),
        Some(("alphabeta", depth)) => {
            let depth = depth
                .parse::<u32>()
                .ok()
                .filter(|d| (1..=MAX_DEPTH).contains(d))
                .ok_or_else(|| PlayerSpecError::Depth(depth.to_string()))?;
            Ok(Box::new(AlphaBeta::new(depth, seed)))
        }
        _ => Err(PlayerSpecError::Unknown(spec.to_string())),
    }
}

/// Checks that every spec of the config key `key` builds a player.
pub fn check_specs(key: &'static str, specs: &[String]) -> Result<(), crate::InvalidKey> {
    for spec in specs {
        player_from_spec(spec, 0).map_err(|e| crate::InvalidKey::new(key, e.to_string()))?;
    }
    Ok(())
}

/// Plays one game from `start` until it is over, or adjudicates a draw after
/// `max_plies` plies. A player that returns an illegal move loses by adjudication.
pub fn play_game(
    white: &mut dyn Player,
    black: &mut dyn Player,
    start: Position,
    max_plies: usize,
) -> Game {
    play_scored_game(white, black, start, max_plies).0
}

/// [`play_game`], with each move's [`Player::score`] (for `[%eval]`).
pub fn play_scored_game(
    white: &mut dyn Player,
    black: &mut dyn Player,
    start: Position,
    max_plies: usize,
) -> (Game, Vec<Option<Score>>) {
    let mut game = Game::new(start);
    let mut scores = Vec::new();
    let choose = |game: &Game| {
        let (mv, score) = match game.position().side_to_move() {
            Color::White => (white.choose(game), white.score()),
            Color::Black => (black.choose(game), black.score()),
        };
        scores.push(score);
        Ok::<_, std::convert::Infallible>(mv)
    };
    play_out(&mut game, max_plies, choose, |_| ControlFlow::Continue(()));
    // An illegal move was scored but not played.
    scores.truncate(game.moves().len());
    (game, scores)
}

/// How [`play_out`] ended.
#[derive(Debug)]
pub enum PlayedOut<E> {
    /// By the rules, or by a draw at the ply cap.
    Over,
    /// The side to move could not choose (`Err`) or chose an illegal move
    /// (`Ok`): it lost by adjudication.
    Forfeit(Color, Result<MoveError, E>),
    /// `watch` broke off: the game is unfinished.
    Stopped,
}

/// The one game loop: plays `game` on until it is over, asking `choose` for
/// each move, adjudicating a draw once it holds `max_plies` plies and a
/// loss for a side that cannot move or moves illegally. `watch` sees the
/// game before each move and at the end, and may break the game off.
pub fn play_out<E>(
    game: &mut Game,
    max_plies: usize,
    mut choose: impl FnMut(&Game) -> Result<Move, E>,
    mut watch: impl FnMut(&Game) -> ControlFlow<()>,
) -> PlayedOut<E> {
    while game.outcome().is_none() {
        if watch(game).is_break() {
            return PlayedOut::Stopped;
        }
        if game.moves().len() >= max_plies {
            game.adjudicate(Outcome::draw(Reason::Adjudication));
            break;
        }
        let mover = game.position().side_to_move();
        let why = match choose(game) {
            Ok(mv) => match game.play(mv) {
                Ok(()) => continue,
                Err(illegal) => Ok(illegal),
            },
            Err(e) => Err(e),
        };
        game.adjudicate(Outcome::win(!mover, Reason::Adjudication));
        let _ = watch(game);
        return PlayedOut::Forfeit(mover, why);
    }
    let _ = watch(game);
    PlayedOut::Over
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::test_game as game;

    #[test]
    fn random_plays_only_legal_moves() {
        for seed in 0..4 {
            let mut white = RandomPlayer::new(seed);
            let mut black = RandomPlayer::new(seed + 10);
            let game = play_game(&mut white, &mut black, Position::start(), 300);
            let outcome = game.outcome().expect("the game ends");
            if outcome.reason == Reason::Adjudication {
                assert_eq!(outcome.winner, None, "no move was refused");
            }
            let mut pos = Position::start();
            for &mv in game.moves() {
                pos = pos.play(mv).expect("legal");
            }
        }
    }

    #[test]
    fn random_differs_by_seed_and_repeats_with_it() {
        let run = |seed| {
            let mut w = RandomPlayer::new(seed);
            let mut b = RandomPlayer::new(seed + 100);
            play_game(&mut w, &mut b, Position::start(), 40)
                .moves()
                .to_vec()
        };
        assert_eq!(run(3), run(3));
        assert_ne!(run(3), run(4));
    }

    #[test]
    fn greedy_takes_a_free_queen() {
        // The knight on d4 can take the undefended queen on e6.
        let g = game("5k4/10/10/10/4q5/10/3N6/10/10/5K4 w - - 0 17");
        for seed in 0..5 {
            assert_eq!(GreedyPlayer::new(seed).choose(&g).to_string(), "d4e6");
        }
    }

    #[test]
    fn greedy_prefers_mate_to_material() {
        // Ra1-a10 mates; Rg5xg6 would win a knight.
        let g = game("5k4/4ppp3/10/10/6n3/6R3/10/10/10/R4K4 w - - 0 17");
        assert_eq!(GreedyPlayer::new(0).choose(&g).to_string(), "a1a10");
    }

    #[test]
    fn specs_parse_and_reject() {
        assert_eq!(player_from_spec("random", 1).unwrap().name(), "random");
        assert_eq!(player_from_spec("greedy", 1).unwrap().name(), "greedy");
        assert_eq!(
            player_from_spec("alphabeta:3", 1).unwrap().name(),
            "alphabeta:3"
        );
        for bad in ["", "Random", "minimax", "alphabeta", "random:1"] {
            assert!(
                matches!(player_from_spec(bad, 0), Err(PlayerSpecError::Unknown(_))),
                "{bad}"
            );
        }
        for bad in [
            "alphabeta:",
            "alphabeta:0",
            "alphabeta:x",
            "alphabeta:-1",
            "alphabeta:99",
        ] {
            assert!(
                matches!(player_from_spec(bad, 0), Err(PlayerSpecError::Depth(_))),
                "{bad}"
            );
        }
    }

    #[test]
    fn play_game_adjudicates_at_the_cap() {
        let mut w = RandomPlayer::new(0);
        let mut b = RandomPlayer::new(1);
        let game = play_game(&mut w, &mut b, Position::start(), 6);
        assert_eq!(game.moves().len(), 6);
        assert_eq!(game.outcome(), Some(Outcome::draw(Reason::Adjudication)));
    }
}
