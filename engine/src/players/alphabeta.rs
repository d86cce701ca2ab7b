//! Negamax alpha-beta: principal variation search with iterative deepening
//! (to a fixed depth, or within [`SearchLimits`]), a transposition table,
//! killer and history move ordering, check extensions and a capture
//! quiescence search. The evaluation is material plus mobility, plus a
//! penalty for a king boxed in near a rule 5 deadline.

use std::sync::Arc;

use arrayvec::ArrayVec;
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;

use super::{Player, PIECE_VALUES};
use crate::attacks::{bishop_attacks, king_attacks, knight_attacks, queen_attacks, rook_attacks};
use crate::bitboard::Bitboard;
use crate::game::Game;
use crate::movegen::{MoveList, PieceMoves, MAX_MOVES};
use crate::position::{Move, Position};
use crate::rules::control_period;
use crate::search::{Score, SearchControl, SearchInfo, SearchLimits};
use crate::types::{Color, Kind, NUM_SQUARES};

/// Deepest search `alphabeta:D` accepts.
pub const MAX_DEPTH: u32 = 16;
/// Score of mate at the root; mate in `n` plies scores `MATE_SCORE - n`.
pub const MATE_SCORE: i32 = 30_000;
/// Scores beyond this are mates.
const MATE_BOUND: i32 = MATE_SCORE - 1_000;
const INFINITY: i32 = MATE_SCORE + 1;
/// Search stack limit: quiescence stops and evaluates here.
const MAX_PLY: usize = 96;
const TT_BITS: u32 = 17;
/// Mobility weight per attacked square, by kind (pawns and kings get none).
const MOBILITY: [i32; 6] = [0, 4, 4, 2, 1, 0];
/// Penalty for a king with no free square 2, 1 or 0 moves before the forced king move.
const BOXED_KING: [i32; 3] = [120, 60, 30];
/// Nodes between two looks at the clock and the stop flag.
const POLL_INTERVAL: u64 = 1024;

#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum Bound {
    #[default]
    Exact,
    Lower,
    Upper,
}

#[derive(Clone, Copy, Default)]
struct Entry {
    key: u64,
    mv: Option<Move>,
    score: i32,
    depth: i32,
    bound: Bound,
}

/// What [`AlphaBeta::search`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SearchResult {
    pub best: Move,
    /// Centipawns for the side to move; see [`MATE_SCORE`]. 0 when the only
    /// legal move was played without a search.
    pub score: i32,
    /// Nodes visited, quiescence included.
    pub nodes: u64,
    /// Deepest completed iteration: 0 when the only legal move was played
    /// without a search, or the limits ran out during the first iteration.
    pub depth: u32,
}

pub struct AlphaBeta {
    depth: u32,
    rng: SmallRng,
    tt: Vec<Entry>,
    killers: [[Option<Move>; 2]; MAX_PLY],
    history: Box<[[i32; NUM_SQUARES]; NUM_SQUARES]>,
    /// Triangular table: row `ply` is the best line found from that ply of
    /// the current path (kept at principal variation nodes only).
    pv: Box<[ArrayVec<Move, MAX_PLY>; MAX_PLY]>,
    /// Repetition keys: the game since its last capture or pawn move, then
    /// the search path.
    keys: Vec<u64>,
    /// Index of the root position in `keys`.
    root: usize,
    nodes: u64,
    /// Deepest ply reached in this search.
    seldepth: usize,
    /// Plies from the root within which checks are extended.
    check_extension_plies: usize,
    control: Arc<SearchControl>,
    node_limit: u64,
    /// The limits ran out: scores since are meaningless and are thrown away.
    aborted: bool,
    /// The score of the last move [`Player::choose`] searched.
    last_score: Option<Score>,
}

