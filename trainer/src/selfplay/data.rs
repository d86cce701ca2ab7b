//! Self-play game records and the chunks that hold them (the objects
//! `games/<worker>/<seq:08>.mzg` of a run's store, see
//! [`crate::distributed`]).
//!
//! A chunk is little-endian binary:
//!
//! | field | bytes |
//! | --- | --- |
//! | magic `MZGCHUNK` | 8 |
//! | version (1) | u32 |
//! | games | u32 |
//! | samples: moves with a policy target, over all games | u64 |
//! | body length | u64 |
//! | body: the games | body length |
//! | CRC32 of everything above | u32 |
//!
//! Each game: rules and baseline (bit 0: 0 full rules, 1 base rules; bits
//! 1-2: 0 the network played both sides, 1 a baseline played White, 2 it
//! played Black), then for a baseline its spec's length (u8) and spec,
//! FEN length (u16) and FEN, winner
//! (0 draw, 1 White, 2 Black), reason ([`Reason`] in declaration order),
//! network (u32), plies (u32), then per move: from, to, promotion (0 none,
//! else kind index + 1), flags (bit 0: policy target, bit 1: sparse visits),
//! search value (f32) and, for a policy target, the visits as LEB128
//! varints: the number of legal moves, then either every count (dense) or
//! the number of non-zero counts followed by (gap since the previous
//! non-zero index, count) pairs (sparse), whichever is shorter.
//!
//! The header repeats the game and sample counts so that a reader can size
//! the replay window from headers alone.

use std::path::{Path, PathBuf};

use engine::types::NUM_SQUARES;
use engine::{Color, FenError, Kind, Move, Outcome, Position, Reason, Rules, Square, MAX_MOVES};
use thiserror::Error;

/// One move of a self-play game.
#[derive(Clone, Debug, PartialEq)]
pub struct MoveRecord {
    pub mv: Move,
    /// Root visit counts of every legal move, in `Position::legal_moves()` order
    /// (forced visits taken out); empty when this move is not a policy target
    /// (a fast playout-cap move).
    pub visits: Vec<u32>,
    /// Root value after the search, for the side to move, in [-1, 1].
    pub search_value: f32,
}

/// A finished self-play game.
#[derive(Clone, Debug, PartialEq)]
pub struct GameRecord {
    pub start: Position,
    pub moves: Vec<MoveRecord>,
    pub outcome: Outcome,
    /// Checkpoint number of the network that played.
    pub network: u32,
    /// The baseline player that played one side instead, if one did.
    pub baseline: Option<Baseline>,
}

/// A baseline player in a self-play game (`[selfplay] baseline_share`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Baseline {
    pub side: Color,
    /// Its spec: random, greedy or alphabeta:DEPTH.
    pub spec: String,
}

impl GameRecord {
    /// Moves with a policy target: the training samples of this game.
    pub fn samples(&self) -> usize {
        self.moves.iter().filter(|m| !m.visits.is_empty()).count()
    }

    /// Whether the move at `ply` was the baseline's, not the network's.
    pub fn by_baseline(&self, ply: usize) -> bool {
        let first = self.start.side_to_move();
        self.baseline
            .as_ref()
            .is_some_and(|b| (b.side == first) == (ply % 2 == 0))
    }
}

pub const MAGIC: [u8; 8] = *b"MZGCHUNK";
pub const VERSION: u32 = 1;
/// Bytes of the header: magic, version, games, samples, body length.
pub const HEADER_LEN: usize = 8 + 4 + 4 + 8 + 8;
const CRC_LEN: usize = 4;
const FLAG_TARGET: u8 = 1;
const FLAG_SPARSE: u8 = 2;
const REASONS: [Reason; 8] = [
    Reason::Checkmate,
    Reason::KingQuota,
    Reason::Stalemate,
    Reason::Threefold,
    Reason::FiftyMove,
    Reason::DeadPosition,
    Reason::Adjudication,
    // Appended, so that files written before it read the same.
    Reason::Resignation,
];

