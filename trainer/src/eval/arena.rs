//! A match between two players (built-in baselines,
//! networks searched with MCTS, or external UCI engines), from a book of
//! balanced openings or random ones, games in parallel, with the score of
//! player 1 as an Elo difference with a 95% confidence interval and an
//! optional SPRT that stops the match once it decides.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use engine::mcts::{RootSearch, SearchConfig, DRAW_SCORES, POLICY_TEMPERATURES};
use engine::players::mcts::MctsPlayer;
use engine::players::{play_out, player_from_spec, PlayedOut, Player, PlayerSpecError};
use engine::search::Score;
use engine::{Color, Game, Move, Position, Reason};
use models::server::{InferenceClient, InferenceServer, ServerConfig};
use serde::Serialize;

use crate::eval::external_engine::{UciConfig, UciEngine};
use crate::eval::openings;
use crate::eval::sprt::{Decision, Sprt, SprtReport};
use crate::run_dir::resolve_weights;

const DEFAULT_PLAYOUTS: u32 = 100;
/// How long a partial batch waits: long enough for the other games' leaves
/// to join, short enough that the last game running alone is barely slowed.
const MAX_WAIT_US: u64 = 200;

/// Where the games start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Openings {
    /// The built-in book of balanced lines, cycled through.
    Book,
    /// This many random moves from the start position.
    Random { plies: usize },
}

/// One side of a match: what plays, and the name it goes by.
#[derive(Clone, Debug, PartialEq)]
pub struct Entrant {
    pub name: String,
    pub player: PlayerSpec,
}

impl Entrant {
    /// A `--player` value, named as given (an external engine by its
    /// `name=`, or its command).
    pub fn parse(spec: &str) -> Result<Entrant> {
        let player = parse_spec(spec)?;
        let name = match &player {
            PlayerSpec::Uci(config) => config.name.clone(),
            _ => spec.to_string(),
        };
        Ok(Entrant { name, player })
    }
}

/// A match: its two entrants, how many games, where they start, and what
/// is written.
#[derive(Clone, Debug)]
pub struct MatchSpec {
    pub entrants: [Entrant; 2],
    /// Games to play (pairs share an opening with colours swapped); the
    /// most, with `sprt`.
    pub games: usize,
    /// Games played at once.
    pub concurrency: usize,
    /// libtorch threads of each network's inference thread (default: the
    /// cores shared among the networks).
    pub threads: Option<usize>,
    /// Number format of the networks' inference.
    pub precision: models::Precision,
    /// Seed of the openings and of the baseline players.
    pub seed: u64,
    /// Plies, opening included, after which a game is adjudicated a draw.
    pub max_plies: usize,
    pub openings: Openings,
    /// Stop once this sequential test decides.
    pub sprt: Option<Sprt>,
    /// Write every game here as PGN when the match ends.
    pub pgn_out: Option<PathBuf>,
}

/// A parsed `--player` value.
#[derive(Clone, Debug, PartialEq)]
pub enum PlayerSpec {
    /// `random`, `greedy` or `alphabeta:D`, checked by [`player_from_spec`].
    Builtin(String),
    /// A weights file (resolved) searched with MCTS with `search` (its
    /// `history` is the net's, set when the match starts).
    Network {
        weights: PathBuf,
        budget: Budget,
        search: SearchConfig,
    },
    /// An external engine.
    Uci(UciConfig),
}

/// How long a network searches each move.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    Playouts(u32),
    Movetime(Duration),
}

/// Parses a `--player` value, resolving a network's path to its weights file.
pub fn parse_spec(spec: &str) -> Result<PlayerSpec> {
    if spec.starts_with("uci:") {
        let config = UciConfig::parse(spec).with_context(|| format!("player `{spec}`"))?;
        return Ok(PlayerSpec::Uci(config));
    }
    match player_from_spec(spec, 0) {
        Ok(_) => return Ok(PlayerSpec::Builtin(spec.to_string())),
        Err(e @ PlayerSpecError::Depth(_)) => bail!("player `{spec}`: {e}"),
        Err(PlayerSpecError::Unknown(_)) => {}
    }
    let (path, budget, search) = match spec.rsplit_once(':') {
        Some((path, options)) if options.contains('=') => {
            let (budget, search) =
                parse_network_options(options).with_context(|| format!("player `{spec}`"))?;
            (path, budget, search)
        }
        _ => (
            spec,
            Budget::Playouts(DEFAULT_PLAYOUTS),
            SearchConfig::play(),
        ),
    };
    if !Path::new(path).exists() {
        bail!(
            "unknown player `{spec}`: not random, greedy, alphabeta:DEPTH or uci:COMMAND, \
             and there is no weights file or run directory `{path}`"
        );
    }
    let weights = resolve_weights(Path::new(path)).with_context(|| format!("player `{spec}`"))?;
    Ok(PlayerSpec::Network {
        weights,
        budget,
        search,
    })
}

/// The search settings a network spec's options may set, each a field of
/// [`SearchConfig`] (`leaves` is `leaves_in_flight`).
const SEARCH_KEYS: &str = "c_puct, c_puct_base, c_puct_factor, fpu_reduction, leaves, \
                           virtual_loss, win_check, capture_prior, policy_temperature, \
                           root (puct or gumbel), gumbel_considered, gumbel_c_visit, \
                           gumbel_c_scale, moves_left_effect, moves_left_slope, draw_score";