impl AlphaBeta {
    /// A searcher of `depth` plies; `seed` breaks ties between equal root moves.
    pub fn new(depth: u32, seed: u64) -> AlphaBeta {
        AlphaBeta {
            depth: depth.clamp(1, MAX_DEPTH),
            rng: SmallRng::seed_from_u64(seed),
            tt: vec![Entry::default(); 1 << TT_BITS],
            killers: [[None; 2]; MAX_PLY],
            history: Box::new([[0; NUM_SQUARES]; NUM_SQUARES]),
            pv: Box::new(std::array::from_fn(|_| ArrayVec::new())),
            keys: Vec::new(),
            root: 0,
            nodes: 0,
            seldepth: 0,
            check_extension_plies: 0,
            control: Arc::default(),
            node_limit: u64::MAX,
            aborted: false,
            last_score: None,
        }
    }

    /// Searches the current position of `game`, which must have a legal
    /// move, to the depth given to [`AlphaBeta::new`].
    pub fn search(&mut self, game: &Game) -> SearchResult {
        let limits = SearchLimits {
            depth: Some(self.depth),
            ..SearchLimits::default()
        };
        self.search_limited(game, &limits, |_| {})
    }

    /// Iterative deepening up to `limits.depth` (else the depth given to
    /// [`AlphaBeta::new`]) among `limits.searchmoves` (else all moves). It
    /// starts no iteration after the soft deadline and abandons one on stop,
    /// the hard deadline or the node limit; the answer is the best move of
    /// the last completed iteration, or of the moves searched so far when
    /// the first one is cut short. `report` hears of each completed iteration.
    pub fn search_limited(
        &mut self,
        game: &Game,
        limits: &SearchLimits,
        mut report: impl FnMut(&SearchInfo),
    ) -> SearchResult {
        self.nodes = 0;
        self.seldepth = 0;
        self.control = Arc::clone(&limits.control);
        self.node_limit = limits.nodes.unwrap_or(u64::MAX);
        self.aborted = false;
        let max_depth = limits.depth.unwrap_or(self.depth).clamp(1, MAX_DEPTH);
        self.check_extension_plies = 2 * max_depth as usize;
        self.load_history(game);
        self.killers = [[None; 2]; MAX_PLY];
        for row in self.history.iter_mut() {
            for h in row.iter_mut() {
                *h /= 4;
            }
        }
        let pos = *game.position();
        let mut moves = pos.legal_moves();
        let allowed: MoveList = moves
            .iter()
            .copied()
            .filter(|mv| limits.searchmoves.contains(mv))
            .collect();
        if !allowed.is_empty() {
            moves = allowed;
        }
        assert!(!moves.is_empty(), "search called on a finished game");
        // Shuffling first makes the stable sort below break ties at random.
        moves.shuffle(&mut self.rng);
        moves.sort_by_key(|&mv| std::cmp::Reverse(capture_order(&pos, mv).unwrap_or(0)));
        let mut result = SearchResult {
            best: moves[0],
            score: 0,
            nodes: 0,
            depth: 0,
        };
        if moves.len() > 1 {
            for depth in 1..=max_depth {
                if depth > 1 && (self.control.should_stop() || self.control.soft_deadline_passed())
                {
                    break;
                }
                let completed = self.root_search(&pos, &mut moves, depth as i32);
                // The first iteration's best so far is better than none.
                if completed.is_some() || depth == 1 {
                    result.best = moves[0];
                }
                let Some(score) = completed else { break };
                result.score = score;
                result.depth = depth;
                report(&SearchInfo {
                    depth,
                    seldepth: Some(self.seldepth as u32),
                    nodes: self.nodes,
                    time: self.control.elapsed(),
                    score: uci_score(score),
                    wdl: None,
                    pv: self.principal_variation(&pos, depth as usize),
                    moves: Vec::new(),
                });
            }
        }
        result.nodes = self.nodes;
        result
    }

    /// Makes `mv` and the line below it the best line from `ply`.
    fn update_pv(&mut self, ply: usize, mv: Move) {
        let (head, tail) = self.pv.split_at_mut(ply + 1);
        let line = &mut head[ply];
        line.clear();
        line.push(mv);
        line.extend(tail[0].iter().copied().take(MAX_PLY - 1));
    }