/// What is wrong with a chunk, naming it (its key in a store).
#[derive(Debug, Error)]
pub enum DataError {
    #[error("{}: truncated: {size} bytes, expected {expected}", path.display())]
    Truncated {
        path: PathBuf,
        size: u64,
        expected: u64,
    },
    #[error("{}: trailing bytes: {size} bytes, expected {expected}", path.display())]
    TrailingBytes {
        path: PathBuf,
        size: u64,
        expected: u64,
    },
    #[error("{}: not a game chunk (bad magic)", path.display())]
    BadMagic { path: PathBuf },
    #[error("{}: chunk version {found}, this build reads {VERSION}", path.display())]
    Version { path: PathBuf, found: u32 },
    #[error("{}: checksum {stored:08x} stored, {computed:08x} computed", path.display())]
    Checksum {
        path: PathBuf,
        stored: u32,
        computed: u32,
    },
    #[error("{}: game {game}: {what}", path.display())]
    Corrupt {
        path: PathBuf,
        game: usize,
        what: String,
    },
    #[error("{}: game {game}: start FEN: {source}", path.display())]
    Fen {
        path: PathBuf,
        game: usize,
        #[source]
        source: FenError,
    },
    #[error("{}: game {game} ply {ply}: illegal move {mv}", path.display())]
    IllegalMove {
        path: PathBuf,
        game: usize,
        ply: usize,
        mv: String,
    },
    #[error("{}: game {game} ply {ply}: {len} visit counts for {legal} legal moves", path.display())]
    Visits {
        path: PathBuf,
        game: usize,
        ply: usize,
        len: usize,
        legal: usize,
    },
    #[error("{}: game {game} ply {ply}: {what}", path.display())]
    Invalid {
        path: PathBuf,
        game: usize,
        ply: usize,
        what: String,
    },
    #[error("{}: header says {header} samples, the games hold {body}", path.display())]
    SampleCount {
        path: PathBuf,
        header: u64,
        body: u64,
    },
}

/// Games and samples of a chunk, from its header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChunkHeader {
    pub games: u32,
    pub samples: u64,
    body_len: u64,
}

/// A chunk of `games` as bytes, for a store (`name` names it in errors).
/// Each game is checked first, as [`decode_games`] will check it, so that
/// a bad record fails here rather than making the chunk unreadable.
pub fn encode_games(name: &Path, games: &[GameRecord]) -> Result<Vec<u8>, DataError> {
    for (index, game) in games.iter().enumerate() {
        validate(name, index, game)?;
    }
    Ok(encode_chunk(games))
}

/// Reads and checks every game of a chunk held in memory (one read from a
/// store); `name` names it in errors.
pub fn decode_games(name: &Path, bytes: &[u8]) -> Result<Vec<GameRecord>, DataError> {
    decode_chunk(name, bytes)
}

/// The header of a chunk of `size` bytes from its first bytes (at least
/// [`HEADER_LEN`] of them, or all of a shorter chunk), checked against the
/// size but not the checksum: a reader sizes the replay window from headers
/// before it reads the chunks the window needs.
pub fn decode_header(name: &Path, first: &[u8], size: u64) -> Result<ChunkHeader, DataError> {
    let header = parse_header(name, first, size)?;
    check_size(name, &header, size)?;
    Ok(header)
}

/// Replays `game`: every move legal, visits one per legal move with a
/// positive total, search values in [-1, 1].
fn validate(path: &Path, index: usize, game: &GameRecord) -> Result<(), DataError> {
    if let Some(baseline) = &game.baseline {
        engine::players::player_from_spec(&baseline.spec, 0).map_err(|e| DataError::Corrupt {
            path: path.to_path_buf(),
            game: index,
            what: format!("baseline: {e}"),
        })?;
    }
    let mut pos = game.start;
    for (ply, record) in game.moves.iter().enumerate() {
        let invalid = |what: String| DataError::Invalid {
            path: path.to_path_buf(),
            game: index,
            ply,
            what,
        };
        let legal = pos.legal_moves();
        if !legal.contains(&record.mv) {
            return Err(DataError::IllegalMove {
                path: path.to_path_buf(),
                game: index,
                ply,
                mv: record.mv.to_string(),
            });
        }
        if !record.visits.is_empty() {
            if game.by_baseline(ply) {
                return Err(invalid("policy target on a baseline's move".into()));
            }
            if record.visits.len() != legal.len() {
                return Err(DataError::Visits {
                    path: path.to_path_buf(),
                    game: index,
                    ply,
                    len: record.visits.len(),
                    legal: legal.len(),
                });
            }
            if record.visits.iter().all(|&v| v == 0) {
                return Err(invalid("policy target with no visits".into()));
            }
        }
        if !(-1.0..=1.0).contains(&record.search_value) {
            return Err(invalid(format!(
                "search value {} outside [-1, 1]",
                record.search_value
            )));
        }
        pos = pos.after(record.mv);
    }
    Ok(())
}

