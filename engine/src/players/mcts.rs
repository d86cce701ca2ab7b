//! A player that searches with MCTS over any [`Evaluator`] and plays the
//! most visited move.

use std::sync::Arc;

use crate::eval::Evaluator;
use crate::game::Game;
use crate::mcts::{Search, SearchConfig};
use crate::players::Player;
use crate::position::{Move, Position};
use crate::search::Score;

/// Runs `playouts` new playouts per move and plays [`Search::best_move`].
///
/// The tree is kept between moves: when the game continued from the last
/// search's root, the search follows the moves played since, so visits
/// already spent below them count. Any other game gets a fresh search.
///
/// `choose` never fails: if the evaluator does, it plays the best move
/// searched so far, else the first legal move, and counts the failure
/// (see [`MctsPlayer::eval_failures`]) so a caller can report it.
pub struct MctsPlayer {
    name: String,
    evaluator: Arc<dyn Evaluator>,
    config: SearchConfig,
    playouts: u32,
    /// The kept search with the game start and moves leading to its root.
    kept: Option<Kept>,
    eval_failures: u64,
}

struct Kept {
    search: Search,
    start: Position,
    line: Vec<Move>,
}

impl MctsPlayer {
    pub fn new(evaluator: Arc<dyn Evaluator>, playouts: u32, config: SearchConfig) -> MctsPlayer {
        MctsPlayer {
            name: format!("mcts:{playouts}"),
            evaluator,
            config,
            playouts: playouts.max(1),
            kept: None,
            eval_failures: 0,
        }
    }

    /// Replaces the default name `mcts:PLAYOUTS` (say, by the network's path).
    pub fn with_name(mut self, name: impl Into<String>) -> MctsPlayer {
        self.name = name.into();
        self
    }

    /// Moves chosen without a complete search because the evaluator failed.
    pub fn eval_failures(&self) -> u64 {
        self.eval_failures
    }

    /// Searches the current position of `game` (which is not over) while
    /// `budget`, asked before every batch of leaves, allows more playouts
    /// (0 ends the search), and returns the best move ([`Search::best_move`])
    /// that `allowed` accepts, or the first such legal move. `planned` is
    /// the playouts the budget will allow, when known ([`Search::plan`]).
    /// The tree is kept for the next call; if the evaluator fails, the
    /// search ends there and the failure is counted.
    pub fn search_among(
        &mut self,
        game: &Game,
        allowed: impl Fn(Move) -> bool,
        planned: Option<u32>,
        mut budget: impl FnMut(&Search) -> usize,
    ) -> Move {
        let mut kept = self.search_for(game);
        if let Some(playouts) = planned {
            kept.search.plan(playouts);
        }
        loop {
            let playouts = budget(&kept.search);
            if playouts == 0 {
                break;
            }
            if kept.search.step(self.evaluator.as_ref(), playouts).is_err() {
                self.eval_failures += 1;
                break;
            }
        }
        // A failed search may hold no root children yet; the tree stays valid
        // (failed leaves are put back), so it is kept for the next move.
        let mv = kept.search.best_move_among(&allowed).unwrap_or_else(|| {
            let moves = game.position().legal_moves();
            moves
                .iter()
                .copied()
                .find(|&mv| allowed(mv))
                .unwrap_or(moves[0])
        });
        self.kept = Some(kept);
        mv
    }

    /// [`MctsPlayer::search_among`] over every legal move.
    pub fn search_until(
        &mut self,
        game: &Game,
        planned: Option<u32>,
        budget: impl FnMut(&Search) -> usize,
    ) -> Move {
        self.search_among(game, |_| true, planned, budget)
    }

    /// Drops the kept tree: the next search starts afresh.
    pub fn forget_tree(&mut self) {
        self.kept = None;
    }

    /// The search behind the last move chosen, if any.
    pub fn last_search(&self) -> Option<&Search> {
        self.kept.as_ref().map(|kept| &kept.search)
    }