/// A network spec's `key=value;...` options: the budget (`playouts=N` or
/// `movetime=MS`, default 100 playouts) and search settings over
/// [`SearchConfig::play`].
fn parse_network_options(options: &str) -> Result<(Budget, SearchConfig)> {
    let mut budget = Budget::Playouts(DEFAULT_PLAYOUTS);
    let mut search = SearchConfig::play();
    for option in options.split(';').filter(|o| !o.is_empty()) {
        let Some((key, value)) = option.split_once('=') else {
            bail!("option `{option}` is not key=value");
        };
        let whole = || {
            value
                .parse::<u32>()
                .ok()
                .filter(|&n| n >= 1)
                .with_context(|| format!("{key} `{value}` is not a whole number >= 1"))
        };
        let real = |range: std::ops::Range<f32>| number_in(key, value, range);
        match key {
            "playouts" => budget = Budget::Playouts(whole()?),
            "movetime" => budget = Budget::Movetime(Duration::from_millis(whole()?.into())),
            "c_puct" => search.c_puct = real(0.001..100.0)?,
            "c_puct_base" => search.c_puct_base = real(1.0..1e9)?,
            "c_puct_factor" => search.c_puct_factor = real(0.0..100.0)?,
            "fpu_reduction" => search.fpu_reduction = real(-10.0..10.0)?,
            "leaves" => search.leaves_in_flight = whole()? as usize,
            "virtual_loss" => search.virtual_loss = real(0.0..100.0)?,
            "capture_prior" => search.capture_prior = real(0.0..1.0)?,
            "policy_temperature" => {
                search.policy_temperature = number_in(key, value, POLICY_TEMPERATURES)?
            }
            "root" => {
                search.root = value
                    .parse()
                    .map_err(|e: String| anyhow::anyhow!("root {e}"))?
            }
            "gumbel_considered" => search.gumbel_considered = whole()?.min(1024) as usize,
            "gumbel_c_visit" => search.gumbel_c_visit = real(0.0..1e6)?,
            "gumbel_c_scale" => search.gumbel_c_scale = real(0.0..1e3)?,
            "moves_left_effect" => search.moves_left_effect = number_in(key, value, 0.0..=1.0)?,
            "moves_left_slope" => search.moves_left_slope = number_in(key, value, 0.0..=1.0)?,
            "draw_score" => search.draw_score = number_in(key, value, DRAW_SCORES)?,
            "win_check" => {
                search.win_check = match value {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => bail!("win_check `{value}` is not 0, 1, true or false"),
                }
            }
            _ => bail!(
                "unknown option `{option}` (expected playouts=N or movetime=MS, \
                 or a search setting: {SEARCH_KEYS})"
            ),
        }
    }
    Ok((budget, search))
}

/// The option `key`'s `value` as a number in `range`.
fn number_in<R>(key: &str, value: &str, range: R) -> Result<f32>
where
    R: std::ops::RangeBounds<f32> + std::fmt::Debug,
{
    value
        .parse::<f32>()
        .ok()
        .filter(|x| range.contains(x))
        .with_context(|| format!("{key} `{value}` is not a number in {range:?}"))
}

/// The spec of the network at `weights` searched with `playouts` and the
/// play-time settings of `search`: what [`parse_spec`] reads back.
pub fn network_spec(weights: &Path, playouts: u32, search: &SearchConfig) -> String {
    format!(
        "{}:playouts={playouts};c_puct={};c_puct_base={};c_puct_factor={};fpu_reduction={};\
         leaves={};virtual_loss={};win_check={};capture_prior={};policy_temperature={};\
         moves_left_effect={};moves_left_slope={};draw_score={};root={}{}",
        weights.display(),
        search.c_puct,
        search.c_puct_base,
        search.c_puct_factor,
        search.fpu_reduction,
        search.leaves_in_flight,
        search.virtual_loss,
        search.win_check as u8,
        search.capture_prior,
        search.policy_temperature,
        search.moves_left_effect,
        search.moves_left_slope,
        search.draw_score,
        search.root,
        match search.root {
            // Gumbel's own settings, only where they count.
            RootSearch::Gumbel => format!(
                ";gumbel_considered={};gumbel_c_visit={};gumbel_c_scale={}",
                search.gumbel_considered, search.gumbel_c_visit, search.gumbel_c_scale
            ),
            RootSearch::Puct => String::new(),
        }
    )
}

/// Wins, draws and losses of one player.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub wins: u32,
    pub draws: u32,
    pub losses: u32,
}

impl Tally {
    pub fn games(&self) -> u32 {
        self.wins + self.draws + self.losses
    }

    /// Points per game, in [0, 1]; 0.5 with no games.
    pub fn score(&self) -> f64 {
        match self.games() {
            0 => 0.5,
            n => (self.wins as f64 + 0.5 * self.draws as f64) / n as f64,
        }
    }
}

/// How player 1's wins, draws and losses ended: games per reason. A score
/// alone does not say whether a net mates or only outlasts a baseline's
/// king-quota slips, nor whether its draws are the length cap.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Endings {
    pub wins: BTreeMap<Reason, u32>,
    pub draws: BTreeMap<Reason, u32>,
    pub losses: BTreeMap<Reason, u32>,
}

