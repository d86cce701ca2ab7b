//! The network's input: f32 planes over the 10x10 board, seen by the side to
//! move (the board is flipped vertically for Black, as in [`crate::policy`]).
//!
//! Plane layout for `history = H` (each plane is 100 values, square index
//! `rank * 10 + file` in the frame):
//!
//! - `12 * age + 0..6`: the side to move's pawns, knights, bishops, rooks,
//!   queens, king in the position `age` plies back (`age` 0 is the current
//!   position, up to `H - 1`); `12 * age + 6..12`: the opponent's. "Side to
//!   move" and the frame are those of the current position, for every age.
//!   Ages the request does not reach are all zero.
//! - `12 * H +` [`feature`] offsets: side to move, castling rights, legal en
//!   passant targets, repetitions, fifty-move counter, then the rule 5/6 state
//!   of the side to move and of the opponent ([`rule`] offsets within each
//!   block). Under `Rules::Base` the rule 5/6 planes are zero.
//! - With [`EncoderConfig::attacks`], the [`attack`] planes: the squares
//!   each side attacks once and twice or more, in the current position.
//! - With [`EncoderConfig::hanging`], the [`hanging`] planes: each
//!   side's pieces that hang ([`Position::hanging`]).
//! - With [`EncoderConfig::ply_plane`] N > 0, last, one plane of the plies
//!   played since the game's start, / N, capped at 1.
//!
//! [`plane_names`] lists them all for debugging.

use engine::types::NUM_SQUARES;
use engine::{control_period, Bitboard, CastlingSide, Color, EvalRequest, Kind, Position, Rules};

use crate::policy::to_frame;

/// Bump when the meaning of any plane changes, so old networks are refused.
pub const ENCODING_VERSION: u32 = 1;

/// Piece planes per position in the history.
pub const PIECE_PLANES: usize = 12;

/// Offsets of the feature planes from `12 * history`.
pub mod feature {
    /// 1 everywhere when Black is to move.
    pub const SIDE_TO_MOVE: usize = 0;
    /// Four planes: own short, own long, opponent short, opponent long.
    pub const CASTLING: usize = 1;
    /// Squares where a legal en passant capture lands.
    pub const EN_PASSANT: usize = 5;
    /// Two planes: the position occurred at least once before / at least twice.
    pub const REPETITIONS: usize = 6;
    /// Halfmove clock / 100, capped at 1.
    pub const HALFMOVE: usize = 8;
    /// Rule 5/6 state: the side to move's block, then the opponent's.
    pub const RULES: usize = 9;
    pub const COUNT: usize = RULES + 2 * super::rule::COUNT;
}

/// Offsets within one side's rule 5/6 block.
pub mod rule {
    /// Five planes, one-hot: the kind (P N B R Q) this side moved last.
    pub const LAST_KIND: usize = 0;
    /// How many turns in a row it moved that kind, / 2.
    pub const RUN_LENGTH: usize = 5;
    /// Five planes, one-hot: the kind (P N B R Q) it may not move next.
    pub const BANNED_KIND: usize = 6;
    /// Its next move falls in one of its control periods.
    pub const IN_PERIOD: usize = 11;
    /// Moves left in that period, its next move included, / 10.
    pub const PERIOD_LEFT: usize = 12;
    /// It has moved its king in that period.
    pub const KING_MOVED: usize = 13;
    /// Its next move must be a king move.
    pub const MUST_MOVE_KING: usize = 14;
    pub const COUNT: usize = 15;
}

/// Offsets of the attack planes from `12 * history + feature::COUNT` (only
/// with [`EncoderConfig::attacks`]). The rules' own attack sets, handed to the
/// net as KataGo hands its nets liberties: a 10x10 board takes a small tower
/// many layers to trace a slider's ray, and which pieces hang is what young
/// self-play nets miss. An input, never a target.
pub mod attack {
    /// Squares the side to move attacks at least once, then at least twice.
    pub const OWN: usize = 0;
    /// Squares the opponent attacks at least once, then at least twice.
    pub const OPPONENT: usize = 2;
    pub const COUNT: usize = 4;
}

