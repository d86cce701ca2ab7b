//! Seeded random games checked move by move against the engine's own
//! invariants and against `Model`, a slow reference implementation of
//! ../../shared/RULES.md written here from the rules text alone (board
//! array, naive attacks, its own rule 5/6 bookkeeping), so that it shares
//! no code with the bitboard move generator it checks.

mod common;

use std::collections::{HashMap, HashSet};

use engine::{Color, Game, Kind, Move, Outcome, Piece, Position, Reason, Rules, Square, START_FEN};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};

type Board = [Option<Piece>; 100];

/// Every `(file step, rank step)` up to `reach` squares on each axis that `keep` accepts.
fn steps(reach: i32, keep: impl Fn(i32, i32) -> bool) -> Vec<(i32, i32)> {
    (-reach..=reach)
        .flat_map(|f| (-reach..=reach).map(move |r| (f, r)))
        .filter(|&(f, r)| keep(f, r))
        .collect()
}

/// One square along one axis and two along the other.
fn knight_steps() -> Vec<(i32, i32)> {
    steps(2, |f, r| (f * r).abs() == 2)
}

/// One square in any of the eight directions.
fn king_steps() -> Vec<(i32, i32)> {
    steps(1, |f, r| (f, r) != (0, 0))
}

const ROOK_DIRS: [(i32, i32); 4] = [(0, 1), (1, 0), (0, -1), (-1, 0)];
const BISHOP_DIRS: [(i32, i32); 4] = [(1, 1), (1, -1), (-1, -1), (-1, 1)];

fn sq(name: &str) -> Square {
    name.parse().unwrap()
}

fn forward(color: Color) -> i32 {
    match color {
        Color::White => 1,
        Color::Black => -1,
    }
}

/// RULES.md §5: White 1-10 then 10k+1..10k+5; Black 1-10 then 10k+6..10k+10.
fn control_period(color: Color, n: u32) -> Option<(u32, u32)> {
    if n <= 10 {
        return Some((1, 10));
    }
    let k = (n - 1) / 10;
    let (first, last) = match color {
        Color::White => (10 * k + 1, 10 * k + 5),
        Color::Black => (10 * k + 6, 10 * k + 10),
    };
    (first..=last).contains(&n).then_some((first, last))
}

fn attacked(board: &Board, target: Square, by: Color) -> bool {
    !attackers(board, target, by).is_empty()
}

/// The kinds of `by`'s pieces that attack `target`, one entry per piece.
fn attackers(board: &Board, target: Square, by: Color) -> Vec<Kind> {
    let at = |s: Option<Square>| s.and_then(|s| board[s.index()]).filter(|p| p.color == by);
    let back = -forward(by);
    let mut kinds = Vec::new();
    for (steps, kind) in [
        (vec![(-1, back), (1, back)], Kind::Pawn),
        (knight_steps(), Kind::Knight),
        (king_steps(), Kind::King),
    ] {
        for (f, r) in steps {
            if at(target.offset(f, r)).is_some_and(|p| p.kind == kind) {
                kinds.push(kind);
            }
        }
    }
    for (dirs, slider) in [(ROOK_DIRS, Kind::Rook), (BISHOP_DIRS, Kind::Bishop)] {
        for (f, r) in dirs {
            let mut s = target.offset(f, r);
            while let Some(on) = s {
                if board[on.index()].is_some() {
                    if let Some(p) = at(s).filter(|p| [slider, Kind::Queen].contains(&p.kind)) {
                        kinds.push(p.kind);
                    }
                    break;
                }
                s = on.offset(f, r);
            }
        }
    }
    kinds
}

/// Whether `by`'s piece on `sq` hangs: the opponent attacks it and `by`
/// does not defend it, or the opponent attacks it with a cheaper piece
/// (pawn 1, knight and bishop 3, rook 5, queen 9). Kings never hang.
fn hangs(board: &Board, sq: Square, by: Color) -> bool {
    let tier = |kind: Kind| match kind {
        Kind::Pawn => 1,
        Kind::Knight | Kind::Bishop => 3,
        Kind::Rook => 5,
        Kind::Queen => 9,
        Kind::King => 100,
    };
    let Some(piece) = board[sq.index()].filter(|p| p.color == by && p.kind != Kind::King) else {
        return false;
    };
    let threats = attackers(board, sq, !by);
    !threats.is_empty()
        && (attackers(board, sq, by).is_empty()
            || threats.iter().any(|&k| tier(k) < tier(piece.kind)))
}