    /// Counts a node; true once the limits have run out.
    #[inline]
    fn count_node_and_check_limits(&mut self, ply: usize) -> bool {
        self.nodes += 1;
        self.seldepth = self.seldepth.max(ply);
        if !self.aborted
            && (self.nodes > self.node_limit
                || (self.nodes % POLL_INTERVAL == 0 && self.control.should_stop()))
        {
            self.aborted = true;
        }
        self.aborted
    }

    /// The best line of the last iteration, lengthened from the
    /// transposition table where a table hit cut it short.
    fn principal_variation(&self, root: &Position, max_len: usize) -> Vec<Move> {
        let mut pv = self.pv[0].to_vec();
        let mut pos = pv.iter().fold(*root, |pos, &mv| pos.after(mv));
        while pv.len() < max_len {
            let key = tt_key(&pos, pos.key());
            let entry = self.tt[tt_index(key)];
            match entry.mv {
                Some(mv) if entry.key == key && pos.is_legal(mv) => {
                    pv.push(mv);
                    pos = pos.after(mv);
                }
                _ => break,
            }
        }
        pv
    }

    fn load_history(&mut self, game: &Game) {
        let mut pos = *game.start();
        self.keys.clear();
        self.keys.push(pos.key());
        for &mv in game.moves() {
            pos = pos.after(mv);
            if pos.halfmove_clock() == 0 {
                self.keys.clear();
            }
            self.keys.push(pos.key());
        }
        self.root = self.keys.len() - 1;
    }

    /// One iteration at the root: its score, with the best move moved first
    /// in `moves`; `None` when the limits ran out, with the best of the
    /// moves searched so far first at depth 1 and `moves` untouched deeper.
    fn root_search(&mut self, pos: &Position, moves: &mut MoveList, depth: i32) -> Option<i32> {
        let mut alpha = -INFINITY;
        let mut best = 0;
        for i in 0..moves.len() {
            let score = self.child_search(pos, moves[i], i == 0, depth - 1, alpha, INFINITY, 0);
            if self.aborted {
                break;
            }
            if score > alpha {
                alpha = score;
                best = i;
                self.update_pv(0, moves[i]);
            }
        }
        if self.aborted && depth > 1 {
            return None;
        }
        moves[..=best].rotate_right(1);
        if self.aborted {
            return None;
        }
        let key = tt_key(pos, self.keys[self.root]);
        self.store(key, Some(moves[0]), alpha, depth, Bound::Exact, 0);
        Some(alpha)
    }

    /// Searches the position after `mv` (principal variation search: a null
    /// window first unless `first`) and returns its score for the mover.
    #[allow(clippy::too_many_arguments)]
    fn child_search(
        &mut self,
        pos: &Position,
        mv: Move,
        first: bool,
        depth: i32,
        alpha: i32,
        beta: i32,
        ply: usize,
    ) -> i32 {
        let child = pos.after(mv);
        self.keys.push(child.key());
        let score = if first {
            -self.negamax(&child, depth, -beta, -alpha, ply + 1)
        } else {
            let score = -self.negamax(&child, depth, -alpha - 1, -alpha, ply + 1);
            if score > alpha && score < beta {
                -self.negamax(&child, depth, -beta, -alpha, ply + 1)
            } else {
                score
            }
        };
        self.keys.pop();
        score
    }