    /// The kept search moved on to the current position of `game`, or a new one.
    fn search_for(&mut self, game: &Game) -> Kept {
        if let Some(mut kept) = self.kept.take() {
            let continues = kept.start == *game.start()
                && game.moves().len() >= kept.line.len()
                && game.moves()[..kept.line.len()] == kept.line[..];
            if continues {
                for &mv in &game.moves()[kept.line.len()..] {
                    kept.search.advance(mv);
                }
                kept.line = game.moves().to_vec();
                return kept;
            }
        }
        Kept {
            search: Search::new(self.config, game),
            start: *game.start(),
            line: game.moves().to_vec(),
        }
    }
}

impl Player for MctsPlayer {
    fn name(&self) -> String {
        self.name.clone()
    }

    fn choose(&mut self, game: &Game) -> Move {
        let playouts = self.playouts;
        let mut target = None;
        self.search_until(game, Some(playouts), |search| {
            let target = *target.get_or_insert(search.root_visits().saturating_add(playouts));
            target.saturating_sub(search.root_visits()) as usize
        })
    }

    fn score(&self) -> Option<Score> {
        let search = self
            .last_search()
            .filter(|search| search.root_visits() > 0)?;
        Some(Score::from_value(search.root_wdl().value()))
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::eval::{EvalError, EvalRequest, Evaluation, UniformEvaluator};
    use crate::game::Reason;
    use crate::players::{play_game, RandomPlayer};

    fn uniform(playouts: u32) -> MctsPlayer {
        MctsPlayer::new(
            Arc::new(UniformEvaluator),
            playouts,
            SearchConfig::default(),
        )
    }

    #[test]
    fn finds_mate_in_one() {
        let game =
            Game::new(Position::from_fen("k9/pp8/10/10/10/10/10/10/10/5K3R w - - 0 17").unwrap());
        let mut mcts = uniform(200);
        assert_eq!(mcts.score(), None, "nothing searched yet");
        let mv = mcts.choose(&game);
        assert_eq!(mv.to_string(), "k1k10");
        // The root value, mostly the mate's win, on the centipawn scale.
        let score = mcts.score().expect("a search scores its move");
        assert!(score.value() > 0.5, "{score:?}");
    }

    #[test]
    fn plays_legal_moves_against_random() {
        let mut mcts = uniform(16);
        let mut random = RandomPlayer::new(7);
        let game = play_game(&mut mcts, &mut random, Position::start(), 60);
        let outcome = game.outcome().expect("the game ends");
        if outcome.reason == Reason::Adjudication {
            assert_eq!(outcome.winner, None, "no move was refused");
        }
        assert_eq!(mcts.eval_failures(), 0);

        // Another game does not continue the kept tree's line: a fresh search.
        let mv = mcts.choose(&Game::new(Position::start()));
        assert!(Position::start().play(mv).is_ok());
        assert_eq!(mcts.kept.as_ref().unwrap().search.root_visits(), 16);
    }

    #[test]
    fn keeps_the_subtree_of_the_moves_played() {
        let mut mcts = uniform(400);
        let mut game = Game::new(Position::start());
        game.play(mcts.choose(&game)).unwrap();
        // The reply the search looked at most already has visits of its own.
        let pv = mcts.kept.as_ref().unwrap().search.pv();
        game.play(pv[1]).unwrap();
        mcts.choose(&game);
        let kept = mcts.kept.as_ref().unwrap();
        assert!(
            kept.search.root_visits() > 400,
            "{}",
            kept.search.root_visits()
        );
        assert_eq!(kept.line, game.moves());
    }

    struct Broken;

    impl Evaluator for Broken {
        fn evaluate_batch(&self, _: &[EvalRequest<'_>]) -> Result<Vec<Evaluation>, EvalError> {
            Err(EvalError::Disconnected)
        }
    }

    #[test]
    fn a_failing_evaluator_still_gets_a_legal_move() {
        let mut mcts = MctsPlayer::new(Arc::new(Broken), 8, SearchConfig::default());
        let game = Game::new(Position::start());
        let mv = mcts.choose(&game);
        assert_eq!(mv, Position::start().legal_moves()[0]);
        assert_eq!(mcts.eval_failures(), 1);
        assert_eq!(mcts.name(), "mcts:8");
    }
}