/// Castling per RULES.md §4: right index, king target, rook from/to, squares
/// that must be empty, squares that must not be attacked.
struct Castle {
    right: usize,
    king_to: Square,
    rook: (Square, Square),
    empty: Vec<Square>,
    safe: Vec<Square>,
}

/// Short, then long castling of `color`, the king starting on the f-file.
fn castles(color: Color) -> [Castle; 2] {
    let rank = if color == Color::White { "1" } else { "10" };
    let on =
        |files: &str| -> Vec<Square> { files.chars().map(|f| sq(&format!("{f}{rank}"))).collect() };
    let at = |file: &str| on(file)[0];
    let first = 2 * color.index();
    [
        Castle {
            right: first,
            king_to: at("i"),
            rook: (at("k"), at("h")),
            empty: on("ghi"),
            safe: on("fghi"),
        },
        Castle {
            right: first + 1,
            king_to: at("c"),
            rook: (at("a"), at("d")),
            empty: on("bcde"),
            safe: on("fedc"),
        },
    ]
}

/// The squares whose every move (from or to) loses castling rights.
const RIGHT_SQUARES: [(&str, &[usize]); 6] = [
    ("f1", &[0, 1]),
    ("k1", &[0]),
    ("a1", &[1]),
    ("f10", &[2, 3]),
    ("k10", &[2]),
    ("a10", &[3]),
];

/// The reference state of a game.
#[derive(Clone)]
struct Model {
    board: Board,
    side: Color,
    rules: Rules,
    /// White short, White long, Black short, Black long.
    rights: [bool; 4],
    /// The pawn that just stepped 2 or 3 squares and the squares it passed.
    ep: Option<(Square, Vec<Square>)>,
    halfmove: u32,
    fullmove: u32,
    /// (side, first move of the control period) where a king move was made.
    king_periods: HashSet<(Color, u32)>,
    /// Rule 6: the kind moved last by each side and how many turns in a row.
    runs: [(Option<Kind>, u32); 2],
}

impl Model {
    /// From a FEN without en passant or rule 5/6 fields.
    fn new(pos: &Position) -> Model {
        assert_eq!(pos.en_passant(), None);
        let bits = pos.castling_rights().bits();
        Model {
            board: std::array::from_fn(|i| pos.piece_at(Square::new(i as u8))),
            side: pos.side_to_move(),
            rules: pos.rules(),
            rights: [bits & 1 != 0, bits & 2 != 0, bits & 4 != 0, bits & 8 != 0],
            ep: None,
            halfmove: pos.halfmove_clock() as u32,
            fullmove: pos.fullmove_number() as u32,
            king_periods: HashSet::new(),
            runs: [(None, 0); 2],
        }
    }

    fn king(&self, color: Color) -> Square {
        Square::all()
            .find(|s| self.board[s.index()] == Some(Piece::new(color, Kind::King)))
            .unwrap()
    }

    fn in_check(&self) -> bool {
        attacked(&self.board, self.king(self.side), !self.side)
    }

    fn next_move_number(&self, color: Color) -> u32 {
        if color == Color::White && self.side == Color::Black {
            self.fullmove + 1
        } else {
            self.fullmove
        }
    }

    fn must_move_king(&self, color: Color) -> bool {
        if self.rules == Rules::Base {
            return false;
        }
        let n = self.next_move_number(color);
        control_period(color, n)
            .is_some_and(|(first, last)| n == last && !self.king_periods.contains(&(color, first)))
    }

    fn king_moved_in_period(&self, color: Color) -> bool {
        let n = self.next_move_number(color);
        self.rules == Rules::Full
            && control_period(color, n)
                .is_some_and(|(first, _)| self.king_periods.contains(&(color, first)))
    }

    fn banned(&self, color: Color) -> Option<Kind> {
        let (kind, length) = self.runs[color.index()];
        (self.rules == Rules::Full && length >= 2)
            .then_some(kind)
            .flatten()
    }

