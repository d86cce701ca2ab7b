//! The network's fixed move space: 89 move types from each of the 100 squares,
//! in the side to move's frame.
//!
//! The frame flips the board vertically for Black (`Square::flip_rank`), so
//! both sides' pawns move "up". Files are not mirrored by the frame, because
//! castling is not symmetric left to right (the king stands on the f file);
//! without castling rights the rules are, and training may mirror a position
//! left to right with [`mirror_index`] and
//! [`crate::encoding::mirror_files`].
//!
//! `index = move_type * 100 + from_square_in_frame`, so a convolutional head
//! with [`MOVE_TYPES`] channels over the 10x10 board flattens straight to it.
//!
//! Move types:
//! - `0..72`: queen-like moves, `direction * 9 + distance - 1` with directions
//!   N, NE, E, SE, S, SW, W, NW and distances 1..=9. Rook, bishop, queen, king
//!   and pawn moves (a queen promotion included) are all of this kind;
//!   castling is the king's 3-square move.
//! - `72..80`: the 8 knight jumps, in the order of [`KNIGHT_JUMPS`].
//! - `80..89`: under-promotions, `80 + 3 * piece + step` with piece knight,
//!   bishop, rook and step capture left, straight, capture right.

use engine::types::NUM_SQUARES;
use engine::{Color, Kind, Move, Position, Square};

pub const MOVE_TYPES: usize = 89;
pub const POLICY_SIZE: usize = MOVE_TYPES * NUM_SQUARES;

/// First knight-jump move type.
pub const KNIGHT_BASE: usize = 72;
/// First under-promotion move type.
pub const UNDERPROMOTION_BASE: usize = 80;

/// Queen-like directions `(file step, rank step)` in the frame.
pub const DIRECTIONS: [(i32, i32); 8] = engine::attacks::KING_STEPS;

/// Knight jumps `(file step, rank step)` in the frame.
pub const KNIGHT_JUMPS: [(i32, i32); 8] = engine::attacks::KNIGHT_STEPS;

/// Under-promotion pieces in move-type order.
pub const UNDERPROMOTIONS: [Kind; 3] = [Kind::Knight, Kind::Bishop, Kind::Rook];

const NONE: u8 = u8::MAX;
/// Deltas run from -9 to 9 on each axis.
const SPAN: usize = 19;

/// Move type of each `(file step, rank step)` for moves without an
/// under-promotion, `NONE` where no piece moves that way.
static DELTA_TYPE: [u8; SPAN * SPAN] = delta_types();

/// `(file step, rank step)` of each move type.
static TYPE_DELTA: [(i8, i8); MOVE_TYPES] = type_deltas();

const fn delta_slot(df: i32, dr: i32) -> usize {
    (dr + 9) as usize * SPAN + (df + 9) as usize
}

const fn type_deltas() -> [(i8, i8); MOVE_TYPES] {
    let mut deltas = [(0i8, 0i8); MOVE_TYPES];
    let mut dir = 0;
    while dir < 8 {
        let (df, dr) = DIRECTIONS[dir];
        let mut distance = 1;
        while distance <= 9 {
            deltas[dir * 9 + distance as usize - 1] =
                ((df * distance) as i8, (dr * distance) as i8);
            distance += 1;
        }
        dir += 1;
    }
    let mut jump = 0;
    while jump < 8 {
        let (df, dr) = KNIGHT_JUMPS[jump];
        deltas[KNIGHT_BASE + jump] = (df as i8, dr as i8);
        jump += 1;
    }
    let mut under = 0;
    while under < 9 {
        deltas[UNDERPROMOTION_BASE + under] = ((under % 3) as i8 - 1, 1);
        under += 1;
    }
    deltas
}

const fn delta_types() -> [u8; SPAN * SPAN] {
    let deltas = type_deltas();
    let mut table = [NONE; SPAN * SPAN];
    let mut t = 0;
    while t < UNDERPROMOTION_BASE {
        let (df, dr) = deltas[t];
        table[delta_slot(df as i32, dr as i32)] = t as u8;
        t += 1;
    }
    table
}

/// The policy index of each index's move mirrored left to right: the same
/// rank step, the file step negated, from the mirrored square.
static MIRRORED: [u16; POLICY_SIZE] = mirrored_indices();