/// Offsets of the hanging-piece planes after the attack planes (only with
/// [`EncoderConfig::hanging`]): the pieces a first capture wins, which the
/// attack planes show only to a net that also weighs the pieces. What the
/// README found young nets losing games to. An input, never a target.
pub mod hanging {
    /// The side to move's pieces that hang.
    pub const OWN: usize = 0;
    /// The opponent's pieces that hang.
    pub const OPPONENT: usize = 1;
    pub const COUNT: usize = 2;
}

/// Whose pieces or state a plane shows, relative to the side to move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Own = 0,
    Opponent = 1,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EncoderConfig {
    /// Positions encoded, the current one included.
    pub history: usize,
    /// The [`attack`] planes. Absent from networks saved before it: off.
    #[serde(default)]
    pub attacks: bool,
    /// The [`hanging`] planes. Absent from networks saved before it: off.
    #[serde(default)]
    pub hanging: bool,
    /// With N > 0, a plane of the plies played / N, capped at 1 (0 = none).
    /// N is self-play's game-length cap: with the plane, the cap is a rule
    /// the position shows, so a capped game's material verdict is a result
    /// the value can learn. The ply is read from the position's fullmove
    /// number, which every self-play start sets to 1. Absent from networks
    /// saved before it: none.
    #[serde(default)]
    pub ply_plane: u32,
}

impl Default for EncoderConfig {
    fn default() -> EncoderConfig {
        EncoderConfig {
            history: 4,
            attacks: false,
            hanging: false,
            ply_plane: 0,
        }
    }
}

impl EncoderConfig {
    pub fn validate(&self) -> Result<(), engine::InvalidKey> {
        engine::check((1..=16).contains(&self.history), "history", || {
            format!("{} (expected 1..=16)", self.history)
        })
    }

    pub fn planes(&self) -> usize {
        self.feature_plane(feature::COUNT)
            + self.attack_planes()
            + self.hanging_planes()
            + usize::from(self.ply_plane > 0)
    }

    pub fn input_len(&self) -> usize {
        self.planes() * NUM_SQUARES
    }

    /// The shape of `n` encoded positions as the network takes them:
    /// `[n, planes, 10, 10]`.
    pub fn input_shape(&self, n: usize) -> [i64; 4] {
        let side = engine::types::SIZE as i64;
        [n as i64, self.planes() as i64, side, side]
    }

    /// The plane of `side`'s `kind` pieces in the position `age` plies back.
    pub fn piece_plane(&self, age: usize, side: Side, kind: Kind) -> usize {
        debug_assert!(age < self.history);
        age * PIECE_PLANES + side as usize * 6 + kind.index()
    }

    /// The plane at a [`feature`] offset.
    pub fn feature_plane(&self, offset: usize) -> usize {
        self.history * PIECE_PLANES + offset
    }

    /// The plane at an [`attack`] offset (with [`EncoderConfig::attacks`]).
    pub fn attack_plane(&self, offset: usize) -> usize {
        debug_assert!(self.attacks);
        self.feature_plane(feature::COUNT + offset)
    }

    /// The plane at a [`hanging`] offset (with [`EncoderConfig::hanging`]).
    pub fn hanging_plane(&self, offset: usize) -> usize {
        debug_assert!(self.hanging);
        self.feature_plane(feature::COUNT) + self.attack_planes() + offset
    }

    /// The ply plane (with [`EncoderConfig::ply_plane`] > 0): the last.
    pub fn ply_plane_index(&self) -> Option<usize> {
        (self.ply_plane > 0).then(|| self.planes() - 1)
    }

    fn attack_planes(&self) -> usize {
        if self.attacks {
            attack::COUNT
        } else {
            0
        }
    }

    fn hanging_planes(&self) -> usize {
        if self.hanging {
            hanging::COUNT
        } else {
            0
        }
    }

