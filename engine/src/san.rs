//! Standard algebraic notation on the 10x10 board (RULES.md §8): `e5`, `Nhg3`,
//! `R10d5`, `exd4`, `O-O`, `e10=Q+`, `Qxf10#`.

use crate::bitboard::Bitboard;
use crate::error::SanError;
use crate::position::{parse_coordinate, Move, Position, CASTLING};
use crate::types::{file_from_char, Kind, Square, SIZE};

/// What a SAN string says about its move.
struct Pattern {
    kind: Kind,
    file: Option<u8>,
    rank: Option<u8>,
    to: Square,
    promotion: Option<Kind>,
}

impl Position {
    /// The SAN of a legal move. A move that is not legal here has no SAN; it
    /// is written in coordinates instead.
    pub fn san(&self, mv: Move) -> String {
        let us = self.side_to_move();
        let Some(piece) = self.piece_at(mv.from).filter(|p| p.color == us) else {
            return mv.to_string();
        };
        let mut legal = false;
        // Other pieces of the same kind that can reach the same square.
        let mut rivals = Bitboard::EMPTY;
        self.generate(|moves| {
            if moves.from == mv.from {
                legal = moves.for_each(us, |m| m == mv);
            } else if moves.kind == piece.kind && moves.to.has(mv.to) {
                rivals = rivals.with(moves.from);
            }
            false
        });
        if !legal {
            return mv.to_string();
        }

        let mut out = String::new();
        match piece.kind {
            // The only king move of three files is castling.
            Kind::King if mv.from.file().abs_diff(mv.to.file()) == 3 => {
                out.push_str(if mv.to.file() > mv.from.file() {
                    "O-O"
                } else {
                    "O-O-O"
                });
            }
            // Pawns need no disambiguation: a capture names its file, and a
            // push has only one candidate (the nearest pawn behind).
            Kind::Pawn => {
                if mv.from.file() != mv.to.file() {
                    out.push(mv.from.file_char());
                    out.push('x');
                }
                out.push_str(&mv.to.to_string());
                if let Some(kind) = mv.promotion {
                    out.push('=');
                    out.push(kind.upper());
                }
            }
            kind => {
                out.push(kind.upper());
                if rivals.any() {
                    let file = mv.from.file();
                    let rank = mv.from.rank();
                    if rivals.filter(|sq| sq.file() == file).count() == 0 {
                        out.push(mv.from.file_char());
                    } else if rivals.filter(|sq| sq.rank() == rank).count() == 0 {
                        out.push_str(&(rank + 1).to_string());
                    } else {
                        out.push_str(&mv.from.to_string());
                    }
                }
                if self.piece_at(mv.to).is_some() {
                    out.push('x');
                }
                out.push_str(&mv.to.to_string());
            }
        }

        let next = self.after(mv);
        if next.in_check() {
            out.push(if next.has_legal_moves() { '+' } else { '#' });
        }
        out
    }

    /// Reads a move in SAN, or in the lax forms people and programs write:
    /// missing or extra `+`/`#`, `!`/`?` annotations, `e.p.`, `0-0`,
    /// promotion without `=` or in lower case, over-disambiguation,
    /// `Ng1-f3`, and coordinate notation (`e2e5`, `f1i1`, `e9e10q`).
    pub fn parse_san(&self, text: &str) -> Result<Move, SanError> {
        // ASCII only, so that byte slicing below stays on char boundaries.
        if !text.is_ascii() {
            return Err(SanError::Syntax(text.to_string()));
        }
        let body = strip_suffixes(text);
        let by_san = match castling_side(body) {
            Some(side) => self.castling_move(side),
            None => match parse_pattern(body) {
                Some(pattern) => self.find_move(&pattern),
                None => Err(SanError::Syntax(String::new())),
            },
        };
        match (by_san, parse_coordinate(body)) {
            (Ok(mv), _) => Ok(mv),
            (Err(SanError::Ambiguous(_)), _) => Err(SanError::Ambiguous(text.to_string())),
            (_, Ok(mv)) if self.is_legal(mv) => Ok(mv),
            (Err(SanError::Syntax(_)), Err(_)) => Err(SanError::Syntax(text.to_string())),
            _ => Err(SanError::Illegal(text.to_string())),
        }
    }

    /// Castling on `side` (0 short, 1 long) if it is legal now.
    fn castling_move(&self, side: usize) -> Result<Move, SanError> {
        let castle = &CASTLING[self.side_to_move().index()][side];
        let mv = Move::new(castle.king_from, castle.king_to);
        let is_king = self.piece_at(castle.king_from).map(|p| p.kind) == Some(Kind::King);
        if is_king && self.is_legal(mv) {
            Ok(mv)
        } else {
            Err(SanError::Illegal(String::new()))
        }
    }

    /// The one legal move that fits `pattern`. Error texts are filled in by
    /// the caller.
    fn find_move(&self, pattern: &Pattern) -> Result<Move, SanError> {
        let us = self.side_to_move();
        let promotes = pattern.kind == Kind::Pawn && pattern.to.rank() == us.promotion_rank();
        if promotes != pattern.promotion.is_some() {
            return Err(SanError::Illegal(String::new()));
        }
        let mut found = None;
        let mut count = 0;
        self.generate(|moves| {
            let from = moves.from;
            let fits = moves.kind == pattern.kind
                && moves.to.has(pattern.to)
                && pattern.file.is_none_or(|f| f == from.file())
                && pattern.rank.is_none_or(|r| r == from.rank())
                // A pawn move without a file is a push: `d4` never means `exd4`.
                && (pattern.kind != Kind::Pawn
                    || pattern.file.is_some()
                    || from.file() == pattern.to.file());
            if fits {
                count += 1;
                found = Some(Move {
                    from,
                    to: pattern.to,
                    promotion: pattern.promotion,
                });
            }
            false
        });
        match (count, found) {
            (1, Some(mv)) => Ok(mv),
            (0, _) => Err(SanError::Illegal(String::new())),
            _ => Err(SanError::Ambiguous(String::new())),
        }
    }
}

