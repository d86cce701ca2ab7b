//! The position: pieces, side to move, castling, en passant, clocks and the
//! rule 5/6 history, with copy-make `play`.

use std::fmt;

use crate::attacks::{
    between, bishop_attacks, king_attacks, knight_attacks, pawn_attacks, queen_attacks,
    rook_attacks,
};
use crate::bitboard::Bitboard;
use crate::castles::{Castles, CastlingSide};
use crate::error::{FenError, MoveError};
use crate::rules::{control_period, Rules, Run};
use crate::types::{Color, Kind, Piece, Square, NUM_SQUARES};
use crate::zobrist;

/// Squares one side attacks at least once, at least twice, and with each
/// kind of piece ([`Position::coverage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Coverage {
    pub once: Bitboard,
    pub twice: Bitboard,
    /// The squares its pieces of each kind attack, by [`Kind::index`].
    pub by_kind: [Bitboard; Kind::ALL.len()],
}

/// The kinds in tiers of value, cheapest first: a capture by a lower tier
/// wins material ([`Position::hanging`]). A knight and a bishop are one
/// tier, as exchanges count them.
const VALUE_TIERS: [&[Kind]; 4] = [
    &[Kind::Pawn],
    &[Kind::Knight, Kind::Bishop],
    &[Kind::Rook],
    &[Kind::Queen],
];

/// A move in coordinate form. Castling is the king's move (`f1i1`); en
/// passant, double and triple steps are told apart by the position.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Move {
    pub from: Square,
    pub to: Square,
    pub promotion: Option<Kind>,
}

impl Move {
    pub const fn new(from: Square, to: Square) -> Move {
        Move {
            from,
            to,
            promotion: None,
        }
    }
}

impl fmt::Display for Move {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.from, self.to)?;
        if let Some(kind) = self.promotion {
            write!(f, "{}", kind.lower())?;
        }
        Ok(())
    }
}

/// En passant state after a 2- or 3-square pawn step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EnPassant {
    /// The pawn that stepped.
    pub victim: Square,
    /// Squares it passed over that an enemy pawn attacks (never empty).
    pub targets: Bitboard,
}

/// King and rook squares of one castling move.
pub struct CastlingMove {
    pub color: Color,
    pub side: CastlingSide,
    pub king_from: Square,
    pub king_to: Square,
    pub rook_from: Square,
    pub rook_to: Square,
    /// Squares that must be empty.
    pub empty: Bitboard,
    /// Squares the king stands on, passes or reaches: none may be attacked.
    pub safe: Bitboard,
}

const fn sq(file: u8, rank: u8) -> Square {
    Square::from_coords(file, rank)
}

const fn squares(files: &[u8], rank: u8) -> Bitboard {
    let mut bits = 0u128;
    let mut i = 0;
    while i < files.len() {
        bits |= 1u128 << (rank as usize * 10 + files[i] as usize);
        i += 1;
    }
    Bitboard(bits)
}

const fn castling_moves(color: Color) -> [CastlingMove; 2] {
    let rank = color as u8 * 9;
    [
        CastlingMove {
            color,
            side: CastlingSide::Short,
            king_from: sq(5, rank),
            king_to: sq(8, rank),
            rook_from: sq(9, rank),
            rook_to: sq(7, rank),
            empty: squares(&[6, 7, 8], rank),
            safe: squares(&[5, 6, 7, 8], rank),
        },
        CastlingMove {
            color,
            side: CastlingSide::Long,
            king_from: sq(5, rank),
            king_to: sq(2, rank),
            rook_from: sq(0, rank),
            rook_to: sq(3, rank),
            empty: squares(&[1, 2, 3, 4], rank),
            safe: squares(&[5, 4, 3, 2], rank),
        },
    ]
}

/// Castling moves by colour: short, then long (RULES.md §4).
pub static CASTLING: [[CastlingMove; 2]; 2] =
    [castling_moves(Color::White), castling_moves(Color::Black)];

