//! Attack tables, computed at compile time, and slider attacks by the
//! obstruction-difference method (one subtraction per line, both directions).

use crate::bitboard::Bitboard;
use crate::types::{Color, Square, NUM_SQUARES, SIZE};

const N: usize = NUM_SQUARES;

const fn on_board(file: i32, rank: i32) -> bool {
    file >= 0 && file < SIZE as i32 && rank >= 0 && rank < SIZE as i32
}

const fn bit(file: i32, rank: i32) -> u128 {
    1u128 << (rank as usize * SIZE + file as usize)
}

const fn step_table(steps: &[(i32, i32)]) -> [Bitboard; N] {
    let mut table = [Bitboard::EMPTY; N];
    let mut sq = 0;
    while sq < N {
        let (file, rank) = ((sq % SIZE) as i32, (sq / SIZE) as i32);
        let mut bits = 0u128;
        let mut i = 0;
        while i < steps.len() {
            let (f, r) = (file + steps[i].0, rank + steps[i].1);
            if on_board(f, r) {
                bits |= bit(f, r);
            }
            i += 1;
        }
        table[sq] = Bitboard(bits);
        sq += 1;
    }
    table
}

/// Knight jumps `(file step, rank step)`.
pub const KNIGHT_STEPS: [(i32, i32); 8] = [
    (1, 2),
    (2, 1),
    (2, -1),
    (1, -2),
    (-1, -2),
    (-2, -1),
    (-2, 1),
    (-1, 2),
];
/// King steps `(file step, rank step)`, clockwise from straight ahead; also
/// the eight directions of queen moves.
pub const KING_STEPS: [(i32, i32); 8] = [
    (0, 1),
    (1, 1),
    (1, 0),
    (1, -1),
    (0, -1),
    (-1, -1),
    (-1, 0),
    (-1, 1),
];

static KNIGHT: [Bitboard; N] = step_table(&KNIGHT_STEPS);
static KING: [Bitboard; N] = step_table(&KING_STEPS);
static PAWN: [[Bitboard; N]; 2] = [
    step_table(&[(-1, 1), (1, 1)]),
    step_table(&[(-1, -1), (1, -1)]),
];

/// Line directions with increasing square index: rank, file, diagonal, anti-diagonal.
const LINE_DIRS: [(i32, i32); 4] = [(1, 0), (0, 1), (1, 1), (-1, 1)];

#[derive(Clone, Copy)]
struct LineMask {
    lower: u128,
    upper: u128,
}

const fn ray(sq: usize, df: i32, dr: i32) -> u128 {
    let (mut f, mut r) = ((sq % SIZE) as i32 + df, (sq / SIZE) as i32 + dr);
    let mut bits = 0;
    while on_board(f, r) {
        bits |= bit(f, r);
        f += df;
        r += dr;
    }
    bits
}

const fn line_masks() -> [[LineMask; 4]; N] {
    let mut table = [[LineMask { lower: 0, upper: 0 }; 4]; N];
    let mut sq = 0;
    while sq < N {
        let mut d = 0;
        while d < 4 {
            let (df, dr) = LINE_DIRS[d];
            table[sq][d] = LineMask {
                lower: ray(sq, -df, -dr),
                upper: ray(sq, df, dr),
            };
            d += 1;
        }
        sq += 1;
    }
    table
}

static LINES: [[LineMask; 4]; N] = line_masks();

/// Squares strictly between two aligned squares; empty when not aligned.
const fn between_table() -> [[Bitboard; N]; N] {
    let mut table = [[Bitboard::EMPTY; N]; N];
    let mut a = 0;
    while a < N {
        let mut d = 0;
        while d < 8 {
            let (df, dr) = if d < 4 {
                LINE_DIRS[d]
            } else {
                (-LINE_DIRS[d - 4].0, -LINE_DIRS[d - 4].1)
            };
            let (mut f, mut r) = ((a % SIZE) as i32 + df, (a / SIZE) as i32 + dr);
            let mut passed = 0u128;
            while on_board(f, r) {
                let b = r as usize * SIZE + f as usize;
                table[a][b] = Bitboard(passed);
                passed |= bit(f, r);
                f += df;
                r += dr;
            }
            d += 1;
        }
        a += 1;
    }
    table
}

/// The whole line through two aligned squares (both included); empty when not aligned.
const fn line_table() -> [[Bitboard; N]; N] {
    let mut table = [[Bitboard::EMPTY; N]; N];
    let mut a = 0;
    while a < N {
        let mut d = 0;
        while d < 4 {
            let (df, dr) = LINE_DIRS[d];
            let line = ray(a, df, dr) | ray(a, -df, -dr) | 1u128 << a;
            let mut rest = line & !(1u128 << a);
            while rest != 0 {
                let b = rest.trailing_zeros() as usize;
                table[a][b] = Bitboard(line);
                rest &= rest - 1;
            }
            d += 1;
        }
        a += 1;
    }
    table
}