impl Endings {
    /// Adds a game that scored `points` (1, 0.5 or 0) for player 1.
    fn add(&mut self, points: f64, reason: Reason) {
        let counts = if points > 0.75 {
            &mut self.wins
        } else if points > 0.25 {
            &mut self.draws
        } else {
            &mut self.losses
        };
        *counts.entry(reason).or_default() += 1;
    }

    /// The wins, draws and losses, whatever their reasons.
    pub fn tally(&self) -> Tally {
        let total = |counts: &BTreeMap<Reason, u32>| counts.values().sum();
        Tally {
            wins: total(&self.wins),
            draws: total(&self.draws),
            losses: total(&self.losses),
        }
    }
}

/// `wins 35 king-quota, 11 checkmate; draws 24 adjudication; losses none`,
/// most frequent first.
impl fmt::Display for Endings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut separator = "";
        for (name, counts) in [
            ("wins", &self.wins),
            ("draws", &self.draws),
            ("losses", &self.losses),
        ] {
            let mut counts: Vec<(&Reason, &u32)> = counts.iter().collect();
            counts.sort_by_key(|&(reason, n)| (std::cmp::Reverse(n), reason));
            let list = counts
                .iter()
                .map(|(reason, n)| format!("{n} {reason}"))
                .collect::<Vec<_>>()
                .join(", ");
            let list = if list.is_empty() { "none" } else { &list };
            write!(f, "{separator}{name} {list}")?;
            separator = "; ";
        }
        Ok(())
    }
}

/// The Elo difference that gives expected score `s` (infinite at 0 and 1).
pub fn elo_from_score(s: f64) -> f64 {
    -400.0 * (1.0 / s - 1.0).log10()
}

/// The Elo estimate and its 95% interval for `tally`.
///
/// Scores are clamped to [1/(2n), 1 - 1/(2n)] so that a clean sweep gives a
/// large finite number rather than infinity. The interval is the normal
/// approximation on the per-game score variance, its bounds converted to
/// Elo; when every game ended alike that variance is 0, so the Bernoulli
/// variance at the clamped score stands in for it.
pub fn elo_with_ci(tally: &Tally) -> (f64, [f64; 2]) {
    let n = tally.games().max(1) as f64;
    let s = tally.score();
    let per_game = (tally.wins as f64 * (1.0 - s).powi(2)
        + tally.draws as f64 * (0.5 - s).powi(2)
        + tally.losses as f64 * s.powi(2))
        / n;
    let clamp = |x: f64| x.clamp(0.5 / n, 1.0 - 0.5 / n);
    let estimate = clamp(s);
    let variance = if per_game > 0.0 {
        per_game
    } else {
        estimate * (1.0 - estimate)
    };
    let margin = 1.96 * (variance / n).sqrt();
    (
        elo_from_score(estimate),
        [
            elo_from_score(clamp(s - margin)),
            elo_from_score(clamp(s + margin)),
        ],
    )
}

/// The JSON summary line.
#[derive(Debug, Serialize)]
pub struct Summary {
    pub player1: String,
    pub player2: String,
    pub games: u32,
    pub wins: u32,
    pub draws: u32,
    pub losses: u32,
    pub score: f64,
    pub elo: f64,
    pub elo_ci95: [f64; 2],
    /// Games lost by a player that gave no legal move (engine crash,
    /// timeout, illegal move).
    pub forfeits: u32,
    /// Network moves chosen without a complete search (evaluator failures).
    pub eval_failures: u64,
    /// How player 1's games ended.
    pub endings: Endings,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sprt: Option<SprtReport>,
    pub seconds: f64,
}

/// How a match builds the player of one side for one game.
enum Maker {
    Builtin(String),
    Network {
        client: InferenceClient,
        budget: Budget,
        config: SearchConfig,
    },
    /// Engines between games, started and ready; a game takes one or starts one.
    Uci {
        config: UciConfig,
        idle: Mutex<Vec<UciEngine>>,
    },
}

/// A player for one game.
enum Seat<'a> {
    Builtin(Box<dyn Player + Send>),
    /// With a move time, searched for that long instead of its playouts.
    Network(Box<MctsPlayer>, Option<Duration>),
    /// The engine is started at the first move when none was ready, and
    /// dropped (which ends its process) when it fails.
    Uci {
        engine: Option<UciEngine>,
        config: &'a UciConfig,
    },
}

/// Why a player lost without a legal move.
struct Forfeit {
    /// The PGN `Termination` value.
    termination: &'static str,
    /// What happened, for the game line, the log and a PGN comment.
    note: String,
}