fn encode_chunk(games: &[GameRecord]) -> Vec<u8> {
    // Counts and lengths fit their fields by far: a FEN is about 100 bytes,
    // and 2^32 games or plies would not fit in memory.
    let count = u32::try_from(games.len()).expect("game count fits u32");
    let mut body = Vec::new();
    for game in games {
        encode_game(&mut body, game);
    }
    let samples: u64 = games.iter().map(|g| g.samples() as u64).sum();
    let mut bytes = Vec::with_capacity(HEADER_LEN + body.len() + CRC_LEN);
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&VERSION.to_le_bytes());
    bytes.extend_from_slice(&count.to_le_bytes());
    bytes.extend_from_slice(&samples.to_le_bytes());
    bytes.extend_from_slice(&(body.len() as u64).to_le_bytes());
    bytes.extend_from_slice(&body);
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_le_bytes());
    bytes
}

fn encode_game(out: &mut Vec<u8>, game: &GameRecord) {
    let rules = match game.start.rules() {
        Rules::Full => 0,
        Rules::Base => 1,
    };
    let side = game
        .baseline
        .as_ref()
        .map_or(0, |b| 1 + b.side.index() as u8);
    out.push(rules | side << 1);
    if let Some(baseline) = &game.baseline {
        // validate() parsed the spec: a few bytes.
        let len = u8::try_from(baseline.spec.len()).expect("a baseline spec fits u8");
        out.push(len);
        out.extend_from_slice(baseline.spec.as_bytes());
    }
    let fen = game.start.fen();
    let fen_len = u16::try_from(fen.len()).expect("FEN fits u16");
    out.extend_from_slice(&fen_len.to_le_bytes());
    out.extend_from_slice(fen.as_bytes());
    out.push(match game.outcome.winner {
        None => 0,
        Some(Color::White) => 1,
        Some(Color::Black) => 2,
    });
    let reason = REASONS.iter().position(|&r| r == game.outcome.reason);
    out.push(reason.expect("REASONS lists every reason") as u8);
    out.extend_from_slice(&game.network.to_le_bytes());
    let plies = u32::try_from(game.moves.len()).expect("plies fit u32");
    out.extend_from_slice(&plies.to_le_bytes());
    let mut dense = Vec::new();
    let mut sparse = Vec::new();
    for record in &game.moves {
        out.push(record.mv.from.index() as u8);
        out.push(record.mv.to.index() as u8);
        out.push(record.mv.promotion.map_or(0, |k| k.index() as u8 + 1));
        if record.visits.is_empty() {
            out.push(0);
            out.extend_from_slice(&record.search_value.to_le_bytes());
            continue;
        }
        dense.clear();
        sparse.clear();
        for &v in &record.visits {
            put_varint(&mut dense, v as u64);
        }
        let nonzero = record.visits.iter().filter(|&&v| v != 0).count();
        put_varint(&mut sparse, nonzero as u64);
        let mut next = 0;
        for (i, &v) in record.visits.iter().enumerate().filter(|(_, &v)| v != 0) {
            put_varint(&mut sparse, (i - next) as u64);
            put_varint(&mut sparse, v as u64);
            next = i + 1;
        }
        let (flags, visits) = if sparse.len() < dense.len() {
            (FLAG_TARGET | FLAG_SPARSE, &sparse)
        } else {
            (FLAG_TARGET, &dense)
        };
        out.push(flags);
        out.extend_from_slice(&record.search_value.to_le_bytes());
        put_varint(out, record.visits.len() as u64);
        out.extend_from_slice(visits);
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn parse_header(path: &Path, bytes: &[u8], size: u64) -> Result<ChunkHeader, DataError> {
    if bytes.len() >= MAGIC.len() && bytes[..MAGIC.len()] != MAGIC {
        return Err(DataError::BadMagic {
            path: path.to_path_buf(),
        });
    }
    if bytes.len() < HEADER_LEN {
        // Too short to give its own length: report the least a chunk holds.
        return Err(DataError::Truncated {
            path: path.to_path_buf(),
            size,
            expected: (HEADER_LEN + CRC_LEN) as u64,
        });
    }
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
    let version = u32_at(8);
    if version != VERSION {
        return Err(DataError::Version {
            path: path.to_path_buf(),
            found: version,
        });
    }
    Ok(ChunkHeader {
        games: u32_at(12),
        samples: u64_at(16),
        body_len: u64_at(24),
    })
}

fn check_size(path: &Path, header: &ChunkHeader, size: u64) -> Result<(), DataError> {
    // A corrupt length may overflow: treat it as longer than any file.
    let expected = header
        .body_len
        .saturating_add((HEADER_LEN + CRC_LEN) as u64);
    if size < expected {
        return Err(DataError::Truncated {
            path: path.to_path_buf(),
            size,
            expected,
        });
    }
    if size > expected {
        return Err(DataError::TrailingBytes {
            path: path.to_path_buf(),
            size,
            expected,
        });
    }
    Ok(())
}

fn decode_chunk(path: &Path, bytes: &[u8]) -> Result<Vec<GameRecord>, DataError> {
    let size = bytes.len() as u64;
    let header = parse_header(path, bytes, size)?;
    check_size(path, &header, size)?;
    let (content, crc) = bytes.split_at(bytes.len() - CRC_LEN);
    let stored = u32::from_le_bytes(crc.try_into().expect("4 bytes"));
    let computed = crc32fast::hash(content);
    if stored != computed {
        return Err(DataError::Checksum {
            path: path.to_path_buf(),
            stored,
            computed,
        });
    }
    let mut reader = Reader {
        bytes: &content[HEADER_LEN..],
    };
    // The CRC vouches for the count, yet never trust it for an allocation.
    let mut games = Vec::with_capacity((header.games as usize).min(1024));
    for index in 0..header.games as usize {
        let game = decode_game(path, index, &mut reader)?;
        validate(path, index, &game)?;
        games.push(game);
    }
    if !reader.bytes.is_empty() {
        return Err(DataError::Corrupt {
            path: path.to_path_buf(),
            game: games.len(),
            what: format!("{} bytes after the last game", reader.bytes.len()),
        });
    }
    let samples: u64 = games.iter().map(|g| g.samples() as u64).sum();
    if samples != header.samples {
        return Err(DataError::SampleCount {
            path: path.to_path_buf(),
            header: header.samples,
            body: samples,
        });
    }
    Ok(games)
}

/// The body of a chunk, consumed from the front.
struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.bytes.len() < n {
            return Err("body ends inside a game");
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        Ok(self.take(N)?.try_into().expect("N bytes"))
    }

    fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }

    fn varint(&mut self) -> Result<u64, &'static str> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.u8()?;
            v |= ((byte & 0x7f) as u64) << shift;
            if byte & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err("varint longer than 64 bits")
    }

    fn varint_u32(&mut self) -> Result<u32, &'static str> {
        u32::try_from(self.varint()?).map_err(|_| "visit count above u32")
    }
}

