//! Legal move generation: checks, pins and evasions are computed, not found by
//! make-and-test (en passant, which is rare, is the one exception). Rules 5
//! and 6 prune whole piece kinds, so they cost nothing per move.

use arrayvec::ArrayVec;

use crate::attacks::{
    between, bishop_attacks, bishop_rays, king_attacks, knight_attacks, line, pawn_attacks,
    queen_attacks, rook_attacks, rook_rays,
};
use crate::bitboard::Bitboard;
use crate::position::{Move, Position, CASTLING};
use crate::types::{Color, Kind, Square};

/// Upper bound on legal moves in a Chess-mix position (eleven queens and all
/// other pieces in the open stay below it).
pub const MAX_MOVES: usize = 768;

pub type MoveList = ArrayVec<Move, MAX_MOVES>;

/// The legal moves of one piece: every square of `to`, each pawn move to the
/// last rank standing for four promotions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PieceMoves {
    pub kind: Kind,
    pub from: Square,
    pub to: Bitboard,
}

impl PieceMoves {
    /// Number of moves, promotions counted one by one.
    #[inline]
    pub fn len(&self, color: Color) -> usize {
        let mut n = self.to.count();
        if self.kind == Kind::Pawn {
            n += 3 * (self.to & Bitboard::rank(color.promotion_rank())).count();
        }
        n as usize
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.to.is_empty()
    }

    /// Calls `f` on each move; stops and returns true when `f` does.
    #[inline]
    pub fn for_each(&self, color: Color, mut f: impl FnMut(Move) -> bool) -> bool {
        let last_rank = Bitboard::rank(color.promotion_rank());
        for to in self.to {
            if self.kind == Kind::Pawn && last_rank.has(to) {
                for kind in Kind::PROMOTIONS {
                    if f(Move {
                        from: self.from,
                        to,
                        promotion: Some(kind),
                    }) {
                        return true;
                    }
                }
            } else if f(Move::new(self.from, to)) {
                return true;
            }
        }
        false
    }
}

impl Position {
    /// Calls `emit` with the legal moves of each piece that has some; stops
    /// and returns true as soon as `emit` returns true.
    #[inline]
    pub fn generate(&self, mut emit: impl FnMut(PieceMoves) -> bool) -> bool {
        let us = self.side;
        let them = !us;
        let ours = self.color(us);
        let occ = self.occupied();
        let king = self.king(us);
        let checkers = self.attackers(king, them, occ);

        let mut king_to = Bitboard::EMPTY;
        let occ_without_king = occ.without(king);
        for to in king_attacks(king) & !ours {
            if !self.is_attacked(to, them, occ_without_king) {
                king_to = king_to.with(to);
            }
        }
        if checkers.is_empty() && !self.castling.is_empty() {
            for castle in &CASTLING[us.index()] {
                if self.castling.has(castle.color, castle.side)
                    && (castle.empty & occ).is_empty()
                    && castle
                        .safe
                        .into_iter()
                        .all(|sq| !self.is_attacked(sq, them, occ))
                {
                    king_to = king_to.with(castle.king_to);
                }
            }
        }
        if king_to.any()
            && emit(PieceMoves {
                kind: Kind::King,
                from: king,
                to: king_to,
            })
        {
            return true;
        }
        if checkers.several() || self.must_move_king(us) {
            return false;
        }

        let target = match checkers.first() {
            Some(checker) => between(king, checker).with(checker),
            None => !ours,
        };
        let banned = self.banned_kind(us);
        let pinned = self.pinned(us, king, occ);
        let mut pieces = |kind: Kind, attacks: &dyn Fn(Square) -> Bitboard| -> bool {
            if banned == Some(kind) {
                return false;
            }
            for from in self.pieces(us, kind) {
                let mut to = attacks(from) & target;
                if pinned.has(from) {
                    to &= line(king, from);
                }
                if to.any() && emit(PieceMoves { kind, from, to }) {
                    return true;
                }
            }
            false
        };
        if pieces(Kind::Knight, &|sq| {
            if pinned.has(sq) {
                Bitboard::EMPTY
            } else {
                knight_attacks(sq)
            }
        }) || pieces(Kind::Bishop, &|sq| bishop_attacks(sq, occ))
            || pieces(Kind::Rook, &|sq| rook_attacks(sq, occ))
            || pieces(Kind::Queen, &|sq| queen_attacks(sq, occ))
        {
            return true;
        }

        if banned == Some(Kind::Pawn) {
            return false;
        }
        let theirs = self.color(them);
        let empty = !occ;
        let (step, start_rank) = match us {
            Color::White => (10i32, 1u8),
            Color::Black => (-10i32, 8u8),
        };
        let ahead = |sq: Square, n: i32| Square::new((sq.index() as i32 + step * n) as u8);
        for from in self.pieces(us, Kind::Pawn) {
            let mut to = pawn_attacks(us, from) & theirs;
            let one = ahead(from, 1);
            if empty.has(one) {
                to = to.with(one);
                if from.rank() == start_rank {
                    let two = ahead(from, 2);
                    if empty.has(two) {
                        to = to.with(two);
                        let three = ahead(from, 3);
                        if empty.has(three) {
                            to = to.with(three);
                        }
                    }
                }
            }
            to &= target;
            if pinned.has(from) {
                to &= line(king, from);
            }
            if to.any()
                && emit(PieceMoves {
                    kind: Kind::Pawn,
                    from,
                    to,
                })
            {
                return true;
            }
        }
        if let Some(ep) = self.ep {
            for to in ep.targets {
                for from in pawn_attacks(them, to) & self.pieces(us, Kind::Pawn) {
                    if self.en_passant_is_safe(from, to, ep.victim)
                        && emit(PieceMoves {
                            kind: Kind::Pawn,
                            from,
                            to: Bitboard::from(to),
                        })
                    {
                        return true;
                    }
                }
            }
        }
        false
    }