static BETWEEN: [[Bitboard; N]; N] = between_table();
static LINE: [[Bitboard; N]; N] = line_table();

#[inline]
pub fn knight_attacks(sq: Square) -> Bitboard {
    KNIGHT[sq.index()]
}

#[inline]
pub fn king_attacks(sq: Square) -> Bitboard {
    KING[sq.index()]
}

/// Squares a pawn of `color` on `sq` attacks.
#[inline]
pub fn pawn_attacks(color: Color, sq: Square) -> Bitboard {
    PAWN[color.index()][sq.index()]
}

#[inline]
fn line_attacks(occ: u128, mask: LineMask) -> u128 {
    let lower = occ & mask.lower;
    let upper = occ & mask.upper;
    // Nearest blocker below (bit 0 when none) and nearest blocker above.
    let below = 1u128 << (127 - (lower | 1).leading_zeros());
    let above = upper & upper.wrapping_neg();
    (mask.lower | mask.upper) & (above << 1).wrapping_sub(below)
}

#[inline]
pub fn rook_attacks(sq: Square, occ: Bitboard) -> Bitboard {
    let m = &LINES[sq.index()];
    Bitboard(line_attacks(occ.0, m[0]) | line_attacks(occ.0, m[1]))
}

#[inline]
pub fn bishop_attacks(sq: Square, occ: Bitboard) -> Bitboard {
    let m = &LINES[sq.index()];
    Bitboard(line_attacks(occ.0, m[2]) | line_attacks(occ.0, m[3]))
}

#[inline]
pub fn queen_attacks(sq: Square, occ: Bitboard) -> Bitboard {
    rook_attacks(sq, occ) | bishop_attacks(sq, occ)
}

/// Rook moves on an empty board.
#[inline]
pub fn rook_rays(sq: Square) -> Bitboard {
    let m = &LINES[sq.index()];
    Bitboard(m[0].lower | m[0].upper | m[1].lower | m[1].upper)
}

/// Bishop moves on an empty board.
#[inline]
pub fn bishop_rays(sq: Square) -> Bitboard {
    let m = &LINES[sq.index()];
    Bitboard(m[2].lower | m[2].upper | m[3].lower | m[3].upper)
}

#[inline]
pub fn between(a: Square, b: Square) -> Bitboard {
    BETWEEN[a.index()][b.index()]
}

#[inline]
pub fn line(a: Square, b: Square) -> Bitboard {
    LINE[a.index()][b.index()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sq(s: &str) -> Square {
        s.parse().unwrap()
    }

    fn slow_slider(from: Square, occ: Bitboard, dirs: &[(i32, i32)]) -> Bitboard {
        let mut out = Bitboard::EMPTY;
        for &(df, dr) in dirs {
            let mut cur = from;
            while let Some(next) = cur.offset(df, dr) {
                out = out.with(next);
                if occ.has(next) {
                    break;
                }
                cur = next;
            }
        }
        out
    }

    #[test]
    fn sliders_match_a_slow_walk() {
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..2000 {
            let mut occ = 0u128;
            for _ in 0..2 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                occ = occ << 64 | state as u128;
            }
            let occ = Bitboard(occ) & Bitboard::FULL & Bitboard(occ >> 3);
            for from in Square::all() {
                let rook = slow_slider(from, occ, &[(1, 0), (-1, 0), (0, 1), (0, -1)]);
                let bishop = slow_slider(from, occ, &[(1, 1), (-1, 1), (1, -1), (-1, -1)]);
                assert_eq!(rook_attacks(from, occ), rook);
                assert_eq!(bishop_attacks(from, occ), bishop);
            }
        }
    }

    #[test]
    fn leaper_tables() {
        assert_eq!(knight_attacks(sq("a1")).count(), 2);
        assert_eq!(knight_attacks(sq("e5")).count(), 8);
        assert_eq!(king_attacks(sq("k10")).count(), 3);
        assert_eq!(
            pawn_attacks(Color::White, sq("a2")),
            Bitboard::from(sq("b3"))
        );
        assert_eq!(
            pawn_attacks(Color::Black, sq("k9")),
            Bitboard::from(sq("i8"))
        );
    }

    #[test]
    fn between_and_line() {
        assert_eq!(between(sq("a1"), sq("a4")).count(), 2);
        assert_eq!(between(sq("a1"), sq("k10")).count(), 8);
        assert!(between(sq("a1"), sq("b3")).is_empty());
        assert_eq!(line(sq("c3"), sq("e5")).count(), 10);
        assert!(line(sq("a1"), sq("b3")).is_empty());
    }
}