    /// Passed-over squares an enemy pawn attacks (what the engine keeps).
    fn ep_targets(&self) -> Vec<Square> {
        let Some((_, passed)) = &self.ep else {
            return Vec::new();
        };
        let pawn = Some(Piece::new(self.side, Kind::Pawn));
        let back = -forward(self.side);
        passed
            .iter()
            .copied()
            .filter(|t| {
                [-1, 1].iter().any(|&f| {
                    t.offset(f, back)
                        .is_some_and(|s| self.board[s.index()] == pawn)
                })
            })
            .collect()
    }

    /// Moves by piece geometry, castling and en passant, before rules 5, 6
    /// and king safety.
    fn pseudo_moves(&self) -> Vec<Move> {
        let us = self.side;
        let mut out = Vec::new();
        let empty = |s: Square| self.board[s.index()].is_none();
        let enemy = |s: Square| self.board[s.index()].is_some_and(|p| p.color != us);
        let push_pawn = |out: &mut Vec<Move>, from: Square, to: Square| {
            if to.rank() == us.promotion_rank() {
                for kind in [Kind::Queen, Kind::Rook, Kind::Bishop, Kind::Knight] {
                    out.push(Move {
                        from,
                        to,
                        promotion: Some(kind),
                    });
                }
            } else {
                out.push(Move::new(from, to));
            }
        };
        for from in Square::all() {
            let Some(piece) = self.board[from.index()] else {
                continue;
            };
            if piece.color != us {
                continue;
            }
            let dir = forward(us);
            match piece.kind {
                Kind::Pawn => {
                    let steps = if from.rank() == us.pawn_rank() { 3 } else { 1 };
                    for n in 1..=steps {
                        match from.offset(0, dir * n) {
                            Some(to) if empty(to) => push_pawn(&mut out, from, to),
                            _ => break,
                        }
                    }
                    for f in [-1, 1] {
                        if let Some(to) = from.offset(f, dir) {
                            let ep = self.ep.as_ref().is_some_and(|(_, p)| p.contains(&to));
                            if enemy(to) || ep {
                                push_pawn(&mut out, from, to);
                            }
                        }
                    }
                }
                Kind::Knight | Kind::King => {
                    let steps = if piece.kind == Kind::Knight {
                        knight_steps()
                    } else {
                        king_steps()
                    };
                    for (f, r) in steps {
                        if let Some(to) = from.offset(f, r) {
                            if empty(to) || enemy(to) {
                                out.push(Move::new(from, to));
                            }
                        }
                    }
                }
                kind => {
                    let dirs: Vec<(i32, i32)> = match kind {
                        Kind::Rook => ROOK_DIRS.to_vec(),
                        Kind::Bishop => BISHOP_DIRS.to_vec(),
                        _ => [ROOK_DIRS, BISHOP_DIRS].concat(),
                    };
                    for (f, r) in dirs {
                        let mut s = from.offset(f, r);
                        while let Some(to) = s {
                            if empty(to) || enemy(to) {
                                out.push(Move::new(from, to));
                            }
                            if !empty(to) {
                                break;
                            }
                            s = to.offset(f, r);
                        }
                    }
                }
            }
        }
        for castle in castles(us) {
            if self.rights[castle.right]
                && castle.empty.iter().all(|&s| empty(s))
                && castle.safe.iter().all(|&s| !attacked(&self.board, s, !us))
            {
                out.push(Move::new(self.king(us), castle.king_to));
            }
        }
        out
    }

    /// Whether `mv` obeys rules 5 and 6 and leaves the mover's king safe.
    fn allows(&self, mv: Move) -> bool {
        let us = self.side;
        let kind = self.board[mv.from.index()].unwrap().kind;
        if self.must_move_king(us) && kind != Kind::King {
            return false;
        }
        if self.banned(us) == Some(kind) {
            return false;
        }
        let king = if kind == Kind::King {
            mv.to
        } else {
            self.king(us)
        };
        !attacked(&self.board_after(mv), king, !us)
    }

    fn legal_moves(&self) -> HashSet<Move> {
        self.pseudo_moves()
            .into_iter()
            .filter(|&mv| self.allows(mv))
            .collect()
    }