impl Seat<'_> {
    fn choose(&mut self, game: &Game) -> Result<Move, Forfeit> {
        match self {
            Seat::Builtin(p) => Ok(p.choose(game)),
            Seat::Network(p, None) => Ok(p.choose(game)),
            Seat::Network(p, Some(movetime)) => {
                let deadline = Instant::now() + *movetime;
                // At least one batch of leaves, however short the time.
                let mut first = true;
                Ok(p.search_until(game, None, |search| {
                    let more = first || Instant::now() < deadline;
                    first = false;
                    if more {
                        search.config().leaves_in_flight
                    } else {
                        0
                    }
                }))
            }
            Seat::Uci { engine, config } => {
                let answer = match engine.take() {
                    Some(ready) => Ok(ready),
                    None => UciEngine::start(config)
                        .and_then(|mut fresh| fresh.new_game().map(|()| fresh)),
                }
                .and_then(|mut ready| Ok((ready.best_move(game)?, ready)));
                match answer {
                    Ok((mv, ready)) => {
                        *engine = Some(ready);
                        Ok(mv)
                    }
                    Err(e) => Err(Forfeit {
                        termination: e.termination(),
                        note: e.to_string(),
                    }),
                }
            }
        }
    }

    /// What the last move chosen found the position worth, for the mover.
    fn score(&self) -> Option<Score> {
        match self {
            Seat::Builtin(p) => p.score(),
            Seat::Network(p, _) => p.score(),
            Seat::Uci { .. } => None,
        }
    }

    fn eval_failures(&self) -> u64 {
        match self {
            Seat::Network(p, _) => p.eval_failures(),
            Seat::Builtin(_) | Seat::Uci { .. } => 0,
        }
    }
}

impl Maker {
    fn seat(&self, name: &str, seed: u64) -> Seat<'_> {
        match self {
            Maker::Builtin(spec) => {
                Seat::Builtin(player_from_spec(spec, seed).expect("checked by parse_spec"))
            }
            Maker::Network {
                client,
                budget,
                config,
            } => {
                let (playouts, movetime) = match *budget {
                    Budget::Playouts(playouts) => (playouts, None),
                    // The playout count goes unused: the time decides.
                    Budget::Movetime(movetime) => (1, Some(movetime)),
                };
                let player = MctsPlayer::new(Arc::new(client.clone()), playouts, *config);
                Seat::Network(Box::new(player.with_name(name)), movetime)
            }
            Maker::Uci { config, idle } => {
                let kept = idle.lock().unwrap_or_else(|e| e.into_inner()).pop();
                // One that fails `ucinewgame` is dropped; the first move starts another.
                let engine = kept.and_then(|mut engine| engine.new_game().ok().map(|()| engine));
                Seat::Uci { engine, config }
            }
        }
    }

    /// Takes back a seat after its game, keeping an engine that still works.
    fn release(&self, seat: Seat<'_>) {
        if let (
            Maker::Uci { idle, .. },
            Seat::Uci {
                engine: Some(engine),
                ..
            },
        ) = (self, seat)
        {
            idle.lock().unwrap_or_else(|e| e.into_inner()).push(engine);
        }
    }
}

/// A finished game and who played White.
struct PlayedGame {
    index: usize,
    game: Game,
    /// The players' score of each move, for the PGN (none for the opening).
    evals: Vec<Option<Score>>,
    player1_white: bool,
    eval_failures: u64,
    forfeit: Option<Forfeit>,
}

/// Sees every arena game of this process after each move, with the
/// names of White and Black (`mixzero arena --serve` shows them live).
/// Unset, games are not watched.
pub static WATCHER: OnceLock<GameWatcher> = OnceLock::new();
pub type GameWatcher = Box<dyn Fn([&str; 2], &Game) + Send + Sync>;

fn watch(names: [&str; 2], game: &Game) {
    if let Some(watcher) = WATCHER.get() {
        watcher(names, game);
    }
}

/// Plays `opening` from the start position, then lets the players move
/// until the game ends or reaches `max_plies`. A player that gives no legal
/// move loses by adjudication, with the reason returned. Each move comes
/// with its player's score ([`Seat::score`]; `None` for the opening).
/// `None` when `cancel` was set before the game ended.
fn play_one(
    seats: [&mut Seat<'_>; 2],
    names: [&str; 2],
    opening: &[Move],
    max_plies: usize,
    cancel: &AtomicBool,
) -> Option<(Game, Vec<Option<Score>>, Option<Forfeit>)> {
    let mut game = Game::new(Position::start());
    for &mv in opening {
        game.play_unchecked(mv);
    }
    let mut evals = vec![None; opening.len()];
    let [white, black] = seats;
    let choose = |game: &Game| {
        let seat = match game.position().side_to_move() {
            Color::White => &mut *white,
            Color::Black => &mut *black,
        };
        let mv = seat.choose(game)?;
        evals.push(seat.score());
        Ok(mv)
    };
    let watch = |game: &Game| {
        watch(names, game);
        match cancel.load(Ordering::Relaxed) {
            true => ControlFlow::Break(()),
            false => ControlFlow::Continue(()),
        }
    };
    let forfeit = match play_out(&mut game, max_plies, choose, watch) {
        PlayedOut::Over => None,
        PlayedOut::Stopped => return None,
        PlayedOut::Forfeit(mover, why) => {
            let forfeit = match why {
                Ok(illegal) => Forfeit {
                    termination: "rules infraction",
                    note: illegal.to_string(),
                },
                Err(forfeit) => forfeit,
            };
            let name = names[mover.index()];
            let note = format!("{mover:?} ({name}) forfeits: {}", forfeit.note);
            Some(Forfeit { note, ..forfeit })
        }
    };
    // An illegal move was scored but not played.
    evals.truncate(game.moves().len());
    Some((game, evals, forfeit))
}

/// A seed for each (match seed, stream, index), so games and openings differ.
fn mix_seed(seed: u64, stream: u64, index: u64) -> u64 {
    // splitmix64's finaliser, so nearby inputs give unrelated seeds.
    engine::mix64(
        seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93)
            ^ index.wrapping_mul(engine::GOLDEN_GAMMA),
    )
}