#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Position {
    pub(crate) by_color: [Bitboard; 2],
    pub(crate) by_kind: [Bitboard; 6],
    pub(crate) board: [Option<Piece>; NUM_SQUARES],
    pub(crate) side: Color,
    pub(crate) castling: Castles,
    pub(crate) ep: Option<EnPassant>,
    pub(crate) halfmove: u16,
    pub(crate) fullmove: u16,
    pub(crate) rules: Rules,
    /// Rule 5: has this side moved its king in the control period of its next move?
    pub(crate) king_moved: [bool; 2],
    /// Rule 6: the kind each side moved last and how many turns in a row.
    pub(crate) runs: [Run; 2],
    /// Incremental part of the key: pieces, side, castling, rule 6 bans.
    pub(crate) hash: u64,
}

pub const START_FEN: &str =
    "rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 1";

impl Default for Position {
    fn default() -> Position {
        Position::start()
    }
}

impl Position {
    /// The start position under the full rules.
    pub fn start() -> Position {
        Position::from_fen(START_FEN).expect("start FEN is valid")
    }

    pub(crate) fn empty(rules: Rules) -> Position {
        Position {
            by_color: [Bitboard::EMPTY; 2],
            by_kind: [Bitboard::EMPTY; 6],
            board: [None; NUM_SQUARES],
            side: Color::White,
            castling: Castles::NONE,
            ep: None,
            halfmove: 0,
            fullmove: 1,
            rules,
            king_moved: [false; 2],
            runs: [Run::default(); 2],
            hash: zobrist::castling(Castles::NONE),
        }
    }

    /// The same position under other rules (rule 5/6 history is kept only under the full rules).
    pub fn with_rules(mut self, rules: Rules) -> Position {
        if rules == Rules::Base {
            self.set_run(Color::White, Run::default());
            self.set_run(Color::Black, Run::default());
            self.king_moved = [false; 2];
        }
        self.rules = rules;
        self
    }

    #[inline]
    pub fn side_to_move(&self) -> Color {
        self.side
    }
    #[inline]
    pub fn rules(&self) -> Rules {
        self.rules
    }
    #[inline]
    pub fn castling_rights(&self) -> Castles {
        self.castling
    }
    #[inline]
    pub fn en_passant(&self) -> Option<EnPassant> {
        self.ep
    }
    #[inline]
    pub fn halfmove_clock(&self) -> u16 {
        self.halfmove
    }
    #[inline]
    pub fn fullmove_number(&self) -> u16 {
        self.fullmove
    }
    #[inline]
    pub fn piece_at(&self, sq: Square) -> Option<Piece> {
        self.board[sq.index()]
    }
    #[inline]
    pub fn occupied(&self) -> Bitboard {
        self.by_color[0] | self.by_color[1]
    }
    #[inline]
    pub fn color(&self, color: Color) -> Bitboard {
        self.by_color[color.index()]
    }
    #[inline]
    pub fn kind(&self, kind: Kind) -> Bitboard {
        self.by_kind[kind.index()]
    }
    #[inline]
    pub fn pieces(&self, color: Color, kind: Kind) -> Bitboard {
        self.by_color[color.index()] & self.by_kind[kind.index()]
    }
    #[inline]
    pub fn king(&self, color: Color) -> Square {
        self.pieces(color, Kind::King)
            .first()
            .expect("every position has both kings")
    }
    /// Rule 5: whether `color` has moved its king in the control period of its next move.
    #[inline]
    pub fn king_moved_in_period(&self, color: Color) -> bool {
        self.king_moved[color.index()]
    }
    /// Rule 6 history of `color`.
    #[inline]
    pub fn run(&self, color: Color) -> Run {
        self.runs[color.index()]
    }

    /// The full-move number of `color`'s next move.
    #[inline]
    pub fn next_move_number(&self, color: Color) -> u32 {
        let n = self.fullmove as u32;
        if color == Color::White && self.side == Color::Black {
            n + 1
        } else {
            n
        }
    }

    /// Rule 5: `color`'s next move must be a king move.
    #[inline]
    pub fn must_move_king(&self, color: Color) -> bool {
        if self.rules == Rules::Base || self.king_moved[color.index()] {
            return false;
        }
        let n = self.next_move_number(color);
        matches!(control_period(color, n), Some(p) if p.last == n)
    }

    /// Rule 6: the kind `color` may not move next, if any.
    #[inline]
    pub fn banned_kind(&self, color: Color) -> Option<Kind> {
        match self.rules {
            Rules::Full => self.runs[color.index()].banned(),
            Rules::Base => None,
        }
    }

