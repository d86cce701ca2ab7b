//! FEN on 10 files (RULES.md §8), with two optional trailing fields for the
//! rule 5/6 state:
//!
//! 7. king moves: `K` if White has moved its king in the control period of its
//!    next move, `k` likewise for Black, `-` for neither;
//! 8. rule 6 runs: the kind each side moved on its last turns and how many
//!    turns in a row, White upper case then Black lower case (`N2p1`), or `-`.
//!
//! Absent fields mean "no king move yet in this period, no kind moved yet";
//! the writer leaves them out when they say exactly that, so classical FENs
//! round-trip unchanged.

use crate::attacks::{between, pawn_attacks};
use crate::bitboard::Bitboard;
use crate::castles::{Castles, CastlingSide};
use crate::error::FenError;
use crate::position::{EnPassant, Position, CASTLING};
use crate::rules::{Rules, Run};
use crate::types::{Color, Kind, Piece, Square, SIZE};

const CASTLING_CHARS: [(char, Color, CastlingSide); 4] = [
    ('K', Color::White, CastlingSide::Short),
    ('Q', Color::White, CastlingSide::Long),
    ('k', Color::Black, CastlingSide::Short),
    ('q', Color::Black, CastlingSide::Long),
];

impl Position {
    /// Reads a FEN under the full rules.
    pub fn from_fen(fen: &str) -> Result<Position, FenError> {
        Position::from_fen_with_rules(fen, Rules::Full)
    }

    pub fn from_fen_with_rules(fen: &str, rules: Rules) -> Result<Position, FenError> {
        if !fen
            .chars()
            .all(|c| c.is_ascii_graphic() || c.is_ascii_whitespace())
        {
            return Err(FenError::NotAscii);
        }
        let fields: Vec<&str> = fen.split_whitespace().collect();
        if fields.len() != 6 && fields.len() != 8 {
            return Err(FenError::FieldCount(fields.len()));
        }
        let mut pos = Position::empty(Rules::Full);
        parse_board(&mut pos, fields[0])?;
        pos.side = match fields[1] {
            "w" => Color::White,
            "b" => Color::Black,
            other => return Err(FenError::SideToMove(other.to_string())),
        };
        pos.set_castling(parse_castling(fields[2])?);
        pos.halfmove = fields[4]
            .parse::<u16>()
            .ok()
            .filter(|&n| n <= 10_000)
            .ok_or_else(|| FenError::HalfmoveClock(fields[4].to_string()))?;
        pos.fullmove = fields[5]
            .parse::<u16>()
            .ok()
            .filter(|&n| (1..=10_000).contains(&n))
            .ok_or_else(|| FenError::FullmoveNumber(fields[5].to_string()))?;
        if fields.len() == 8 {
            pos.king_moved = parse_king_moves(fields[6])?;
            for (color, run) in parse_runs(fields[7])? {
                pos.set_run(color, run);
            }
        }
        if pos.side == Color::Black {
            pos.hash ^= crate::zobrist::side();
        }
        validate_pieces(&pos)?;
        pos.ep = parse_en_passant(&pos, fields[3])?;
        Ok(pos.with_rules(rules))
    }

    /// The FEN, with the rule 5/6 fields only when they differ from the default.
    pub fn fen(&self) -> String {
        let mut out = String::new();
        for rank in (0..SIZE as u8).rev() {
            let mut gap = 0;
            for file in 0..SIZE as u8 {
                match self.piece_at(Square::from_coords(file, rank)) {
                    Some(piece) => {
                        if gap > 0 {
                            out.push_str(&gap.to_string());
                            gap = 0;
                        }
                        out.push(piece.char());
                    }
                    None => gap += 1,
                }
            }
            if gap > 0 {
                out.push_str(&gap.to_string());
            }
            if rank > 0 {
                out.push('/');
            }
        }
        out.push(' ');
        out.push(self.side.char());
        out.push(' ');
        out.push_str(&self.castling_field());
        out.push(' ');
        match self.ep {
            Some(ep) => ep.targets.for_each(|sq| out.push_str(&sq.to_string())),
            None => out.push('-'),
        }
        out.push_str(&format!(" {} {}", self.halfmove, self.fullmove));
        let (king_moves, runs) = (self.king_moves_field(), self.runs_field());
        if king_moves != "-" || runs != "-" {
            out.push_str(&format!(" {king_moves} {runs}"));
        }
        out
    }

