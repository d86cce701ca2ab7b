//! `mixzero arena`: a match between two players (built-in baselines or
//! networks searched with MCTS), with balanced random openings, games in
//! parallel, and the score of player 1 as an Elo difference with a 95%
//! confidence interval.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use engine::mcts::SearchConfig;
use engine::players::mcts::MctsPlayer;
use engine::players::{play_game, player_from_spec, Player, PlayerSpecError};
use engine::{Color, Game, Position};
use models::server::{InferenceClient, InferenceServer, ServerConfig};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::SeedableRng;
use serde::Serialize;

use crate::train::{latest_checkpoint, weights_file};

const DEFAULT_PLAYOUTS: u32 = 100;
/// How long a partial batch waits: long enough for the other games' leaves
/// to join, short enough that the last game running alone is barely slowed.
const MAX_WAIT_US: u64 = 200;

#[derive(clap::Args, Debug, Clone)]
pub struct ArenaArgs {
    /// A player, given twice: random, greedy, alphabeta:DEPTH, or a network
    /// PATH[:playouts=N] (a weights file, a run directory, its checkpoints
    /// directory or its checkpoints/latest file).
    #[arg(long = "player", value_name = "SPEC", required = true)]
    pub players: Vec<String>,
    /// Games to play (pairs share an opening with colours swapped).
    #[arg(long, default_value_t = 100)]
    pub games: usize,
    /// Games played at once (default: the number of cores).
    #[arg(long)]
    pub concurrency: Option<usize>,
    /// Seed of the openings and of the baseline players.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Plies after which a game is adjudicated a draw.
    #[arg(long, default_value_t = 400)]
    pub max_plies: usize,
    /// Random plies from the start position before the players take over.
    #[arg(long, default_value_t = 4)]
    pub opening_plies: usize,
    /// Write every game here as PGN when the match ends.
    #[arg(long, value_name = "FILE")]
    pub pgn_out: Option<PathBuf>,
    /// No line per game; the last line is a JSON summary.
    #[arg(long)]
    pub json: bool,
}

/// A parsed `--player` value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PlayerSpec {
    /// `random`, `greedy` or `alphabeta:D`, checked by [`player_from_spec`].
    Builtin(String),
    /// A weights file (resolved) searched with `playouts` per move.
    Network { weights: PathBuf, playouts: u32 },
}

/// Parses a `--player` value, resolving a network's path to its weights file.
pub fn parse_spec(spec: &str) -> Result<PlayerSpec> {
    match player_from_spec(spec, 0) {
        Ok(_) => return Ok(PlayerSpec::Builtin(spec.to_string())),
        Err(e @ PlayerSpecError::Depth(_)) => bail!("player `{spec}`: {e}"),
        Err(PlayerSpecError::Unknown(_)) => {}
    }
    let (path, playouts) = match spec.rsplit_once(':') {
        Some((path, option)) if option.contains('=') => {
            let value = option.strip_prefix("playouts=").with_context(|| {
                format!("player `{spec}`: unknown option `{option}` (expected playouts=N)")
            })?;
            let playouts = value
                .parse::<u32>()
                .ok()
                .filter(|&n| n >= 1)
                .with_context(|| {
                    format!("player `{spec}`: playouts `{value}` is not a whole number >= 1")
                })?;
            (path, playouts)
        }
        _ => (spec, DEFAULT_PLAYOUTS),
    };
    if !Path::new(path).exists() {
        bail!(
            "unknown player `{spec}`: not random, greedy or alphabeta:DEPTH, \
             and there is no weights file or run directory `{path}`"
        );
    }
    let weights = resolve_weights(Path::new(path)).with_context(|| format!("player `{spec}`"))?;
    Ok(PlayerSpec::Network { weights, playouts })
}