    /// The board after `mv`: en passant removes the pawn that stepped,
    /// castling moves the rook too.
    fn board_after(&self, mv: Move) -> Board {
        let mut board = self.board;
        let (from, to) = (mv.from, mv.to);
        let piece = board[from.index()].unwrap();
        if piece.kind == Kind::Pawn && from.file() != to.file() && board[to.index()].is_none() {
            let (victim, _) = self.ep.as_ref().unwrap();
            board[victim.index()] = None;
        }
        board[from.index()] = None;
        board[to.index()] = Some(match mv.promotion {
            Some(kind) => Piece::new(piece.color, kind),
            None => piece,
        });
        if piece.kind == Kind::King && from.file().abs_diff(to.file()) == 3 {
            let castle = castles(piece.color)
                .into_iter()
                .find(|c| c.king_to == to)
                .unwrap();
            let (rook_from, rook_to) = castle.rook;
            board[rook_to.index()] = board[rook_from.index()].take();
        }
        board
    }

    fn after(&self, mv: Move) -> Model {
        let mut next = self.clone();
        let us = self.side;
        let (from, to) = (mv.from, mv.to);
        let piece = self.board[from.index()].unwrap();
        let captured = self.board[to.index()].is_some()
            || (piece.kind == Kind::Pawn && from.file() != to.file());
        next.board = self.board_after(mv);
        for (name, rights) in RIGHT_SQUARES {
            if from == sq(name) || to == sq(name) {
                for &r in rights {
                    next.rights[r] = false;
                }
            }
        }
        next.ep = None;
        if piece.kind == Kind::Pawn && from.rank().abs_diff(to.rank()) >= 2 {
            let passed = (1..from.rank().abs_diff(to.rank()) as i32)
                .map(|n| from.offset(0, n * forward(us)).unwrap())
                .collect();
            next.ep = Some((to, passed));
        }
        next.halfmove = if piece.kind == Kind::Pawn || captured {
            0
        } else {
            self.halfmove + 1
        };
        if self.rules == Rules::Full {
            if piece.kind == Kind::King {
                if let Some((first, _)) = control_period(us, self.fullmove) {
                    next.king_periods.insert((us, first));
                }
                next.runs[us.index()] = (None, 0);
            } else {
                let (kind, length) = self.runs[us.index()];
                next.runs[us.index()] = if kind == Some(piece.kind) {
                    (kind, length + 1)
                } else {
                    (Some(piece.kind), 1)
                };
            }
        }
        if us == Color::Black {
            next.fullmove += 1;
        }
        next.side = !us;
        next
    }

    /// RULES.md §7 position identity, as bytes; `legal` are the legal moves.
    fn identity(&self, legal: &[Move]) -> Vec<u8> {
        let mut id: Vec<u8> = self
            .board
            .iter()
            .map(|p| p.map_or(0, |p| 1 + p.color.index() as u8 * 6 + p.kind.index() as u8))
            .collect();
        id.push(self.side.index() as u8);
        id.extend(self.rights.map(u8::from));
        for color in Color::ALL {
            id.push(self.banned(color).map_or(9, |k| k.index() as u8));
            id.push(self.must_move_king(color).into());
        }
        // Legal en passant landing squares.
        let mut ep: Vec<u8> = legal
            .iter()
            .filter(|m| {
                self.board[m.from.index()].is_some_and(|p| p.kind == Kind::Pawn)
                    && m.from.file() != m.to.file()
                    && self.board[m.to.index()].is_none()
            })
            .map(|m| m.to.index() as u8)
            .collect();
        ep.sort();
        ep.dedup();
        id.extend(ep);
        id
    }