    fn negamax(
        &mut self,
        pos: &Position,
        depth: i32,
        mut alpha: i32,
        beta: i32,
        ply: usize,
    ) -> i32 {
        if self.count_node_and_check_limits(ply) {
            return 0;
        }
        self.pv[ply].clear();
        if self.is_repetition(pos) || pos.draw_by_clock_or_material().is_some() {
            // Having no legal move decides first (RULES.md §7).
            return if pos.has_legal_moves() {
                0
            } else {
                no_moves_score(pos, ply)
            };
        }
        let in_check = pos.in_check();
        // Extending checks finds forced mates; the cap keeps check chains finite.
        let depth = if in_check && ply < self.check_extension_plies {
            depth + 1
        } else {
            depth
        };
        if depth <= 0 || ply >= MAX_PLY - 1 {
            return self.quiesce(pos, alpha, beta, ply);
        }

        let key = tt_key(pos, self.keys[self.keys.len() - 1]);
        let entry = self.tt[tt_index(key)];
        let tt_move = if entry.key == key {
            let score = score_from_tt(entry.score, ply);
            if entry.depth >= depth
                && match entry.bound {
                    Bound::Exact => true,
                    Bound::Lower => score >= beta,
                    Bound::Upper => score <= alpha,
                }
            {
                return score;
            }
            entry.mv
        } else {
            None
        };

        let mut moves = pos.legal_moves();
        if moves.is_empty() {
            return no_moves_score(pos, ply);
        }
        let mut order = [0i32; MAX_MOVES];
        for (i, &mv) in moves.iter().enumerate() {
            order[i] = if Some(mv) == tt_move {
                1 << 30
            } else if let Some(capture) = capture_order(pos, mv) {
                (1 << 20) + capture
            } else if Some(mv) == self.killers[ply][0] {
                (1 << 19) + 1
            } else if Some(mv) == self.killers[ply][1] {
                1 << 19
            } else {
                self.history[mv.from.index()][mv.to.index()]
            };
        }

        let alpha_before = alpha;
        let pv_node = beta - alpha > 1;
        let mut best_score = -INFINITY;
        let mut best_move = moves[0];
        for i in 0..moves.len() {
            // Selection sort: most nodes cut off after one or two moves.
            let next = (i..moves.len()).max_by_key(|&j| order[j]).unwrap_or(i);
            moves.swap(i, next);
            order.swap(i, next);
            let mv = moves[i];
            let score = self.child_search(pos, mv, i == 0, depth - 1, alpha, beta, ply);
            if self.aborted {
                return 0;
            }
            if score > best_score {
                best_score = score;
                best_move = mv;
                if score > alpha {
                    alpha = score;
                    if pv_node {
                        self.update_pv(ply, mv);
                    }
                    if alpha >= beta {
                        if capture_order(pos, mv).is_none() {
                            self.note_quiet_cutoff(mv, depth, ply);
                        }
                        break;
                    }
                }
            }
        }
        let bound = if best_score >= beta {
            Bound::Lower
        } else if best_score > alpha_before {
            Bound::Exact
        } else {
            Bound::Upper
        };
        self.store(key, Some(best_move), best_score, depth, bound, ply);
        best_score
    }

    /// Captures and queen promotions until the position is quiet; every
    /// evasion when in check.
    fn quiesce(&mut self, pos: &Position, mut alpha: i32, beta: i32, ply: usize) -> i32 {
        if self.count_node_and_check_limits(ply) {
            return 0;
        }
        let us = pos.side_to_move();
        let in_check = pos.in_check();
        let targets = pos.color(!us);
        let pawn_targets = targets
            | pos.en_passant().map_or(Bitboard::EMPTY, |ep| ep.targets)
            | Bitboard::rank(us.promotion_rank());
        let mut any_move = false;
        let mut moves = MoveList::new();
        pos.generate(|piece| {
            any_move = true;
            let to = if in_check {
                piece.to
            } else if piece.kind == Kind::Pawn {
                piece.to & pawn_targets
            } else {
                piece.to & targets
            };
            PieceMoves { to, ..piece }.for_each(us, |mv| {
                if matches!(mv.promotion, None | Some(Kind::Queen)) {
                    moves.push(mv);
                }
                false
            });
            false
        });
        if !any_move {
            return no_moves_score(pos, ply);
        }
        if pos.draw_by_clock_or_material().is_some() {
            return 0;
        }
        let mut best_score = -INFINITY;
        if !in_check || ply >= MAX_PLY - 1 {
            let stand_pat = evaluate(pos);
            if stand_pat >= beta || ply >= MAX_PLY - 1 {
                return stand_pat;
            }
            alpha = alpha.max(stand_pat);
            best_score = stand_pat;
        }
        let mut order = [0i32; MAX_MOVES];
        for (i, &mv) in moves.iter().enumerate() {
            order[i] = capture_order(pos, mv).unwrap_or(0);
        }
        let occupied = pos.occupied();
        for i in 0..moves.len() {
            let next = (i..moves.len()).max_by_key(|&j| order[j]).unwrap_or(i);
            moves.swap(i, next);
            order.swap(i, next);
            let mv = moves[i];
            if !in_check && losing_capture(pos, mv, occupied) {
                continue;
            }
            let score = -self.quiesce(&pos.after(mv), -beta, -alpha, ply + 1);
            if self.aborted {
                return 0;
            }
            if score > best_score {
                best_score = score;
                if score > alpha {
                    alpha = score;
                    if alpha >= beta {
                        break;
                    }
                }
            }
        }
        best_score
    }