    /// Pieces of `by` that attack `sq`, with `occ` as the occupancy.
    #[inline]
    pub fn attackers(&self, sq: Square, by: Color, occ: Bitboard) -> Bitboard {
        let them = self.by_color[by.index()];
        let queens = self.by_kind[Kind::Queen.index()];
        let rooks = self.by_kind[Kind::Rook.index()] | queens;
        let bishops = self.by_kind[Kind::Bishop.index()] | queens;
        them & ((knight_attacks(sq) & self.by_kind[Kind::Knight.index()])
            | (king_attacks(sq) & self.by_kind[Kind::King.index()])
            | (pawn_attacks(!by, sq) & self.by_kind[Kind::Pawn.index()])
            | (rook_attacks(sq, occ) & rooks)
            | (bishop_attacks(sq, occ) & bishops))
    }

    /// The squares `by`'s pieces attack (pins and whose turn it is aside):
    /// those at least one piece attacks, those at least two do, and those
    /// each kind does.
    pub fn coverage(&self, by: Color) -> Coverage {
        let occ = self.occupied();
        let mut cover = Coverage::default();
        for kind in Kind::ALL {
            for sq in self.pieces(by, kind) {
                let attacks = match kind {
                    Kind::Pawn => pawn_attacks(by, sq),
                    Kind::Knight => knight_attacks(sq),
                    Kind::Bishop => bishop_attacks(sq, occ),
                    Kind::Rook => rook_attacks(sq, occ),
                    Kind::Queen => queen_attacks(sq, occ),
                    Kind::King => king_attacks(sq),
                };
                cover.twice |= cover.once & attacks;
                cover.once |= attacks;
                cover.by_kind[kind.index()] |= attacks;
            }
        }
        cover
    }

    /// `color`'s pieces, its king aside, that hang: those the opponent
    /// attacks and `color` does not defend, and those the opponent attacks
    /// with a piece of a lower tier (pawn; knight and bishop; rook; queen).
    /// A first capture's count, as a cue: whose turn it is, pins, x-rays and
    /// the exchanges after it are not weighed. `own` and `theirs` are the
    /// two sides' [`Position::coverage`], which callers often have already.
    pub fn hanging(&self, color: Color, own: &Coverage, theirs: &Coverage) -> Bitboard {
        let kings = self.by_kind[Kind::King.index()];
        let mut hanging = self.by_color[color.index()] & !kings & theirs.once & !own.once;
        let mut cheaper = Bitboard::EMPTY;
        for tier in VALUE_TIERS {
            for &kind in tier {
                hanging |= self.pieces(color, kind) & cheaper;
            }
            for &kind in tier {
                cheaper |= theirs.by_kind[kind.index()];
            }
        }
        hanging
    }

    #[inline]
    pub fn is_attacked(&self, sq: Square, by: Color, occ: Bitboard) -> bool {
        self.attackers(sq, by, occ).any()
    }

    /// Enemy pieces giving check to the side to move.
    #[inline]
    pub fn checkers(&self) -> Bitboard {
        self.attackers(self.king(self.side), !self.side, self.occupied())
    }

    #[inline]
    pub fn in_check(&self) -> bool {
        self.checkers().any()
    }

    /// The key for repetition: equal keys mean the same pieces, side, castling
    /// rights, legal en passant captures and rule 5/6 restrictions (RULES.md §7).
    pub fn key(&self) -> u64 {
        let mut key = self.hash;
        for color in Color::ALL {
            if self.must_move_king(color) {
                key ^= zobrist::forced(color);
            }
        }
        for target in self.legal_en_passant_targets() {
            key ^= zobrist::en_passant(target);
        }
        key
    }

    /// The key recomputed from scratch (for tests of the incremental one).
    pub fn key_from_scratch(&self) -> u64 {
        let mut pos = *self;
        pos.hash = pos.compute_hash();
        pos.key()
    }