    /// Checks every piece of state the engine exposes against the model.
    fn assert_matches(&self, pos: &Position, parent: &Position, mv: Move) {
        for s in Square::all() {
            assert_eq!(
                pos.piece_at(s),
                self.board[s.index()],
                "{s} after {mv} from {parent:?}"
            );
        }
        assert_eq!(pos.side_to_move(), self.side, "after {mv} from {parent:?}");
        let bits = self
            .rights
            .iter()
            .enumerate()
            .filter(|(_, &r)| r)
            .fold(0u8, |acc, (i, _)| acc | 1 << i);
        assert_eq!(
            pos.castling_rights().bits(),
            bits,
            "after {mv} from {parent:?}"
        );
        let targets = self.ep_targets();
        match pos.en_passant() {
            None => assert!(targets.is_empty(), "after {mv} from {parent:?}"),
            Some(ep) => {
                assert_eq!(
                    Some(ep.victim),
                    self.ep.as_ref().map(|e| e.0),
                    "after {mv} from {parent:?}"
                );
                assert_eq!(ep.targets.collect::<Vec<_>>(), {
                    let mut t = targets;
                    t.sort();
                    t
                });
            }
        }
        assert_eq!(
            pos.halfmove_clock() as u32,
            self.halfmove,
            "after {mv} from {parent:?}"
        );
        assert_eq!(
            pos.fullmove_number() as u32,
            self.fullmove,
            "after {mv} from {parent:?}"
        );
        assert_eq!(
            pos.in_check(),
            self.in_check(),
            "after {mv} from {parent:?}"
        );
        for color in Color::ALL {
            assert_eq!(
                pos.must_move_king(color),
                self.must_move_king(color),
                "{color:?} after {mv} from {parent:?}"
            );
            assert_eq!(
                pos.king_moved_in_period(color),
                self.king_moved_in_period(color),
                "{color:?} after {mv} from {parent:?}"
            );
            assert_eq!(
                pos.banned_kind(color),
                self.banned(color),
                "{color:?} after {mv} from {parent:?}"
            );
            let (kind, length) = match self.rules {
                Rules::Full => self.runs[color.index()],
                Rules::Base => (None, 0),
            };
            let run = pos.run(color);
            assert_eq!(
                (run.kind, run.length as u32),
                (kind, length.min(2)),
                "after {mv} from {parent:?}"
            );
        }
    }

    /// The outcome RULES.md §7 gives; `repetitions` counts earlier occurrences.
    fn outcome(&self, legal: &HashSet<Move>, repetitions: usize) -> Option<Outcome> {
        if legal.is_empty() {
            return Some(if self.in_check() {
                Outcome::win(!self.side, Reason::Checkmate)
            } else if self.must_move_king(self.side) {
                Outcome::win(!self.side, Reason::KingQuota)
            } else {
                Outcome::draw(Reason::Stalemate)
            });
        }
        if repetitions >= 2 {
            Some(Outcome::draw(Reason::Threefold))
        } else if self.halfmove >= 100 {
            Some(Outcome::draw(Reason::FiftyMove))
        } else if self.board.iter().flatten().all(|p| p.kind == Kind::King) {
            Some(Outcome::draw(Reason::DeadPosition))
        } else {
            None
        }
    }
}

/// What the games reached, so that a weak seed cannot pass unnoticed.
#[derive(Default, Debug)]
struct Seen {
    positions: usize,
    castles: usize,
    en_passant: usize,
    en_passant_positions: usize,
    promotions: usize,
    triple_steps: usize,
    forced_king_moves: usize,
    banned_kinds: usize,
    outcomes: HashMap<Reason, usize>,
}

fn is_castling(pos: &Position, mv: Move) -> bool {
    pos.piece_at(mv.from).unwrap().kind == Kind::King && mv.from.file().abs_diff(mv.to.file()) == 3
}

fn is_en_passant(pos: &Position, mv: Move) -> bool {
    pos.piece_at(mv.from).unwrap().kind == Kind::Pawn
        && mv.from.file() != mv.to.file()
        && pos.piece_at(mv.to).is_none()
}

fn sorted(moves: impl IntoIterator<Item = Move>) -> Vec<String> {
    let mut v: Vec<String> = moves.into_iter().map(|m| m.to_string()).collect();
    v.sort();
    v
}