/// The game as PGN with its moves' `evals`; a forfeit sets `Termination`
/// and adds its note as a comment before the result.
fn game_pgn(
    game: &Game,
    evals: &[Option<Score>],
    tags: &[(&str, String)],
    forfeit: Option<&Forfeit>,
) -> String {
    let Some(forfeit) = forfeit else {
        return engine::write_annotated_pgn(game, tags, evals);
    };
    let mut tags = tags.to_vec();
    tags.push(("Termination", forfeit.termination.to_string()));
    let pgn = engine::write_annotated_pgn(game, &tags, evals);
    let note: String = forfeit
        .note
        .chars()
        .map(|c| match c {
            '{' => '(',
            '}' => ')',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    let body = pgn.trim_end();
    match body.rsplit_once(char::is_whitespace) {
        Some((moves, result)) => format!("{moves}\n{{{note}}}\n{result}\n"),
        None => pgn,
    }
}

/// Plays the match `spec` describes, hands a
/// line per finished game to `on_game`, writes the PGN when asked, and
/// returns the summary. Setting `cancel` abandons the match: games in
/// flight stop at their next move and it returns an error.
pub fn play_match(
    spec: &MatchSpec,
    cancel: &AtomicBool,
    mut on_game: impl FnMut(&str),
) -> Result<Summary> {
    if spec.games == 0 {
        bail!("a match needs at least 1 game");
    }
    if spec.concurrency == 0 {
        bail!("a match needs a concurrency of at least 1");
    }
    let concurrency = spec.concurrency.min(spec.games);
    let names = spec.entrants.each_ref().map(|e| e.name.clone());
    let specs = spec.entrants.each_ref().map(|e| e.player.clone());

    // One server per distinct network, shared by every game of the match.
    let key = |weights: &PathBuf| std::fs::canonicalize(weights).unwrap_or(weights.clone());
    let mut networks: Vec<PathBuf> = Vec::new();
    for spec in &specs {
        if let PlayerSpec::Network { weights, .. } = spec {
            if !networks.contains(&key(weights)) {
                networks.push(key(weights));
            }
        }
    }
    let max_leaves = specs
        .iter()
        .map(|spec| match spec {
            PlayerSpec::Network { search, .. } => search.leaves_in_flight,
            _ => 1,
        })
        .max()
        .unwrap_or(1);
    let device = models::device();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut servers = HashMap::new();
    for weights in networks.iter() {
        let net = models::weights::load(weights, device)?;
        let history = net.arch().encoder.history;
        let server = InferenceServer::start(
            net,
            ServerConfig {
                // Positions, not games: each search sends a batch of leaves.
                max_batch: concurrency * max_leaves,
                max_wait_us: MAX_WAIT_US,
                threads: spec.threads.unwrap_or((cores / networks.len()).max(1)),
                replicas: 1,
                precision: spec.precision,
            },
        );
        servers.insert(weights.clone(), (server, history));
    }
    let mut makers = Vec::with_capacity(2);
    for (player, name) in specs.into_iter().zip(&names) {
        makers.push(match player {
            PlayerSpec::Builtin(spec) => Maker::Builtin(spec),
            PlayerSpec::Network {
                weights,
                budget,
                search,
            } => {
                let (server, history) = &servers[&key(&weights)];
                Maker::Network {
                    client: server.client(),
                    budget,
                    config: SearchConfig {
                        history: *history,
                        // Play is deterministic given the seed: no root noise.
                        dirichlet_epsilon: 0.0,
                        ..search
                    },
                }
            }
            PlayerSpec::Uci(config) => {
                // Started once here so that a wrong command fails the match at once.
                let engine = UciEngine::start(&config)
                    .with_context(|| format!("player `{name}`: the engine did not start"))?;
                Maker::Uci {
                    config,
                    idle: Mutex::new(vec![engine]),
                }
            }
        });
    }
    let pairs = spec.games.div_ceil(2);
    let lines: Vec<Vec<Move>> = match spec.openings {
        Openings::Book => {
            let book = openings::book()?;
            // The seed picks the first line, so that matches can differ.
            let first = (spec.seed % book.len() as u64) as usize;
            (0..pairs)
                .map(|pair| book[(first + pair) % book.len()].clone())
                .collect()
        }
        Openings::Random { plies } => (0..pairs)
            .map(|pair| openings::random_line(plies, mix_seed(spec.seed, 0, pair as u64)))
            .collect(),
    };

    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let mut finished: Vec<PlayedGame> = Vec::with_capacity(spec.games);
    let mut endings = Endings::default();
    let mut decision = Decision::None;
    std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::channel();
        for _ in 0..concurrency {
            let sender = sender.clone();
            let (next, stop, makers, names, lines) = (&next, &stop, &makers, &names, &lines);
            scope.spawn(move || loop {
                if stop.load(Ordering::Relaxed) || cancel.load(Ordering::Relaxed) {
                    return;
                }
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= spec.games {
                    return;
                }
                let player1_white = index % 2 == 0;
                let seed = |seat: u64| mix_seed(spec.seed, seat, index as u64);
                let mut one = makers[0].seat(&names[0], seed(1));
                let mut two = makers[1].seat(&names[1], seed(2));
                let (seats, seat_names) = if player1_white {
                    ([&mut one, &mut two], [names[0].as_str(), names[1].as_str()])
                } else {
                    ([&mut two, &mut one], [names[1].as_str(), names[0].as_str()])
                };
                let played = play_one(seats, seat_names, &lines[index / 2], spec.max_plies, cancel);
                let eval_failures = one.eval_failures() + two.eval_failures();
                makers[0].release(one);
                makers[1].release(two);
                let Some((game, evals, forfeit)) = played else {
                    return;
                };
                let done = PlayedGame {
                    index,
                    game,
                    evals,
                    player1_white,
                    eval_failures,
                    forfeit,
                };
                if sender.send(done).is_err() {
                    return;
                }
            });
        }
        drop(sender);
        for done in receiver {
            let outcome = done.game.outcome().expect("play_one ends the game");
            let player1 = if done.player1_white {
                Color::White
            } else {
                Color::Black
            };
            endings.add(outcome.score(player1), outcome.reason);
            if let Some(forfeit) = &done.forfeit {
                tracing::warn!(game = done.index + 1, "{}", forfeit.note);
            }
            let (white, black) = if done.player1_white {
                (&names[0], &names[1])
            } else {
                (&names[1], &names[0])
            };
            let note = done
                .forfeit
                .as_ref()
                .map_or(String::new(), |f| format!("  ({})", f.note));
            on_game(&format!(
                "game {:>4}  {white} - {black}  {:<7} {:<13} {:>3} plies{note}",
                done.index + 1,
                outcome.result(),
                outcome.reason.as_str(),
                done.game.moves().len()
            ));
            finished.push(done);
            if let (Some(sprt), Decision::None) = (&spec.sprt, decision) {
                let tally = endings.tally();
                decision = sprt.report(tally.wins, tally.draws, tally.losses).result;
                if decision != Decision::None {
                    // Games in flight still finish; no new one starts.
                    stop.store(true, Ordering::Relaxed);
                    tracing::info!(games = tally.games(), %decision, "SPRT decided");
                }
            }
        }
    });
    if cancel.load(Ordering::Relaxed) {
        bail!("the match was cancelled after {} games", finished.len());
    }
    let seconds = started.elapsed().as_secs_f64();
    finished.sort_by_key(|f| f.index);
    let eval_failures: u64 = finished.iter().map(|f| f.eval_failures).sum();
    let forfeits = finished.iter().filter(|f| f.forfeit.is_some()).count() as u32;
    if eval_failures > 0 {
        tracing::warn!(
            eval_failures,
            "network moves were chosen without a complete search"
        );
    }

    if let Some(path) = &spec.pgn_out {
        let mut pgn = String::new();
        for f in &finished {
            let (white, black) = if f.player1_white {
                (&names[0], &names[1])
            } else {
                (&names[1], &names[0])
            };
            let tags = [
                ("Event", "mixzero arena".to_string()),
                ("Round", (f.index + 1).to_string()),
                ("White", white.clone()),
                ("Black", black.clone()),
            ];
            pgn.push_str(&game_pgn(&f.game, &f.evals, &tags, f.forfeit.as_ref()));
            pgn.push('\n');
        }
        models::weights::write_atomically(path, pgn.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }

    let tally = endings.tally();
    let (elo, elo_ci95) = elo_with_ci(&tally);
    // The LLR over every game played; the result is the bound crossed first.
    let sprt = spec.sprt.map(|sprt| SprtReport {
        result: decision,
        ..sprt.report(tally.wins, tally.draws, tally.losses)
    });
    let [name1, name2] = names;
    let summary = Summary {
        player1: name1,
        player2: name2,
        games: tally.games(),
        wins: tally.wins,
        draws: tally.draws,
        losses: tally.losses,
        score: tally.score(),
        elo,
        elo_ci95,
        forfeits,
        eval_failures,
        endings,
        sprt,
        seconds,
    };
    tracing::info!(
        games = summary.games,
        wins = summary.wins,
        draws = summary.draws,
        losses = summary.losses,
        score = summary.score,
        elo,
        elo_low = elo_ci95[0],
        elo_high = elo_ci95[1],
        forfeits,
        "match finished"
    );
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use engine::{Outcome, Reason};

    fn tally(wins: u32, draws: u32, losses: u32) -> Tally {
        Tally {
            wins,
            draws,
            losses,
        }
    }

    #[test]
    fn endings_count_each_result_by_reason() {
        let mut endings = Endings::default();
        for (points, reason) in [
            (1.0, Reason::KingQuota),
            (1.0, Reason::Checkmate),
            (1.0, Reason::KingQuota),
            (0.5, Reason::Adjudication),
            (0.5, Reason::Stalemate),
        ] {
            endings.add(points, reason);
        }
        assert_eq!(endings.wins[&Reason::KingQuota], 2);
        assert_eq!(endings.wins[&Reason::Checkmate], 1);
        assert_eq!(endings.draws.len(), 2);
        assert!(endings.losses.is_empty());
        // Most frequent first; ties in the rules' order of reasons.
        assert_eq!(
            endings.to_string(),
            "wins 2 king-quota, 1 checkmate; draws 1 stalemate, 1 adjudication; losses none"
        );
        let json = serde_json::to_value(&endings).unwrap();
        assert_eq!(json["wins"]["king-quota"], 2);
        assert_eq!(json["draws"]["adjudication"], 1);
    }

    #[test]
    fn elo_of_known_scores() {
        assert_eq!(elo_from_score(0.5), 0.0);
        assert!((elo_from_score(0.75) - 190.85).abs() < 0.01);
        assert!((elo_from_score(0.25) + 190.85).abs() < 0.01);
        let (elo, [low, high]) = elo_with_ci(&tally(30, 40, 30));
        assert!(elo.abs() < 1e-9);
        assert!((low + high).abs() < 1e-6 && low < -30.0, "{low} {high}");
    }

    #[test]
    fn interval_shrinks_with_games() {
        let width = |t: Tally| {
            let (elo, [low, high]) = elo_with_ci(&t);
            assert!(low < elo && elo < high);
            high - low
        };
        let small = width(tally(6, 2, 2));
        let large = width(tally(60, 20, 20));
        assert!(large < small / 2.5, "{small} {large}");
    }

    #[test]
    fn sweeps_stay_finite() {
        for t in [
            tally(10, 0, 0),
            tally(0, 0, 10),
            tally(0, 10, 0),
            tally(1, 0, 0),
        ] {
            let (elo, [low, high]) = elo_with_ci(&t);
            assert!(
                elo.is_finite() && low.is_finite() && high.is_finite(),
                "{t:?}"
            );
            assert!(low <= elo && elo <= high, "{t:?}");
        }
        let (elo, [low, _]) = elo_with_ci(&tally(10, 0, 0));
        // s clamped to 1 - 1/20: about +512 Elo.
        assert!((elo - elo_from_score(0.95)).abs() < 1e-9);
        assert!(low < elo);
        assert!(elo_with_ci(&tally(0, 0, 10)).0 < -500.0);
    }

    /// [`play_one`] never cancelled.
    fn play_through(
        seats: [&mut Seat<'_>; 2],
        names: [&str; 2],
        opening: &[Move],
        max_plies: usize,
    ) -> (Game, Vec<Option<Score>>, Option<Forfeit>) {
        play_one(seats, names, opening, max_plies, &AtomicBool::new(false))
            .expect("an uncancelled game ends")
    }

    #[test]
    fn a_forfeit_loses_and_is_recorded() {
        let config = UciConfig::parse("uci:/nonexistent/mixzero-arena-engine").unwrap();
        let mut engine = Seat::Uci {
            engine: None,
            config: &config,
        };
        let mut random = Seat::Builtin(player_from_spec("random", 1).unwrap());
        let opening = openings::book().unwrap()[0].clone();
        let (game, evals, forfeit) =
            play_through([&mut engine, &mut random], ["e", "r"], &opening, 100);
        assert_eq!(game.moves(), &opening[..]);
        assert_eq!(evals, vec![None; opening.len()]);
        assert_eq!(
            game.outcome(),
            Some(Outcome::win(Color::Black, Reason::Adjudication))
        );
        let forfeit = forfeit.expect("the engine could not start");
        assert_eq!(forfeit.termination, "abandoned");
        assert!(
            forfeit
                .note
                .starts_with("White (e) forfeits: could not start"),
            "{}",
            forfeit.note
        );

        let pgn = game_pgn(&game, &evals, &[("White", "e".into())], Some(&forfeit));
        assert!(pgn.contains("[Termination \"abandoned\"]"), "{pgn}");
        assert!(pgn.trim_end().ends_with("}\n0-1"), "{pgn}");
        let read = engine::read_pgn(&pgn).unwrap();
        assert_eq!(read.game.moves(), &opening[..]);
        assert_eq!(read.tag("Result"), Some("0-1"));

        // Both sides playing: the game runs to the cap.
        let mut white = Seat::Builtin(player_from_spec("random", 2).unwrap());
        let (game, evals, forfeit) =
            play_through([&mut white, &mut random], ["a", "b"], &opening, 10);
        assert!(forfeit.is_none());
        assert_eq!(game.moves().len(), 10);
        assert_eq!(game.moves()[..4], opening[..]);
        assert_eq!(evals, vec![None; 10], "random players do not evaluate");

        // Alpha-beta scores its moves, and the PGN carries them.
        let mut searcher = Seat::Builtin(player_from_spec("alphabeta:1", 3).unwrap());
        let (game, evals, _) = play_through([&mut searcher, &mut random], ["a", "r"], &opening, 10);
        assert_eq!(evals.len(), 10);
        for (ply, eval) in evals.iter().enumerate() {
            let searched = ply >= opening.len() && ply % 2 == 0;
            assert_eq!(eval.is_some(), searched, "ply {ply}: {eval:?}");
        }
        let read = engine::read_pgn(&game_pgn(&game, &evals, &[], None)).unwrap();
        assert_eq!(read.evals, evals);
    }

    #[test]
    fn a_cancelled_match_stops_and_errs() {
        let cancel = AtomicBool::new(true);
        let mut white = Seat::Builtin(player_from_spec("random", 1).unwrap());
        let mut black = Seat::Builtin(player_from_spec("random", 2).unwrap());
        assert!(play_one([&mut white, &mut black], ["a", "b"], &[], 10, &cancel).is_none());

        let args = MatchSpec {
            entrants: [
                Entrant::parse("random").unwrap(),
                Entrant::parse("greedy").unwrap(),
            ],
            games: 4,
            concurrency: 2,
            threads: None,
            precision: models::Precision::Auto,
            seed: 1,
            max_plies: 20,
            openings: Openings::Book,
            sprt: None,
            pgn_out: None,
        };
        let mut games = 0;
        let err = play_match(&args, &cancel, |_| games += 1).unwrap_err();
        assert_eq!(games, 0);
        assert!(err.to_string().contains("cancelled"), "{err}");
        let summary = play_match(&args, &AtomicBool::new(false), |_| {}).unwrap();
        assert_eq!(summary.games, 4);
    }

    #[test]
    fn specs_and_checkpoint_paths() {
        assert_eq!(
            parse_spec("alphabeta:2").unwrap(),
            PlayerSpec::Builtin("alphabeta:2".into())
        );
        let msg = |spec: &str| format!("{:#}", parse_spec(spec).unwrap_err());
        assert!(
            msg("alphabeta:0").contains("depth"),
            "{}",
            msg("alphabeta:0")
        );
        assert!(msg("minimax").contains("unknown player `minimax`"));
        assert!(matches!(
            parse_spec("uci:engine --flag;movetime=30").unwrap(),
            PlayerSpec::Uci(UciConfig { ref args, .. }) if args == &["--flag"]
        ));
        assert!(msg("uci:;movetime=30").contains("no command"));

        let dir = std::env::temp_dir().join(format!("mixzero-arena-spec-{}", std::process::id()));
        let checkpoints = dir.join("checkpoints");
        std::fs::create_dir_all(&checkpoints).unwrap();
        let weights = checkpoints.join("000012.weights.safetensors");
        std::fs::write(&weights, b"not read here").unwrap();
        assert!(format!("{:#}", resolve_weights(&dir).unwrap_err()).contains("no checkpoint"));
        std::fs::write(checkpoints.join("latest"), "000012\n").unwrap();
        for path in [
            dir.clone(),
            checkpoints.clone(),
            checkpoints.join("latest"),
            weights.clone(),
        ] {
            assert_eq!(
                resolve_weights(&path).unwrap(),
                weights,
                "{}",
                path.display()
            );
        }
        let spec = format!("{}:playouts=7", dir.display());
        assert_eq!(
            parse_spec(&spec).unwrap(),
            PlayerSpec::Network {
                weights: weights.clone(),
                budget: Budget::Playouts(7),
                search: SearchConfig::play(),
            }
        );
        let spec = format!("{}:movetime=250", weights.display());
        assert_eq!(
            parse_spec(&spec).unwrap(),
            PlayerSpec::Network {
                weights: weights.clone(),
                budget: Budget::Movetime(Duration::from_millis(250)),
                search: SearchConfig::play(),
            }
        );
        let spec = format!(
            "{}:capture_prior=0;playouts=30;c_puct=2.5;win_check=0",
            dir.display()
        );
        assert_eq!(
            parse_spec(&spec).unwrap(),
            PlayerSpec::Network {
                weights: weights.clone(),
                budget: Budget::Playouts(30),
                search: SearchConfig {
                    capture_prior: 0.0,
                    c_puct: 2.5,
                    win_check: false,
                    ..SearchConfig::play()
                },
            }
        );
        // What the ladder writes reads back as the same settings, with
        // either root.
        let puct = SearchConfig {
            c_puct: 1.5,
            fpu_reduction: 0.1,
            leaves_in_flight: 4,
            capture_prior: 0.05,
            policy_temperature: 1.5,
            win_check: false,
            moves_left_effect: 0.05,
            moves_left_slope: 0.004,
            draw_score: -0.25,
            ..SearchConfig::default()
        };
        let gumbel = SearchConfig {
            root: RootSearch::Gumbel,
            gumbel_considered: 8,
            gumbel_c_visit: 30.0,
            gumbel_c_scale: 0.5,
            ..puct
        };
        for search in [puct, gumbel] {
            assert_eq!(
                parse_spec(&network_spec(&weights, 64, &search)).unwrap(),
                PlayerSpec::Network {
                    weights: weights.clone(),
                    budget: Budget::Playouts(64),
                    search,
                }
            );
        }
        for bad in [
            "playouts=0",
            "playouts=x",
            "playout=5",
            "movetime=0",
            "movetime=",
            "playouts=5;capture_prior=1",
            "playouts=5;capture_prior=-0.1",
            "policy_temperature=0",
            "c_puct=x",
            "win_check=2",
            "playouts=5;leaves=0",
            "playouts=5;nonsense",
            "root=alphazero",
            "root=gumbel;gumbel_considered=0",
            "root=gumbel;gumbel_c_scale=-1",
            "moves_left_effect=1.5",
            "moves_left_slope=-0.1",
            "draw_score=-1.5",
        ] {
            let spec = format!("{}:{bad}", dir.display());
            assert!(parse_spec(&spec).is_err(), "{spec}");
        }
        std::fs::write(checkpoints.join("latest"), "000013\n").unwrap();
        assert!(format!("{:#}", resolve_weights(&dir).unwrap_err()).contains("does not exist"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