/// `text` without surrounding space, check and mate marks, annotations and
/// an `e.p.` remark.
fn strip_suffixes(text: &str) -> &str {
    let mut body = text.trim();
    loop {
        let before = body.len();
        body = body.trim_end_matches(['+', '#', '!', '?']).trim_end();
        body = body.strip_suffix("e.p.").unwrap_or(body).trim_end();
        if body.len() == before {
            return body;
        }
    }
}

/// 0 for `O-O`, 1 for `O-O-O`, also written with zeros or lower-case o.
fn castling_side(body: &str) -> Option<usize> {
    let mut parts = body.split('-');
    let letters = parts.by_ref().take(4).collect::<Vec<_>>();
    if parts.next().is_some() || letters.iter().any(|p| !matches!(*p, "O" | "0" | "o")) {
        return None;
    }
    match letters.len() {
        2 => Some(0),
        3 => Some(1),
        _ => None,
    }
}

/// Splits `[piece][file][rank][x|-|:]square[[=]promotion]`. `body` is ASCII.
fn parse_pattern(body: &str) -> Option<Pattern> {
    let (kind, mut rest) = match body.as_bytes().first()? {
        b'N' => (Kind::Knight, &body[1..]),
        b'B' => (Kind::Bishop, &body[1..]),
        b'R' => (Kind::Rook, &body[1..]),
        b'Q' => (Kind::Queen, &body[1..]),
        b'K' => (Kind::King, &body[1..]),
        b'P' => (Kind::Pawn, &body[1..]),
        _ => (Kind::Pawn, body),
    };

    // A square ends in a digit, so a trailing letter is the promotion piece.
    let mut promotion = None;
    if let Some(&last) = rest.as_bytes().last() {
        if last.is_ascii_alphabetic() {
            let piece =
                Kind::from_char(last as char).filter(|k| !matches!(k, Kind::Pawn | Kind::King))?;
            promotion = Some(piece);
            rest = &rest[..rest.len() - 1];
            rest = rest.strip_suffix('=').unwrap_or(rest);
        }
    }

    // The destination: the trailing digits and the file letter before them.
    let digits = rest.bytes().rev().take_while(u8::is_ascii_digit).count();
    if digits == 0 || digits > 2 || rest.len() <= digits {
        return None;
    }
    let (head, square) = rest.split_at(rest.len() - digits - 1);
    let to: Square = square.parse().ok()?;

    let head = head.strip_suffix(['x', '-', ':']).unwrap_or(head);
    let mut file = None;
    let mut rank_text = head;
    if let Some(f) = head.chars().next().and_then(file_from_char) {
        file = Some(f);
        rank_text = &head[1..];
    }
    let rank = if rank_text.is_empty() {
        None
    } else {
        if !rank_text.bytes().all(|b| b.is_ascii_digit()) || rank_text.starts_with('0') {
            return None;
        }
        let rank: usize = rank_text.parse().ok()?;
        if !(1..=SIZE).contains(&rank) {
            return None;
        }
        Some(rank as u8 - 1)
    };
    Some(Pattern {
        kind,
        file,
        rank,
        to,
        promotion,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suffixes_are_stripped() {
        assert_eq!(strip_suffixes(" e4!? "), "e4");
        assert_eq!(strip_suffixes("Qxf10#"), "Qxf10");
        assert_eq!(strip_suffixes("dxe6 e.p.+"), "dxe6");
        assert_eq!(strip_suffixes("+#"), "");
    }

    #[test]
    fn castling_forms() {
        for (text, side) in [("O-O", 0), ("0-0-0", 1), ("o-o", 0)] {
            assert_eq!(castling_side(text), Some(side), "{text}");
        }
        for bad in ["O", "O-O-O-O", "O-", "OO", "O-X", ""] {
            assert_eq!(castling_side(bad), None, "{bad}");
        }
    }

    #[test]
    fn patterns() {
        let p = parse_pattern("Nhg3").unwrap();
        assert_eq!(
            (p.kind, p.file, p.rank, p.to.to_string()),
            (Kind::Knight, Some(7), None, "g3".into())
        );
        let p = parse_pattern("R10d5").unwrap();
        assert_eq!(
            (p.file, p.rank, p.to.to_string()),
            (None, Some(9), "d5".into())
        );
        let p = parse_pattern("exd10=q").unwrap();
        assert_eq!(
            (p.kind, p.file, p.to.to_string(), p.promotion),
            (Kind::Pawn, Some(4), "d10".into(), Some(Kind::Queen))
        );
        let p = parse_pattern("Qk10xk1").unwrap();
        assert_eq!((p.file, p.rank), (Some(9), Some(9)));
        for bad in [
            "", "N", "Nz3", "e11", "e0", "Ra0a1", "R11a1", "e10=K", "j4", "e4=", "x",
        ] {
            assert!(parse_pattern(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn start_position_moves() {
        let pos = Position::start();
        for mv in pos.legal_moves() {
            let san = pos.san(mv);
            assert_eq!(pos.parse_san(&san), Ok(mv), "{san}");
        }
        assert_eq!(
            pos.san(Move::new("e2".parse().unwrap(), "e5".parse().unwrap())),
            "e5"
        );
        // Not legal: written in coordinates.
        assert_eq!(
            pos.san(Move::new("e2".parse().unwrap(), "e6".parse().unwrap())),
            "e2e6"
        );
    }
}