fn decode_game(path: &Path, index: usize, r: &mut Reader) -> Result<GameRecord, DataError> {
    let corrupt = |what: &str| DataError::Corrupt {
        path: path.to_path_buf(),
        game: index,
        what: what.into(),
    };
    let head = r.u8().map_err(corrupt)?;
    let rules = match head & 1 {
        0 => Rules::Full,
        _ => Rules::Base,
    };
    let baseline = match head >> 1 {
        0 => None,
        side @ 1..=2 => {
            let len = r.u8().map_err(corrupt)? as usize;
            let spec = std::str::from_utf8(r.take(len).map_err(corrupt)?)
                .map_err(|_| corrupt("baseline spec is not UTF-8"))?;
            Some(Baseline {
                side: Color::ALL[side as usize - 1],
                spec: spec.to_string(),
            })
        }
        _ => return Err(corrupt("unknown rule set or baseline side")),
    };
    let fen_len = u16::from_le_bytes(r.array().map_err(corrupt)?) as usize;
    let fen = std::str::from_utf8(r.take(fen_len).map_err(corrupt)?)
        .map_err(|_| corrupt("FEN is not UTF-8"))?;
    let start = Position::from_fen_with_rules(fen, rules).map_err(|source| DataError::Fen {
        path: path.to_path_buf(),
        game: index,
        source,
    })?;
    let winner = match r.u8().map_err(corrupt)? {
        0 => None,
        1 => Some(Color::White),
        2 => Some(Color::Black),
        _ => return Err(corrupt("unknown winner")),
    };
    let reason = *REASONS
        .get(r.u8().map_err(corrupt)? as usize)
        .ok_or_else(|| corrupt("unknown reason"))?;
    let network = u32::from_le_bytes(r.array().map_err(corrupt)?);
    let plies = u32::from_le_bytes(r.array().map_err(corrupt)?) as usize;
    // A move takes at least 8 bytes: never allocate past what the body holds.
    let mut moves = Vec::with_capacity(plies.min(r.bytes.len() / 8));
    for _ in 0..plies {
        moves.push(decode_move(r).map_err(corrupt)?);
    }
    Ok(GameRecord {
        start,
        moves,
        outcome: Outcome { winner, reason },
        network,
        baseline,
    })
}