    /// The FEN without the rule 5/6 fields, for engines that do not know them.
    pub fn classical_fen(&self) -> String {
        self.fen().split(' ').take(6).collect::<Vec<_>>().join(" ")
    }

    fn castling_field(&self) -> String {
        dash_if_empty(
            CASTLING_CHARS
                .iter()
                .filter(|&&(_, color, side)| self.castling.has(color, side))
                .map(|(c, _, _)| *c)
                .collect(),
        )
    }

    fn king_moves_field(&self) -> String {
        let mut field = String::new();
        if self.king_moved[Color::White.index()] {
            field.push('K');
        }
        if self.king_moved[Color::Black.index()] {
            field.push('k');
        }
        dash_if_empty(field)
    }

    fn runs_field(&self) -> String {
        let mut field = String::new();
        for color in Color::ALL {
            let run = self.runs[color.index()];
            if let Some(kind) = run.kind {
                field.push(Piece::new(color, kind).char());
                field.push_str(&run.length.to_string());
            }
        }
        dash_if_empty(field)
    }
}

/// A FEN field, or `-` when it has nothing to say.
fn dash_if_empty(field: String) -> String {
    if field.is_empty() {
        "-".into()
    } else {
        field
    }
}

fn parse_board(pos: &mut Position, board: &str) -> Result<(), FenError> {
    let ranks: Vec<&str> = board.split('/').collect();
    if ranks.len() != SIZE {
        return Err(FenError::RankCount(ranks.len()));
    }
    for (i, text) in ranks.iter().enumerate() {
        let rank = (SIZE - 1 - i) as u8;
        let mut file = 0usize;
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            if c.is_ascii_digit() {
                let mut run = c.to_digit(10).unwrap_or(0) as usize;
                while let Some(d) = chars.peek().and_then(|d| d.to_digit(10)) {
                    run = run * 10 + d as usize;
                    chars.next();
                    if run > SIZE {
                        break;
                    }
                }
                if run == 0 || file + run > SIZE {
                    return Err(FenError::RankLength {
                        rank: rank as usize + 1,
                        squares: file + run.max(1),
                    });
                }
                file += run;
            } else {
                let piece = Piece::from_char(c).ok_or(FenError::UnknownPiece(c))?;
                if file >= SIZE {
                    return Err(FenError::RankLength {
                        rank: rank as usize + 1,
                        squares: file + 1,
                    });
                }
                pos.put(
                    piece.color,
                    piece.kind,
                    Square::from_coords(file as u8, rank),
                );
                file += 1;
            }
        }
        if file != SIZE {
            return Err(FenError::RankLength {
                rank: rank as usize + 1,
                squares: file,
            });
        }
    }
    Ok(())
}

fn parse_castling(field: &str) -> Result<Castles, FenError> {
    if field == "-" {
        return Ok(Castles::NONE);
    }
    let mut rights = Castles::NONE;
    for c in field.chars() {
        let &(_, color, side) = CASTLING_CHARS
            .iter()
            .find(|(ch, _, _)| *ch == c)
            .ok_or_else(|| FenError::CastlingField(field.to_string()))?;
        if rights.has(color, side) {
            return Err(FenError::CastlingField(field.to_string()));
        }
        rights = rights.with(color, side);
    }
    Ok(rights)
}

fn parse_king_moves(field: &str) -> Result<[bool; 2], FenError> {
    let err = || FenError::KingMoveField(field.to_string());
    match field {
        "-" => Ok([false, false]),
        "K" => Ok([true, false]),
        "k" => Ok([false, true]),
        "Kk" => Ok([true, true]),
        _ => Err(err()),
    }
}

fn parse_runs(field: &str) -> Result<Vec<(Color, Run)>, FenError> {
    let err = || FenError::RunField(field.to_string());
    if field == "-" {
        return Ok(Vec::new());
    }
    let bytes = field.as_bytes();
    if bytes.len() % 2 != 0 || bytes.len() > 4 {
        return Err(err());
    }
    let mut runs = Vec::new();
    for pair in bytes.chunks(2) {
        let piece = Piece::from_char(pair[0] as char).ok_or_else(err)?;
        let length = match pair[1] {
            b'1' => 1,
            b'2' => 2,
            _ => return Err(err()),
        };
        let expected = if runs.is_empty() && piece.color == Color::White {
            Color::White
        } else {
            Color::Black
        };
        if piece.kind == Kind::King || piece.color != expected {
            return Err(err());
        }
        runs.push((
            piece.color,
            Run {
                kind: Some(piece.kind),
                length,
            },
        ));
    }
    Ok(runs)
}