    pub(crate) fn compute_hash(&self) -> u64 {
        let mut hash = zobrist::castling(self.castling);
        for sq in self.occupied() {
            let p = self.board[sq.index()].expect("board and bitboards agree");
            hash ^= zobrist::piece(p.color, p.kind, sq);
        }
        if self.side == Color::Black {
            hash ^= zobrist::side();
        }
        for color in Color::ALL {
            if let Some(kind) = self.banned_kind(color) {
                hash ^= zobrist::banned(color, kind);
            }
        }
        hash
    }

    /// This position with the pieces on `squares` taken off: castling
    /// rights go with their king or rook, and an en passant right lapses.
    /// Checked as a FEN's pieces are (a king taken off, or a king left in
    /// check with the other side to move, is an error).
    pub fn without_pieces(&self, squares: Bitboard) -> Result<Position, FenError> {
        let mut pos = *self;
        for sq in squares {
            if let Some(piece) = pos.board[sq.index()] {
                pos.remove(piece.color, piece.kind, sq);
                pos.set_castling(pos.castling.touched(sq));
            }
        }
        pos.ep = None;
        crate::fen::validate_pieces(&pos)?;
        Ok(pos)
    }

    #[inline]
    pub(crate) fn put(&mut self, color: Color, kind: Kind, sq: Square) {
        let bit = Bitboard::from_square(sq);
        self.by_color[color.index()] |= bit;
        self.by_kind[kind.index()] |= bit;
        self.board[sq.index()] = Some(Piece::new(color, kind));
        self.hash ^= zobrist::piece(color, kind, sq);
    }

    #[inline]
    fn remove(&mut self, color: Color, kind: Kind, sq: Square) {
        let bit = Bitboard::from_square(sq);
        self.by_color[color.index()] ^= bit;
        self.by_kind[kind.index()] ^= bit;
        self.board[sq.index()] = None;
        self.hash ^= zobrist::piece(color, kind, sq);
    }

    #[inline]
    fn shift(&mut self, color: Color, kind: Kind, from: Square, to: Square) {
        let bits = Bitboard::from_square(from) | Bitboard::from_square(to);
        self.by_color[color.index()] ^= bits;
        self.by_kind[kind.index()] ^= bits;
        self.board[to.index()] = self.board[from.index()].take();
        self.hash ^= zobrist::piece(color, kind, from) ^ zobrist::piece(color, kind, to);
    }

    #[inline]
    pub(crate) fn set_run(&mut self, color: Color, run: Run) {
        let old = self.runs[color.index()];
        if let Some(kind) = old.banned() {
            self.hash ^= zobrist::banned(color, kind);
        }
        if let Some(kind) = run.banned() {
            self.hash ^= zobrist::banned(color, kind);
        }
        self.runs[color.index()] = run;
    }

    #[inline]
    pub(crate) fn set_castling(&mut self, rights: Castles) {
        self.hash ^= zobrist::castling(self.castling) ^ zobrist::castling(rights);
        self.castling = rights;
    }

    /// Makes a move known to be legal (from the move generator).
    pub fn play_unchecked(&mut self, mv: Move) {
        let us = self.side;
        let them = !us;
        let (from, to) = (mv.from, mv.to);
        let kind = self.board[from.index()]
            .expect("a piece on the from-square")
            .kind;
        let captured = self.board[to.index()];
        let old_ep = self.ep.take();

        if let Some(victim) = captured {
            self.remove(them, victim.kind, to);
        }
        match kind {
            Kind::Pawn => {
                if captured.is_none() && from.file() != to.file() {
                    let victim =
                        old_ep.expect("a diagonal pawn move to an empty square is en passant");
                    self.remove(them, Kind::Pawn, victim.victim);
                }
                self.shift(us, Kind::Pawn, from, to);
                if let Some(promoted) = mv.promotion {
                    self.remove(us, Kind::Pawn, to);
                    self.put(us, promoted, to);
                }
                if from.rank().abs_diff(to.rank()) >= 2 {
                    let enemy_pawns = self.pieces(them, Kind::Pawn);
                    let targets: Bitboard = between(from, to)
                        .filter(|&sq| (pawn_attacks(us, sq) & enemy_pawns).any())
                        .collect();
                    if targets.any() {
                        self.ep = Some(EnPassant {
                            victim: to,
                            targets,
                        });
                    }
                }
            }
            Kind::King if from.file().abs_diff(to.file()) == 3 => {
                let castle = CASTLING[us.index()]
                    .iter()
                    .find(|c| c.king_to == to)
                    .expect("a 3-square king move is castling");
                self.shift(us, Kind::King, from, to);
                self.shift(us, Kind::Rook, castle.rook_from, castle.rook_to);
            }
            _ => self.shift(us, kind, from, to),
        }

        let kept = self.castling.touched(from).touched(to);
        if kept != self.castling {
            self.set_castling(kept);
        }

        if kind == Kind::Pawn || captured.is_some() {
            self.halfmove = 0;
        } else {
            self.halfmove = self.halfmove.saturating_add(1);
        }

        if self.rules == Rules::Full {
            self.record_rule_history(us, kind);
        }
        if us == Color::Black {
            self.fullmove = self.fullmove.saturating_add(1);
        }
        self.side = them;
        self.hash ^= zobrist::side();
    }