/// Checks the engine at one position; returns its legal moves.
fn check_position(pos: &Position, model: &Model, rng: &mut SmallRng, seen: &mut Seen) -> Vec<Move> {
    let saved = *pos;
    let legal: Vec<Move> = pos.legal_moves().to_vec();
    let set: HashSet<Move> = legal.iter().copied().collect();
    assert_eq!(set.len(), legal.len(), "duplicate moves in {pos:?}");
    let reference = model.legal_moves();
    assert!(
        set == reference,
        "legal moves differ in {pos:?}\nengine:    {:?}\nreference: {:?}",
        sorted(set.clone()),
        sorted(reference.clone())
    );
    assert_eq!(pos.count_legal_moves(), legal.len(), "{pos:?}");
    assert_eq!(pos.has_legal_moves(), !legal.is_empty(), "{pos:?}");
    assert_eq!(pos.key(), pos.key_from_scratch(), "{pos:?}");
    for by in [Color::White, Color::Black] {
        let cover = pos.coverage(by);
        let hanging = pos.hanging(by, &cover, &pos.coverage(!by));
        for sq in Square::all() {
            let kinds = attackers(&model.board, sq, by);
            let at = format!("{by:?} on {sq} in {pos:?}");
            assert_eq!(cover.once.has(sq), !kinds.is_empty(), "{at}");
            assert_eq!(cover.twice.has(sq), kinds.len() >= 2, "{at}");
            for kind in Kind::ALL {
                let by_kind = cover.by_kind[kind.index()].has(sq);
                assert_eq!(by_kind, kinds.contains(&kind), "{kind:?}: {at}");
            }
            let hangs_here = hanging.has(sq);
            assert_eq!(hangs_here, hangs(&model.board, sq, by), "hanging: {at}");
        }
    }

    let us = pos.side_to_move();
    for &mv in &legal {
        assert!(pos.is_legal(mv), "{mv} in {pos:?}");
        let child = pos.after(mv);
        assert!(
            !child.is_attacked(child.king(us), !us, child.occupied()),
            "{mv} leaves the king attacked in {pos:?}"
        );
        assert_eq!(child.key(), child.key_from_scratch(), "{mv} in {pos:?}");
    }
    // Moves the rules filter out, and random from/to pairs, are refused.
    for mv in model.pseudo_moves() {
        if !set.contains(&mv) {
            assert!(!pos.is_legal(mv), "{mv} in {pos:?}");
        }
    }
    for _ in 0..4 {
        let promotion = [None, Some(Kind::Queen), Some(Kind::Knight)]
            .choose(rng)
            .copied()
            .flatten();
        let mv = Move {
            from: Square::new(rng.random_range(0..100)),
            to: Square::new(rng.random_range(0..100)),
            promotion,
        };
        if !set.contains(&mv) {
            assert!(!pos.is_legal(mv), "{mv} in {pos:?}");
            assert!(pos.play(mv).is_err(), "{mv} in {pos:?}");
        }
    }
    assert_eq!(*pos, saved, "copy-make changed the parent");

    seen.positions += 1;
    if pos.must_move_king(us) && !legal.is_empty() {
        seen.forced_king_moves += 1;
    }
    if pos.banned_kind(us).is_some() {
        seen.banned_kinds += 1;
    }
    legal
}

/// Plays `games` seeded random games from `fen`, checking every position.
fn random_games(fen: &str, rules: Rules, seed: u64, games: usize, max_plies: usize) -> Seen {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut seen = Seen::default();
    let start = Position::from_fen_with_rules(fen, rules).unwrap();
    for _ in 0..games {
        let mut game = Game::new(start);
        let mut model = Model::new(&start);
        let mut history: HashMap<_, usize> = HashMap::new();
        for _ in 0..max_plies {
            let pos = *game.position();
            let legal = check_position(&pos, &model, &mut rng, &mut seen);
            let legal_set: HashSet<Move> = legal.iter().copied().collect();
            let count = history.entry(model.identity(&legal)).or_insert(0);
            assert_eq!(game.repetitions(), *count, "{}", pos.fen());
            *count += 1;
            let expected = model.outcome(&legal_set, game.repetitions());
            assert_eq!(game.outcome(), expected, "{}", pos.fen());
            if let Some(outcome) = expected {
                *seen.outcomes.entry(outcome.reason).or_insert(0) += 1;
                break;
            }

            // Castling and en passant are rare in random play: take them half
            // the time; and half the time prefer pawn moves, to reach promotions.
            let special: Vec<Move> = legal
                .iter()
                .copied()
                .filter(|&m| is_castling(&pos, m) || is_en_passant(&pos, m))
                .collect();
            let pawn_moves: Vec<Move> = legal
                .iter()
                .copied()
                .filter(|m| pos.piece_at(m.from).unwrap().kind == Kind::Pawn)
                .collect();
            let pool = if !special.is_empty() && rng.random_bool(0.5) {
                &special
            } else if !pawn_moves.is_empty() && rng.random_bool(0.5) {
                &pawn_moves
            } else {
                &legal
            };
            let mv = *pool.choose(&mut rng).unwrap();
            if legal.iter().any(|&m| is_en_passant(&pos, m)) {
                seen.en_passant_positions += 1;
            }
            if is_castling(&pos, mv) {
                seen.castles += 1;
            } else if is_en_passant(&pos, mv) {
                seen.en_passant += 1;
            } else if mv.promotion.is_some() {
                seen.promotions += 1;
            } else if pos.piece_at(mv.from).unwrap().kind == Kind::Pawn
                && mv.from.rank().abs_diff(mv.to.rank()) == 3
            {
                seen.triple_steps += 1;
            }

            game.play(mv).unwrap();
            model = model.after(mv);
            let next = *game.position();
            model.assert_matches(&next, &pos, mv);
            let text = next.fen();
            let parsed = Position::from_fen_with_rules(&text, rules).unwrap();
            assert_eq!(parsed, next, "FEN round trip of {text}");
            assert_eq!(parsed.fen(), text);
        }
    }
    seen
}