fn decode_move(r: &mut Reader) -> Result<MoveRecord, &'static str> {
    let square = |b: u8| {
        if (b as usize) < NUM_SQUARES {
            Ok(Square::new(b))
        } else {
            Err("square off the board")
        }
    };
    let from = square(r.u8()?)?;
    let to = square(r.u8()?)?;
    let promotion = match r.u8()? {
        0 => None,
        k @ 1..=6 => Some(Kind::from_index(k as usize - 1)),
        _ => return Err("unknown promotion kind"),
    };
    let flags = r.u8()?;
    if flags & !(FLAG_TARGET | FLAG_SPARSE) != 0 || flags == FLAG_SPARSE {
        return Err("unknown move flags");
    }
    let search_value = f32::from_le_bytes(r.array()?);
    let mut visits = Vec::new();
    if flags & FLAG_TARGET != 0 {
        let len = r.varint()?;
        // No position has more legal moves than a move list holds.
        if len == 0 || len > MAX_MOVES as u64 {
            return Err("visit vector length out of range");
        }
        let len = len as usize;
        if flags & FLAG_SPARSE == 0 {
            for _ in 0..len {
                visits.push(r.varint_u32()?);
            }
        } else {
            visits.resize(len, 0);
            let nonzero = r.varint()?;
            let mut next = 0u64;
            for _ in 0..nonzero {
                let at = next.saturating_add(r.varint()?);
                let count = r.varint_u32()?;
                if at >= len as u64 || count == 0 {
                    return Err("bad sparse visit entry");
                }
                visits[at as usize] = count;
                next = at + 1;
            }
        }
    }
    Ok(MoveRecord {
        mv: Move {
            from,
            to,
            promotion,
        },
        visits,
        search_value,
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    /// A one-move game from the start position, its move a policy target,
    /// played by net `network` and capped.
    pub(crate) fn one_move_game(network: u32) -> GameRecord {
        let start = Position::start();
        GameRecord {
            start,
            moves: vec![MoveRecord {
                mv: start.legal_moves()[0],
                visits: vec![1; start.legal_moves().len()],
                search_value: 0.0,
            }],
            outcome: Outcome::draw(Reason::Adjudication),
            network,
            baseline: None,
        }
    }

    /// A game of random legal moves from `start`, with random visits (some
    /// empty, some sparse, some dense) and the given outcome.
    pub(crate) fn random_game(
        rng: &mut SmallRng,
        start: Position,
        plies: usize,
        outcome: Outcome,
    ) -> GameRecord {
        let mut pos = start;
        let mut moves = Vec::new();
        for _ in 0..plies {
            let legal = pos.legal_moves();
            if legal.is_empty() {
                break;
            }
            let mv = legal[rng.random_range(0..legal.len())];
            let visits = match rng.random_range(0..4) {
                0 => Vec::new(),
                1 => {
                    let mut v = vec![0; legal.len()];
                    v[rng.random_range(0..legal.len())] = rng.random_range(1..1000);
                    v
                }
                2 => (0..legal.len()).map(|_| rng.random_range(1..300)).collect(),
                // Mostly zeros, the rest of any size up to u32::MAX.
                _ => {
                    let mut v: Vec<u32> = (0..legal.len())
                        .map(|_| match rng.random_bool(0.7) {
                            true => 0,
                            false => rng.random::<u32>() >> rng.random_range(0..32),
                        })
                        .collect();
                    v[0] = v[0].max(1);
                    v
                }
            };
            moves.push(MoveRecord {
                mv,
                visits,
                search_value: rng.random_range(-1.0..=1.0),
            });
            pos = pos.after(mv);
        }
        GameRecord {
            start,
            moves,
            outcome,
            network: rng.random(),
            baseline: None,
        }
    }

    fn all_outcomes() -> Vec<Outcome> {
        let mut outcomes = Vec::new();
        for reason in REASONS {
            outcomes.push(Outcome::draw(reason));
            outcomes.push(Outcome::win(Color::White, reason));
            outcomes.push(Outcome::win(Color::Black, reason));
        }
        outcomes
    }

    const OTHER_FEN: &str =
        "r1nbqkbn1r/pp1ppppppp/2n7/10/2p7/10/10/4N5/PPPPPPPPPP/RNNBQKB2R b KQkq - 3 5";

    /// `game` with a baseline playing `side`: its moves lose their targets.
    fn with_baseline(mut game: GameRecord, side: Color, spec: &str) -> GameRecord {
        game.baseline = Some(Baseline {
            side,
            spec: spec.into(),
        });
        for ply in 0..game.moves.len() {
            if game.by_baseline(ply) {
                game.moves[ply].visits.clear();
            }
        }
        game
    }

    fn small_games(rng: &mut SmallRng) -> Vec<GameRecord> {
        let start = Position::start();
        vec![
            random_game(rng, start, 6, Outcome::draw(Reason::Threefold)),
            random_game(
                rng,
                Position::from_fen(OTHER_FEN).unwrap(),
                4,
                Outcome::win(Color::Black, Reason::Adjudication),
            ),
            with_baseline(
                random_game(rng, start, 3, Outcome::draw(Reason::Adjudication)),
                Color::Black,
                "alphabeta:1",
            ),
        ]
    }

    #[test]
    fn round_trip_random_games() {
        let name = Path::new("games/w/00000000.mzg");
        let mut rng = SmallRng::seed_from_u64(1);
        let mut games = Vec::new();
        for (i, outcome) in all_outcomes().into_iter().enumerate() {
            let start = if i % 2 == 0 {
                Position::start()
            } else {
                Position::from_fen(OTHER_FEN).unwrap()
            };
            let plies = rng.random_range(0..120);
            games.push(random_game(&mut rng, start, plies, outcome));
        }
        games.push(random_game(
            &mut rng,
            Position::start().with_rules(Rules::Base),
            40,
            Outcome::draw(Reason::FiftyMove),
        ));
        // Games against baselines, on either side and either rule set, from
        // a start with either side to move.
        let against = [
            (Position::start(), Color::White, "alphabeta:1"),
            (
                Position::from_fen(OTHER_FEN).unwrap(),
                Color::White,
                "greedy",
            ),
            (
                Position::start().with_rules(Rules::Base),
                Color::Black,
                "random",
            ),
        ];
        for (start, side, spec) in against {
            let game = random_game(&mut rng, start, 30, Outcome::win(side, Reason::Checkmate));
            let game = with_baseline(game, side, spec);
            assert!((0..30).any(|ply| game.by_baseline(ply)) && game.samples() > 0);
            games.push(game);
        }
        let bytes = encode_games(name, &games).unwrap();
        assert_eq!(decode_games(name, &bytes).unwrap(), games);
        let header = decode_header(name, &bytes[..HEADER_LEN], bytes.len() as u64).unwrap();
        assert_eq!(header.games as usize, games.len());
        let samples: usize = games.iter().map(GameRecord::samples).sum();
        assert_eq!(header.samples, samples as u64);
        // An empty chunk is valid too.
        let empty = encode_games(name, &[]).unwrap();
        assert!(decode_games(name, &empty).unwrap().is_empty());
    }

    #[test]
    fn every_truncation_and_byte_flip_is_an_error() {
        let mut rng = SmallRng::seed_from_u64(2);
        let damaged = Path::new("damaged.mzg");
        let bytes = encode_games(damaged, &small_games(&mut rng)).unwrap();
        for len in 0..bytes.len() {
            let err = decode_chunk(damaged, &bytes[..len]).unwrap_err();
            assert!(matches!(err, DataError::Truncated { .. }), "{len}: {err}");
            // The header alone shows it too, from the size.
            let first = &bytes[..len.min(HEADER_LEN)];
            let err = decode_header(damaged, first, len as u64).unwrap_err();
            assert!(matches!(err, DataError::Truncated { .. }), "{len}: {err}");
        }
        for at in 0..bytes.len() {
            for bit in 0..8 {
                let mut copy = bytes.clone();
                copy[at] ^= 1 << bit;
                assert!(decode_chunk(damaged, &copy).is_err(), "flip at {at}");
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(
            decode_chunk(damaged, &longer),
            Err(DataError::TrailingBytes { .. })
        ));
        assert!(matches!(
            decode_header(damaged, &longer[..HEADER_LEN], longer.len() as u64),
            Err(DataError::TrailingBytes { .. })
        ));
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut rng = SmallRng::seed_from_u64(3);
        let path = Path::new("fuzz.mzg");
        let valid = encode_chunk(&small_games(&mut rng));
        let with_crc = |mut bytes: Vec<u8>| {
            let crc = crc32fast::hash(&bytes);
            bytes.extend_from_slice(&crc.to_le_bytes());
            bytes
        };
        for _ in 0..3000 {
            let len = rng.random_range(0..200);
            let noise: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            assert!(decode_chunk(path, &noise).is_err());
            // Noise behind a valid header, with a matching CRC, reaches the
            // body decoder.
            let mut bytes = valid[..HEADER_LEN].to_vec();
            bytes[24..32].copy_from_slice(&(noise.len() as u64).to_le_bytes());
            bytes.extend_from_slice(&noise);
            let _ = decode_chunk(path, &with_crc(bytes));
            // So does a valid body with a few bytes scrambled.
            let mut bytes = valid[..valid.len() - CRC_LEN].to_vec();
            for _ in 0..rng.random_range(1..4) {
                let at = rng.random_range(HEADER_LEN..bytes.len());
                bytes[at] = rng.random();
            }
            let _ = decode_chunk(path, &with_crc(bytes));
        }
    }

    #[test]
    fn writer_rejects_bad_records() {
        let path = Path::new("games/w/00000000.mzg");
        let mut rng = SmallRng::seed_from_u64(4);
        let outcome = Outcome::draw(Reason::Stalemate);
        let good = random_game(&mut rng, Position::start(), 3, outcome);

        let mut illegal = good.clone();
        illegal.moves[1].mv = illegal.moves[0].mv;
        let err = encode_games(path, &[good.clone(), illegal]).unwrap_err();
        assert!(
            matches!(
                err,
                DataError::IllegalMove {
                    game: 1,
                    ply: 1,
                    ..
                }
            ),
            "{err}"
        );

        let legal = Position::start().legal_moves().len();
        let mut short = good.clone();
        short.moves[0].visits = vec![1; 3];
        let err = encode_games(path, &[short]).unwrap_err();
        assert!(
            matches!(err, DataError::Visits { ply: 0, len: 3, legal: l, .. } if l == legal),
            "{err}"
        );

        let mut zero = good.clone();
        zero.moves[0].visits = vec![0; legal];
        assert!(matches!(
            encode_games(path, &[zero]),
            Err(DataError::Invalid { ply: 0, .. })
        ));

        let mut value = good.clone();
        value.moves[2].search_value = f32::NAN;
        assert!(matches!(
            encode_games(path, &[value]),
            Err(DataError::Invalid { ply: 2, .. })
        ));

        // A baseline's move is no policy target, and its spec must parse.
        let mut target = with_baseline(good.clone(), Color::Black, "greedy");
        target.moves[1].visits = good.moves[1].visits.clone();
        assert!(matches!(
            encode_games(path, &[target]),
            Err(DataError::Invalid { ply: 1, .. })
        ));
        let unknown = with_baseline(good, Color::White, "grandmaster");
        let err = encode_games(path, &[unknown]).unwrap_err();
        assert!(
            matches!(err, DataError::Corrupt { game: 0, .. })
                && err.to_string().contains("grandmaster"),
            "{err}"
        );
    }

    #[test]
    fn version_and_magic_are_checked() {
        let mut rng = SmallRng::seed_from_u64(5);
        let path = Path::new("v.mzg");
        let mut bytes = encode_chunk(&small_games(&mut rng));
        bytes[8] = 2;
        assert!(matches!(
            decode_chunk(path, &bytes),
            Err(DataError::Version { found: 2, .. })
        ));
        bytes[0] = b'X';
        assert!(matches!(
            decode_chunk(path, &bytes),
            Err(DataError::BadMagic { .. })
        ));
    }
}