    /// The planes [`encode`] fills with one value over the whole board: every
    /// [`feature`] plane but the en passant squares, and the ply plane. The
    /// net's input layer reads them as one number per position rather than
    /// convolving them (`net::Net`'s input layer), which is exact because
    /// they are uniform.
    pub fn whole_board_planes(&self) -> Vec<usize> {
        (0..feature::COUNT)
            .filter(|&offset| offset != feature::EN_PASSANT)
            .map(|offset| self.feature_plane(offset))
            .chain(self.ply_plane_index())
            .collect()
    }

    /// The plane at a [`rule`] offset in `side`'s rule 5/6 block.
    pub fn rule_plane(&self, side: Side, offset: usize) -> usize {
        self.feature_plane(feature::RULES + side as usize * rule::COUNT + offset)
    }
}

/// Writes the planes of `request` into `out` (`config.input_len()` values).
pub fn encode(config: &EncoderConfig, request: &EvalRequest<'_>, out: &mut [f32]) {
    assert_eq!(out.len(), config.input_len(), "encoding buffer size");
    let pos = request.position();
    let us = pos.side_to_move();
    out.fill(0.0);

    for (age, past) in request
        .history
        .iter()
        .rev()
        .take(config.history)
        .enumerate()
    {
        for (side, color) in [(Side::Own, us), (Side::Opponent, !us)] {
            for kind in Kind::ALL {
                let plane = config.piece_plane(age, side, kind);
                set_squares(out, plane, us, past.pieces(color, kind));
            }
        }
    }

    if us == Color::Black {
        fill(out, config.feature_plane(feature::SIDE_TO_MOVE), 1.0);
    }
    // Our short and long rights, then theirs.
    let rights = pos.castling_rights();
    let planes = [us, !us]
        .into_iter()
        .flat_map(|color| CastlingSide::ALL.map(|side| (color, side)));
    for (i, (color, side)) in planes.enumerate() {
        if rights.has(color, side) {
            fill(out, config.feature_plane(feature::CASTLING + i), 1.0);
        }
    }
    if pos.en_passant().is_some() {
        let plane = config.feature_plane(feature::EN_PASSANT);
        set_squares(out, plane, us, pos.legal_en_passant_targets());
    }
    for i in 0..request.repetitions.min(2) as usize {
        fill(out, config.feature_plane(feature::REPETITIONS + i), 1.0);
    }
    let clock = f32::from(pos.halfmove_clock().min(100)) / 100.0;
    fill(out, config.feature_plane(feature::HALFMOVE), clock);

    if pos.rules() == Rules::Full {
        for (side, color) in [(Side::Own, us), (Side::Opponent, !us)] {
            encode_rule_state(config, pos, side, color, out);
        }
    }
    if config.attacks || config.hanging {
        // Both plane sets read the same two coverages: computed once.
        let [own, theirs] = [us, !us].map(|color| pos.coverage(color));
        if config.attacks {
            for (offset, cover) in [(attack::OWN, &own), (attack::OPPONENT, &theirs)] {
                set_squares(out, config.attack_plane(offset), us, cover.once);
                set_squares(out, config.attack_plane(offset + 1), us, cover.twice);
            }
        }
        if config.hanging {
            let planes = [
                (hanging::OWN, pos.hanging(us, &own, &theirs)),
                (hanging::OPPONENT, pos.hanging(!us, &theirs, &own)),
            ];
            for (offset, pieces) in planes {
                set_squares(out, config.hanging_plane(offset), us, pieces);
            }
        }
    }
    if let Some(plane) = config.ply_plane_index() {
        fill(out, plane, ply_share(pos, config.ply_plane));
    }
}

/// The plies played since the game's start (fullmove 1, White to move),
/// over `cap`, at most 1.
fn ply_share(pos: &Position, cap: u32) -> f32 {
    let fullmove = u32::from(pos.fullmove_number().max(1));
    let ply = 2 * (fullmove - 1) + u32::from(pos.side_to_move() == Color::Black);
    (ply as f32 / cap as f32).min(1.0)
}