fn assert_covers(seen: &Seen, rules: Rules) {
    assert!(seen.castles > 0, "{seen:?}");
    assert!(seen.en_passant > 0, "{seen:?}");
    assert!(seen.promotions > 0, "{seen:?}");
    assert!(seen.triple_steps > 0, "{seen:?}");
    if rules == Rules::Full {
        assert!(seen.forced_king_moves > 0, "{seen:?}");
        assert!(seen.banned_kinds > 0, "{seen:?}");
    }
}

#[test]
fn full_rules_random_games_from_the_start() {
    let seen = random_games(START_FEN, Rules::Full, 1, 300, 80);
    assert_covers(&seen, Rules::Full);
    // Random play often fails the first king-move obligation.
    assert!(seen.outcomes.contains_key(&Reason::KingQuota), "{seen:?}");
}

#[test]
fn base_rules_random_games_from_the_start() {
    let seen = random_games(START_FEN, Rules::Base, 2, 250, 80);
    assert_covers(&seen, Rules::Base);
}

#[test]
fn full_rules_random_games_in_an_open_position() {
    // Few pieces: castling both ways, pawn races and endings come quickly.
    let fen = "r3nk3r/pppp2pppp/10/10/10/10/10/10/PPPP2PPPP/R3NK3R w KQkq - 0 1";
    let seen = random_games(fen, Rules::Full, 3, 300, 80);
    assert_covers(&seen, Rules::Full);
}

#[test]
fn random_games_with_pawns_facing_each_other() {
    // Pawns that can step past enemy pawns (en passant) and promote soon.
    let fen = "r4k3r/p1p1p1p1p1/10/10/1P1P1P1P1P/1p1p1p1p1p/10/10/P1P1P1P1P1/R4K3R w KQkq - 0 1";
    for (rules, seed) in [(Rules::Full, 5), (Rules::Base, 6)] {
        let seen = random_games(fen, rules, seed, 600, 40);
        assert_covers(&seen, rules);
    }
}

#[test]
fn castling_against_every_single_attacker() {
    // Castling rights on both sides and one enemy piece on each square in
    // turn: every case of castling out of, through or into attack.
    let mut rng = SmallRng::seed_from_u64(7);
    let mut seen = Seen::default();
    let mut home = [None; 100];
    for (name, c) in [
        ("a1", 'R'),
        ("f1", 'K'),
        ("k1", 'R'),
        ("a10", 'r'),
        ("f10", 'k'),
        ("k10", 'r'),
    ] {
        home[sq(name).index()] = Some(c);
    }
    for (side, enemies) in [("w", "qrbnp"), ("b", "QRBNP")] {
        for letter in enemies.chars() {
            for index in 0..100 {
                if home[index].is_some() {
                    continue;
                }
                let mut cells = home;
                cells[index] = Some(letter);
                let fen = format!("{} {side} KQkq - 0 1", common::board_field(&cells));
                // FEN refuses pawns on the back ranks.
                let Ok(pos) = Position::from_fen(&fen) else {
                    continue;
                };
                let model = Model::new(&pos);
                check_position(&pos, &model, &mut rng, &mut seen);
            }
        }
    }
    // 94 empty squares, less 14 on the back ranks for pawns.
    assert_eq!(seen.positions, 2 * (5 * 94 - 14));
}