    /// A repeated position inside the search is a draw (the repeating side
    /// can repeat again); one from before the root only on its third time.
    fn is_repetition(&self, pos: &Position) -> bool {
        let last = self.keys.len() - 1;
        let key = self.keys[last];
        let oldest = last - (pos.halfmove_clock() as usize).min(last);
        let mut seen = 0;
        for i in (oldest..last.saturating_sub(1)).rev().step_by(2) {
            if self.keys[i] == key {
                seen += 1;
                if i >= self.root || seen >= 2 {
                    return true;
                }
            }
        }
        false
    }

    fn note_quiet_cutoff(&mut self, mv: Move, depth: i32, ply: usize) {
        let killers = &mut self.killers[ply];
        if killers[0] != Some(mv) {
            killers[1] = killers[0];
            killers[0] = Some(mv);
        }
        let h = &mut self.history[mv.from.index()][mv.to.index()];
        // Capped below the killer and capture bands of the move order.
        *h = (*h + depth * depth).min(1 << 18);
    }

    fn store(
        &mut self,
        key: u64,
        mv: Option<Move>,
        score: i32,
        depth: i32,
        bound: Bound,
        ply: usize,
    ) {
        self.tt[tt_index(key)] = Entry {
            key,
            mv,
            score: score_to_tt(score, ply),
            depth,
            bound,
        };
    }
}

impl Player for AlphaBeta {
    fn name(&self) -> String {
        format!("alphabeta:{}", self.depth)
    }

    fn choose(&mut self, game: &Game) -> Move {
        let result = self.search(game);
        self.last_score = (result.depth > 0).then(|| uci_score(result.score));
        result.best
    }

    fn score(&self) -> Option<Score> {
        self.last_score
    }
}

impl AlphaBeta {
    /// The deepest iteration of a search without other limits.
    pub fn depth(&self) -> u32 {
        self.depth
    }

    /// Sets that depth, within 1..=[`MAX_DEPTH`].
    pub fn set_depth(&mut self, depth: u32) {
        self.depth = depth.clamp(1, MAX_DEPTH);
    }

    /// Reseeds the choice between equal moves.
    pub fn set_seed(&mut self, seed: u64) {
        self.rng = SmallRng::seed_from_u64(seed);
    }

    /// Forgets what was learnt about the previous game (transpositions,
    /// killer moves, history).
    pub fn new_game(&mut self) {
        self.tt.fill(Entry::default());
        self.killers = [[None; 2]; MAX_PLY];
        for row in self.history.iter_mut() {
            row.fill(0);
        }
    }
}

/// A score as searchers report it: mates in moves rather than plies.
fn uci_score(score: i32) -> Score {
    if score >= MATE_BOUND {
        Score::Mate((MATE_SCORE - score + 1) / 2)
    } else if score <= -MATE_BOUND {
        Score::Mate(-(MATE_SCORE + score) / 2)
    } else {
        Score::Centipawns(score)
    }
}

/// Score of a position without legal moves for the side to move: checkmate
/// and an unmet king-move obligation lose (sooner is worse), else stalemate.
fn no_moves_score(pos: &Position, ply: usize) -> i32 {
    if pos.in_check() || pos.must_move_king(pos.side_to_move()) {
        -(MATE_SCORE - ply as i32)
    } else {
        0
    }
}