fn encode_rule_state(
    config: &EncoderConfig,
    pos: &Position,
    side: Side,
    color: Color,
    out: &mut [f32],
) {
    let plane = |offset| config.rule_plane(side, offset);
    let run = pos.run(color);
    // A king move resets the run, so `kind` is never the king.
    if let Some(kind) = run.kind {
        fill(out, plane(rule::LAST_KIND + kind.index()), 1.0);
        fill(out, plane(rule::RUN_LENGTH), f32::from(run.length) / 2.0);
    }
    if let Some(kind) = pos.banned_kind(color) {
        fill(out, plane(rule::BANNED_KIND + kind.index()), 1.0);
    }
    let n = pos.next_move_number(color);
    if let Some(period) = control_period(color, n) {
        fill(out, plane(rule::IN_PERIOD), 1.0);
        fill(
            out,
            plane(rule::PERIOD_LEFT),
            (period.last - n + 1) as f32 / 10.0,
        );
    }
    if pos.king_moved_in_period(color) {
        fill(out, plane(rule::KING_MOVED), 1.0);
    }
    if pos.must_move_king(color) {
        fill(out, plane(rule::MUST_MOVE_KING), 1.0);
    }
}

#[inline]
fn fill(out: &mut [f32], plane: usize, value: f32) {
    out[plane * NUM_SQUARES..(plane + 1) * NUM_SQUARES].fill(value);
}

#[inline]
fn set_squares(out: &mut [f32], plane: usize, us: Color, squares: Bitboard) {
    let plane = &mut out[plane * NUM_SQUARES..(plane + 1) * NUM_SQUARES];
    for sq in squares {
        plane[to_frame(us, sq).index()] = 1.0;
    }
}

/// Mirrors encoded planes left to right in place (the file axis of every
/// plane; planes that fill the board are unchanged). With
/// [`crate::policy::mirror_index`] on the policy, it turns a position
/// without castling rights into its mirror image, which the rules treat the
/// same.
pub fn mirror_files(planes: &mut [f32]) {
    let side = engine::types::SIZE;
    for row in planes.chunks_exact_mut(side) {
        row.reverse();
    }
}

/// A name for every plane, in order (`h0 own P`, `castling opp long`, ...).
pub fn plane_names(config: &EncoderConfig) -> Vec<String> {
    const KINDS: [&str; 6] = ["P", "N", "B", "R", "Q", "K"];
    const SIDES: [&str; 2] = ["own", "opp"];
    let mut names = Vec::with_capacity(config.planes());
    for age in 0..config.history {
        for side in SIDES {
            for kind in KINDS {
                names.push(format!("h{age} {side} {kind}"));
            }
        }
    }
    names.push("side to move".to_string());
    for side in SIDES {
        for wing in ["short", "long"] {
            names.push(format!("castling {side} {wing}"));
        }
    }
    names.push("en passant".to_string());
    names.push("repeated once".to_string());
    names.push("repeated twice".to_string());
    names.push("halfmove clock".to_string());
    for side in SIDES {
        for kind in &KINDS[..5] {
            names.push(format!("{side} last kind {kind}"));
        }
        names.push(format!("{side} run length"));
        for kind in &KINDS[..5] {
            names.push(format!("{side} banned {kind}"));
        }
        names.push(format!("{side} in period"));
        names.push(format!("{side} period left"));
        names.push(format!("{side} king moved"));
        names.push(format!("{side} must move king"));
    }
    if config.attacks {
        for side in SIDES {
            names.push(format!("{side} attacks"));
            names.push(format!("{side} attacks twice"));
        }
    }
    if config.hanging {
        for side in SIDES {
            names.push(format!("{side} pieces hanging"));
        }
    }
    if config.ply_plane > 0 {
        names.push("plies played".to_string());
    }
    debug_assert_eq!(names.len(), config.planes());
    names
}
