//! Small `Copy` types: colours, piece kinds, squares.

use std::fmt;
use std::str::FromStr;

use crate::error::ParseSquareError;

/// Board width and height.
pub const SIZE: usize = 10;
/// Number of squares.
pub const NUM_SQUARES: usize = SIZE * SIZE;
/// File letters from White's left; there is no `j` file.
pub const FILE_CHARS: [char; SIZE] = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'i', 'k'];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Color {
    White = 0,
    Black = 1,
}

impl Color {
    pub const ALL: [Color; 2] = [Color::White, Color::Black];

    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }

    /// The rank (0-based) a pawn of this colour starts on.
    #[inline]
    pub const fn pawn_rank(self) -> u8 {
        match self {
            Color::White => 1,
            Color::Black => 8,
        }
    }

    /// The rank (0-based) a pawn of this colour promotes on.
    #[inline]
    pub const fn promotion_rank(self) -> u8 {
        match self {
            Color::White => 9,
            Color::Black => 0,
        }
    }

    /// The rank (0-based) the king and rooks start on.
    #[inline]
    pub const fn back_rank(self) -> u8 {
        match self {
            Color::White => 0,
            Color::Black => 9,
        }
    }

    pub fn char(self) -> char {
        match self {
            Color::White => 'w',
            Color::Black => 'b',
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Color::White => "white",
            Color::Black => "black",
        }
    }
}

impl std::ops::Not for Color {
    type Output = Color;
    #[inline]
    fn not(self) -> Color {
        match self {
            Color::White => Color::Black,
            Color::Black => Color::White,
        }
    }
}

/// A kind of piece. Rule 6 is about kinds, not individual pieces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Pawn = 0,
    Knight = 1,
    Bishop = 2,
    Rook = 3,
    Queen = 4,
    King = 5,
}

impl Kind {
    pub const ALL: [Kind; 6] = [
        Kind::Pawn,
        Kind::Knight,
        Kind::Bishop,
        Kind::Rook,
        Kind::Queen,
        Kind::King,
    ];
    /// Promotion choices, strongest first.
    pub const PROMOTIONS: [Kind; 4] = [Kind::Queen, Kind::Rook, Kind::Bishop, Kind::Knight];

    #[inline]
    pub const fn index(self) -> usize {
        self as usize
    }

    #[inline]
    pub const fn from_index(i: usize) -> Kind {
        Kind::ALL[i]
    }

    /// Upper-case letter (as in SAN and White's FEN pieces).
    pub fn upper(self) -> char {
        ['P', 'N', 'B', 'R', 'Q', 'K'][self.index()]
    }

    pub fn lower(self) -> char {
        ['p', 'n', 'b', 'r', 'q', 'k'][self.index()]
    }

    pub fn from_char(c: char) -> Option<Kind> {
        Some(match c.to_ascii_lowercase() {
            'p' => Kind::Pawn,
            'n' => Kind::Knight,
            'b' => Kind::Bishop,
            'r' => Kind::Rook,
            'q' => Kind::Queen,
            'k' => Kind::King,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        ["pawn", "knight", "bishop", "rook", "queen", "king"][self.index()]
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Piece {
    pub color: Color,
    pub kind: Kind,
}

impl Piece {
    pub const fn new(color: Color, kind: Kind) -> Piece {
        Piece { color, kind }
    }

    /// FEN letter: upper case for White.
    pub fn char(self) -> char {
        match self.color {
            Color::White => self.kind.upper(),
            Color::Black => self.kind.lower(),
        }
    }

    pub fn from_char(c: char) -> Option<Piece> {
        let kind = Kind::from_char(c)?;
        let color = if c.is_ascii_uppercase() {
            Color::White
        } else {
            Color::Black
        };
        Some(Piece { color, kind })
    }
}

/// A square, `rank * 10 + file`, both 0-based (a1 = 0, k1 = 9, a2 = 10, k10 = 99).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Square(u8);

impl Square {
    #[inline]
    pub const fn new(index: u8) -> Square {
        debug_assert!((index as usize) < NUM_SQUARES);
        Square(index)
    }

    #[inline]
    pub const fn from_coords(file: u8, rank: u8) -> Square {
        Square(rank * SIZE as u8 + file)
    }

    /// `None` when off the board.
    #[inline]
    pub const fn try_from_coords(file: i32, rank: i32) -> Option<Square> {
        if file >= 0 && file < SIZE as i32 && rank >= 0 && rank < SIZE as i32 {
            Some(Square::from_coords(file as u8, rank as u8))
        } else {
            None
        }
    }

    #[inline]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    #[inline]
    pub const fn file(self) -> u8 {
        self.0 % SIZE as u8
    }

    #[inline]
    pub const fn rank(self) -> u8 {
        self.0 / SIZE as u8
    }

    /// The same square seen from the other side (a1 <-> a10).
    #[inline]
    pub const fn flip_rank(self) -> Square {
        Square::from_coords(self.file(), SIZE as u8 - 1 - self.rank())
    }

    /// The square mirrored left to right (a1 <-> k1).
    #[inline]
    pub const fn flip_file(self) -> Square {
        Square::from_coords(SIZE as u8 - 1 - self.file(), self.rank())
    }

    /// `None` when the step leaves the board.
    #[inline]
    pub const fn offset(self, df: i32, dr: i32) -> Option<Square> {
        Square::try_from_coords(self.file() as i32 + df, self.rank() as i32 + dr)
    }

    pub fn all() -> impl Iterator<Item = Square> {
        (0..NUM_SQUARES as u8).map(Square)
    }

    pub fn file_char(self) -> char {
        FILE_CHARS[self.file() as usize]
    }
}

impl fmt::Display for Square {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.file_char(), self.rank() + 1)
    }
}

pub fn file_from_char(c: char) -> Option<u8> {
    FILE_CHARS.iter().position(|&x| x == c).map(|i| i as u8)
}

impl Square {
    /// Parses the longest square name at the start of `s` (`a1`..`k10`), returning
    /// the square and the number of bytes used.
    pub fn parse_prefix(s: &str) -> Option<(Square, usize)> {
        let bytes = s.as_bytes();
        let file = file_from_char(*bytes.first()? as char)?;
        let digits = bytes[1..]
            .iter()
            .take(2)
            .take_while(|b| b.is_ascii_digit())
            .count();
        // Prefer "10" over "1" followed by a stray "0".
        for len in (1..=digits).rev() {
            let text = &s[1..1 + len];
            if text.starts_with('0') {
                continue;
            }
            if let Ok(rank) = text.parse::<u8>() {
                if (1..=SIZE as u8).contains(&rank) {
                    return Some((Square::from_coords(file, rank - 1), 1 + len));
                }
            }
        }
        None
    }
}

impl FromStr for Square {
    type Err = ParseSquareError;

    fn from_str(s: &str) -> Result<Square, ParseSquareError> {
        match Square::parse_prefix(s) {
            Some((sq, len)) if len == s.len() => Ok(sq),
            _ => Err(ParseSquareError(s.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn square_names_round_trip() {
        for sq in Square::all() {
            assert_eq!(sq.to_string().parse::<Square>().unwrap(), sq);
        }
        assert_eq!("k10".parse::<Square>().unwrap().index(), 99);
        assert_eq!("a1".parse::<Square>().unwrap().index(), 0);
        assert_eq!("i1".parse::<Square>().unwrap().file(), 8);
        for bad in ["j1", "a0", "a11", "a01", "", "k", "a1x", "z5"] {
            assert!(bad.parse::<Square>().is_err(), "{bad}");
        }
    }
}