    /// Own pieces pinned to the king.
    #[inline]
    fn pinned(&self, us: Color, king: Square, occ: Bitboard) -> Bitboard {
        let them = !us;
        let queens = self.pieces(them, Kind::Queen);
        let snipers = (rook_rays(king) & (self.pieces(them, Kind::Rook) | queens))
            | (bishop_rays(king) & (self.pieces(them, Kind::Bishop) | queens));
        let mut pinned = Bitboard::EMPTY;
        for sniper in snipers {
            let blockers = between(king, sniper) & occ;
            if !blockers.several() {
                pinned |= blockers & self.color(us);
            }
        }
        pinned
    }

    /// Whether capturing en passant from `from` to `to` leaves the king safe.
    fn en_passant_is_safe(&self, from: Square, to: Square, victim: Square) -> bool {
        let us = self.side;
        let occ = self.occupied().without(from).without(victim).with(to);
        (self.attackers(self.king(us), !us, occ) & !Bitboard::from(victim)).is_empty()
    }

    /// Squares where a legal en passant capture can land now.
    pub fn legal_en_passant_targets(&self) -> Bitboard {
        let Some(ep) = self.ep else {
            return Bitboard::EMPTY;
        };
        let mut targets = Bitboard::EMPTY;
        self.generate(|moves| {
            if moves.kind == Kind::Pawn {
                let pawn_captures_to_empty =
                    moves.to & ep.targets & pawn_attacks(self.side, moves.from);
                targets |= pawn_captures_to_empty;
            }
            false
        });
        targets
    }

    /// Calls `f` on every legal move; stops and returns true when `f` does.
    #[inline]
    pub fn for_each_legal_move(&self, mut f: impl FnMut(Move) -> bool) -> bool {
        let color = self.side;
        self.generate(|moves| moves.for_each(color, &mut f))
    }

    pub fn legal_moves(&self) -> MoveList {
        let mut list = MoveList::new();
        self.for_each_legal_move(|mv| {
            list.push(mv);
            false
        });
        list
    }

    /// Number of legal moves (what perft counts at its last ply).
    #[inline]
    pub fn count_legal_moves(&self) -> usize {
        let color = self.side;
        let mut n = 0;
        self.generate(|moves| {
            n += moves.len(color);
            false
        });
        n
    }

    #[inline]
    pub fn has_legal_moves(&self) -> bool {
        self.generate(|_| true)
    }

    pub fn is_legal(&self, mv: Move) -> bool {
        let color = self.side;
        self.generate(|moves| moves.from == mv.from && moves.for_each(color, |m| m == mv))
    }
}