/// The checks of a FEN's pieces that any position must pass.
pub(crate) fn validate_pieces(pos: &Position) -> Result<(), FenError> {
    for color in Color::ALL {
        let count = pos.pieces(color, Kind::King).count();
        if count != 1 {
            return Err(FenError::KingCount {
                color: color.name(),
                count,
            });
        }
    }
    let back_ranks = Bitboard::rank(0) | Bitboard::rank(SIZE as u8 - 1);
    if let Some(sq) = (pos.kind(Kind::Pawn) & back_ranks).first() {
        return Err(FenError::PawnOnBackRank(sq.to_string()));
    }
    let waiting = !pos.side;
    if pos.is_attacked(pos.king(waiting), pos.side, pos.occupied()) {
        return Err(FenError::OpponentInCheck);
    }
    for (c, color, side) in CASTLING_CHARS {
        let castle = &CASTLING[color.index()][side as usize];
        if pos.castling.has(color, side)
            && !(pos.pieces(color, Kind::King).has(castle.king_from)
                && pos.pieces(color, Kind::Rook).has(castle.rook_from))
        {
            return Err(FenError::CastlingWithoutPieces(c));
        }
    }
    Ok(())
}

/// Any passed-over square names the pawn; every square it passed over is a
/// target, kept when an enemy pawn attacks it.
fn parse_en_passant(pos: &Position, field: &str) -> Result<Option<EnPassant>, FenError> {
    if field == "-" {
        return Ok(None);
    }
    let impossible = |why| FenError::ImpossibleEnPassant {
        field: field.to_string(),
        why,
    };
    let mut squares = Vec::new();
    let mut rest = field;
    while !rest.is_empty() {
        let (sq, used) = Square::parse_prefix(rest)
            .ok_or_else(|| FenError::EnPassantField(field.to_string()))?;
        squares.push(sq);
        rest = &rest[used..];
    }
    if squares.len() > 2 {
        return Err(impossible("a pawn passes over at most two squares"));
    }
    let mover = !pos.side;
    let start_rank = mover.pawn_rank() as i32;
    let dir = if mover == Color::White { 1 } else { -1 };
    let mut victim: Option<Square> = None;
    for &sq in &squares {
        let distance = (sq.rank() as i32 - start_rank) * dir;
        if !(1..=2).contains(&distance) {
            return Err(impossible(
                "not a square a pawn of the side that just moved passes over",
            ));
        }
        // The pawn stands one or two squares beyond the passed-over square.
        let found = (1..=3 - distance).find_map(|ahead| {
            let stand = sq.offset(0, ahead * dir)?;
            (pos.piece_at(stand) == Some(Piece::new(mover, Kind::Pawn))
                && between(Square::from_coords(sq.file(), start_rank as u8), stand)
                    .all(|s| pos.piece_at(s).is_none()))
            .then_some(stand)
        });
        let Some(found) = found else {
            return Err(impossible("no pawn that could just have passed over it"));
        };
        if victim.is_some_and(|v| v != found) {
            return Err(impossible("the squares name different pawns"));
        }
        victim = Some(found);
    }
    let victim = victim.ok_or_else(|| FenError::EnPassantField(field.to_string()))?;
    let start = Square::from_coords(victim.file(), start_rank as u8);
    if pos.piece_at(start).is_some() {
        return Err(impossible("the pawn's start square is occupied"));
    }
    let enemy_pawns = pos.pieces(pos.side, Kind::Pawn);
    let targets: Bitboard = between(start, victim)
        .filter(|&sq| (pawn_attacks(mover, sq) & enemy_pawns).any())
        .collect();
    Ok(targets.any().then_some(EnPassant { victim, targets }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::position::START_FEN;

    #[test]
    fn start_position_round_trips() {
        let pos = Position::start();
        assert_eq!(pos.fen(), START_FEN);
        assert_eq!(pos.count_legal_moves(), 38);
    }

    #[test]
    fn extension_fields_round_trip() {
        let fen =
            "rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 7 k N2p1";
        let pos = Position::from_fen(fen).unwrap();
        assert_eq!(pos.fen(), fen);
        assert_eq!(pos.banned_kind(Color::White), Some(Kind::Knight));
        assert_eq!(pos.banned_kind(Color::Black), None);
        assert!(pos.king_moved_in_period(Color::Black));
        let plain =
            "rnnbqkbnnr/pppppppppp/10/10/10/10/10/10/PPPPPPPPPP/RNNBQKBNNR w KQkq - 0 7 - -";
        assert_eq!(
            Position::from_fen(plain).unwrap().fen(),
            plain.trim_end_matches(" - -")
        );
    }

    #[test]
    fn en_passant_field_names_every_passed_square() {
        let fen = "r4k3r/pp2pppppp/10/10/10/3pP5/3p6/10/PPP2PPPPP/R4K3R b KQkq e3 0 1";
        let pos = Position::from_fen(fen).unwrap();
        let ep = pos.en_passant().unwrap();
        assert_eq!(ep.victim.to_string(), "e5");
        assert_eq!(ep.targets.count(), 2);
        assert!(pos.fen().contains(" e3e4 "));
    }

    #[test]
    fn each_error_is_typed() {
        use FenError::*;
        type Check = fn(&FenError) -> bool;
        #[rustfmt::skip]
        let cases: &[(&str, Check)] = &[
            ("10/10 w - -",                                  |e| matches!(e, FieldCount(4))),
            ("10/10 w - - 0 1 a b c",                        |e| matches!(e, FieldCount(9))),
            ("k9/10/10/10/10/10/10/10/9K w - - 0 1",         |e| matches!(e, RankCount(9))),
            ("k9/10/10/10/10/10/10/10/10/9 w - - 0 1",       |e| matches!(e, RankLength { .. })),
            ("k9/10/10/10/10/10/10/10/10/8K2 w - - 0 1",     |e| matches!(e, RankLength { .. })),
            ("k9/10/10/10/10/10/10/10/10/9X w - - 0 1",      |e| matches!(e, UnknownPiece('X'))),
            ("k8k/10/10/10/10/10/10/10/10/9K w - - 0 1",     |e| matches!(e, KingCount { .. })),
            ("k9/10/10/10/10/10/10/10/10/10 w - - 0 1",      |e| matches!(e, KingCount { .. })),
            ("kP8/10/10/10/10/10/10/10/10/9K w - - 0 1",     |e| matches!(e, PawnOnBackRank(_))),
            ("k9/10/10/10/10/10/10/10/10/9K x - - 0 1",      |e| matches!(e, SideToMove(_))),
            ("k8R/10/10/10/10/10/10/10/10/9K w - - 0 1",     |e| matches!(e, OpponentInCheck)),
            ("k9/10/10/10/10/10/10/10/10/9K w X - 0 1",      |e| matches!(e, CastlingField(_))),
            ("k9/10/10/10/10/10/10/10/10/9K w K - 0 1",      |e| matches!(e, CastlingWithoutPieces('K'))),
            ("k9/10/10/10/10/10/10/10/10/9K w - z9 0 1",     |e| matches!(e, EnPassantField(_))),
            ("k9/10/10/10/10/10/10/10/10/9K w - e8 0 1",     |e| matches!(e, ImpossibleEnPassant { .. })),
            ("k9/10/10/10/10/10/10/10/10/9K w - - x 1",      |e| matches!(e, HalfmoveClock(_))),
            ("k9/10/10/10/10/10/10/10/10/9K w - - 0 0",      |e| matches!(e, FullmoveNumber(_))),
            ("k9/10/10/10/10/10/10/10/10/9K w - - 0 1 X -",  |e| matches!(e, KingMoveField(_))),
            ("k9/10/10/10/10/10/10/10/10/9K w - - 0 1 - K2", |e| matches!(e, RunField(_))),
        ];
        for (fen, check) in cases {
            let err = Position::from_fen(fen).expect_err(fen);
            assert!(check(&err), "{fen}: {err:?}");
        }
    }
}