const fn mirrored_indices() -> [u16; POLICY_SIZE] {
    let deltas = type_deltas();
    let types = delta_types();
    let mut table = [0u16; POLICY_SIZE];
    let mut t = 0;
    while t < MOVE_TYPES {
        let mirrored_type = if t < UNDERPROMOTION_BASE {
            let (df, dr) = deltas[t];
            types[delta_slot(-(df as i32), dr as i32)] as usize
        } else {
            // Capture left and capture right swap; the piece stays.
            let under = t - UNDERPROMOTION_BASE;
            UNDERPROMOTION_BASE + under / 3 * 3 + (2 - under % 3)
        };
        let mut from = 0;
        while from < NUM_SQUARES {
            let flipped = Square::new(from as u8).flip_file().index();
            table[t * NUM_SQUARES + from] = (mirrored_type * NUM_SQUARES + flipped) as u16;
            from += 1;
        }
        t += 1;
    }
    table
}

/// The policy index of the move at `index` mirrored left to right (an
/// involution). Valid training data only for a position without castling
/// rights, where the mirrored position follows the same rules.
#[inline]
pub fn mirror_index(index: usize) -> usize {
    MIRRORED[index] as usize
}

/// The square as seen by `side` (an involution: it also maps back).
#[inline]
pub fn to_frame(side: Color, sq: Square) -> Square {
    match side {
        Color::White => sq,
        Color::Black => sq.flip_rank(),
    }
}

/// The policy index of `mv` played by `side`; `None` only when no piece could
/// ever make the move (a delta no piece has, a promotion that is not a
/// one-square pawn step onto the last rank, a promotion to a pawn or king).
#[inline]
pub fn move_index(side: Color, mv: Move) -> Option<usize> {
    let from = to_frame(side, mv.from);
    let to = to_frame(side, mv.to);
    let df = to.file() as i32 - from.file() as i32;
    let dr = to.rank() as i32 - from.rank() as i32;
    let move_type = match mv.promotion {
        None => {
            let t = DELTA_TYPE[delta_slot(df, dr)];
            if t == NONE {
                return None;
            }
            t as usize
        }
        Some(kind) => {
            if dr != 1 || df.abs() > 1 || to.rank() != 9 {
                return None;
            }
            let step = (df + 1) as usize;
            match kind {
                // A queen promotion is the plain pawn move.
                Kind::Queen => DELTA_TYPE[delta_slot(df, dr)] as usize,
                Kind::Knight => UNDERPROMOTION_BASE + step,
                Kind::Bishop => UNDERPROMOTION_BASE + 3 + step,
                Kind::Rook => UNDERPROMOTION_BASE + 6 + step,
                Kind::Pawn | Kind::King => return None,
            }
        }
    };
    Some(move_type * NUM_SQUARES + from.index())
}

/// The legal move of `pos` with policy index `index`, if there is one.
pub fn decode(pos: &Position, index: usize) -> Option<Move> {
    if index >= POLICY_SIZE {
        return None;
    }
    let side = pos.side_to_move();
    let move_type = index / 100;
    let from_in_frame = Square::new((index % 100) as u8);
    let (df, dr) = TYPE_DELTA[move_type];
    let to_in_frame = from_in_frame.offset(df as i32, dr as i32)?;
    let from = to_frame(side, from_in_frame);
    let to = to_frame(side, to_in_frame);
    let piece = pos.piece_at(from)?;
    if piece.color != side {
        return None;
    }
    let promotion = if move_type >= UNDERPROMOTION_BASE {
        Some(UNDERPROMOTIONS[(move_type - UNDERPROMOTION_BASE) / 3])
    } else if piece.kind == Kind::Pawn && to_in_frame.rank() == 9 {
        Some(Kind::Queen)
    } else {
        None
    };
    let mv = Move {
        from,
        to,
        promotion,
    };
    pos.is_legal(mv).then_some(mv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_inverse() {
        for (t, &(df, dr)) in TYPE_DELTA.iter().enumerate().take(UNDERPROMOTION_BASE) {
            assert_eq!(DELTA_TYPE[delta_slot(df as i32, dr as i32)] as usize, t);
        }
        let filled = DELTA_TYPE.iter().filter(|&&t| t != NONE).count();
        assert_eq!(filled, UNDERPROMOTION_BASE);
    }

    #[test]
    fn mirroring_is_an_involution_and_a_permutation() {
        let mut seen = vec![false; POLICY_SIZE];
        for index in 0..POLICY_SIZE {
            let m = mirror_index(index);
            assert_eq!(mirror_index(m), index);
            assert!(!std::mem::replace(&mut seen[m], true));
        }
    }
}