/// MVV-LVA order of a capture or promotion; `None` for quiet moves.
fn capture_order(pos: &Position, mv: Move) -> Option<i32> {
    let attacker = pos.piece_at(mv.from).map_or(Kind::Pawn, |p| p.kind);
    let victim = match pos.piece_at(mv.to) {
        Some(piece) => Some(piece.kind),
        None if attacker == Kind::Pawn && mv.from.file() != mv.to.file() => Some(Kind::Pawn),
        None => None,
    };
    if victim.is_none() && mv.promotion.is_none() {
        return None;
    }
    let gain = victim.map_or(0, |k| PIECE_VALUES[k.index()])
        + mv.promotion.map_or(0, |k| PIECE_VALUES[k.index()]);
    Some(gain * 8 - attacker.index() as i32)
}

/// A capture of a cheaper piece on a defended square: quiescence skips it.
fn losing_capture(pos: &Position, mv: Move, occupied: Bitboard) -> bool {
    let (Some(attacker), Some(victim)) = (pos.piece_at(mv.from), pos.piece_at(mv.to)) else {
        return false;
    };
    PIECE_VALUES[victim.kind.index()] < PIECE_VALUES[attacker.kind.index()]
        && pos.is_attacked(mv.to, victim.color, occupied)
}

/// Static score for the side to move.
fn evaluate(pos: &Position) -> i32 {
    let us = pos.side_to_move();
    side_score(pos, us) - side_score(pos, !us)
}

fn side_score(pos: &Position, color: Color) -> i32 {
    let occupied = pos.occupied();
    let free = !pos.color(color);
    let mut score = 0;
    for kind in Kind::ALL {
        let pieces = pos.pieces(color, kind);
        score += PIECE_VALUES[kind.index()] * pieces.count() as i32;
        let reach = |sq| match kind {
            Kind::Knight => knight_attacks(sq),
            Kind::Bishop => bishop_attacks(sq, occupied),
            Kind::Rook => rook_attacks(sq, occupied),
            Kind::Queen => queen_attacks(sq, occupied),
            Kind::Pawn | Kind::King => Bitboard::EMPTY,
        };
        if MOBILITY[kind.index()] != 0 {
            for sq in pieces {
                score += MOBILITY[kind.index()] * (reach(sq) & free).count() as i32;
            }
        }
    }
    score - boxed_king_penalty(pos, color)
}

/// Rule 5 loses for a king that cannot move at its deadline; the search sees
/// that only a few plies ahead, so warn it earlier.
fn boxed_king_penalty(pos: &Position, color: Color) -> i32 {
    if pos.king_moved_in_period(color) || pos.rules() == crate::rules::Rules::Base {
        return 0;
    }
    let n = pos.next_move_number(color);
    let Some(period) = control_period(color, n) else {
        return 0;
    };
    let Some(&penalty) = BOXED_KING.get((period.last - n) as usize) else {
        return 0;
    };
    let king = pos.king(color);
    let occupied = pos.occupied();
    let mut steps = king_attacks(king) & !pos.color(color);
    let can_step = Iterator::any(&mut steps, |sq| !pos.is_attacked(sq, !color, occupied));
    if can_step {
        0
    } else {
        penalty
    }
}

/// The transposition key: the repetition key plus the rule 5/6 history it
/// leaves out, which changes what can happen later in the search.
fn tt_key(pos: &Position, repetition_key: u64) -> u64 {
    let run = |color| {
        let run = pos.run(color);
        run.kind.map_or(0, |k| k.index() as u64 + 1) * 4 + run.length as u64
    };
    let extra = run(Color::White)
        | run(Color::Black) << 5
        | (pos.king_moved_in_period(Color::White) as u64) << 10
        | (pos.king_moved_in_period(Color::Black) as u64) << 11
        | (pos.fullmove_number() as u64) << 12;
    repetition_key ^ crate::splitmix64(extra)
}

fn tt_index(key: u64) -> usize {
    (key >> (64 - TT_BITS)) as usize
}