    /// Rule 5 and 6 bookkeeping for a move of `kind` by `us` (before the
    /// full-move number advances).
    #[inline]
    fn record_rule_history(&mut self, us: Color, kind: Kind) {
        let n = self.fullmove as u32;
        let period = control_period(us, n);
        let i = us.index();
        if kind == Kind::King && period.is_some() {
            self.king_moved[i] = true;
        }
        if control_period(us, n + 1) != period {
            self.king_moved[i] = false;
        }
        let run = self.runs[i].after(kind);
        if run != self.runs[i] {
            self.set_run(us, run);
        }
    }

    /// Whether `mv`, a legal move here, takes a piece (en passant included).
    pub fn is_capture(&self, mv: Move) -> bool {
        let us = self.side_to_move();
        self.color(!us).has(mv.to)
            || self
                .en_passant()
                .is_some_and(|ep| ep.targets.has(mv.to) && self.pieces(us, Kind::Pawn).has(mv.from))
    }

    /// Plays a move after checking that it is legal.
    pub fn play(&self, mv: Move) -> Result<Position, MoveError> {
        if !self.is_legal(mv) {
            return Err(MoveError::Illegal {
                mv: mv.to_string(),
                fen: self.fen(),
            });
        }
        let mut next = *self;
        next.play_unchecked(mv);
        Ok(next)
    }

    /// The position after a legal move.
    #[inline]
    pub fn after(&self, mv: Move) -> Position {
        let mut next = *self;
        next.play_unchecked(mv);
        next
    }

    /// Parses a coordinate move and checks that it is legal here.
    pub fn parse_move(&self, text: &str) -> Result<Move, MoveError> {
        let mv = parse_coordinate(text)?;
        if self.is_legal(mv) {
            Ok(mv)
        } else {
            Err(MoveError::Illegal {
                mv: text.to_string(),
                fen: self.fen(),
            })
        }
    }

    /// Material and board as text, White at the bottom.
    pub fn board_text(&self) -> String {
        let mut out = String::new();
        for rank in (0..10u8).rev() {
            out.push_str(&format!("{:>2} ", rank + 1));
            for file in 0..10u8 {
                let c =
                    self.board[Square::from_coords(file, rank).index()].map_or('.', Piece::char);
                out.push(' ');
                out.push(c);
            }
            out.push('\n');
        }
        out.push_str("    a b c d e f g h i k\n");
        out
    }
}

/// Parses `e2e5`, `f1i1`, `e9e10q` without looking at a position.
pub fn parse_coordinate(text: &str) -> Result<Move, MoveError> {
    let err = || MoveError::Syntax(text.to_string());
    let (from, used) = Square::parse_prefix(text).ok_or_else(err)?;
    let rest = &text[used..];
    let (to, used) = Square::parse_prefix(rest).ok_or_else(err)?;
    let promotion = match &rest[used..] {
        "" => None,
        p if p.len() == 1 => {
            let kind = Kind::from_char(p.chars().next().ok_or_else(err)?).ok_or_else(err)?;
            if matches!(kind, Kind::Pawn | Kind::King) {
                return Err(err());
            }
            Some(kind)
        }
        _ => return Err(err()),
    };
    Ok(Move {
        from,
        to,
        promotion,
    })
}

impl fmt::Debug for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Position({})", self.fen())
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.board_text())
    }
}