/// The weights file behind `path`: a weights file itself, a `latest` file
/// naming a checkpoint (`000012` means `000012.weights.safetensors` beside
/// it), a checkpoints directory holding `latest`, or a run directory holding
/// `checkpoints/latest`.
pub fn resolve_weights(path: &Path) -> Result<PathBuf> {
    if path.is_dir() {
        for latest in [path.join("checkpoints").join("latest"), path.join("latest")] {
            if latest.is_file() {
                return resolve_weights(&latest);
            }
        }
        bail!(
            "{}: a directory without checkpoints/latest or latest (no checkpoint yet?)",
            path.display()
        );
    }
    if path.file_name() == Some("latest".as_ref()) {
        let dir = path.parent().unwrap_or(Path::new("."));
        let name =
            latest_checkpoint(dir)?.with_context(|| format!("{}: no such file", path.display()))?;
        let weights = weights_file(dir, &name);
        if !weights.is_file() {
            bail!(
                "{} names checkpoint {name}, but {} does not exist",
                path.display(),
                weights.display()
            );
        }
        return Ok(weights);
    }
    if !path.is_file() {
        bail!("{}: no such weights file", path.display());
    }
    Ok(path.to_path_buf())
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

    /// Adds a game that scored `points` (1, 0.5 or 0).
    fn add(&mut self, points: f64) {
        if points > 0.75 {
            self.wins += 1;
        } else if points > 0.25 {
            self.draws += 1;
        } else {
            self.losses += 1;
        }
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
    /// Network moves chosen without a complete search (evaluator failures).
    pub eval_failures: u64,
    pub seconds: f64,
}

/// How a match builds the player of one side for one game.
enum Maker {
    Builtin(String),
    Network {
        client: InferenceClient,
        playouts: u32,
        config: SearchConfig,
    },
}

/// A player for one game; networks keep their failure count readable.
enum Seat {
    Builtin(Box<dyn Player + Send>),
    Network(Box<MctsPlayer>),
}

impl Seat {
    fn player(&mut self) -> &mut dyn Player {
        match self {
            Seat::Builtin(p) => p.as_mut(),
            Seat::Network(p) => p.as_mut(),
        }
    }

    fn eval_failures(&self) -> u64 {
        match self {
            Seat::Builtin(_) => 0,
            Seat::Network(p) => p.eval_failures(),
        }
    }
}

impl Maker {
    fn seat(&self, name: &str, seed: u64) -> Seat {
        match self {
            Maker::Builtin(spec) => {
                Seat::Builtin(player_from_spec(spec, seed).expect("checked by parse_spec"))
            }
            Maker::Network {
                client,
                playouts,
                config,
            } => Seat::Network(Box::new(
                MctsPlayer::new(Arc::new(client.clone()), *playouts, *config).with_name(name),
            )),
        }
    }
}

/// A finished game and who played White.
struct Finished {
    index: usize,
    game: Game,
    player1_white: bool,
    eval_failures: u64,
}

/// A seed for each (match seed, stream, index), so games and openings differ.
fn mix_seed(seed: u64, stream: u64, index: u64) -> u64 {
    let mut x = seed
        ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93)
        ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    // splitmix64's finaliser, so nearby inputs give unrelated seeds.
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// The start position after up to `plies` random moves, none of which ends the game.
pub fn random_opening(plies: usize, seed: u64) -> Position {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut game = Game::new(Position::start());
    for _ in 0..plies {
        let pos = *game.position();
        let ongoing: Vec<_> = pos
            .legal_moves()
            .iter()
            .copied()
            .filter(|&mv| pos.after(mv).outcome().is_none())
            .collect();
        match ongoing.choose(&mut rng) {
            Some(&mv) => game.play_unchecked(mv),
            None => break,
        }
    }
    *game.position()
}

pub fn run(args: ArenaArgs) -> Result<()> {
    let [name1, name2] = <[String; 2]>::try_from(args.players.clone())
        .ok()
        .context("give --player exactly twice")?;
    if args.games == 0 {
        bail!("--games must be at least 1");
    }
    let concurrency = args
        .concurrency
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    if concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let concurrency = concurrency.min(args.games);
    let specs = [parse_spec(&name1)?, parse_spec(&name2)?];

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
                max_batch: concurrency * SearchConfig::default().leaves_in_flight,
                max_wait_us: MAX_WAIT_US,
                threads: (cores / networks.len()).max(1),
            },
        );
        servers.insert(weights.clone(), (server, history));
    }
    let makers = specs.map(|spec| match spec {
        PlayerSpec::Builtin(spec) => Maker::Builtin(spec),
        PlayerSpec::Network { weights, playouts } => {
            let (server, history) = &servers[&key(&weights)];
            Maker::Network {
                client: server.client(),
                playouts,
                config: SearchConfig {
                    history: *history,
                    ..SearchConfig::default()
                },
            }
        }
    });
    let names = [name1, name2];
    let openings: Vec<Position> = (0..args.games.div_ceil(2))
        .map(|pair| random_opening(args.opening_plies, mix_seed(args.seed, 0, pair as u64)))
        .collect();

    let started = Instant::now();
    let next = AtomicUsize::new(0);
    let mut finished: Vec<Finished> = Vec::with_capacity(args.games);
    let mut tally = Tally::default();
    std::thread::scope(|scope| {
        let (sender, receiver) = mpsc::channel();
        for _ in 0..concurrency {
            let sender = sender.clone();
            let (next, makers, names, openings) = (&next, &makers, &names, &openings);
            scope.spawn(move || loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= args.games {
                    return;
                }
                let player1_white = index % 2 == 0;
                let seed = |seat: u64| mix_seed(args.seed, seat, index as u64);
                let mut one = makers[0].seat(&names[0], seed(1));
                let mut two = makers[1].seat(&names[1], seed(2));
                let (white, black) = if player1_white {
                    (&mut one, &mut two)
                } else {
                    (&mut two, &mut one)
                };
                let game = play_game(
                    white.player(),
                    black.player(),
                    openings[index / 2],
                    args.max_plies,
                );
                let eval_failures = one.eval_failures() + two.eval_failures();
                let done = Finished {
                    index,
                    game,
                    player1_white,
                    eval_failures,
                };
                if sender.send(done).is_err() {
                    return;
                }
            });
        }
        drop(sender);
        for done in receiver {
            let outcome = done.game.outcome().expect("play_game ends the game");
            let player1 = if done.player1_white {
                Color::White
            } else {
                Color::Black
            };
            tally.add(outcome.score(player1));
            if !args.json {
                let (white, black) = if done.player1_white {
                    (&names[0], &names[1])
                } else {
                    (&names[1], &names[0])
                };
                println!(
                    "game {:>4}  {white} - {black}  {:<7} {:<13} {:>3} plies",
                    done.index + 1,
                    outcome.result(),
                    outcome.reason.as_str(),
                    done.game.moves().len()
                );
            }
            finished.push(done);
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    finished.sort_by_key(|f| f.index);
    let eval_failures: u64 = finished.iter().map(|f| f.eval_failures).sum();
    if eval_failures > 0 {
        tracing::warn!(
            eval_failures,
            "network moves were chosen without a complete search"
        );
    }

    if let Some(path) = &args.pgn_out {
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
            pgn.push_str(&engine::write_pgn(&f.game, &tags));
            pgn.push('\n');
        }
        models::weights::write_atomically(path, pgn.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }

    let (elo, elo_ci95) = elo_with_ci(&tally);
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
        eval_failures,
        seconds,
    };
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "{} vs {}: +{} ={} -{} in {} games ({seconds:.1} s), score {:.3}, \
             Elo {:+.1} (95% CI {:+.1} to {:+.1})",
            summary.player1,
            summary.player2,
            summary.wins,
            summary.draws,
            summary.losses,
            summary.games,
            summary.score,
            elo,
            elo_ci95[0],
            elo_ci95[1]
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(wins: u32, draws: u32, losses: u32) -> Tally {
        Tally {
            wins,
            draws,
            losses,
        }
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

    #[test]
    fn openings_are_seeded_and_ongoing() {
        assert_eq!(random_opening(4, 9), random_opening(4, 9));
        assert_ne!(random_opening(4, 9), random_opening(4, 10));
        assert_eq!(random_opening(0, 9), Position::start());
        let pos = random_opening(4, 3);
        assert_eq!(pos.side_to_move(), Color::White);
        assert!(pos.outcome().is_none());
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
                playouts: 7
            }
        );
        for bad in ["playouts=0", "playouts=x", "playout=5"] {
            let spec = format!("{}:{bad}", dir.display());
            assert!(parse_spec(&spec).is_err(), "{spec}");
        }
        std::fs::write(checkpoints.join("latest"), "000013\n").unwrap();
        assert!(format!("{:#}", resolve_weights(&dir).unwrap_err()).contains("does not exist"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
