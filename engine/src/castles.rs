//! Castling rights (RULES.md §4), after shakmaty's `Castles`: which of the
//! four castling moves each side may still make, as a small `Copy` set.

use crate::types::{Color, Square, NUM_SQUARES};

/// The short (king to the i-file) or long (king to the c-file) castling move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CastlingSide {
    Short = 0,
    Long = 1,
}

impl CastlingSide {
    pub const ALL: [CastlingSide; 2] = [CastlingSide::Short, CastlingSide::Long];
}

/// The castling moves each side may still make.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Castles(u8);

impl Castles {
    pub const NONE: Castles = Castles(0);
    pub const ALL: Castles = Castles(0xf);

    const fn bit(color: Color, side: CastlingSide) -> u8 {
        1 << (color as u8 * 2 + side as u8)
    }

    pub const fn has(self, color: Color, side: CastlingSide) -> bool {
        self.0 & Castles::bit(color, side) != 0
    }

    /// These rights and `color`'s `side` too.
    #[must_use]
    pub const fn with(self, color: Color, side: CastlingSide) -> Castles {
        Castles(self.0 | Castles::bit(color, side))
    }

    /// These rights less `color`'s `side`.
    #[must_use]
    pub const fn without(self, color: Color, side: CastlingSide) -> Castles {
        Castles(self.0 & !Castles::bit(color, side))
    }

    pub const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The rights as four bits (White short, White long, Black short, Black
    /// long from the lowest), an index of 16 values for the Zobrist table.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// The rights left after a move from or to `sq`: a king or rook moving
    /// off its home square, or a rook captured on it, ends them.
    #[must_use]
    pub fn touched(self, sq: Square) -> Castles {
        Castles(self.0 & KEPT[sq.index()].0)
    }
}

/// Rights kept when a move touches a square: all but those whose king or
/// rook starts there.
static KEPT: [Castles; NUM_SQUARES] = kept();

const fn kept() -> [Castles; NUM_SQUARES] {
    use CastlingSide::{Long, Short};
    let mut kept = [Castles::ALL; NUM_SQUARES];
    let colors = [Color::White, Color::Black];
    let mut c = 0;
    while c < 2 {
        let color = colors[c];
        let rank = c * 9;
        // The king on the f-file; the short rook on the k-file, the long on the a-file.
        kept[rank * 10 + 5] = kept[rank * 10 + 5]
            .without(color, Short)
            .without(color, Long);
        kept[rank * 10 + 9] = kept[rank * 10 + 9].without(color, Short);
        kept[rank * 10] = kept[rank * 10].without(color, Long);
        c += 1;
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn home_squares_end_their_rights() {
        let sq = |s: &str| s.parse::<Square>().unwrap();
        let all = Castles::ALL;
        assert_eq!(all.touched(sq("e5")), all);
        let white_king = all.touched(sq("f1"));
        assert!(!white_king.has(Color::White, CastlingSide::Short));
        assert!(!white_king.has(Color::White, CastlingSide::Long));
        assert!(white_king.has(Color::Black, CastlingSide::Short));
        let black_long_rook = all.touched(sq("a10"));
        assert_eq!(
            black_long_rook,
            all.without(Color::Black, CastlingSide::Long)
        );
        assert_eq!(
            all.touched(sq("k1")),
            all.without(Color::White, CastlingSide::Short)
        );
        assert_eq!(
            Castles::NONE.with(Color::Black, CastlingSide::Long).bits(),
            8
        );
    }
}