/// Mate scores are stored relative to the node, so they stay right when
/// the same position is met at another ply.
fn score_to_tt(score: i32, ply: usize) -> i32 {
    if score >= MATE_BOUND {
        score + ply as i32
    } else if score <= -MATE_BOUND {
        score - ply as i32
    } else {
        score
    }
}

fn score_from_tt(score: i32, ply: usize) -> i32 {
    if score >= MATE_BOUND {
        score - ply as i32
    } else if score <= -MATE_BOUND {
        score + ply as i32
    } else {
        score
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::game::test_game as game;
    use crate::players::{play_game, player_from_spec, RandomPlayer};
    use crate::types::Square;

    #[test]
    fn finds_a_mate_at_every_depth() {
        // Position, deepest depth tried, the mating move.
        let cases = [
            // Mate in one.
            (
                "5k4/4ppp3/10/10/6n3/6R3/10/10/10/R4K4 w - - 0 17",
                4,
                "a1a10",
            ),
            // Black's move 20 must be a king move (rule 5): Bc8-e6 covers
            // i10, the king's only square, and Black loses by king-quota.
            ("9k/8pp/2B7/10/10/10/10/10/10/5K4 w - - 0 20", 3, "c8e6"),
        ];
        for (fen, max_depth, best) in cases {
            let g = game(fen);
            for depth in 1..=max_depth {
                let result = AlphaBeta::new(depth, 0).search(&g);
                assert_eq!(result.best.to_string(), best, "{fen} depth {depth}");
                assert_eq!(result.score, MATE_SCORE - 1, "{fen} depth {depth}");
            }
        }
    }

    #[test]
    fn does_not_hang_its_queen() {
        // The d6 and f6 pawns attack the queen on e5; both are defended, so
        // taking either loses the queen.
        let g = game("5k4/10/10/2p3p3/3p1p4/4Q5/10/10/10/5K4 w - - 0 17");
        let defended: [Square; 2] = ["d6".parse().unwrap(), "f6".parse().unwrap()];
        for depth in 1..=4 {
            let result = AlphaBeta::new(depth, 1).search(&g);
            let after = g.position().after(result.best);
            let queen = after.pieces(Color::White, Kind::Queen).first();
            let queen = queen.expect("still has a queen");
            assert!(
                !after.is_attacked(queen, Color::Black, after.occupied()),
                "depth {depth}: {} leaves the queen en prise",
                result.best
            );
            assert!(!defended.contains(&result.best.to), "depth {depth}");
        }
    }

    #[test]
    fn beats_random() {
        for seed in 0..2 {
            let mut engine = player_from_spec("alphabeta:3", seed).unwrap();
            let mut random = RandomPlayer::new(seed);
            let (white, black): (&mut dyn Player, &mut dyn Player) = if seed == 0 {
                (engine.as_mut(), &mut random)
            } else {
                (&mut random, engine.as_mut())
            };
            let game = play_game(white, black, Position::start(), 200);
            let outcome = game.outcome().unwrap();
            let engine_color = if seed == 0 {
                Color::White
            } else {
                Color::Black
            };
            assert_eq!(outcome.winner, Some(engine_color), "{outcome:?}");
        }
    }

    fn limits(depth: u32) -> SearchLimits {
        SearchLimits {
            depth: Some(depth),
            ..SearchLimits::default()
        }
    }

    #[test]
    fn limited_search_reports_each_iteration() {
        let g = game("5k4/4ppp3/10/10/6n3/6R3/10/10/10/R4K4 w - - 0 17");
        let mut infos = Vec::new();
        let result = AlphaBeta::new(MAX_DEPTH, 0)
            .search_limited(&g, &limits(3), |info| infos.push(info.clone()));
        assert_eq!(result.best.to_string(), "a1a10");
        assert_eq!(result.depth, 3);
        let depths: Vec<u32> = infos.iter().map(|i| i.depth).collect();
        assert_eq!(depths, [1, 2, 3]);
        for info in &infos {
            assert_eq!(info.score, Score::Mate(1));
            assert_eq!(info.pv[0], result.best);
            assert!(info.seldepth.unwrap() >= 1);
        }
        assert_eq!(infos.last().unwrap().nodes, result.nodes);
    }

    #[test]
    fn limited_search_matches_the_fixed_depth_one() {
        let g = Game::new(Position::start());
        let fixed = AlphaBeta::new(3, 7).search(&g);
        let limited = AlphaBeta::new(MAX_DEPTH, 7).search_limited(&g, &limits(3), |_| {});
        assert_eq!(fixed, limited);
    }

    #[test]
    fn principal_variations_are_legal_lines() {
        let mut g = Game::new(Position::start());
        for text in ["e2e5", "e9e7", "d2d4"] {
            g.play(crate::parse_coordinate(text).unwrap()).unwrap();
        }
        let mut pvs = Vec::new();
        AlphaBeta::new(4, 0).search_limited(&g, &limits(4), |info| pvs.push(info.pv.clone()));
        assert_eq!(pvs.len(), 4);
        for pv in pvs {
            let mut pos = *g.position();
            for mv in pv {
                pos = pos.play(mv).expect("a legal line");
            }
        }
    }

    #[test]
    fn searchmoves_restrict_the_answer() {
        // a1a10 mates, but only the g5 rook's moves are allowed.
        let g = game("5k4/4ppp3/10/10/6n3/6R3/10/10/10/R4K4 w - - 0 17");
        let allowed: Vec<Move> = g
            .position()
            .legal_moves()
            .into_iter()
            .filter(|mv| mv.from.to_string() == "g5")
            .collect();
        let restricted = SearchLimits {
            searchmoves: allowed.clone(),
            ..limits(3)
        };
        let result = AlphaBeta::new(MAX_DEPTH, 0).search_limited(&g, &restricted, |_| {});
        assert!(allowed.contains(&result.best), "{}", result.best);
        // Taking the knight is the best of them.
        assert_eq!(result.best.to_string(), "g5g6");
    }

    #[test]
    fn stopped_searches_still_answer_legally() {
        let g = Game::new(Position::start());
        let stopped = limits(MAX_DEPTH);
        stopped.control.stop();
        let result = AlphaBeta::new(MAX_DEPTH, 0).search_limited(&g, &stopped, |_| {});
        assert!(g.position().is_legal(result.best));
        assert!(result.depth <= 1);
        assert!(result.nodes <= POLL_INTERVAL * 2);

        for nodes in [0, 1, 50, 3000] {
            let capped = SearchLimits {
                nodes: Some(nodes),
                ..limits(MAX_DEPTH)
            };
            let result = AlphaBeta::new(MAX_DEPTH, 0).search_limited(&g, &capped, |_| {});
            assert!(g.position().is_legal(result.best), "nodes {nodes}");
            assert!(result.nodes <= nodes + 1, "nodes {nodes}: {}", result.nodes);
        }
    }

    #[test]
    fn past_the_soft_deadline_no_iteration_starts() {
        let g = Game::new(Position::start());
        let hurried = SearchLimits {
            control: Arc::new(SearchControl::timed(crate::search::TimeBudget {
                soft: Some(std::time::Duration::ZERO),
                hard: None,
            })),
            ..limits(MAX_DEPTH)
        };
        let result = AlphaBeta::new(MAX_DEPTH, 0).search_limited(&g, &hurried, |_| {});
        assert_eq!(result.depth, 1);
    }

    #[test]
    fn mate_scores_count_moves() {
        assert_eq!(uci_score(MATE_SCORE - 1), Score::Mate(1));
        assert_eq!(uci_score(MATE_SCORE - 3), Score::Mate(2));
        assert_eq!(uci_score(-(MATE_SCORE - 2)), Score::Mate(-1));
        assert_eq!(uci_score(-(MATE_SCORE - 4)), Score::Mate(-2));
        assert_eq!(uci_score(-250), Score::Centipawns(-250));
    }

    #[test]
    fn mate_scores_survive_the_table() {
        for ply in [0, 3, 10] {
            for score in [MATE_SCORE - 5, -(MATE_SCORE - 7), 123, -45] {
                assert_eq!(score_from_tt(score_to_tt(score, ply), ply), score);
            }
        }
    }
}
