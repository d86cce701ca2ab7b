//! Zobrist keys, generated at compile time from a fixed seed.

use crate::castles::Castles;
use crate::types::{Color, Kind, Square, NUM_SQUARES};

/// splitmix64's increment, 2^64 / the golden ratio.
pub const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

/// splitmix64's finaliser: a bijection of u64 whose outputs for nearby
/// inputs look unrelated.
pub const fn mix64(z: u64) -> u64 {
    let z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    let z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// splitmix64's output for `state` (the generator advanced by one step).
pub const fn splitmix64(state: u64) -> u64 {
    mix64(state.wrapping_add(GOLDEN_GAMMA))
}

const PIECE_KEYS: usize = 2 * 6 * NUM_SQUARES;
const SIDE: usize = PIECE_KEYS;
const CASTLING: usize = SIDE + 1;
const EN_PASSANT: usize = CASTLING + 16;
const BANNED: usize = EN_PASSANT + NUM_SQUARES;
const FORCED: usize = BANNED + 2 * 6;
const TOTAL: usize = FORCED + 2;

const fn keys() -> [u64; TOTAL] {
    let mut table = [0u64; TOTAL];
    let mut state = 0x4d69_785a_6572_6f21; // "MixZero!"
    let mut i = 0;
    while i < TOTAL {
        table[i] = splitmix64(state);
        state = state.wrapping_add(GOLDEN_GAMMA);
        i += 1;
    }
    table
}

static KEYS: [u64; TOTAL] = keys();

#[inline]
pub fn piece(color: Color, kind: Kind, sq: Square) -> u64 {
    KEYS[(color.index() * 6 + kind.index()) * NUM_SQUARES + sq.index()]
}

#[inline]
pub fn side() -> u64 {
    KEYS[SIDE]
}

/// Key of a whole castling-rights set (4 bits).
#[inline]
pub fn castling(rights: Castles) -> u64 {
    KEYS[CASTLING + rights.bits() as usize]
}

/// Key of a square where a legal en passant capture can land.
#[inline]
pub fn en_passant(sq: Square) -> u64 {
    KEYS[EN_PASSANT + sq.index()]
}

/// Key of "`color` may not move `kind` next" (rule 6).
#[inline]
pub fn banned(color: Color, kind: Kind) -> u64 {
    KEYS[BANNED + color.index() * 6 + kind.index()]
}

/// Key of "`color`'s next move must be a king move" (rule 5).
#[inline]
pub fn forced(color: Color) -> u64 {
    KEYS[FORCED + color.index()]
}
